"""The tailer: turns the files under the job globs into stored events, exactly once per line.

:class:`Tailer` is the one object the daemon and ``ingest`` use; it drives each scan. The
questions are answered in the modules beside it:

* ``discovery`` - which files are to be followed, and which may have changed (globs, polls);
* ``identity`` - is this the file we knew (inode + head hash, rotation, truncation, reuse);
* ``files`` - how long a file is followed (renamed and deleted files, release, shutdown);
* ``reader`` - how new bytes become committed events (buffers, replay, commits, flushes);
* ``backlog`` - which files are still catching up with what they held when opened;
* ``dating`` - when did a line that printed no time happen;
* ``inputs`` - what a match is before it is read (a regular file? binary?), the line limit;
* ``parsers.selection`` - which lines of a buffer the parser must see (pure).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from datetime import datetime, tzinfo

from ckpt_advisor.agent.store import Store
from ckpt_advisor.agent.tail import discovery
from ckpt_advisor.agent.tail.backlog import Backlog
from ckpt_advisor.agent.tail.discovery import FileKey, WatchSpec
from ckpt_advisor.agent.tail.files import FollowedFiles
from ckpt_advisor.agent.tail.followed import FilePosition
from ckpt_advisor.agent.tail.reader import Reader, ScanStats

log = logging.getLogger(__name__)

ROTATED_IDLE_S = 3600.0
"""Default of ``[schedule] rotated_idle`` (see :class:`Tailer`)."""


class Tailer:
    """Reads the files of several jobs into a :class:`Store`, exactly once per complete line.

    Files are followed by identity (device + inode + head hash), not by name: a file renamed
    within the globs keeps its offset; a path reached twice (a symlink and its target) is read
    once. A file that leaves its globs (renamed away, deleted, left behind by a re-pointed
    symlink) is read on through its open descriptor, like ``tail -F``: its writer may keep
    writing to it (logrotate ``create``, a rotated stdout). Once it has been quiet (its size
    unchanged) for ``rotated_idle_s``, it is read to its end, its parser flushed, and it is
    *released* (closed; a deleted file's record is forgotten, its inode may be reused).
    :meth:`drain` does the same at shutdown for every such file, quiet or not. A file shorter
    than its offset, or whose first bytes changed, was truncated: it is read again from 0 and
    counted. At start, files rotated away while nothing watched them are found by inode in
    their old directory, read from their stored offset, and followed the same way.

    A scan stats the known files (the cheap poll) and, when asked or needed, searches the globs
    (see :meth:`scan`). What a read does, replay and flushes included, is ``reader``'s.

    Args:
        store: where events and offsets go.
        specs: the globs to watch.
        clock: returns the current aware UTC datetime (idle times, and the time given to
            untimed lines that arrive live in a file that prints no time, see ``dating``).
        tz: zone for naive timestamps in logs.
        backfill: True for ``ingest``: every line is history, so a line without a timestamp
            gets the nearest earlier timestamp of its file (or the file's mtime), never now.
        on_progress: called with the number of bytes read, for a progress bar.
        idle_flush_s: live, how long (by ``clock``) a file must have had no new complete line
            before its parser's pending state is flushed.
        rotated_idle_s: how long (by ``clock``) a file that left its globs is followed after
            its size last changed; 0 releases it as soon as it is read to its end.
        backlog: where the files opened live wait until their backlog settles (``backlog``; the
            daemon's advisor asks it too); None: a tailer's own.
        workers: with ``backfill``, how many worker processes parse the files (``parallel``:
            files spread over them, a big file cut into ranges; the same events as one).
    """

    def __init__(
        self,
        store: Store,
        specs: list[WatchSpec],
        *,
        clock: Callable[[], datetime],
        tz: tzinfo,
        backfill: bool = False,
        on_progress: Callable[[int], None] | None = None,
        idle_flush_s: float = 2.0,
        rotated_idle_s: float = ROTATED_IDLE_S,
        backlog: Backlog | None = None,
        workers: int = 1,
    ) -> None:
        self.store = store
        self.specs = specs
        self._backfill = backfill
        self._clock = clock
        self._idle_flush_s = idle_flush_s
        self.backlog = backlog or Backlog()
        """The followed files whose backlog has not settled."""
        self._reader = Reader(
            store,
            clock=clock,
            tz=tz,
            backfill=backfill,
            on_progress=on_progress,
            idle_flush_s=idle_flush_s,
            backlog=None if backfill else self.backlog,
        )
        if backfill and workers > 1:
            from ckpt_advisor.agent.tail.parallel import ParallelBackfill

            self._reader.parallel = ParallelBackfill(self._reader, workers)
        self._files = FollowedFiles(store, self._reader, clock=clock, rotated_idle_s=rotated_idle_s)
        self._rediscover = False
        self._scans = 0
        self._not_regular: set[str] = set()
        """Matches warned about as not regular files (each path once)."""

    def close(self) -> None:
        """Close every open file, reading nothing more (what a crash leaves: the next start
        reads on from the store's offsets). A clean shutdown calls :meth:`drain` first."""
        if self._reader.parallel is not None:
            self._reader.parallel.close()
        self._files.close_all()

    def drain(self) -> None:
        """At shutdown: read every file that left its globs to its end and release it (see
        :meth:`FollowedFiles.drain`). Never raises."""
        self._files.drain()

    def set_specs(self, specs: list[WatchSpec]) -> None:
        """Follow a new set of globs (a config reload). Files whose job or glob is gone are
        closed; the others keep their open file and parser state; new ones are found by the
        next :meth:`scan`."""
        self.specs = specs
        self._rediscover = True
        for key, f in list(self._files.by_key.items()):
            if f.spec not in specs:
                self._files.close(key)

    def positions(self) -> list[FilePosition]:
        """The read position and current size of every followed file, sorted by path."""
        return self._files.positions()

    @property
    def n_followed(self) -> int:
        """How many files are followed (open), without a ``fstat`` of each as :meth:`positions`
        takes."""
        return len(self._files.by_key)

    def watched_dirs(self) -> set[str]:
        """Directories to hand to watchdog: the fixed prefix of every glob that exists."""
        return discovery.watched_dirs(self.specs)

    def discover(self) -> Iterator[tuple[WatchSpec, str]]:
        """Every (spec, path) currently matching the globs, regular files only, each path once;
        any other match is skipped with one warning naming it."""
        return discovery.discover(self.specs, self._not_regular)

    def scan(self, *, discover: bool = True) -> ScanStats:
        """Read everything new in the followed files; returns what was done.

        ``discover``: search the globs for new files. Without it, only the files already
        followed are ``stat()``ed, which is the cheap poll; the globs are searched anyway on
        the first scan, after :meth:`set_specs`, after a file was dropped on an error, and as
        soon as a followed file's name no longer leads to it (renamed, deleted, re-pointed).
        Either way a file whose size and mtime did not change since it was read (and whose
        mtime is older than :data:`discovery.SETTLED_S`) is not read again, unless its parser
        is due an idle flush. Live, the scan ends by settling the files' backlogs
        (:meth:`Backlog.settle`, after the reads, so a due flush comes first): the jobs that
        caught up are in ``caught_up`` of the stats.

        Never raises for a bad file: an unreadable file is logged and retried next scan (a
        file that could not be opened: next discovery).

        Raises:
            StoreError: the store cannot be written. Nothing read since the last commit is
                lost: the files involved are read again from their stored offsets (through
                the same descriptor) next scan.
        """
        stats = ScanStats()
        due = discover or self._rediscover or self._files.dropped or self._scans == 0
        if due or not self._poll(stats):
            self._discover_and_read(stats)
        if self._reader.parallel is not None:
            self._reader.parallel.wait(stats)  # every file read before the scan returns
        elif not self._backfill:
            now_s = self._clock().timestamp()
            followed = self._files.by_key.values()
            stats.caught_up = self.backlog.settle(followed, now_s, self._idle_flush_s)
        self._scans += 1
        return stats

    def _discover_and_read(self, stats: ScanStats) -> None:
        stats.discovered = True
        self._rediscover = self._files.dropped = False
        found: set[FileKey] = set()
        for spec, path in self.discover():
            try:
                self._scan_path(spec, path, found, stats)
            except OSError as exc:
                log.warning("cannot read %s: %s", path, exc.strerror or exc)
        if self._scans == 0 and not self._backfill:
            self._files.recover_rotated(self.specs, found)
        for key in [k for k in self._files.by_key if k not in found]:
            self._files.left_globs(key, stats)

    def _poll(self, stats: ScanStats) -> bool:
        """Stat the followed files and read those that changed; False (nothing read) if the
        globs must be searched instead (see :func:`discovery.poll`)."""
        observed = discovery.poll(self._files.by_key)
        if observed is None:
            return False
        stats.files += len(observed)
        for key, st in observed:
            f = self._files.by_key[key]
            if f.orphan is not None:
                self._files.read_orphan(key, st, stats)
            elif self._reader.due(f, st):
                try:
                    self._files.read(key, stats, st)
                except OSError as exc:
                    log.warning("cannot read %s: %s", f.path, exc.strerror or exc)
        return True

    def _scan_path(self, spec: WatchSpec, path: str, found: set[FileKey], stats: ScanStats) -> None:
        st = os.stat(path)
        key = (st.st_dev, st.st_ino)
        if key in found:
            return  # the same file by a second name (a symlink, or a second glob)
        f = self._files.by_key.get(key)
        if f is None:
            f = self._reader.open(spec, path, live=self._scans > 0)
            key = (f.state.dev, f.state.ino)
            if key in found or key in self._files.by_key:
                os.close(f.fd)
                return
            self._files.by_key[key] = f
        found.add(key)
        f.path, f.orphan = path, None  # (back) under a glob
        stats.files += 1
        if self._reader.due(f, st):
            self._files.read(key, stats, st)
