"""File notifications (watchdog/inotify) that wake the main loop; polling goes on without them.

watchdog calls its handlers on its own thread, and the store belongs to the main loop, so a
notification only sets a flag: :attr:`Watcher.wake` (something changed: scan now) and
:attr:`Watcher.discover` (a file or directory was created, moved or deleted: search the globs
too). Directories on shared filesystems (NFS, Lustre, GPFS, CIFS) get no watch: other hosts'
writes raise no event there, and the stat poll reads them (docs/RELIABILITY.md, scenario 13).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from watchdog.events import (
    DirAttribEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirModifiedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from ckpt_advisor.agent.mounts import MOUNT_TABLE, filesystem_type, is_shared

log = logging.getLogger(__name__)

WAKE_EVENTS: list[type[FileSystemEvent]] = [
    DirAttribEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirModifiedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
]
"""The file notifications that wake the main loop: all but reads (a file opened, or closed
unwritten: ours or another reader's). Only these are asked of inotify, so a read raises
nothing for watchdog's threads to take in: each glob search lists its directories, an open and
a close of each (100 directories: ~0.1 s of CPU every ``discover_every``), and a log shipper
reading the logs would do the same."""
DISCOVER_EVENTS = frozenset(("created", "moved", "deleted"))
"""File notifications after which the globs are searched again at once."""


class _Wake(FileSystemEventHandler):
    def __init__(self, wake: threading.Event, discover: threading.Event) -> None:
        self._wake = wake
        self._discover = discover

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in DISCOVER_EVENTS:
            self._discover.set()
        self._wake.set()


class Watcher:
    """One watchdog observer over the local directories of the globs, restarted if it dies.

    Args:
        mount_table: the mount table to look filesystems up in (``/proc/self/mounts``).
        poll_every_s: the main loop's poll interval (for the log lines only).
    """

    def __init__(self, *, mount_table: str = MOUNT_TABLE, poll_every_s: float = 2.0) -> None:
        self.wake = threading.Event()
        self.discover = threading.Event()
        self.mount_table = mount_table
        self.poll_every_s = poll_every_s
        self.observer: BaseObserver | None = None
        """The running observer; None when no directory is watched or inotify failed."""

    def start(self, dirs: Iterable[str]) -> None:
        """Watch the local ones of ``dirs`` recursively (a wake-up only: polling is always on).

        If inotify fails (watch limit, instance limit), one warning, then polling only.
        """
        observer = Observer()
        handler = _Wake(self.wake, self.discover)
        watched = 0
        try:
            for d in sorted(dirs):
                fstype = filesystem_type(d, self.mount_table)
                if fstype is not None and is_shared(fstype):
                    log.info("%s is on %s: polling it every %gs", d, fstype, self.poll_every_s)
                    continue
                observer.schedule(handler, d, recursive=True, event_filter=WAKE_EVENTS)
                watched += 1
            if watched:
                observer.start()
        except OSError as exc:
            log.warning(
                "file notifications unavailable (%s); polling every %gs only",
                exc,
                self.poll_every_s,
            )
            return
        self.observer = observer if watched else None

    def stop(self) -> None:
        """Stop the observer (if any) and wait up to 5 s for its thread."""
        if self.observer is not None:
            self.observer.stop()
            self.observer.join(timeout=5)
            self.observer = None

    def restart(self, dirs: Iterable[str], *, enabled: bool) -> None:
        """Watch ``dirs`` anew (a config reload changed the globs); none if not ``enabled``."""
        self.stop()
        if enabled:
            self.start(dirs)

    def supervise(self, dirs: Callable[[], Iterable[str]]) -> None:
        """Start a new observer over ``dirs()`` if the running one's thread died (polling went
        on meanwhile). ``dirs`` is called then only: it looks at every glob's directories (~1 ms
        for 100 globs), and the main loop supervises after every scan."""
        if self.observer is not None and not self.observer.is_alive():
            self.observer = None
            log.warning(
                "the file watcher thread died; restarting it (polling every %gs meanwhile)",
                self.poll_every_s,
            )
            self.start(dirs())
