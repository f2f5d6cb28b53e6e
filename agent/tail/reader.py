"""How a followed file's new bytes become stored events: buffers, replay and commits.

Complete lines are read in large buffers from where the parser stopped, handed to the parser
(only the lines its ``LineFilter`` asks for, see ``parsers.buffers``), and the events, with
the file's new offset, are committed in ONE store transaction: a crash neither loses nor
repeats a line (docs/RELIABILITY.md scenarios 1, 2, 8 and 9). What the parsers find about a file's
clock is logged as it is stored, naming the file and the line: a clock that stepped back or a
stamp after the file's last write as a warning (scenario 30), a bar clock ignored or a file
without timestamps at INFO.

Parser state (a traceback half read, a CSV header, the detected stack) is not stored: when a
file is opened again after a restart, its committed bytes are fed to a fresh parser and their
events dropped (the *replay*), so the parser continues exactly where the stopped one was. This
costs one re-read of each file per start (see ``bench/``), and makes a restart mid-traceback or
mid-save lose nothing. Replayed bytes go through the same fast path as new ones.

A parser may hold an event until the next line (a traceback's failure waits for the line after
its exception line). Live, a file with no new complete line for ``idle_flush_s`` has its parser
*flushed* (``StreamParser.finish()``) once (at once if its mtime is older than
:data:`WRITER_GONE_S`: its writer is gone, and a last line no newline ended, a killed run's last
progress-bar redraw, is read first: :meth:`Reader.flush_end`), and the flush is recorded with the
offset (``FileState.finished``) so that a replay flushes at the same byte: a failure that ends a
file is stored, and stored once, across restarts. A backfill flushes at the end of each file, and
a file that left its globs is flushed at its end when it is let go (:meth:`Reader.flush_final`:
quiet for ``rotated_idle_s``, or at shutdown). A flush ends nothing but such a failure: a save
stays open until a line ends it (an HF Trainer save writes its weights for minutes after its
config lines), so a file read in pieces far apart in time, a restart between them or not,
gives the events of the whole file read at once (docs/RELIABILITY.md scenario 8).
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING

from ckpt_advisor import parsers
from ckpt_advisor.agent.store import FileState, Store
from ckpt_advisor.agent.tail import identity
from ckpt_advisor.agent.tail.backlog import Backlog
from ckpt_advisor.agent.tail.dating import FileClock
from ckpt_advisor.agent.tail.discovery import WatchSpec
from ckpt_advisor.agent.tail.followed import OpenFile
from ckpt_advisor.agent.tail.inputs import (
    BINARY_SNIFF_BYTES,
    MAX_LINE_BYTES,
    binary_reason,
    open_regular,
    skipped_line,
)
from ckpt_advisor.parsers.buffers import parse_buffer
from ckpt_advisor.parsers.events import CLOCK_KINDS, Event, EventKind

if TYPE_CHECKING:
    from ckpt_advisor.agent.tail.parallel import ParallelBackfill

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 4 << 20
"""Bytes read at once; a backfill's memory is a few of these whatever the file's size."""
COMMIT_EVERY_BYTES = 16 << 20
"""A long backfill commits every so many bytes, so progress survives a crash."""
WRITER_GONE_S = 300.0
"""A file whose mtime is this much older than our clock (or ``idle_flush_s``, if longer) when it
is read has its parser flushed at once, without the idle wait: its writer is gone, and its last
lines (a traceback's failure) are stored in the scan that reads them, so a start on old logs
posts its first message without waiting. Not after ``idle_flush_s`` of mtime: the mtime is
stamped by the file server's clock (NFS, Lustre), and a server whose clock runs behind ours
makes a file being written look idle; a flush too early stores the failure of a traceback cut
short (its exception line unread: no class), for good. Five minutes is far beyond the skew of
NTP-synchronised hosts (milliseconds) and is what Kerberos (NFS with ``sec=krb5``) tolerates by
default. A server running ahead of ours only makes files look younger: they wait for the idle
flush, which runs by our clock alone, as before."""


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
    caught_up: set[str] = field(default_factory=set)
    """Jobs whose files' backlogs all settled in this scan (``backlog``)."""


_WARNED_KINDS = (EventKind.CLOCK_STEP, EventKind.STAMP_AFTER_WRITE)
"""Clock findings logged as warnings: a clock that stepped back, stamps in the future."""

SHARED_RECHECK_S = 30.0
"""How often a file another agent reads is looked at again (that agent may have gone away)."""


def _writer_gone(st: os.stat_result, idle_flush_s: float = 0.0) -> bool:
    """Whether the file whose ``fstat`` is ``st`` was last written :data:`WRITER_GONE_S` (or
    ``idle_flush_s``, if longer) ago or more: its writer is gone."""
    return time.time() - st.st_mtime >= max(WRITER_GONE_S, idle_flush_s)


def _file_clock(fd: int) -> FileClock:
    return FileClock(lambda: os.fstat(fd).st_mtime)


def from_timing_file(event: Event) -> bool:
    """Whether ``event`` was read by a timing-file parser (see :data:`parsers.TIMING_FORMATS`):
    decided by the parser that recognised it, not by the file's name or glob."""
    return event.parser in parsers.TIMING_FORMATS


class Reader:
    """Opens followed files and reads their new complete lines into the store.

    The arguments are the :class:`~ckpt_advisor.agent.tail.Tailer`'s of the same names; with
    ``backfill`` every read also ends with a flush. Each file opened is added to ``backlog``
    (the tailer's, live; None: to none).

    (A little over 250 lines with its docstrings, on purpose: the read loop, the replay and the
    resets after a truncation or a failed commit move the same positions of one ``OpenFile``
    together; split apart, each half would have to keep the other's invariants.)
    """

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], datetime],
        tz: tzinfo,
        backfill: bool,
        on_progress: Callable[[int], None] | None,
        idle_flush_s: float,
        backlog: Backlog | None = None,
    ) -> None:
        self.store = store
        self._clock = clock
        self._tz = tz
        self._backfill = backfill
        self._on_progress = on_progress
        self._idle_flush_s = idle_flush_s
        self.parallel: ParallelBackfill | None = None
        """Set for a backfill on several cores: files are read in its workers (``parallel``)."""
        self.backlog = backlog

    def open(self, spec: WatchSpec, path: str, *, live: bool, name: str | None = None) -> OpenFile:
        """Open ``path`` and find what the store remembers of it. An empty file is followed
        too (identified by its inode alone until it has bytes): if it is renamed away before
        its first line, its writer's lines are still read.

        ``live``: the file appeared while we watched, so all of it is live; otherwise the bytes
        already there are history. ``name``: the name the file had under its glob, ``path``
        by default; it is the name stored, so a file rotated away is found again by it at the
        next start. The format is the spec's: with ``auto`` the parser tells a timing file
        from a log by its content, whatever its name or glob.

        Raises:
            OSError: the file cannot be opened or read (``inputs.NotRegularFile``: it is a
                FIFO, a directory…: never opened for reading).
            StoreError: the store cannot be read.
        """
        fd = open_regular(path)
        try:
            st = os.fstat(fd)
            state = identity.identify(self.store, fd, st, spec.job, name or path)
        except BaseException:
            os.close(fd)
            raise
        fmt = spec.fmt
        if state.shared_with is not None:
            log.warning("%s: %s reads this file; not read here", path, state.shared_with)
        elif state.offset:
            log.info("resuming %s at byte %d (line %d)", path, state.offset, state.lineno)
        parser = parsers.make_parser(fmt, tz=self.zone(spec), patterns=spec.custom)
        f = OpenFile(
            spec,
            path,
            fd,
            state,
            fmt,
            parser,
            _file_clock(fd),
            live_from=1 << 62 if self._backfill else 0 if live else st.st_size,
            replay_to=0,
            last_read_s=state.updated_s,
            idle_since_s=self._clock().timestamp(),
            backlog_end=st.st_size,
        )
        self._reset(f, state, parser)
        if self.backlog is not None:
            self.backlog.add(f)
        return f

    def due(self, f: OpenFile, st: os.stat_result) -> bool:
        """Whether ``f`` is to be read now: its size or mtime moved since it was last read
        (or its mtime had not settled then), its parser is due an idle flush, or its state is
        to be rebuilt after a failed read."""
        changed = f.settled != (st.st_size, st.st_mtime_ns)
        return f.stale or changed or self._flush_due(f, False, st)

    def read(self, f: OpenFile, stats: ScanStats) -> None:
        """Read ``f``'s new complete lines (after a replay of what an earlier run committed),
        commit their events with the new offset (every :data:`COMMIT_EVERY_BYTES` and at the
        end), and flush the parser when due. Read from its start, the file is sniffed
        (:meth:`_sniff`). The first read that ends sets ``f.backlog_read_s``: what ``f`` held
        when it was opened is read (but for a partial last line).

        Raises:
            OSError: the file cannot be read.
            StoreError: the store cannot be written; ``f``'s in-memory state is then ahead of
                the store: the caller marks it ``stale``, and the next read rebuilds it.
        """
        if f.state.shared_with is not None:  # fleet mode: another agent reads this file
            if self._clock().timestamp() - f.idle_since_s < SHARED_RECHECK_S:
                return
            f.idle_since_s = self._clock().timestamp()
            self._reload(f)  # that agent may be away now: adopt its file
            if f.state.shared_with is not None:
                return
        stats.files_read += 1
        if f.stale:
            self._reload(f)
        fd = f.fd
        st = os.fstat(fd)
        size = st.st_size
        truncated = identity.truncated(fd, f.state, f.pos, size)
        if truncated:
            stats.truncations += 1
            self._rewind(f, size)
        if f.pos == 0 and f.skip_pos is None:
            self._sniff(f)
        if not truncated and self.parallel is not None and self.parallel.take(f, size, stats):
            return
        misses_before = f.parser.misses
        pending: list[Event] = []
        since_commit = 0
        new_lines = False
        while True:
            # Each read starts at the first unconsumed line (or inside an overlong one), so a
            # partial last line is read again with what was appended to it. A replay stops at
            # ``replay_to``, where the earlier run stopped (and maybe flushed).
            at = f.skip_pos if f.skip_pos is not None else f.pos
            replaying = at < f.replay_to
            f.unended_bytes = 0
            end = f.replay_to if replaying else size  # bytes after ``size``: next scan
            want = min(max(READ_CHUNK_BYTES, MAX_LINE_BYTES + 1), end - at)
            if want <= 0:
                break
            data = os.pread(fd, want, at)
            cut = data.rfind(b"\n")
            if cut < 0:
                if len(data) > MAX_LINE_BYTES or (
                    f.skip_pos is not None and data and not replaying
                ):
                    # an overlong line: drop what we have, go on from its end next time
                    f.skip_pos = at + len(data)
                    consumed = len(data)
                elif replaying and data and f.replay_flush and at + len(data) == f.replay_to:
                    # an earlier run fed this last line of a dead writer at its flush, below
                    self._parse_tail(f, data, pending, stats, replaying=True)
                    consumed = len(data)
                elif replaying and data:  # the replayed bytes changed: read them as new ones
                    f.replay_to, f.replay_flush = at, False
                    continue
                else:  # nothing, or a partial last line: wait for its newline
                    f.unended_bytes = len(data)
                    break
            else:
                consumed = cut + 1
                self._parse_lines(f, data, consumed, at, pending, stats, replaying=replaying)
                new_lines = new_lines or not replaying
            if not replaying:
                f.last_read_s = f.idle_since_s = self._clock().timestamp()
            if replaying and f.pos == f.replay_to and f.replay_flush:
                f.replay_flush = False
                self._flush(f, [])  # as the earlier run did here; its events are stored
            stats.bytes_read += consumed
            if self._on_progress:
                self._on_progress(consumed)
            since_commit += consumed
            if since_commit >= COMMIT_EVERY_BYTES and f.pos > f.state.offset:
                self._commit(f, pending, stats, truncated)
                pending, since_commit, truncated = [], 0, False
        if self._flush_due(f, new_lines, st):
            self.flush_end(f, pending, stats)
        stats.parse_misses += f.parser.misses - misses_before
        if f.pos >= f.state.offset and (
            pending
            or f.pos != f.state.offset
            or truncated
            or f.state.id == 0
            or f.flushed != f.state.finished
        ):
            self._commit(f, pending, stats, truncated)
        if f.backlog_read_s is None:
            f.backlog_read_s = self._clock().timestamp()

    def flush_final(self, f: OpenFile, stats: ScanStats) -> None:
        """No line will follow: flush the parser at ``f.pos`` (a pending failure is complete;
        a save still open stays open, as at the end of a backfill: no line showed its end) and
        commit, unless it is flushed already or the position is not a line's end yet."""
        if f.pos >= f.replay_to and not f.flushed and f.skip_pos is None:
            pending: list[Event] = []
            self.flush_end(f, pending, stats)
            self._commit(f, pending, stats, False)

    def _flush_due(self, f: OpenFile, new_lines: bool, st: os.stat_result) -> bool:
        """Whether the parser's pending state is to be flushed at ``f.pos`` now: once all
        replayed bytes are fed, at the end of a backfill, or live once the file has had no
        new complete line for ``idle_flush_s``, or its mtime (in ``st``, its ``fstat``) is
        older than :data:`WRITER_GONE_S`; never inside an overlong line."""
        if f.pos < f.replay_to or f.flushed or f.skip_pos is not None:
            return False
        idle_s = self._clock().timestamp() - f.idle_since_s
        gone = _writer_gone(st, self._idle_flush_s)
        return self._backfill or gone or (not new_lines and idle_s >= self._idle_flush_s)

    def _flush(self, f: OpenFile, pending: list[Event]) -> None:
        """Flush the parser's pending state at ``f.pos`` into ``pending``."""
        live = f.pos > f.live_from
        for ev in f.parser.finish():
            pending.append(f.clock.date(ev, live=live, now=self._clock))
            if (found := f.clock.take_finding()) is not None:
                pending.append(found)
        f.flushed = True

    @staticmethod
    def _sniff(f: OpenFile) -> None:
        """Set ``f.binary`` (:attr:`OpenFile.binary`) from its first bytes, about to be read
        from its start, warning when it starts to look binary. At each read from the start, so
        a file created empty is judged once it has bytes, and one rewritten as text is
        again."""
        why = binary_reason(os.pread(f.fd, BINARY_SNIFF_BYTES, 0))
        if why is not None and f.binary is None:
            log.warning("%s looks binary (%s): no events expected; narrow the glob", f.path, why)
        f.binary = why

    def _rewind(self, f: OpenFile, size: int) -> None:
        """``f`` was truncated or rewritten: read it again from 0, fresh parser and file clock."""
        log.warning(
            "%s was truncated or rewritten (%d bytes, offset %d); reading from the start",
            f.path,
            size,
            f.state.offset,
        )
        self._reset(f, identity.rewound(f.fd, f.state, size), self._parser(f))
        f.clock = _file_clock(f.fd)
        f.live_from = 0

    def _reload(self, f: OpenFile) -> None:
        """Rebuild ``f``'s in-memory state from the store, through the same descriptor (a
        renamed or deleted file cannot be opened again): a fresh parser and file clock that
        replay what the store holds as committed."""
        state = identity.identify(self.store, f.fd, os.fstat(f.fd), f.spec.job, f.state.path)
        self._reset(f, state, self._parser(f))
        f.clock = _file_clock(f.fd)
        f.stale = False

    def zone(self, spec: WatchSpec) -> tzinfo:
        """The zone the files of ``spec`` are read in: the job's, else the tailer's."""
        return spec.tz or self._tz

    def _parser(self, f: OpenFile) -> parsers.StreamParser:
        return parsers.make_parser(f.fmt, tz=self.zone(f.spec), patterns=f.spec.custom)

    @staticmethod
    def _reset(f: OpenFile, state: FileState, parser: parsers.StreamParser) -> None:
        """Read ``f`` from 0 with ``parser`` (a fresh one), replaying ``state``'s committed
        bytes (and flushing where ``state`` says the parser was flushed)."""
        f.state = state
        f.parser = parser
        f.pos = f.lineno = 0
        f.replay_to = state.offset
        f.replay_flush = state.finished and state.offset > 0
        f.skip_pos = None
        f.flushed = False

    def _parse_lines(
        self,
        f: OpenFile,
        data: bytes,
        end: int,
        base: int,
        pending: list[Event],
        stats: ScanStats,
        *,
        replaying: bool,
    ) -> None:
        """Feed the parser the lines of ``data[:end]`` (complete lines; ``data`` starts at file
        byte ``base``, which is ``f.pos`` or inside the overlong line starting there) that its
        :class:`~parsers.stream.LineFilter` asks for (:func:`parsers.buffers.parse_buffer`),
        and move ``f.pos``/``f.lineno`` past them. ``replaying``: bytes an earlier run
        committed; their events are dropped and they are not counted."""
        first_lineno = f.lineno
        clock, now = f.clock, self._clock

        def skipped(line_start: int, stop: int, lineno: int) -> None:
            if not replaying:
                stats.skipped_lines += 1
                length = base + stop - line_start
                log.warning("%s", skipped_line(f.path, lineno, length))

        start, lines = 0, 0
        if f.skip_pos is not None:  # the end of an overlong line begun in an earlier read
            stop = data.index(b"\n", 0, end)
            f.skip_pos = None
            lines = 1
            skipped(f.pos, stop, first_lineno + 1)
            start = stop + 1
        numbered_from = first_lineno + lines
        fed_lines, found = parse_buffer(
            f.parser,
            data,
            start,
            end,
            numbered_from,
            max_line_bytes=MAX_LINE_BYTES,
            on_skipped=lambda line_start, stop, lineno: skipped(base + line_start, stop, lineno),
        )
        lines += fed_lines
        for line_start, events in found:
            live = base + line_start >= f.live_from
            for ev in events:
                resolved = clock.date(ev, live=live, now=now)
                ahead = clock.take_finding()
                if not replaying:
                    pending.append(resolved)
                    if ahead is not None:
                        pending.append(ahead)
        if lines:
            f.flushed = False  # lines went by, fed or not
        f.pos, f.lineno = base + end, first_lineno + lines
        if not replaying and lines:
            stats.lines += lines
            stats.job_lines[f.spec.job] += lines
            stats.job_files.setdefault(f.spec.job, set()).add(f.path)

    def flush_end(self, f: OpenFile, pending: list[Event], stats: ScanStats) -> None:
        """Flush the parser at ``f.pos`` (:meth:`_flush`), feeding first the file's last line
        if no newline ends it and its writer is gone (:func:`_writer_gone`,
        :meth:`_parse_tail`); events go to ``pending``, the line to ``stats``.

        Raises:
            OSError: the file cannot be read.
        """
        st = os.fstat(f.fd)
        if _writer_gone(st) and f.replay_to <= f.pos < st.st_size and f.skip_pos is None:
            tail = os.pread(f.fd, min(st.st_size - f.pos, MAX_LINE_BYTES + 1), f.pos)
            if len(tail) <= MAX_LINE_BYTES and b"\n" not in tail:
                self._parse_tail(f, tail, pending, stats, replaying=False)
                f.unended_bytes = 0
        self._flush(f, pending)

    def _parse_tail(
        self,
        f: OpenFile,
        tail: bytes,
        pending: list[Event],
        stats: ScanStats,
        *,
        replaying: bool,
    ) -> None:
        """Feed ``tail``, the bytes after ``f.pos`` up to the file's end, no newline among
        them, as the file's last line, when the parser is flushed with its writer gone
        (:func:`_writer_gone`): the last redraw of a training bar killed with SIGKILL (tqdm ends
        a redraw with no newline), the run's last progress. ``f.pos`` moves past it and the
        flush is stored there, so a replay feeds the same bytes (:meth:`read`). The line is
        not counted in ``f.lineno``: if its writer was not gone after all, what it appends
        continues the same line, read from there as the next line and numbered the same."""
        lineno = f.lineno
        self._parse_lines(
            f, tail + b"\n", len(tail) + 1, f.pos, pending, stats, replaying=replaying
        )
        f.pos, f.lineno = f.pos - 1, lineno

    def _commit(self, f: OpenFile, events: list[Event], stats: ScanStats, truncated: bool) -> None:
        """Store ``events`` with the offset ``f.pos`` in one transaction."""
        f.state = self.store.commit_read(
            identity.grown_head(f.fd, f.state, f.pos),
            offset=f.pos,
            lineno=f.lineno,
            events=events,
            now_s=self._clock().timestamp(),
            from_timing_file=from_timing_file,
            truncated=truncated,
            finished=f.flushed,
        )
        if f.state.shared_with is not None:  # the store found another agent reading it
            log.warning("%s: %s reads this file; not read here", f.path, f.state.shared_with)
            return
        stats.events += len(events)
        stats.job_events[f.spec.job] += len(events)
        for ev in events:
            if ev.kind is EventKind.FAILURE:
                stats.failure_jobs.add(f.spec.job)
            elif ev.kind in CLOCK_KINDS:  # once, as stored: a replay drops its events
                level = logging.WARNING if ev.kind in _WARNED_KINDS else logging.INFO
                log.log(level, "%s:%d: %s: %s", f.path, ev.line, ev.kind.value, ev.detail)
