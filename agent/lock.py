"""One daemon per store: an advisory lock file beside the database.

Two daemons tailing into one store would each read every line and store it twice. ``run``
takes an exclusive ``flock`` on ``<db>.lock`` for the daemon's lifetime; the kernel drops it
when the process dies, so a crash leaves no stale lock.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class LockedError(Exception):
    """Another process holds the store's daemon lock; the message names the path and pid."""


def lock_store(db_path: Path) -> int:
    """Take the daemon lock of the store at ``db_path``; returns the open descriptor to keep.

    Raises:
        LockedError: another daemon holds it (its pid, when it wrote one, is in the message).
        OSError: the lock file cannot be created (the caller reports the path).
    """
    path = Path(f"{Path(db_path).resolve()}.lock")  # a symlinked store path is the same store
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise LockedError(
            f"{db_path}: another ckpt-advisor daemon (pid {holder}) is using this store"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd
