"""Discovery, offsets and rotation: turns files under the job globs into stored events.

The tailer finds files under each job's globs, reads complete lines from where it last stopped,
hands them to a parser, and commits the parsed events together with the new offset in one store
transaction. It is driven by :meth:`Tailer.scan`, which the daemon calls when watchdog reports a
change and on every poll tick (shared filesystems such as NFS and Lustre deliver no inotify events
for other hosts' writes, so a ``stat`` poll of every known file is always on). A poll costs one
``stat`` per known file: a file whose size and mtime did not change is not read. Globbing for new
files (discovery) is the costlier part; the caller asks for it less often (``discover=True``).

File identity is device + inode + a hash of the file's first bytes, so a renamed, truncated or
recreated file is recognised whatever its name.
"""

from __future__ import annotations

import bisect
import fnmatch
import functools
import glob
import hashlib
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, tzinfo
from pathlib import Path

import ahocorasick_rs

from ckpt_advisor import parsers
from ckpt_advisor.agent.store import FileState, Store
from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.stream import LineFilter

log = logging.getLogger(__name__)

HEAD_BYTES = 1024
"""How many leading bytes identify a file (with its device and inode)."""
MAX_LINE_BYTES = 1 << 20
"""Longer lines are skipped and counted; memory stays bounded whatever a file holds."""
READ_CHUNK_BYTES = 4 << 20
"""Bytes read at once; a backfill's memory is a few of these whatever the file's size."""
STEP_SAMPLE_BYTES = 256 << 10
"""In a stretch of progress lines (tqdm redraws) with no keyword line, one progress line per this
many bytes is parsed, besides the first and the last (see :class:`parsers.stream.LineFilter`):
the store keeps a sample of the bar (a step event every few minutes of training), not all of it."""
COMMIT_EVERY_BYTES = 16 << 20
"""A long backfill commits every so many bytes, so progress survives a crash."""
SETTLED_S = 2.0
"""A file whose mtime is at least this old when it is stat()ed is trusted to be unchanged while
its size and mtime stay the same. A younger one is read on every scan: a truncation and a
same-size rewrite within one mtime tick (a few ms) would otherwise go unseen (git's "racily
clean" entries; NFS servers may also stamp with a coarse or skewed clock)."""
LIVE_CLOCK_SKEW_S = 3600.0
"""A live line without a timestamp gets the read time, unless its file's own clock is further
than this from ours (a replay, a wrong zone): then the file's latest time is nearer the truth."""


@dataclass(frozen=True, slots=True)
class WatchSpec:
    """One job's globs of one kind: training logs, or checkpoint timing files."""

    job: str
    patterns: tuple[str, ...]
    timing: bool = False
    fmt: str = "auto"
    custom: tuple[parsers.CustomPattern, ...] = ()
    """Custom log patterns from the job's config (``[[jobs.patterns]]``)."""


@dataclass
class ScanStats:
    """What one scan did, for logs, metrics and the scheduler."""

    files: int = 0
    bytes_read: int = 0
    lines: int = 0
    events: int = 0
    skipped_lines: int = 0
    parse_misses: int = 0
    truncations: int = 0
    failure_jobs: set[str] = field(default_factory=set)
    discovered: bool = False
    """The globs were searched for new files (else only known files were stat()ed)."""
    files_read: int = 0
    """Files read (changed, or due an idle flush); 0 if no file's position or size moved."""
    job_lines: Counter[str] = field(default_factory=Counter)
    """New lines read, by job."""
    job_events: Counter[str] = field(default_factory=Counter)
    """Events stored, by job."""
    job_files: dict[str, set[str]] = field(default_factory=dict)
    """Paths new lines were read from, by job."""


@dataclass(frozen=True, slots=True)
class FilePosition:
    """How far one followed file has been read, for metrics and ``ckpt-advisor status``.

    ``size_bytes - offset_bytes`` is the lag: bytes written but not yet read (an incomplete
    last line stays there until its newline arrives). ``last_read_s`` is the Unix time new
    bytes were last read from the file, None if none were since the daemon started.
    """

    job: str
    path: str
    offset_bytes: int
    size_bytes: int
    last_read_s: float | None

    @property
    def lag_bytes(self) -> int:
        """Bytes behind the end of the file (never negative)."""
        return max(0, self.size_bytes - self.offset_bytes)


@dataclass
class _Tracked:
    """One open file. ``pos``/``lineno``: how far the parser has read (in memory);
    ``state``: how far events are committed. Bytes before ``replay_to`` were committed by an
    earlier run: they are fed again to rebuild the parser's state, and their events dropped."""

    spec: WatchSpec
    path: str
    fd: int
    state: FileState
    fmt: str
    parser: parsers.StreamParser
    live_from: int
    replay_to: int
    replay_finish: bool = False  # the parser was flushed at ``replay_to``: flush it there again
    pos: int = 0
    lineno: int = 0
    last_time: datetime | None = None
    skip_pos: int | None = None  # inside an overlong line: where to go on reading it
    last_read_s: float | None = None  # clock time new bytes were last read
    finished: bool = False  # the parser was flushed at ``pos`` (nothing pending)
    idle_since_s: float = 0.0  # clock time of the last new complete line (or of the open)
    settled: tuple[int, int] | None = None  # (size, mtime_ns) when read; None: read next scan


def _parser_format(spec: WatchSpec, path: str) -> str:
    if spec.timing and spec.fmt == "auto":
        return "timing_csv" if path.lower().endswith(".csv") else "timing_jsonl"
    return spec.fmt


def _head_hash(fd: int, length: int) -> str:
    return hashlib.blake2b(os.pread(fd, length, 0), digest_size=16).hexdigest()


class Tailer:
    """Reads the files of several jobs into a :class:`Store`, exactly once per complete line.

    Files are followed by identity (device + inode + head hash), not by name: a file renamed
    within the globs keeps its offset; one renamed out of them, deleted, or left behind by a
    re-pointed symlink is drained to its end through the open descriptor, then closed; a path
    reached twice (a symlink and its target) is read once. A file shorter than its offset, or
    whose first bytes changed, was truncated: it is read again from 0 and counted.

    Parser state (a traceback half read, a CSV header, the detected stack) is not stored: when a
    file is opened again after a restart, its committed bytes are fed to a fresh parser and
    their events dropped, so the parser continues exactly where the crashed one was. This costs
    one re-read of each file per start (see ``bench/``), and makes a restart mid-traceback or
    mid-save lose nothing. Replayed bytes go through the same fast path (:meth:`_parse_lines`)
    as new ones.

    A parser may hold an event until the next line (a traceback's failure waits for the line
    after its exception line). Live, a file with no new complete line for ``idle_flush_s``
    has its parser flushed (``finish()``) once, and the flush is recorded with the offset
    (``FileState.finished``) so that a replay flushes at the same byte: a failure that ends a
    file is stored, and stored once, across restarts. ``ingest`` flushes at the end of each
    file, and a file drained because it left its globs is flushed before it is closed.

    Args:
        store: where events and offsets go.
        specs: the globs to watch.
        clock: returns the current aware UTC datetime (the time given to lines with no
            timestamp that arrive live).
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
        self._clock = clock
        self._tz = tz
        self._backfill = backfill
        self._on_progress = on_progress
        self._idle_flush_s = idle_flush_s
        self._tracked: dict[tuple[int, int], _Tracked] = {}
        self._empty: set[str] = set()  # paths found empty by the last discovery
        self._rediscover = False
        self._scans = 0

    def close(self) -> None:
        """Close every open file."""
        for t in self._tracked.values():
            os.close(t.fd)
        self._tracked.clear()

    def set_specs(self, specs: list[WatchSpec]) -> None:
        """Follow a new set of globs (a config reload). Files whose job or glob is gone are
        closed; the others keep their open file and parser state; new ones are found by the
        next :meth:`scan`."""
        self.specs = specs
        self._rediscover = True
        for key, t in list(self._tracked.items()):
            if t.spec not in specs:
                self._close(key)

    def positions(self) -> list[FilePosition]:
        """The read position and current size of every followed file, sorted by path."""
        out = []
        for t in sorted(self._tracked.values(), key=lambda t: t.path):
            try:
                size = os.fstat(t.fd).st_size
            except OSError:
                continue
            out.append(FilePosition(t.spec.job, t.path, t.state.offset, size, t.last_read_s))
        return out

    def watched_dirs(self) -> set[str]:
        """Directories to hand to watchdog: the fixed prefix of every glob that exists."""
        dirs: set[str] = set()
        for spec in self.specs:
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

    def discover(self) -> Iterator[tuple[WatchSpec, str]]:
        """Every (spec, path) currently matching the globs, files only, each path once."""
        seen: set[str] = set()
        for spec in self.specs:
            for pattern in spec.patterns:
                for path in sorted(glob.glob(pattern, recursive=True)):
                    if path not in seen and os.path.isfile(path):
                        seen.add(path)
                        yield spec, path

    def scan(self, *, discover: bool = True) -> ScanStats:
        """Read everything new in the watched files; returns what was done.

        ``discover``: search the globs for new files. Without it, only the files already
        followed (and those found empty) are ``stat()``ed, which is the cheap poll; the globs
        are searched anyway on the first scan, after :meth:`set_specs`, after a file was
        dropped on an error, and as soon as a followed file's name no longer leads to it
        (renamed, deleted, re-pointed) or a file found empty has grown. Either way a file
        whose size and mtime did not change since it was read (and whose mtime is older than
        :data:`SETTLED_S`) is not read again, unless its parser is due an idle flush.

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
        seen: set[tuple[int, int]] = set()
        for spec, path in self.discover():
            try:
                self._scan_path(spec, path, seen, stats)
            except OSError as exc:
                log.warning("cannot read %s: %s", path, exc.strerror or exc)
        if self._scans == 0 and not self._backfill:
            self._finish_rotated(seen, stats)
        for key in [k for k in self._tracked if k not in seen]:
            self._finish(key, stats)

    def _poll(self, stats: ScanStats) -> bool:
        """Stat the followed files and read those that changed; False (nothing read) if the
        globs must be searched instead: a name no longer leads to its file, or a file found
        empty has grown."""
        due: list[tuple[tuple[int, int], os.stat_result]] = []
        try:
            for key, t in self._tracked.items():
                st = os.stat(t.path)
                if (st.st_dev, st.st_ino) != key:
                    return False
                if not self._unchanged(t, st):
                    due.append((key, st))
            if any(os.stat(path).st_size for path in self._empty):
                return False
        except OSError:
            return False
        stats.files += len(self._tracked)
        for key, st in due:
            path = self._tracked[key].path
            try:
                self._read_or_drop(key, stats, st)
            except OSError as exc:
                log.warning("cannot read %s: %s", path, exc.strerror or exc)
        return True

    def _unchanged(self, t: _Tracked, st: os.stat_result) -> bool:
        """Nothing to do for this file: same size and mtime as when it was last read (and
        then settled), and no idle flush due."""
        return t.settled == (st.st_size, st.st_mtime_ns) and not self._flush_due(t, False)

    def _flush_due(self, t: _Tracked, new_lines: bool) -> bool:
        """Whether the parser's pending state is to be flushed at ``t.pos`` now: once all
        replayed bytes are fed, at the end of a backfill, or live once the file has had no
        new complete line for ``idle_flush_s``; never inside an overlong line."""
        if t.pos < t.replay_to or t.finished or t.skip_pos is not None:
            return False
        idle_s = self._clock().timestamp() - t.idle_since_s
        return self._backfill or (not new_lines and idle_s >= self._idle_flush_s)

    # -- one file ------------------------------------------------------------------------

    def _scan_path(
        self, spec: WatchSpec, path: str, seen: set[tuple[int, int]], stats: ScanStats
    ) -> None:
        st = os.stat(path)
        key = (st.st_dev, st.st_ino)
        if key in seen:
            return  # the same file by a second name (a symlink, or a second glob)
        t = self._tracked.get(key)
        if t is None:
            t = self._open(spec, path, live=self._scans > 0)
            if t is None:
                self._empty.add(path)
                return
            key = (t.state.dev, t.state.ino)
            if key in seen or key in self._tracked:
                os.close(t.fd)
                return
            self._tracked[key] = t
        seen.add(key)
        t.path = path
        stats.files += 1
        if not self._unchanged(t, st):
            self._read_or_drop(key, stats, st)

    def _read_or_drop(
        self, key: tuple[int, int], stats: ScanStats, st: os.stat_result | None = None
    ) -> None:
        """Read one tracked file; if anything fails, forget its in-memory state (the parser has
        seen lines that were not committed) so the next scan replays from the store.

        ``st``: the file's ``stat`` taken before the read; if its mtime is settled, the next
        scans skip the file while its size and mtime stay the same."""
        t = self._tracked[key]
        try:
            self._read(t, stats)
        except BaseException:
            self._close(key)
            self._rediscover = True
            raise
        settled = st is not None and time.time_ns() - st.st_mtime_ns >= SETTLED_S * 1e9
        t.settled = (st.st_size, st.st_mtime_ns) if st is not None and settled else None

    def _close(self, key: tuple[int, int]) -> _Tracked:
        t = self._tracked.pop(key)
        os.close(t.fd)
        return t

    def _finish(self, key: tuple[int, int], stats: ScanStats) -> None:
        """A tracked file no longer under its glob (renamed away, deleted, symlink re-pointed):
        read it to its end through the open descriptor, then let it go."""
        t = self._tracked[key]
        try:
            self._read_or_drop(key, stats)
            if t.pos >= t.replay_to and not t.finished and t.skip_pos is None:
                pending: list[Event] = []
                self._flush(t, pending)  # no line will follow: a pending failure is complete
                self._commit(t, pending, stats, False)
        except OSError as exc:
            log.warning("cannot finish %s: %s", t.path, exc.strerror or exc)
            return
        except BaseException:
            if key in self._tracked:
                self._close(key)
            raise
        deleted = os.fstat(t.fd).st_nlink == 0
        self._close(key)
        log.info("finished %s (%s)", t.path, "deleted" if deleted else "no longer watched")
        if deleted and t.state.id:
            self.store.forget_file(t.state.id)  # its inode may be reused by an unrelated file

    def _finish_rotated(self, seen: set[tuple[int, int]], stats: ScanStats) -> None:
        """At start: files rotated away while the daemon was down are found in their old
        directory by inode and head hash and read from their stored offset to the end."""
        by_dir: dict[str, dict[int, str]] = {}
        for spec in self.specs:
            for known in self.store.files(spec.job):
                if (known.dev, known.ino) in seen or not any(
                    fnmatch.fnmatch(known.path, p) for p in spec.patterns
                ):
                    continue
                folder = os.path.dirname(known.path)
                if folder not in by_dir:
                    try:
                        by_dir[folder] = {e.inode(): e.path for e in os.scandir(folder)}
                    except OSError:
                        by_dir[folder] = {}
                path = by_dir[folder].get(known.ino)
                if path is None:
                    continue
                try:
                    t = self._open(spec, path, live=False, name=known.path)
                except OSError:
                    continue
                if t is None:
                    continue
                key = (t.state.dev, t.state.ino)
                if t.state.id != known.id or key in seen or key in self._tracked:
                    os.close(t.fd)  # not the same file after all (inode reused)
                    continue
                seen.add(key)
                self._tracked[key] = t
                log.info("finishing %s (was %s) from byte %d", path, known.path, known.offset)
                self._finish(key, stats)

    def _open(
        self, spec: WatchSpec, path: str, *, live: bool, name: str | None = None
    ) -> _Tracked | None:
        """Open ``path`` and find what the store remembers of it (None for an empty file).

        ``live``: the file appeared while we watched, so all of it is live; otherwise the bytes
        already there are history. ``name``: the name the file had under its glob (a rotated
        ``timings.csv.1`` is still CSV), ``path`` by default.
        """
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            if st.st_size == 0:
                os.close(fd)
                return None
            state = self._identify(fd, st, spec.job, path)
        except BaseException:
            os.close(fd)
            raise
        fmt = _parser_format(spec, name or path)
        parser = parsers.make_parser(fmt, tz=self._tz, patterns=spec.custom)
        live_from = 1 << 62 if self._backfill else 0 if live else st.st_size
        if state.offset:
            log.info("resuming %s at byte %d (line %d)", path, state.offset, state.lineno)
        return _Tracked(
            spec,
            path,
            fd,
            state,
            fmt,
            parser,
            live_from,
            replay_to=state.offset,
            replay_finish=state.finished and state.offset > 0,
            idle_since_s=self._clock().timestamp(),
        )

    def _identify(self, fd: int, st: os.stat_result, job: str, path: str) -> FileState:
        """The stored state of the open file, or a new one at offset 0; stale rows for this
        inode (an unrelated file that had it before) are forgotten."""
        for known in self.store.find_files(job, st.st_dev, st.st_ino):
            same = known.head_len <= st.st_size and (
                _head_hash(fd, known.head_len) == known.head_hash
            )
            if same and known.offset <= st.st_size:
                return replace(known, path=path)
            self.store.forget_file(known.id)
            log.info("%s: inode %d held another file before; reading from 0", path, st.st_ino)
        head_len = min(HEAD_BYTES, st.st_size)
        return FileState(
            id=0,
            job=job,
            path=path,
            dev=st.st_dev,
            ino=st.st_ino,
            head_hash=_head_hash(fd, head_len),
            head_len=head_len,
            offset=0,
            lineno=0,
            truncations=0,
        )

    def _truncated(self, t: _Tracked, size: int) -> bool:
        """Shorter than what was read, or different first bytes: a truncated (and maybe
        rewritten) file."""
        if size < t.pos or size < t.state.offset:
            return True
        return _head_hash(t.fd, t.state.head_len) != t.state.head_hash

    def _restart(self, t: _Tracked, size: int) -> None:
        log.warning(
            "%s was truncated or rewritten (%d bytes, offset %d); reading from the start",
            t.path,
            size,
            t.state.offset,
        )
        head_len = min(HEAD_BYTES, size)
        t.state = replace(
            t.state, offset=0, lineno=0, head_len=head_len, head_hash=_head_hash(t.fd, head_len)
        )
        t.parser = parsers.make_parser(t.fmt, tz=self._tz, patterns=t.spec.custom)
        t.pos = t.lineno = t.replay_to = t.live_from = 0
        t.skip_pos = None
        t.replay_finish = t.finished = False

    def _read(self, t: _Tracked, stats: ScanStats) -> None:
        stats.files_read += 1
        fd = t.fd
        size = os.fstat(fd).st_size
        truncated = self._truncated(t, size)
        if truncated:
            stats.truncations += 1
            self._restart(t, size)
        misses_before = t.parser.misses
        pending: list[Event] = []
        since_commit = 0
        new_lines = False
        while True:
            # Each read starts at the first unconsumed line (or inside an overlong one), so a
            # partial last line is read again with what was appended to it. A replay stops at
            # ``replay_to``, where the earlier run stopped (and maybe flushed).
            at = t.skip_pos if t.skip_pos is not None else t.pos
            replaying = at < t.replay_to
            end = t.replay_to if replaying else size  # bytes after ``size``: next scan
            want = min(max(READ_CHUNK_BYTES, MAX_LINE_BYTES + 1), end - at)
            if want <= 0:
                break
            data = os.pread(fd, want, at)
            cut = data.rfind(b"\n")
            if cut < 0:
                if len(data) > MAX_LINE_BYTES or (
                    t.skip_pos is not None and data and not replaying
                ):
                    # an overlong line: drop what we have, go on from its end next time
                    t.skip_pos = at + len(data)
                    consumed = len(data)
                elif replaying and data:  # the replayed bytes changed: read them as new ones
                    t.replay_to, t.replay_finish = at, False
                    continue
                else:
                    break  # nothing, or a partial last line: wait for its newline
            else:
                consumed = cut + 1
                self._parse_lines(t, data, consumed, at, pending, stats, replaying=replaying)
                new_lines = new_lines or not replaying
            if not replaying:
                t.last_read_s = t.idle_since_s = self._clock().timestamp()
            if replaying and t.pos == t.replay_to and t.replay_finish:
                t.replay_finish = False
                self._flush(t, [])  # as the earlier run did here; its events are stored
            stats.bytes_read += consumed
            if self._on_progress:
                self._on_progress(consumed)
            since_commit += consumed
            if since_commit >= COMMIT_EVERY_BYTES and t.pos > t.state.offset:
                self._commit(t, pending, stats, truncated)
                pending, since_commit, truncated = [], 0, False
        if self._flush_due(t, new_lines):
            self._flush(t, pending)
        stats.parse_misses += t.parser.misses - misses_before
        if t.pos >= t.state.offset and (
            pending
            or t.pos != t.state.offset
            or truncated
            or t.state.id == 0
            or t.finished != t.state.finished
        ):
            self._commit(t, pending, stats, truncated)

    def _flush(self, t: _Tracked, pending: list[Event]) -> None:
        """Flush the parser's pending state at ``t.pos`` into ``pending``."""
        for ev in t.parser.finish():
            pending.append(self._resolve_time(t, ev, t.pos > t.live_from, t.fd))
        t.finished = True

    def _parse_lines(
        self,
        t: _Tracked,
        data: bytes,
        end: int,
        base: int,
        pending: list[Event],
        stats: ScanStats,
        *,
        replaying: bool,
    ) -> None:
        """Feed the parser the lines of ``data[:end]`` (complete lines; ``data`` starts at file
        byte ``base``, which is ``t.pos`` or inside the overlong line starting there) that its
        :class:`~parsers.stream.LineFilter` asks for, and move ``t.pos``/``t.lineno`` past
        them. The other lines are only counted: finding the keyword lines is one multi-literal
        search over the whole buffer. ``replaying``: bytes an earlier run committed; their
        events are dropped and they are not counted."""

        def feed(start: int, stop: int, lineno: int) -> None:
            line_start = t.pos if t.skip_pos is not None else base + start
            if t.skip_pos is not None or stop - start > MAX_LINE_BYTES:
                t.skip_pos = None
                if not replaying:
                    stats.skipped_lines += 1
                    length = base + stop - line_start
                    log.warning("%s:%d: line of %d bytes skipped", t.path, lineno, length)
                return
            t.finished = False
            live = line_start >= t.live_from
            for ev in t.parser.feed(data[start:stop].decode("utf-8", "replace"), lineno):
                resolved = self._resolve_time(t, ev, live, t.fd)
                if not replaying:
                    pending.append(resolved)

        first_lineno, lineno, pos = t.lineno, t.lineno, 0
        hits: dict[LineFilter, _Hits] = {}
        newlines: _Newlines | None = None
        line_filter = t.parser.line_filter
        while pos < end:
            if line_filter is None or t.skip_pos is not None:  # every line, one at a time
                stop = data.index(b"\n", pos, end)
                lineno += 1
                feed(pos, stop, lineno)
                pos = stop + 1
                line_filter = t.parser.line_filter
                continue
            if line_filter not in hits:
                hits[line_filter] = _Hits(line_filter.keywords, data, end)
            if newlines is None:
                newlines = _Newlines(data, end)
            keyword_line = hits[line_filter].next_line(pos)
            for start in _sampled_progress_lines(line_filter.progress, data, pos, keyword_line):
                pos = data.index(b"\n", start, end)
                lineno = first_lineno + newlines.before(start) + 1
                feed(start, pos, lineno)
                pos += 1
            pos = keyword_line
            lineno = first_lineno + newlines.before(pos)
            if pos < end:
                stop = data.index(b"\n", pos, end)
                lineno += 1
                feed(pos, stop, lineno)
                pos = stop + 1
                line_filter = t.parser.line_filter
        if lineno > first_lineno:
            t.finished = False  # lines went by, fed or not
        t.pos, t.lineno = base + end, lineno
        if not replaying and lineno > first_lineno:
            stats.lines += lineno - first_lineno
            stats.job_lines[t.spec.job] += lineno - first_lineno
            stats.job_files.setdefault(t.spec.job, set()).add(t.path)

    def _resolve_time(self, t: _Tracked, ev: Event, live: bool, fd: int) -> Event:
        """Date an event whose line printed no time.

        Live, the read time is best (the line was written within a poll interval) unless the
        file's own clock is far from ours; otherwise the parser's inferred time (the bar
        clock), else the file's latest printed time, else the file's mtime. Such times are
        marked ``time_estimated``.
        """
        if ev.time is not None and not ev.time_estimated:
            t.last_time = ev.time
            return ev
        now = self._clock()
        if live and (
            t.last_time is None or abs((now - t.last_time).total_seconds()) < LIVE_CLOCK_SKEW_S
        ):
            when = now
        elif ev.time is not None:
            return ev
        elif t.last_time is not None:
            when = t.last_time
        else:
            when = datetime.fromtimestamp(os.fstat(fd).st_mtime, now.tzinfo)
        return replace(ev, time=when, time_estimated=True)

    def _commit(self, t: _Tracked, events: list[Event], stats: ScanStats, truncated: bool) -> None:
        """Store ``events`` with the offset ``t.pos`` in one transaction; the identifying head
        grows with the committed bytes up to :data:`HEAD_BYTES`."""
        state = t.state
        if state.head_len < HEAD_BYTES and t.pos > state.head_len:
            head_len = min(HEAD_BYTES, t.pos)
            state = replace(state, head_len=head_len, head_hash=_head_hash(t.fd, head_len))
        t.state = self.store.commit_read(
            state,
            offset=t.pos,
            lineno=t.lineno,
            events=events,
            now_s=self._clock().timestamp(),
            from_timing_file=_from_timing_file,
            truncated=truncated,
            finished=t.finished,
        )
        stats.events += len(events)
        stats.job_events[t.spec.job] += len(events)
        if any(ev.kind is EventKind.FAILURE for ev in events):
            stats.failure_jobs.add(t.spec.job)


def _from_timing_file(event: Event) -> bool:
    """Whether ``event`` was read by a timing-file parser (see :data:`parsers.TIMING_FORMATS`):
    decided by the parser that recognised it, not by the file's name or glob."""
    return event.parser in parsers.TIMING_FORMATS


@functools.lru_cache(maxsize=64)
def _matcher(keywords: tuple[bytes, ...]) -> ahocorasick_rs.BytesAhoCorasick | None:
    """A multi-literal searcher for the keywords of two bytes or more (``None`` if none).

    Leftmost-first matching lets the library use its SIMD prefilter (Teddy), ~3 GB/s where
    ``re`` with an alternation does ~70 MB/s; one single-byte keyword (``b"\x1b"``) among them
    turns the prefilter off (~450 MB/s), so those are searched apart (:func:`_byte_hits`)."""
    long = [k for k in keywords if len(k) > 1]
    if not long:
        return None
    return ahocorasick_rs.BytesAhoCorasick(long, matchkind=ahocorasick_rs.MatchKind.LeftmostFirst)


def _byte_hits(data: bytes, byte: bytes, end: int) -> Iterator[int]:
    """Offsets of ``byte`` in ``data[:end]``: ``bytes.find`` is memchr, ~10 GB/s."""
    at = data.find(byte, 0, end)
    while at >= 0:
        yield at
        at = data.find(byte, at + 1, end)


class _Hits:
    """The keyword lines of one buffer, found by one search of the whole buffer per kind of
    keyword (multi-byte ones together, each single byte apart)."""

    def __init__(self, keywords: tuple[bytes, ...], data: bytes, end: int) -> None:
        self._data, self._end = data, end
        matcher = _matcher(keywords)
        starts = (
            [s for _, s, _ in matcher.find_matches_as_indexes(data) if s < end] if matcher else []
        )
        for byte in (k for k in keywords if len(k) == 1):
            starts.extend(_byte_hits(data, byte, end))
        starts.sort()
        self._starts = starts
        self._next = 0

    def next_line(self, pos: int) -> int:
        """Start of the first keyword line at or after line start ``pos``, else the end."""
        starts = self._starts
        i = bisect.bisect_left(starts, pos, self._next)
        self._next = i
        if i == len(starts):
            return self._end
        return self._data.rfind(b"\n", pos, starts[i]) + 1 or pos


class _Newlines:
    """Line numbers in one buffer: a numpy mask of its newlines (~4 GB/s), counted between
    offsets that only grow (~16 GB/s), where ``bytes.count`` goes at ~1.3 GB/s."""

    def __init__(self, data: bytes, end: int) -> None:
        import numpy as np  # loaded already wherever there is a tailer: the estimator needs it

        self._mask = np.frombuffer(data, np.uint8, count=end) == ord("\n")
        self._count = np.count_nonzero
        self._pos = self._before = 0

    def before(self, pos: int) -> int:
        """How many lines end before offset ``pos`` (fastest for offsets in growing order)."""
        if pos < self._pos:
            self._pos = self._before = 0
        self._before += int(self._count(self._mask[self._pos : pos]))
        self._pos = pos
        return self._before


def _nearest(markers: tuple[bytes, ...], data: bytes, lo: int, hi: int, *, last: bool) -> int:
    """Offset of the first (or, with ``last``, the last) marker in ``data[lo:hi]``, else -1.

    The window grows from the near end, so a marker a line away costs a short scan even when
    another marker (``it/s`` where the bar shows ``s/it``) is nowhere in the buffer."""
    width = 4096
    while True:
        w_lo, w_hi = (max(lo, hi - width), hi) if last else (lo, min(hi, lo + width))
        found = [at for at in (_find(data, m, w_lo, w_hi, last) for m in markers) if at >= 0]
        if found:
            return max(found) if last else min(found)
        if w_hi - w_lo == hi - lo:
            return -1
        width *= 4


def _find(data: bytes, marker: bytes, lo: int, hi: int, last: bool) -> int:
    return data.rfind(marker, lo, hi) if last else data.find(marker, lo, hi)


def _sampled_progress_lines(markers: tuple[bytes, ...], data: bytes, lo: int, hi: int) -> list[int]:
    """Starts of the progress lines to parse in ``data[lo:hi]`` (whole lines, none holding a
    keyword): the first, the last before every :data:`STEP_SAMPLE_BYTES` boundary, the last."""
    if not markers or lo >= hi:
        return []

    def line_start(at: int) -> int:
        return data.rfind(b"\n", lo, at) + 1 or lo

    first = _nearest(markers, data, lo, hi, last=False)
    if first < 0:
        return []
    starts = [line_start(first)]
    bound = lo + STEP_SAMPLE_BYTES
    while True:
        bound = min(bound, hi)
        at = _nearest(markers, data, starts[-1], bound, last=True)
        if at >= 0 and (start := line_start(at)) > starts[-1]:
            starts.append(start)
        if bound == hi:
            return starts
        bound += STEP_SAMPLE_BYTES
