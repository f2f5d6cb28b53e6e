"""One log reader per store: an advisory lock file beside the database.

Two processes tailing into one store (two daemons, a daemon and an ``ingest``, two ``ingest``
runs) would each read a file they share from the same offset and store its events twice. ``run``
and ``ingest`` take an exclusive ``flock`` on ``<db>.lock`` for their lifetime; the kernel drops
it when the process dies, so a crash leaves no stale lock.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class LockedError(Exception):
    """Another process holds the store's lock; the message names the path, the pid and the
    command that holds it."""


def lock_store(db_path: Path, command: str = "run") -> int:
    """Take the reader lock of the store at ``db_path`` for ``command`` (``run``, ``ingest``);
    returns the open descriptor to keep.

    Raises:
        LockedError: another process holds it (its pid and command, when it wrote them, are in
            the message).
        OSError: the lock file cannot be created (the caller reports the path).
    """
    path = Path(f"{Path(db_path).resolve()}.lock")  # a symlinked store path is the same store
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid, _, holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip().partition(" ")
        os.close(fd)
        what = "daemon" if holder in ("", "run") else f"`{holder}`"
        raise LockedError(
            f"{db_path}: another ckpt-advisor {what} (pid {pid or 'unknown'}) is reading logs "
            "into this store"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {command}\n".encode(), 0)
    return fd
