"""A backfill on several cores: files spread over worker processes, a big file cut into ranges.

``ingest`` parses most of its CPU time away (issue 15); with ``workers`` > 1 the reader hands
each file to this module (:meth:`ParallelBackfill.take`) instead of reading it itself. A file
is cut into *ranges* of about ``range_bytes`` (one range below ``split_bytes``); each range is
parsed by a worker process through the reader's own parsing call
(:meth:`~ckpt_advisor.agent.tail.reader.Reader._parse_lines`), and the main process commits
the ranges' events in file order, each range with its end offset and line number in one store
transaction (:meth:`Reader._commit`), as the reader commits its 16 MB steps: a crash loses and
repeats nothing (docs/RELIABILITY.md scenarios 1 and 2), and the next run goes on from the
last committed range.

**Why the result is the one process's.** A parser is a deterministic function of its state
and the lines it is fed. Three things make a range's events those of one sequential read:

* *The same buffers.* The reader reads 4 MB at a time, each buffer ending at its last newline,
  and samples the progress bar per buffer (``parsers.selection``): its buffer boundaries are a
  chain from offset 0 (capped at a committed offset when it resumes, as its replay is). Ranges
  are cut on that chain (:func:`_chain`, which also counts the lines before each boundary), and
  a worker reads with the same rule, so it feeds its parser exactly the lines the reader would.
* *The same state at the cut.* A worker starts a fresh parser ``overlap_windows`` buffers
  before its cut and replays them (events dropped, as the reader's replay does). A fresh
  parser does not in general reach the sequential parser's state (a traceback or save open at
  the cut, the run's ``Total optimization steps``, the file clock's shift after a step back,
  a once-per-file report already made, failures within the dedup window), so nothing is
  assumed: at the cut the worker takes a *signature* of its whole state
  (:func:`state_signature`: every field reachable from the parser and the file's clock), and
  the range before, when it reaches the same cut, takes its own. The range is kept only if
  the two are equal; then every later line is parsed from an equal state, so its events are
  equal. The first range of a file starts at offset 0 (replaying what an earlier run
  committed), like the reader.
* *The same fallback.* When the signatures differ (or a worker fails, or the file cannot be
  cut: a buffer without a newline), the ranges kept so far are committed, and the rest of the
  file is read by the reader itself, sequentially, with a fresh parser started where the last
  kept range's parser started (its *origin*) replaying up to the committed offset: the state
  the kept range had, so again the one process's result; it costs one range's re-read.

Memory: a range's events are held until committed, at most ``workers + 1`` ranges at a time
(32 MB of the event-dense bench log is ~35,000 events, ~25 MB); buffers are 4 MB.

Workers are forked when the :class:`ParallelBackfill` is made, which must be before the
process starts a thread (``ingest`` makes it before its progress bar): a fork costs ~10 ms and
no imports, and the children's CPU time is the parent's children's (``getrusage``), so
benchmarks see it. They never touch the store.
"""

from __future__ import annotations

import ctypes
import enum
import logging
import multiprocessing
import os
import re
import signal
import types
from collections import deque
from collections.abc import Iterator
from concurrent.futures import BrokenExecutor, Future, ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any, cast

import ahocorasick_rs

from ckpt_advisor import parsers
from ckpt_advisor.agent.store import FileState, Store
from ckpt_advisor.agent.tail import reader as reader_module
from ckpt_advisor.agent.tail.dating import FileClock
from ckpt_advisor.agent.tail.discovery import WatchSpec
from ckpt_advisor.agent.tail.followed import OpenFile
from ckpt_advisor.agent.tail.inputs import MAX_LINE_BYTES
from ckpt_advisor.agent.tail.reader import Reader, ScanStats
from ckpt_advisor.parsers.events import Event
from ckpt_advisor.parsers.failures import DEDUP_LINES, FailureLines
from ckpt_advisor.parsers.stream import Diagnostics
from ckpt_advisor.parsers.traceback import TracebackTracker

log = logging.getLogger(__name__)

SPLIT_BYTES = 64 << 20
"""A file at least this big is cut into ranges (a smaller one is one worker's task)."""
RANGE_BYTES = 32 << 20
"""About how many bytes a range holds (a whole number of the reader's buffers)."""
OVERLAP_WINDOWS = 1
"""Buffers a worker replays before its cut to rebuild the parser's state."""
MAX_DIFFERING = 2
"""Ranges in a row whose state may differ before the rest of their file is read here."""


def default_workers() -> int:
    """The cores this process may run on (``os.sched_getaffinity``: a cgroup's or ``taskset``'s
    limit, not the machine's count)."""
    return len(os.sched_getaffinity(0))


@dataclass(frozen=True)
class RangeTask:
    """One worker's share of a file: a fresh parser at byte ``origin`` (line ``origin_lineno``)
    replays up to ``cut`` (events dropped), then parses up to ``end``, in buffers of
    ``window_bytes`` ending at their last newline; ``flush``: the file's end, the parser is
    flushed there (a backfill flushes at the end of each file)."""

    spec: WatchSpec
    path: str
    fmt: str
    tz: tzinfo
    window_bytes: int
    origin: int
    origin_lineno: int
    cut: int
    end: int
    flush: bool


@dataclass
class RangeResult:
    """What a worker found in its range: the events (in the reader's order), the position
    after it, the state signatures at the cut and at the end (None after a flush), what it
    counted."""

    events: list[Event]
    pos: int
    lineno: int
    start_signature: object
    end_signature: object
    flushed: bool
    misses: int
    stats: ScanStats


def parse_range(task: RangeTask) -> RangeResult:
    """Run ``task`` (in a worker process): feed its bytes through the reader's own parsing call.

    Raises:
        OSError: the file cannot be read.
        ValueError: a buffer of the range holds no newline (a line longer than a buffer).
    """
    fd = os.open(task.path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        reader = Reader(
            cast(Store, None),  # never committed to: the main process commits
            clock=lambda: datetime.now(UTC),
            tz=task.tz,
            backfill=True,
            on_progress=None,
            idle_flush_s=0.0,
        )
        parser = parsers.make_parser(task.fmt, tz=task.tz, patterns=task.spec.custom)
        f = OpenFile(
            task.spec,
            task.path,
            fd,
            FileState(0, task.spec.job, task.path, 0, 0, "", 0, 0, 0, 0),
            task.fmt,
            parser,
            FileClock(lambda: os.fstat(fd).st_mtime),
            live_from=1 << 62,
            replay_to=task.cut,
        )
        f.pos, f.lineno = task.origin, task.origin_lineno
        stats, events = ScanStats(), list[Event]()
        _feed(reader, f, task.window_bytes, task.cut, events, stats, replaying=True)
        start_signature, misses = state_signature(f), parser.misses
        _feed(reader, f, task.window_bytes, task.end, events, stats, replaying=False)
        end_signature = None
        if task.flush:
            reader._flush(f, events)
        else:
            end_signature = state_signature(f)
        return RangeResult(
            events, f.pos, f.lineno, start_signature, end_signature, f.flushed,
            parser.misses - misses, stats,
        )  # fmt: skip
    finally:
        os.close(fd)


def _feed(
    reader: Reader,
    f: OpenFile,
    window: int,
    stop: int,
    events: list[Event],
    stats: ScanStats,
    *,
    replaying: bool,
) -> None:
    """Parse ``f`` from ``f.pos`` up to ``stop`` (or its last complete line), buffer by buffer
    as :meth:`Reader.read` does."""
    while f.pos < stop:
        data = os.pread(f.fd, min(window, stop - f.pos), f.pos)
        consumed = data.rfind(b"\n") + 1
        if not consumed:
            if len(data) > MAX_LINE_BYTES:
                raise ValueError(f"{f.path}: a line longer than {len(data)} bytes")
            return  # a partial last line: the reader waits for its newline too
        reader._parse_lines(f, data, consumed, f.pos, events, stats, replaying=replaying)


_OPAQUE = (ahocorasick_rs.AhoCorasick, ahocorasick_rs.BytesAhoCorasick)
"""Objects a signature takes by type alone: immutable searchers, each built from literals that
are themselves part of the state (``LogParser._keywords``)."""


def state_signature(f: OpenFile) -> object:
    """Every field reachable from ``f``'s parser and file clock, as nested tuples: two readers of
    one file whose signatures are equal at a line give the same events from there on.

    Left out, since no event depends on them: the miss counters and recent-error lists
    (:class:`parsers.stream.Diagnostics`, write-only), the file clock's mtime function (the
    file's, whatever its descriptor), and memory that can no longer act after this line
    (:func:`_live`). Objects are walked through ``__dict__`` and ``__slots__``, functions
    through their closure and bound instance, so a field added to any parser is compared
    without being named here; an object of a kind not known here makes the signature unique
    (never equal): the range falls back to a sequential read."""
    return (_canon(f.parser, {}, f.lineno), f.clock.last_stamp)


def _live(obj: object, lineno: int) -> tuple[set[str], object]:
    """The fields of ``obj`` replaced in its signature at line ``lineno`` (the last line fed),
    and what replaces them: the part that can still act on a later line, as a value.

    * A failure recogniser with no traceback or banner open dates every later failure at a
      later line; a remembered family (``_seen``: its last line) or unplanned failure
      (``_last_failure``) only acts on a failure within ``DEDUP_LINES`` of its line, one
      further back acts as if absent (the next failure of the family is reported and takes
      its place) (``parsers/failures.py``, "One interruption, few events").
    * A traceback tracker's ``_tail_until`` (a bare exception line is not a new failure up to
      that line) acts only on a later line up to it.

    Both are only looked up by key: their order is not state."""
    if isinstance(obj, FailureLines) and not obj.active:
        horizon = lineno + 1 - DEDUP_LINES
        seen = sorted((k, v) for k, v in obj._seen.items() if v[0] >= horizon)
        last = obj._last_failure
        return {"_seen", "_last_failure"}, (seen, last if last and last[0] >= horizon else None)
    if isinstance(obj, TracebackTracker):
        return {"_tail_until"}, sorted((k, v) for k, v in obj._tail_until.items() if v > lineno)
    return set(), None


def _canon(obj: Any, memo: dict[int, int], lineno: int) -> object:
    if obj is None or isinstance(obj, bool | int | float | str | bytes | enum.Enum):
        return obj
    if isinstance(obj, datetime | date | timedelta):
        return (type(obj).__name__, obj, str(getattr(obj, "tzinfo", None)))
    if isinstance(obj, re.Pattern):
        return ("re", obj.pattern, obj.flags)
    if isinstance(obj, Diagnostics):
        return "diagnostics"
    if id(obj) in memo:
        return ("ref", memo[id(obj)])
    memo[id(obj)] = len(memo)
    if isinstance(obj, list | tuple | deque):
        return (type(obj).__name__, *(_canon(x, memo, lineno) for x in obj))
    if isinstance(obj, dict):
        items = ((_canon(k, memo, lineno), _canon(v, memo, lineno)) for k, v in obj.items())
        return ("dict", *items)
    if isinstance(obj, set | frozenset):
        return ("set", frozenset(_canon(x, memo, lineno) for x in obj))
    if isinstance(obj, types.MethodType):
        return ("method", obj.__func__.__qualname__, _canon(obj.__self__, memo, lineno))
    if isinstance(obj, types.FunctionType):
        cells = tuple(_canon(c.cell_contents, memo, lineno) for c in obj.__closure__ or ())
        return ("function", obj.__module__, obj.__qualname__, cells)
    kind = type(obj)
    if isinstance(obj, _OPAQUE):
        return ("opaque", kind.__qualname__)
    if isinstance(obj, type):
        return ("class", obj.__module__, obj.__qualname__)
    if kind.__module__.split(".")[0] != "ckpt_advisor":
        if isinstance(obj, tzinfo):  # a ZoneInfo, UTC: immutable, known by name
            return ("tz", str(obj))
        return ("unknown", id(obj), os.getpid())  # equal to nothing from another process
    skip, extra = _live(obj, lineno)
    skip.add("__weakref__")
    names = {*getattr(obj, "__dict__", {})}
    for klass in kind.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.update([slots] if isinstance(slots, str) else slots)
    fields = sorted(n for n in names if n not in skip and hasattr(obj, n))
    walked = ((n, _canon(getattr(obj, n), memo, lineno)) for n in fields)
    return (kind.__module__, kind.__qualname__, extra, *walked)


@dataclass
class _Range:
    """A submitted range of one file, awaiting its commit."""

    job: _FileJob
    task: RangeTask
    future: Future[RangeResult]


@dataclass
class _FileJob:
    """One file handed to the workers: its ranges, and how far its commits have come."""

    f: OpenFile
    plan: Iterator[RangeTask]
    accepted: RangeResult | None = None
    """The last committed range's result (its end signature is the state at the next cut)."""
    origin: tuple[int, int] = (0, 0)
    """Where the last committed range's parser started (byte, line): a fallback starts there."""
    in_main: bool = False
    """This process's parser of the file holds the sequential state at the committed offset."""
    misses: int = 0
    """Ranges in a row whose state at the cut differed."""
    failed: bool = False
    """No more ranges: this process reads the rest of the file."""


class ParallelBackfill:
    """Reads backfilled files in ``workers`` processes for a :class:`Reader` (see the module
    docstring). :meth:`take` a file, :meth:`wait` for every file taken, :meth:`close` at the
    end. ``split_bytes``, ``range_bytes`` and ``overlap_windows``: see the module constants
    (read when a file is planned, if None)."""

    def __init__(
        self,
        reader: Reader,
        workers: int,
        *,
        split_bytes: int | None = None,
        range_bytes: int | None = None,
        overlap_windows: int | None = None,
    ) -> None:
        self._reader = reader
        self._workers = workers
        self._split_bytes = split_bytes
        self._range_bytes = range_bytes
        self._overlap = overlap_windows
        self._pool = ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context("fork"),
            initializer=_worker_start,
            initargs=(os.getpid(),),
        )
        self._pool.submit(os.getpid).result()  # every worker forked now, before any thread
        self._inflight: deque[_Range] = deque()
        self._sequential: set[int] = set()
        """``id`` of the open files being finished by the reader after a fallback."""
        self.fallbacks = 0
        """Files whose rest was read by this process after ranges in a row differed."""
        self.differed = 0
        """Ranges whose state at the cut differed (parsed again here)."""
        self.ranges = 0
        """Ranges committed from workers."""

    def take(self, f: OpenFile, size: int, stats: ScanStats) -> bool:
        """Read ``f`` (just opened or replayed from nothing, ``size`` bytes) in the workers:
        its ranges are submitted now and committed as they finish (by later calls and
        :meth:`wait`). False if the reader is to read it itself (its earlier run flushed it,
        or it was read in memory already)."""
        if id(f) in self._sequential or f.pos or f.replay_flush or f.skip_pos is not None:
            return False
        job = _FileJob(f, self._plan(f, size))
        try:
            for task in job.plan:
                while len(self._inflight) > self._workers:
                    self._commit_next(stats)
                if job.failed:
                    break
                self._inflight.append(_Range(job, task, self._submit(task)))
        except ValueError as exc:  # not cut further: the reader reads on after the ranges
            log.info("%s: %s; read by one process from there", f.path, exc)
            self.wait(stats)
            if not job.failed:
                self._fall_back(job, stats)
        return True

    def wait(self, stats: ScanStats) -> None:
        """Commit every range submitted (in file order; a file whose signature differed is
        finished by the reader)."""
        while self._inflight:
            self._commit_next(stats)

    def close(self) -> None:
        """Stop the workers (ranges not committed are dropped: the store has their offset)."""
        for r in self._inflight:
            r.future.cancel()
        self._inflight.clear()
        self._pool.shutdown(cancel_futures=True)

    def _submit(self, task: RangeTask) -> Future[RangeResult]:
        return self._pool.submit(parse_range, task)

    def _plan(self, f: OpenFile, size: int) -> Iterator[RangeTask]:
        """``f``'s ranges in file order, cut on the reader's buffer chain (:func:`_chain`)
        every ``range_bytes`` from the committed offset on, once ``split_bytes`` or more are
        left to read; walked as the ranges are submitted.

        Raises:
            ValueError: a buffer holds no newline (the file is left to the reader).
        """
        window = _window()
        committed = f.state.offset

        def task(origin: tuple[int, int], cut: int, end: int, flush: bool) -> RangeTask:
            return RangeTask(f.spec, f.path, f.fmt, self._reader._tz, window, *origin, cut, end,
                             flush)  # fmt: skip

        if size - committed < (self._split_bytes or SPLIT_BYTES):
            yield task((0, 0), committed, size, True)
            return
        overlap = self._overlap or OVERLAP_WINDOWS
        per_range = max(overlap + 1, (self._range_bytes or RANGE_BYTES) // window)
        recent: deque[tuple[int, int]] = deque(maxlen=per_range + 1)
        origin, cut = (0, 0), committed
        for bound in _chain(f.fd, committed, f.state.lineno, size, window):
            recent.append(bound)
            if len(recent) == per_range + 1 and size - bound[0] >= window:
                yield task(origin, cut, bound[0], False)
                origin, cut = recent[-1 - overlap], bound[0]
                recent.clear()
                recent.append(bound)
        yield task(origin, cut, size, True)

    def _commit_next(self, stats: ScanStats) -> None:
        """Commit the oldest submitted range if its parser's state at the cut is the sequential
        one (the range before's, or this process's own after a differing range); else parse
        that range here from the sequential state."""
        r = self._inflight.popleft()
        job = r.job
        if job.failed:
            r.future.cancel()
            return
        try:
            result: RangeResult | None = r.future.result()
        except (OSError, ValueError, BrokenExecutor) as exc:  # a worker killed, an odd file
            log.warning("%s: byte %d on: parsed here (%s)", job.f.path, r.task.cut, exc)
            result = None
        if job.in_main:
            sequential = state_signature(job.f)
        else:
            sequential = job.accepted.end_signature if job.accepted is not None else None
        if result is not None and (r.task.origin == 0 or result.start_signature == sequential):
            job.in_main, job.misses = False, 0
            self._commit(job, r.task, result, stats)
            job.accepted, job.origin = result, (r.task.origin, r.task.origin_lineno)
            self.ranges += 1
            return
        self.differed += 1
        job.misses += 1
        if job.misses > MAX_DIFFERING:
            self._fall_back(job, stats)  # the overlaps do not reach this file's state
        else:
            self._parse_here(job, r.task, stats)

    def _commit(
        self, job: _FileJob, task: RangeTask, result: RangeResult, stats: ScanStats
    ) -> None:
        """Commit ``result``, the events of ``task``'s range, with its end offset and line."""
        f = job.f
        f.pos, f.lineno, f.flushed = result.pos, result.lineno, result.flushed
        self._reader._commit(f, result.events, stats, False)
        _merge(stats, result)
        stats.bytes_read += result.pos - task.cut
        if self._reader._on_progress:
            self._reader._on_progress(result.pos - task.cut)

    def _sequential_state(self, job: _FileJob) -> None:
        """Give this process's parser of ``job``'s file the sequential state at the committed
        offset: a fresh parser at the last kept range's origin replays up to there."""
        f = job.f
        if job.in_main:
            return
        self._reader._reset(f, f.state, self._reader._parser(f))
        f.pos, f.lineno = job.origin
        f.clock = FileClock(lambda: os.fstat(f.fd).st_mtime)
        _feed(self._reader, f, _window(), f.state.offset, [], ScanStats(), replaying=True)
        job.in_main = True

    def _parse_here(self, job: _FileJob, task: RangeTask, stats: ScanStats) -> None:
        """Parse ``task``'s range in this process from the sequential state, and commit it."""
        self._sequential_state(job)
        f, events, got = job.f, list[Event](), ScanStats()
        misses = f.parser.misses
        _feed(self._reader, f, _window(), task.end, events, got, replaying=False)
        if task.flush:
            self._reader._flush(f, events)
        result = RangeResult(events, f.pos, f.lineno, None, None, f.flushed,
                             f.parser.misses - misses, got)  # fmt: skip
        self._commit(job, task, result, stats)

    def _fall_back(self, job: _FileJob, stats: ScanStats) -> None:
        """Read the rest of ``job``'s file in this process, from the sequential state."""
        job.failed = True
        self.fallbacks += 1
        log.info("%s: read by one process from byte %d", job.f.path, job.f.state.offset)
        self._sequential_state(job)
        self._sequential.add(id(job.f))
        try:
            self._reader.read(job.f, stats)
        finally:
            self._sequential.discard(id(job.f))


def _worker_start(parent: int) -> None:
    """In each worker, first: die with the main process (``prctl(PR_SET_PDEATHSIG)``, Linux),
    so that a killed ``ingest`` leaves no worker holding its store's lock; leave Ctrl-C to the
    main process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before the prctl
        os._exit(1)


_PR_SET_PDEATHSIG = 1
"""linux/prctl.h."""


def _window() -> int:
    """The reader's buffer size (``Reader.read``'s rule)."""
    return max(reader_module.READ_CHUNK_BYTES, MAX_LINE_BYTES + 1)


def _merge(stats: ScanStats, result: RangeResult) -> None:
    """Add a worker's counts to the scan's."""
    got = result.stats
    stats.lines += got.lines
    stats.skipped_lines += got.skipped_lines
    stats.parse_misses += result.misses
    stats.job_lines.update(got.job_lines)
    for job, paths in got.job_files.items():
        stats.job_files.setdefault(job, set()).update(paths)


def _chain(fd: int, start: int, lineno: int, stop: int, window: int) -> Iterator[tuple[int, int]]:
    """The reader's buffer boundaries from ``start`` (line ``lineno``) up to ``stop``, each
    buffer ``window`` bytes ending after its last newline, as ``(offset, lines before it)``;
    the last is ``stop``'s last line end.

    Raises:
        ValueError: a buffer holds no newline (the reader would skip an overlong line there).
    """
    at = start
    yield at, lineno
    while at < stop:
        data = os.pread(fd, min(window, stop - at), at)
        consumed = data.rfind(b"\n") + 1
        if not consumed:
            if len(data) > MAX_LINE_BYTES:
                raise ValueError(f"a line of more than {len(data)} bytes at byte {at}")
            return
        lineno += data.count(b"\n", 0, consumed)
        at += consumed
        yield at, lineno
