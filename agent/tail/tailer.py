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
import time
from collections.abc import Callable, Iterator
from datetime import datetime, tzinfo

from ckpt_advisor.agent.store import Store
from ckpt_advisor.agent.tail import discovery, identity
from ckpt_advisor.agent.tail.discovery import FileKey, WatchSpec
from ckpt_advisor.agent.tail.followed import FilePosition, OpenFile
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
    ) -> None:
        self.store = store
        self.specs = specs
        self._clock = clock
        self._backfill = backfill
        self._rotated_idle_s = rotated_idle_s
        self._reader = Reader(
            store,
            clock=clock,
            tz=tz,
            backfill=backfill,
            on_progress=on_progress,
            idle_flush_s=idle_flush_s,
        )
        self._files: dict[FileKey, OpenFile] = {}
        self._rediscover = False
        self._scans = 0

    def close(self) -> None:
        """Close every open file, reading nothing more (what a crash leaves: the next start
        reads on from the store's offsets). A clean shutdown calls :meth:`drain` first."""
        for f in self._files.values():
            os.close(f.fd)
        self._files.clear()

    def drain(self) -> None:
        """At shutdown: read every followed file that left its globs (noticed by a scan yet or
        not) to its end through its descriptor, flush its parser and release it; nothing
        could read a deleted one later. Never raises: a file that cannot be read to its end
        is logged, with where its stored lines stop."""
        stats = ScanStats()
        for key, f in list(self._files.items()):
            try:
                if f.orphan is None:
                    if _leads_to(f.path, key):
                        continue
                    self._orphan(f, os.fstat(f.fd))
                self._release(key, stats)
            except Exception as exc:
                log.error(
                    "cannot read %s to its end at shutdown (%s): lines after byte %d are not "
                    "stored",
                    f.path,
                    exc,
                    f.state.offset,
                )

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
        """Read everything new in the followed files; returns what was done.

        ``discover``: search the globs for new files. Without it, only the files already
        followed are ``stat()``ed, which is the cheap poll; the globs are searched anyway on
        the first scan, after :meth:`set_specs`, after a file was dropped on an error, and as
        soon as a followed file's name no longer leads to it (renamed, deleted, re-pointed).
        Either way a file whose size and mtime did not change since it was read (and whose
        mtime is older than :data:`discovery.SETTLED_S`) is not read again, unless its parser
        is due an idle flush.

        Never raises for a bad file: an unreadable file is logged and retried next scan (a
        file that could not be opened: next discovery).

        Raises:
            StoreError: the store cannot be written. Nothing read since the last commit is
                lost: the files involved are read again from their stored offsets (through
                the same descriptor) next scan.
        """
        stats = ScanStats()
        if discover or self._rediscover or self._scans == 0 or not self._poll(stats):
            self._discover_and_read(stats)
        self._scans += 1
        return stats

    def _discover_and_read(self, stats: ScanStats) -> None:
        stats.discovered = True
        self._rediscover = False
        seen: set[FileKey] = set()
        for spec, path in self.discover():
            try:
                self._scan_path(spec, path, seen, stats)
            except OSError as exc:
                log.warning("cannot read %s: %s", path, exc.strerror or exc)
        if self._scans == 0 and not self._backfill:
            self._recover_rotated(seen)
        for key in [k for k in self._files if k not in seen]:
            f = self._files[key]
            try:
                st = os.fstat(f.fd)
            except OSError as exc:
                log.warning("cannot follow %s: %s", f.path, exc.strerror or exc)
                self._close(key)
                continue
            if f.orphan is None:
                self._orphan(f, st)
            stats.files += 1
            self._read_orphan(key, st, stats)

    def _poll(self, stats: ScanStats) -> bool:
        """Stat the followed files and read those that changed; False (nothing read) if the
        globs must be searched instead (see :func:`discovery.poll`)."""
        observed = discovery.poll(self._files)
        if observed is None:
            return False
        stats.files += len(self._files)
        for key, st in observed:
            f = self._files[key]
            if f.orphan is not None:
                self._read_orphan(key, st, stats)
            elif self._reader.due(f, st):
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
            key = (f.state.dev, f.state.ino)
            if key in seen or key in self._files:
                os.close(f.fd)
                return
            self._files[key] = f
        seen.add(key)
        f.path, f.orphan = path, None  # (back) under a glob
        stats.files += 1
        if self._reader.due(f, st):
            self._read_or_drop(key, stats, st)

    def _read_or_drop(
        self,
        key: FileKey,
        stats: ScanStats,
        st: os.stat_result | None = None,
        *,
        final: bool = False,
    ) -> None:
        """Read one followed file (``final``: to its end, with a flush, before its release).

        If the file cannot be read, it is closed: one under its globs is opened again by name
        at the next discovery (a stale NFS handle heals so), one that left them is lost. If
        the store fails, the file stays open and is marked ``stale``: the parser has seen
        lines that were not committed, so the next read replays from the store.

        ``st``: the file's ``stat`` taken before the read; if its mtime is settled, the next
        scans skip the file while its size and mtime stay the same."""
        f = self._files[key]
        try:
            self._reader.read(f, stats)
            if final:
                self._reader.flush_final(f, stats)
        except OSError:
            self._close(key)
            self._rediscover = True
            raise
        except BaseException:
            f.stale = True
            raise
        f.settled = discovery.settled(st) if st is not None else None

    def _close(self, key: FileKey) -> OpenFile:
        f = self._files.pop(key)
        os.close(f.fd)
        return f

    def _orphan(self, f: OpenFile, st: os.stat_result) -> None:
        """``f`` left its globs: follow it through its descriptor from now on."""
        f.orphan = identity.Orphan(self._clock().timestamp(), st.st_size)
        name = identity.current_name(f.fd, f.path)
        log.info(
            "%s left its globs (now %s): reading it through its open descriptor until it has "
            "been idle for %gs",
            f.path,
            name,
            self._rotated_idle_s,
        )
        f.path = name

    def _read_orphan(self, key: FileKey, st: os.stat_result, stats: ScanStats) -> None:
        """Read a file that left its globs if it changed; release it once it has been quiet
        for ``rotated_idle_s``."""
        f = self._files[key]
        assert f.orphan is not None
        try:
            if self._reader.due(f, st):
                self._read_or_drop(key, stats, st)
            if f.orphan.quiet_s(st.st_size, self._clock().timestamp()) >= self._rotated_idle_s:
                self._release(key, stats)
        except OSError as exc:
            log.warning("cannot read %s: %s; lines written to it from now on are lost", f.path, exc)

    def _release(self, key: FileKey, stats: ScanStats) -> None:
        """Done with a file that left its globs: read it to its end through the open
        descriptor, flush its parser (no line will follow: a pending failure is complete),
        close it; a deleted file's record is forgotten (its inode may be reused).

        Raises:
            OSError: the file could not be read to its end (it is closed).
            StoreError: as :meth:`scan` (the file stays open, to be read again).
        """
        f = self._files[key]
        self._read_or_drop(key, stats, final=True)
        try:
            deleted = identity.is_deleted(f.fd)
        finally:
            self._close(key)
        log.info("released %s (%s)", f.path, "deleted" if deleted else "renamed")
        if deleted and f.state.id:
            self.store.forget_file(f.state.id)

    def _recover_rotated(self, seen: set[FileKey]) -> None:
        """At start: files rotated away while the daemon was down (see
        :func:`identity.rotated_while_down`) are followed from their stored offset, as files
        that left their globs, quiet since their last write (their mtime). One whose first
        bytes changed meanwhile (truncated and rewritten, or a new file with the inode, in the
        same directory) is read from 0: none of it was stored."""
        for spec, path, known in identity.rotated_while_down(self.store, self.specs, seen):
            try:
                f = self._reader.open(spec, path, live=False, name=known.path)
            except OSError:
                continue
            key = (f.state.dev, f.state.ino)
            if key in seen or key in self._files:
                os.close(f.fd)
                continue
            st = os.fstat(f.fd)  # an open descriptor: fstat does not fail
            age_s = max(0.0, time.time() - st.st_mtime)
            f.orphan = identity.Orphan(self._clock().timestamp() - age_s, st.st_size)
            self._files[key] = f
            log.info("following %s (was %s) from byte %d", path, known.path, f.state.offset)


def _leads_to(path: str, key: FileKey) -> bool:
    """Whether ``path`` still names the file ``key``."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == key
