"""Events before a file's first printed time: held, then dated at it (an upper bound) when it
comes within PRE_STAMP_HOLD_LINES lines, else released untimed as a file without stamps."""

from __future__ import annotations

from pathlib import Path

from ckpt_advisor.parsers import make_parser
from ckpt_advisor.parsers.events import EventKind
from ckpt_advisor.parsers.logs import PRE_STAMP_HOLD_LINES
from tests.parsers._helpers import REAL_LOGS, parse, read_lines, utc

FIXTURES = Path(__file__).parent / "fixtures"
MEGATRON = FIXTURES / "megatron" / "megatron_2024.log"
SIGKILL = FIXTURES / "torch" / "torchrun_sigkill.log"


def test_megatron_resume_before_the_first_stamp_is_dated_at_it() -> None:
    """megatron_2024.log's ' loading checkpoint from /ck at iteration 100' (line 2) precedes
    the file's first stamp (line 4, 10:00:00): the resume is dated 10:00:00, marked estimated,
    after a ``dated_at_first_time`` finding at line 2 (same time), and the file is not
    reported as one without timestamps."""
    events, _ = parse(read_lines(MEGATRON), clock=True)
    first = utc("2024-05-10 10:00:00")
    assert [(e.kind, e.line, e.time, e.time_estimated) for e in events[:3]] == [
        (EventKind.DATED_AT_FIRST_TIME, 2, first, True),
        (EventKind.RESUME, 2, first, True),
        (EventKind.RUN_START, 4, first, False),
    ]
    assert "10:00:00" in (events[0].detail or "")
    assert not [e for e in events if e.kind is EventKind.NO_TIMESTAMPS]
    times = [e.time for e in events if e.time is not None]
    assert times == sorted(times)


def test_lightning_before_a_torchrun_block_is_dated_at_its_first_time() -> None:
    """lightning_crash.log (no stamps: its launch at line 1, saves at 19-21, step 130 at 22,
    its NCCL traceback from 23 to 98) then torchrun_sigkill.log, whose first event with a printed
    time is its launch (line 98 + 3, 'Setting OMP_NUM_THREADS …', W1129 23:03:17, the year
    from its ChildFailedError banner): every Lightning event is dated at that time, estimated,
    not left to the reader (a backfill dated them at the mtime); the launcher's SIGKILL
    failure (line 98 + 22) keeps its own stamp."""
    lines = [*read_lines(REAL_LOGS / "lightning_crash.log"), *read_lines(SIGKILL)]
    events, _ = parse(lines, clock=True)
    stamp = utc("2026-11-29 23:03:17")
    lightning = [e for e in events if e.line <= 98]
    assert [(e.kind, e.line) for e in lightning] == [
        (EventKind.DATED_AT_FIRST_TIME, 1),
        (EventKind.RUN_START, 1),
        (EventKind.CHECKPOINT_START, 19),
        (EventKind.CHECKPOINT_START, 20),
        (EventKind.CHECKPOINT_START, 21),
        (EventKind.STEP, 22),
        (EventKind.FAILURE, 23),
    ]
    assert {(e.time, e.time_estimated) for e in lightning} == {(stamp, True)}
    assert lightning[-1].failure_class == "nccl_error"
    launch, launcher = (next(e for e in events if e.line == 98 + n) for n in (3, 22))
    assert [(e.kind, e.time, e.time_estimated) for e in (launch, launcher)] == [
        (EventKind.RUN_START, stamp, False),
        (EventKind.FAILURE, utc("2026-11-29 23:03:27"), False),
    ]


def test_no_stamp_within_the_hold_releases_the_events_untimed() -> None:
    """lightning_crash.log then PRE_STAMP_HOLD_LINES + 1 more of its own lines without a stamp
    (its fifth, a warning under ``lightning/pytorch/``): its events come out while the file
    is read (without a time, after a ``no_timestamps`` finding at line 1), not only when it
    is finished."""
    lines = read_lines(REAL_LOGS / "lightning_crash.log")
    parser = make_parser("auto")
    fed = [*lines, *[lines[4]] * (PRE_STAMP_HOLD_LINES + 1)]
    events = [e for n, line in enumerate(fed, 1) for e in parser.feed(line, n)]
    assert [(e.kind, e.line, e.time) for e in events] == [
        (EventKind.NO_TIMESTAMPS, 1, None),
        (EventKind.RUN_START, 1, None),
        (EventKind.CHECKPOINT_START, 19, None),
        (EventKind.CHECKPOINT_START, 20, None),
        (EventKind.CHECKPOINT_START, 21, None),
        (EventKind.STEP, 22, None),
        (EventKind.FAILURE, 23, None),
    ]
    assert parser.finish() == []


def test_a_flush_before_the_first_stamp_releases_what_is_held() -> None:
    """megatron_2024.log's first three lines, then ``finish()`` (a live file quiet past the
    idle flush): the resume goes out untimed, reported ``no_timestamps``; the lines after it
    are dated by their own stamps, nothing else is held."""
    lines = read_lines(MEGATRON)
    parser = make_parser("auto")
    fed = [e for n, line in enumerate(lines[:3], 1) for e in parser.feed(line, n)]
    assert fed == []
    flushed = parser.finish()
    assert [(e.kind, e.line, e.time) for e in flushed] == [
        (EventKind.NO_TIMESTAMPS, 2, None),
        (EventKind.RESUME, 2, None),
    ]
    [start] = parser.feed(lines[3], 4)
    assert (start.kind, start.time) == (EventKind.RUN_START, utc("2024-05-10 10:00:00"))
