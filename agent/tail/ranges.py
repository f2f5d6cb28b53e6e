"""The worker side of a backfill on several cores: a range of one file parsed as the reader
parses it (``agent/tail/parallel.py`` hands out the ranges and commits them).

A range is parsed through :meth:`Reader._parse_lines`, the reader's own call, on the reader's
own buffers: :func:`chain` walks the buffer boundaries a sequential read has (4 MB each, ending
after their last newline, from offset 0 or a committed offset), and :func:`feed` reads with the
same rule between two of them. The state signatures are ``agent/tail/signature.py``'s.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass, fields
from datetime import UTC, datetime, tzinfo
from operator import attrgetter
from typing import Any, cast

from ckpt_advisor import parsers
from ckpt_advisor.agent.store import FileState, Store
from ckpt_advisor.agent.tail import reader as reader_module
from ckpt_advisor.agent.tail.dating import FileClock
from ckpt_advisor.agent.tail.discovery import WatchSpec
from ckpt_advisor.agent.tail.followed import OpenFile
from ckpt_advisor.agent.tail.inputs import MAX_LINE_BYTES
from ckpt_advisor.agent.tail.reader import Reader, ScanStats
from ckpt_advisor.agent.tail.signature import state_signature
from ckpt_advisor.parsers.events import Event


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


ROW = attrgetter(*(field.name for field in fields(Event)))
"""An event as the tuple of its fields, in ``Event``'s order: ``Event(*ROW(event)) == event``."""


@dataclass
class RangeResult:
    """What a worker found in its range: its events (in the reader's order, as :data:`ROW`
    tuples: they cross the process boundary in ~60% of the time ``Event`` objects take), the
    position after it, the state signatures at the cut and at the end (None after a flush),
    what it counted."""

    rows: list[tuple[Any, ...]]
    pos: int
    lineno: int
    start_signature: object
    end_signature: object
    flushed: bool
    misses: int
    stats: ScanStats

    def events(self) -> list[Event]:
        """The events, rebuilt from :attr:`rows`."""
        return [Event(*row) for row in self.rows]


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
        feed(reader, f, task.window_bytes, task.cut, events, stats, replaying=True)
        start_signature, misses = state_signature(f), parser.misses
        feed(reader, f, task.window_bytes, task.end, events, stats, replaying=False)
        end_signature = None
        if task.flush:
            reader.flush_end(f, events, stats)
        else:
            end_signature = state_signature(f)
        return RangeResult(
            list(map(ROW, events)), f.pos, f.lineno, start_signature, end_signature, f.flushed,
            parser.misses - misses, stats,
        )  # fmt: skip
    finally:
        os.close(fd)


def feed(
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


def worker_start(parent: int) -> None:
    """In each worker, first: die with the main process (``prctl(PR_SET_PDEATHSIG)``, Linux),
    so that a killed ``ingest`` leaves no worker holding its store's lock; leave Ctrl-C to the
    main process."""
    import ctypes

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before the prctl
        os._exit(1)


_PR_SET_PDEATHSIG = 1
"""linux/prctl.h."""


def window() -> int:
    """The reader's buffer size (``Reader.read``'s rule)."""
    return max(reader_module.READ_CHUNK_BYTES, MAX_LINE_BYTES + 1)


def chain(fd: int, start: int, lineno: int, stop: int, window: int) -> Iterator[tuple[int, int]]:
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
