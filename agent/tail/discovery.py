"""Which files are followed, and which of them may have changed since they were read.

Discovery searches each job's globs for files (the costlier part; the daemon asks for it every
``discover_every`` and on a file notification). A poll ``stat``s only the files already
followed, one call a file: shared filesystems (NFS, Lustre) deliver no inotify events for other
hosts' writes, so the poll is always on, and a file whose size and settled mtime did not move
is not read (docs/RELIABILITY.md scenarios 11 and 13).
"""

from __future__ import annotations

import glob
import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import tzinfo
from pathlib import Path
from typing import Protocol

from ckpt_advisor import parsers
from ckpt_advisor.agent.tail.inputs import REGULAR, describe, path_kind

log = logging.getLogger(__name__)

SETTLED_S = 2.0
"""A file whose mtime is at least this old when it is stat()ed is trusted to be unchanged while
its size and mtime stay the same. A younger one is read on every scan: a truncation and a
same-size rewrite within one mtime tick (a few ms) would otherwise go unseen (git's "racily
clean" entries; NFS servers may also stamp with a coarse or skewed clock)."""

FileKey = tuple[int, int]
"""A followed file's ``(st_dev, st_ino)``."""


@dataclass(frozen=True, slots=True)
class WatchSpec:
    """One job's globs (its training logs, or its checkpoint timing files), read with ``fmt``:
    with ``auto`` each file's content decides, a timing file by its records whatever its name
    or glob (:func:`parsers.make_parser`)."""

    job: str
    patterns: tuple[str, ...]
    fmt: str = "auto"
    custom: tuple[parsers.CustomPattern, ...] = ()
    """Custom log patterns from the job's config (``[[jobs.patterns]]``)."""
    tz: tzinfo | None = None
    """The zone of the job's stamps printed without an offset (``[[jobs]] timezone``); None:
    the tailer's (``[parse] timezone``)."""


def discover(
    specs: Iterable[WatchSpec], skipped: set[str] | None = None
) -> Iterator[tuple[WatchSpec, str]]:
    """Every (spec, path) currently matching the globs, regular files only, each path once (the
    first spec whose glob reaches it).

    A match that is not a regular file (a FIFO, a directory, a dangling symlink or a symlink
    loop, :func:`inputs.path_kind`) is skipped, never opened, with a warning naming it the
    first time: ``skipped`` holds the paths warned about (and loses those that are files again).
    """
    seen: set[str] = set()
    for spec in specs:
        for pattern in spec.patterns:
            for path in sorted(glob.glob(pattern, recursive=True)):
                if path in seen:
                    continue
                seen.add(path)
                if os.path.isfile(path):
                    if skipped:
                        skipped.discard(path)
                    yield spec, path
                elif skipped is not None and path not in skipped:
                    skipped.add(path)
                    if (kind := path_kind(path)) != REGULAR:
                        log.warning("job %s: %s is %s: skipped", spec.job, path, describe(kind))


def watched_dirs(specs: Iterable[WatchSpec]) -> set[str]:
    """Directories to hand to watchdog: the fixed prefix of every glob, or its nearest existing
    parent."""
    dirs: set[str] = set()
    for spec in specs:
        for pattern in spec.patterns:
            prefix = []
            for part in Path(pattern).parts[:-1]:
                if glob.has_magic(part):
                    break
                prefix.append(part)
            d = str(Path(*prefix)) if prefix else "/"
            while not os.path.isdir(d) and d != "/":
                d = os.path.dirname(d)
            dirs.add(d)
    return dirs


def settled(st: os.stat_result) -> tuple[int, int] | None:
    """``(size, mtime_ns)`` of a file ``stat()``ed just before it was read, if its mtime is old
    enough (:data:`SETTLED_S`) for an equal pair to mean "unchanged"; else None (read it on
    the next scan whatever its stat says)."""
    if time.time_ns() - st.st_mtime_ns >= SETTLED_S * 1e9:
        return st.st_size, st.st_mtime_ns
    return None


class Polled(Protocol):
    """What :func:`poll` needs of a followed file."""

    @property
    def path(self) -> str: ...
    @property
    def fd(self) -> int: ...
    @property
    def left_globs(self) -> bool: ...


def poll(files: Mapping[FileKey, Polled]) -> list[tuple[FileKey, os.stat_result]] | None:
    """``stat`` every followed file: by name while it is under its globs, through its open
    descriptor once it left them (renamed or deleted, see ``identity.Orphan``).

    Returns each file's key with its stat, or None when the globs must be searched instead: a
    name no longer leads to its file (renamed, deleted, a symlink re-pointed), or a ``stat``
    failed.
    """
    out = []
    try:
        for key, f in files.items():
            st = os.fstat(f.fd) if f.left_globs else os.stat(f.path)
            if (st.st_dev, st.st_ino) != key:
                return None
            out.append((key, st))
    except OSError:
        return None
    return out
