"""The tailer: turns the files under the job globs into stored events, exactly once per line.

:class:`Tailer` is the one object the daemon and ``ingest`` use. It keeps the set of followed
files and drives each scan; the questions are answered in the modules beside it:

* ``discovery`` - which files are to be followed, and which may have changed (globs, polls);
* ``identity`` - is this the file we knew (inode + head hash, rotation, truncation, reuse);
* ``reader`` - how new bytes become committed events (buffers, replay, commits, flushes);
* ``dating`` - when did a line that printed no time happen;
* ``parsers.selection`` - which lines of a buffer the parser must see (pure).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from datetime import datetime, tzinfo

from ckpt_advisor.agent.store import Store
from ckpt_advisor.agent.tail import discovery, identity
from ckpt_advisor.agent.tail.discovery import FileKey, WatchSpec
from ckpt_advisor.agent.tail.followed import FilePosition, OpenFile
from ckpt_advisor.agent.tail.reader import Reader, ScanStats

log = logging.getLogger(__name__)


class Tailer:
    """Reads the files of several jobs into a :class:`Store`, exactly once per complete line.

    Files are followed by identity (device + inode + head hash), not by name: a file renamed
    within the globs keeps its offset; one renamed out of them, deleted, or left behind by a
    re-pointed symlink is read to its end through the open descriptor, then *released*
    (closed); a path reached twice (a symlink and its target) is read once. A file shorter
    than its offset, or whose first bytes changed, was truncated: it is read again from 0 and
    counted. At start, files rotated away while nothing watched them are found by inode in
    their old directory and read from their stored offset.

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
    ) -> None:
        self.store = store
        self.specs = specs
        self._backfill = backfill
        self._reader = Reader(
            store,
            clock=clock,
            tz=tz,
            backfill=backfill,
            on_progress=on_progress,
            idle_flush_s=idle_flush_s,
        )
        self._files: dict[FileKey, OpenFile] = {}
        self._empty: set[str] = set()  # paths found empty by the last discovery
        self._rediscover = False
        self._scans = 0

    def close(self) -> None:
        """Close every open file (what is not committed is read again by the next start)."""
        for f in self._files.values():
            os.close(f.fd)
        self._files.clear()

    def set_specs(self, specs: list[WatchSpec]) -> None:
        """Follow a new set of globs (a config reload). Files whose job or glob is gone are
        closed; the others keep their open file and parser state; new ones are found by the
        next :meth:`scan`."""
        self.specs = specs
        self._rediscover = True
        for key, f in list(self._files.items()):
            if f.spec not in specs:
                self._close(key)

    def positions(self) -> list[FilePosition]:
        """The read position and current size of every followed file, sorted by path."""
        out = []
        for f in sorted(self._files.values(), key=lambda f: f.path):
            try:
                size = os.fstat(f.fd).st_size
            except OSError:
                continue
            out.append(FilePosition(f.spec.job, f.path, f.state.offset, size, f.last_read_s))
        return out

    def watched_dirs(self) -> set[str]:
        """Directories to hand to watchdog: the fixed prefix of every glob that exists."""
        return discovery.watched_dirs(self.specs)

    def discover(self) -> Iterator[tuple[WatchSpec, str]]:
        """Every (spec, path) currently matching the globs, files only, each path once."""
        return discovery.discover(self.specs)

    def scan(self, *, discover: bool = True) -> ScanStats:
        """Read everything new in the watched files; returns what was done.

        ``discover``: search the globs for new files. Without it, only the files already
        followed (and those found empty) are ``stat()``ed, which is the cheap poll; the globs
        are searched anyway on the first scan, after :meth:`set_specs`, after a file was
        dropped on an error, and as soon as a followed file's name no longer leads to it
        (renamed, deleted, re-pointed) or a file found empty has grown. Either way a file
        whose size and mtime did not change since it was read (and whose mtime is older than
        :data:`discovery.SETTLED_S`) is not read again, unless its parser is due an idle flush.

        Never raises for a bad file: an unreadable file is logged and retried next scan (a
        file that could not be opened: next discovery).

        Raises:
            StoreError: the store cannot be written. Nothing read since the last commit is
                lost: the files involved are re-read from their stored offsets next scan.
        """
        stats = ScanStats()
        if discover or self._rediscover or self._scans == 0 or not self._poll(stats):
            self._discover_and_read(stats)
        self._scans += 1
        return stats

    def _discover_and_read(self, stats: ScanStats) -> None:
        stats.discovered = True
        self._rediscover = False
        self._empty.clear()
        seen: set[FileKey] = set()
        for spec, path in self.discover():
            try:
                self._scan_path(spec, path, seen, stats)
            except OSError as exc:
                log.warning("cannot read %s: %s", path, exc.strerror or exc)
        if self._scans == 0 and not self._backfill:
            self._recover_rotated(seen, stats)
        for key in [k for k in self._files if k not in seen]:
            self._release(key, stats)

    def _poll(self, stats: ScanStats) -> bool:
        """Stat the followed files and read those that changed; False (nothing read) if the
        globs must be searched instead (see :func:`discovery.poll`)."""
        observed = discovery.poll(self._files, self._empty)
        if observed is None:
            return False
        stats.files += len(self._files)
        for key, st in observed:
            f = self._files[key]
            if self._reader.due(f, st):
                try:
                    self._read_or_drop(key, stats, st)
                except OSError as exc:
                    log.warning("cannot read %s: %s", f.path, exc.strerror or exc)
        return True

    def _scan_path(self, spec: WatchSpec, path: str, seen: set[FileKey], stats: ScanStats) -> None:
        st = os.stat(path)
        key = (st.st_dev, st.st_ino)
        if key in seen:
            return  # the same file by a second name (a symlink, or a second glob)
        f = self._files.get(key)
        if f is None:
            f = self._reader.open(spec, path, live=self._scans > 0)
            if f is None:
                self._empty.add(path)
                return
            key = (f.state.dev, f.state.ino)
            if key in seen or key in self._files:
                os.close(f.fd)
                return
            self._files[key] = f
        seen.add(key)
        f.path = path
        stats.files += 1
        if self._reader.due(f, st):
            self._read_or_drop(key, stats, st)

    def _read_or_drop(
        self, key: FileKey, stats: ScanStats, st: os.stat_result | None = None
    ) -> None:
        """Read one followed file; if anything fails, forget its in-memory state (the parser has
        seen lines that were not committed) so the next scan replays from the store.

        ``st``: the file's ``stat`` taken before the read; if its mtime is settled, the next
        scans skip the file while its size and mtime stay the same."""
        f = self._files[key]
        try:
            self._reader.read(f, stats)
        except BaseException:
            self._close(key)
            self._rediscover = True
            raise
        f.settled = discovery.settled(st) if st is not None else None

    def _close(self, key: FileKey) -> OpenFile:
        f = self._files.pop(key)
        os.close(f.fd)
        return f

    def _release(self, key: FileKey, stats: ScanStats) -> None:
        """A followed file no longer under its glob (renamed away, deleted, symlink
        re-pointed): read it to its end through the open descriptor, flush its parser, then
        let it go; a deleted file's record is forgotten (its inode may be reused)."""
        f = self._files[key]
        try:
            self._read_or_drop(key, stats)
            self._reader.flush_final(f, stats)
        except OSError as exc:
            log.warning("cannot read %s to its end: %s", f.path, exc.strerror or exc)
            return
        except BaseException:
            if key in self._files:
                self._close(key)
            raise
        deleted = identity.is_deleted(f.fd)
        self._close(key)
        log.info("released %s (%s)", f.path, "deleted" if deleted else "no longer watched")
        if deleted and f.state.id:
            self.store.forget_file(f.state.id)  # its inode may be reused by an unrelated file

    def _recover_rotated(self, seen: set[FileKey], stats: ScanStats) -> None:
        """At start: files rotated away while the daemon was down are read from their stored
        offset to their end (see :func:`identity.rotated_while_down`)."""
        for spec, path, known in identity.rotated_while_down(self.store, self.specs, seen):
            try:
                f = self._reader.open(spec, path, live=False, name=known.path)
            except OSError:
                continue
            if f is None:
                continue
            key = (f.state.dev, f.state.ino)
            if f.state.id != known.id or key in seen or key in self._files:
                os.close(f.fd)  # not the same file after all (inode reused)
                continue
            seen.add(key)
            self._files[key] = f
            log.info("reading %s (was %s) from byte %d", path, known.path, known.offset)
            self._release(key, stats)
