"""A backfill on several cores: files spread over worker processes, a big file cut into ranges.

``ingest`` parses most of its CPU time away (issue 15); with ``workers`` > 1 the reader hands
each file to this module (:meth:`ParallelBackfill.take`) instead of reading it itself. A file
is cut into *ranges* of about :data:`RANGE_BYTES` (one range below :data:`SPLIT_BYTES`); each
range is parsed by a worker process through the reader's own parsing call
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
  are cut on that chain (``ranges.chain``, which also counts the lines before each boundary),
  and a worker reads with the same rule, so it feeds its parser exactly the lines the reader would.
* *The same state at the cut.* A worker starts a fresh parser :data:`OVERLAP_WINDOWS` buffers
  before its cut and replays them (events dropped, as the reader's replay does). A fresh
  parser does not in general reach the sequential parser's state (a traceback or save open at
  the cut, the run's ``Total optimization steps``, the file clock's shift after a step back,
  a once-per-file report already made, failures within the dedup window), so nothing is
  assumed: at the cut the worker takes a *signature* of its whole state
  (``signature.state_signature``: every field reachable from the parser and the file's
  clock), and the range before, when it reaches the same cut, takes its own. The range is
  kept only if the two are equal; then every later line is parsed from an equal state, so its
  events are equal. The first range of a file starts at offset 0 (replaying what an earlier run
  committed), like the reader.
* *The same state when they differ.* A range whose signature differs (or whose worker failed)
  is parsed again in the main process from the sequential state: a fresh parser started where
  the last kept range's parser started (its *origin*) replays up to the committed offset,
  which gives the state that range left, then parses the range. The main process keeps that
  parser: the next range is kept if its signature equals the main parser's at its cut, else
  parsed here too; after :data:`MAX_DIFFERING` ranges in a row, the rest of the file is read
  here by the reader (``Reader.read``). A file that cannot be cut (a buffer without a newline)
  is read on by the reader after its last range. Either way, the one process's result; a
  differing range costs one range's re-read.

Memory: a range's events are held until committed, at most ``workers + 1`` ranges at a time,
as tuples (64 MB of the event-dense bench log is ~52,000 events); buffers are 4 MB. Peak RSS on
the bench's 423 MB dense log: 165 MB (one process: 164 MB).

Workers are forked when the :class:`ParallelBackfill` is made, which must be before the
process starts a thread (``ingest`` makes it before its progress bar): a fork costs ~10 ms and
no imports, and the children's CPU time is the parent's children's (``getrusage``), so
benchmarks see it. They never touch the store.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ckpt_advisor.agent.tail.dating import FileClock
from ckpt_advisor.agent.tail.followed import OpenFile
from ckpt_advisor.agent.tail.inputs import MAX_LINE_BYTES
from ckpt_advisor.agent.tail.ranges import (
    ROW,
    RangeResult,
    RangeTask,
    chain,
    feed,
    parse_range,
    window,
    worker_start,
)
from ckpt_advisor.agent.tail.reader import Reader, ScanStats
from ckpt_advisor.agent.tail.signature import state_signature
from ckpt_advisor.parsers.events import Event

if TYPE_CHECKING:
    from concurrent.futures import Future

log = logging.getLogger(__name__)

SPLIT_BYTES = 64 << 20
"""A file at least this big is cut into ranges (a smaller one is one worker's task)."""
RANGE_BYTES = 64 << 20
"""At most about how many bytes a range holds (a whole number of the reader's buffers); a file
of less than ``workers`` such ranges is cut in ``workers`` even ones. Each range but the first
costs an overlap's parse: 64 MB ranges took 27.9 CPU s on the bench's 423 MB dense log, 32 MB
ones 32.4 (one process: 21.9; load 8)."""
OVERLAP_WINDOWS = 1
"""Buffers a worker replays before its cut to rebuild the parser's state."""
MAX_DIFFERING = 2
"""Ranges in a row whose state may differ before the rest of their file is read here."""


def default_workers() -> int:
    """The cores this process may run on (``os.sched_getaffinity``: a cgroup's or ``taskset``'s
    limit, not the machine's count)."""
    return len(os.sched_getaffinity(0))


DENSE_LINES_PER_MB = 1000.0
"""Lines per MB a parser selects (``parsers.selection``) from which a file is parsed on several
cores. Two workers against one on this 2-core machine: the bench's sparse HF log (~54 per MB,
434 MB) took 2.0 s against 1.6 s, a log of ~800 per MB (221 MB, 330 events per MB) 6.4 s
against 5.1 s (the overlaps' replay, the events crossing processes and the main process's
serial commits outweigh the parse saved); the dense one (~1,950 per MB, 423 MB) 12.1 s against
18.6 s on a quiet machine."""
SAMPLE_BYTES = 4 << 20
"""Bytes read from the middle of a file to measure its density (one reader buffer)."""
DETECT_BYTES = 256 << 10
"""Bytes from a file's start fed to a parser before the sample, to detect its stack."""


def dense_enough(path: str, fmt: str) -> bool:
    """Whether ``path`` (read as ``fmt``) selects :data:`DENSE_LINES_PER_MB` or more lines per
    MB, measured on :data:`SAMPLE_BYTES` from its middle by a parser that has read its first
    :data:`DETECT_BYTES` (its stack detected, its filter known). The lines are only counted,
    not fed (a few ms). True when it cannot tell (a file too small to sample, a filter that
    wants every line, an unreadable file): the workers are then used, as before.
    """
    from ckpt_advisor import parsers
    from ckpt_advisor.parsers.buffers import parse_buffer
    from ckpt_advisor.parsers.selection import select_lines

    try:
        with open(path, "rb") as fh:
            head = fh.read(DETECT_BYTES)
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size // 2 - SAMPLE_BYTES // 2))
            sample = fh.read(SAMPLE_BYTES)
    except OSError:
        return True
    parser = parsers.make_parser(fmt)
    head_end = head.rfind(b"\n") + 1  # read as the reader reads a buffer
    parse_buffer(parser, head, 0, head_end, 0, max_line_bytes=MAX_LINE_BYTES, on_skipped=_skip)
    parser.finish()  # a traceback open at the head's end no longer wants every line
    start, end = sample.find(b"\n") + 1, sample.rfind(b"\n") + 1
    if parser.line_filter is None or end - start < SAMPLE_BYTES // 2:
        return True
    selected = [0]

    def count(_start: int, _stop: int, _number: int, _how: int) -> bool:
        selected[0] += 1
        return False

    select_lines(parser, sample, start, end, count)
    return selected[0] / ((end - start) / 1e6) >= DENSE_LINES_PER_MB


def _skip(_start: int, _stop: int, _lineno: int) -> None:
    """An overlong line of :func:`dense_enough`'s head: not fed, as the reader skips it."""


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
    end. The sizes are the module's constants, read when a file is planned."""

    def __init__(self, reader: Reader, workers: int) -> None:
        self._reader = reader
        self._workers = workers
        import multiprocessing  # here: a small ingest does not pay for the imports
        from concurrent.futures import ProcessPoolExecutor

        self._pool = ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context("fork"),
            initializer=worker_start,
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
                future = self._pool.submit(parse_range, task)
                self._inflight.append(_Range(job, task, future))
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

    def _plan(self, f: OpenFile, size: int) -> Iterator[RangeTask]:
        """``f``'s ranges in file order, cut on the reader's buffer chain (:func:`ranges.chain`)
        every :data:`RANGE_BYTES` from the committed offset on, once :data:`SPLIT_BYTES` or more are
        left to read; walked as the ranges are submitted.

        Raises:
            ValueError: a buffer holds no newline (the file is left to the reader).
        """
        buffer = window()
        committed = f.state.offset

        def task(origin: tuple[int, int], cut: int, end: int, flush: bool) -> RangeTask:
            tz = self._reader.zone(f.spec)
            return RangeTask(f.spec, f.path, f.fmt, tz, buffer, *origin, cut, end, flush)

        if size - committed < SPLIT_BYTES:
            yield task((0, 0), committed, size, True)
            return
        overlap = OVERLAP_WINDOWS
        even = -(-(size - committed) // self._workers)
        per_range = max(overlap + 1, min(RANGE_BYTES, even) // buffer)
        recent: deque[tuple[int, int]] = deque(maxlen=per_range + 1)
        origin, cut = (0, 0), committed
        for bound in chain(f.fd, committed, f.state.lineno, size, buffer):
            recent.append(bound)
            if len(recent) == per_range + 1 and size - bound[0] >= buffer:
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
        from concurrent.futures import BrokenExecutor

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
        try:
            if job.misses > MAX_DIFFERING:
                self._fall_back(job, stats)  # the overlaps do not reach this file's state
            else:
                self._parse_here(job, r.task, stats)
        except OSError as exc:  # as the tailer does: the rest of the file is read next time
            job.failed = True
            log.warning("cannot read %s: %s", job.f.path, exc.strerror or exc)

    def _commit(
        self, job: _FileJob, task: RangeTask, result: RangeResult, stats: ScanStats
    ) -> None:
        """Commit ``result``, the events of ``task``'s range, with its end offset and line."""
        f = job.f
        f.pos, f.lineno, f.flushed = result.pos, result.lineno, result.flushed
        f.unended_bytes = task.end - result.pos if task.flush else 0  # a last line unread
        self._reader._commit(f, result.events(), stats, False)
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
        feed(self._reader, f, window(), f.state.offset, [], ScanStats(), replaying=True)
        job.in_main = True

    def _parse_here(self, job: _FileJob, task: RangeTask, stats: ScanStats) -> None:
        """Parse ``task``'s range in this process from the sequential state, and commit it."""
        self._sequential_state(job)
        f, events, got = job.f, list[Event](), ScanStats()
        misses = f.parser.misses
        feed(self._reader, f, window(), task.end, events, got, replaying=False)
        if task.flush:
            self._reader.flush_end(f, events, got)
        result = RangeResult(list(map(ROW, events)), f.pos, f.lineno, None, None, f.flushed,
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


def _merge(stats: ScanStats, result: RangeResult) -> None:
    """Add a worker's counts to the scan's."""
    got = result.stats
    stats.lines += got.lines
    stats.skipped_lines += got.skipped_lines
    stats.parse_misses += result.misses
    stats.job_lines.update(got.job_lines)
    for job, paths in got.job_files.items():
        stats.job_files.setdefault(job, set()).update(paths)
