"""The four real fixture logs give exactly the events a human reads in them."""

from __future__ import annotations

from datetime import datetime

import pytest

from ckpt_advisor.parsers import make_parser
from ckpt_advisor.parsers.events import EventKind
from tests.parsers._helpers import REAL_LOGS, parse, read_lines, summary, utc


def _t(clock: str) -> datetime:
    return utc(f"2026-11-29 {clock}")


START, END = EventKind.CHECKPOINT_START, EventKind.CHECKPOINT_END
STEP, FAIL = EventKind.STEP, EventKind.FAILURE

# (kind, line, time, step, duration_s, failure_class); step durations are 1 / the bar's it/s.
# One step event per step: the bar redrawn at the same step after a record (a save's start
# glued to it) gives none. A failure's step is the last step the bar reached before it.
# Untimed lines (bars, tracebacks) are dated by the bar clock, never later than the line: the
# bar's start (the run_start/resume record, or a record glued after it minus its elapsed seconds
# and the second tqdm's whole seconds may hide, whichever is later) plus its elapsed time, once
# the bar has shown its clock advancing; so every time keeps the file's order.
HF_TRAINER_CRASH = [
    (EventKind.RUN_START, 13, _t("22:11:34.899"), None, None, None),
    (STEP, 23, _t("22:11:34.964"), 5, 1 / 9.12, None),
    (STEP, 24, _t("22:11:35.899"), 10, 1 / 8.13, None),
    (STEP, 25, _t("22:11:35.899"), 15, 1 / 6.09, None),
    (STEP, 26, _t("22:11:36.899"), 20, 1 / 6.45, None),
    (STEP, 27, _t("22:11:37.899"), 25, 1 / 6.24, None),
    (START, 28, _t("22:11:38.483"), 25, None, None),
    (END, 33, _t("22:11:38.555"), 25, 0.072, None),
    (STEP, 34, _t("22:11:38.899"), 30, 1 / 7.00, None),
    (STEP, 35, _t("22:11:39.899"), 35, 1 / 7.07, None),
    (STEP, 36, _t("22:11:39.899"), 40, 1 / 6.57, None),
    (STEP, 37, _t("22:11:40.899"), 45, 1 / 6.63, None),
    (STEP, 38, _t("22:11:41.899"), 50, 1 / 4.84, None),
    (START, 39, _t("22:11:42.640"), 50, None, None),
    (END, 44, _t("22:11:42.677"), 50, 0.037, None),
    (STEP, 45, _t("22:11:42.899"), 55, 1 / 6.10, None),
    (STEP, 46, _t("22:11:43.899"), 59, 1 / 5.95, None),
    (FAIL, 46, _t("22:11:43.899"), 59, None, "cuda_illegal_memory_access"),
]

HF_TRAINER_RESUME = [  # no step durations: tqdm's rate counts the 50 skipped steps, and
    # the resumed run's bar shows 11 s, under RESUMED_RATE_SPAN_S (parsers/hf_trainer.py)
    (EventKind.RUN_START, 15, _t("22:11:48.385"), None, None, None),
    (EventKind.RESUME, 24, _t("22:11:48.386"), 50, None, None),
    (STEP, 27, _t("22:11:50.672"), 55, None, None),
    (STEP, 28, _t("22:11:50.672"), 59, None, None),
    (STEP, 29, _t("22:11:51.672"), 65, None, None),
    (STEP, 30, _t("22:11:52.672"), 70, None, None),
    (STEP, 31, _t("22:11:52.672"), 75, None, None),
    (START, 32, _t("22:11:53.117"), 75, None, None),
    (END, 37, _t("22:11:53.178"), 75, 0.061, None),
    (STEP, 38, _t("22:11:53.672"), 80, None, None),
    (STEP, 39, _t("22:11:54.672"), 85, None, None),
    (STEP, 40, _t("22:11:55.672"), 90, None, None),
    (STEP, 41, _t("22:11:55.672"), 95, None, None),
    (STEP, 42, _t("22:11:56.672"), 100, None, None),
    (START, 43, _t("22:11:56.948"), 100, None, None),
    (END, 48, _t("22:11:56.956"), 100, 0.008, None),
    (STEP, 49, _t("22:11:57.672"), 105, None, None),
    (STEP, 50, _t("22:11:58.672"), 110, None, None),
    (STEP, 51, _t("22:11:58.672"), 115, None, None),
    (STEP, 52, _t("22:11:59.672"), 120, None, None),
    (START, 53, _t("22:11:59.760"), 120, None, None),
    (END, 58, _t("22:11:59.767"), 120, 0.007, None),
    (EventKind.RUN_END, 59, _t("22:11:59.792"), None, None, None),
]

LIGHTNING_CRASH = [
    (EventKind.RUN_START, 1, None, None, None, None),  # GPU available: the launch
    (START, 19, None, 40, None, None),
    (START, 20, None, 80, None, None),
    (START, 21, None, 120, None, None),
    (STEP, 22, None, 130, 1 / 41.42, None),  # the rich bar's last state, batch 130 of epoch 0
    (FAIL, 23, None, 130, None, "nccl_error"),  # the last step the bar reached
]

LIGHTNING_RESUME = [
    (EventKind.RUN_START, 1, None, None, None, None),
    (EventKind.RESUME, 19, None, None, None, None),
    (START, 22, None, 160, None, None),
    (START, 23, None, 200, None, None),
    (EventKind.RUN_END, 24, None, 200, None, None),
]

CASES = [
    ("hf_trainer_crash.log", "hf_trainer", HF_TRAINER_CRASH),
    ("hf_trainer_resume.log", "hf_trainer", HF_TRAINER_RESUME),
    ("lightning_crash.log", "lightning", LIGHTNING_CRASH),
    ("lightning_resume.log", "lightning", LIGHTNING_RESUME),
]


@pytest.mark.parametrize(("filename", "stack", "expected"), CASES)
def test_auto_reads_every_event_of_a_real_log(
    filename: str, stack: str, expected: list[tuple[object, ...]]
) -> None:
    """Auto-detection finds the stack and yields exactly the expected events, in order."""
    events, parser = parse(read_lines(REAL_LOGS / filename))
    assert summary(events) == expected
    assert parser.name == stack
    assert parser.misses == 0


@pytest.mark.parametrize(("filename", "stack", "expected"), CASES)
def test_explicit_format_reads_the_same_events(
    filename: str, stack: str, expected: list[tuple[object, ...]]
) -> None:
    """Naming the stack gives the same events as auto-detecting it."""
    events, parser = parse(read_lines(REAL_LOGS / filename), fmt=stack)
    assert summary(events) == expected
    assert parser.name == stack


@pytest.mark.parametrize(("filename", "stack", "expected"), CASES)
def test_events_name_their_parser(
    filename: str, stack: str, expected: list[tuple[object, ...]]
) -> None:
    """Stack events carry the stack's name and failures the traceback recogniser's."""
    events, _ = parse(read_lines(REAL_LOGS / filename))
    assert [e.parser for e in events] == [
        "traceback" if e.kind is EventKind.FAILURE else stack for e in events
    ]


def test_checkpoint_events_carry_the_checkpoint_path() -> None:
    """A save's start and end events name the checkpoint directory in ``detail``."""
    events, _ = parse(read_lines(REAL_LOGS / "hf_trainer_crash.log"))
    saves = [(e.kind, e.detail) for e in events if e.kind in (START, END)]
    assert saves == [
        (START, "/data/hf/run/checkpoint-25"),
        (END, "/data/hf/run/checkpoint-25"),
        (START, "/data/hf/run/checkpoint-50"),
        (END, "/data/hf/run/checkpoint-50"),
    ]


def test_failure_detail_is_the_exception_line() -> None:
    """A traceback's failure keeps its exception line for humans."""
    events, _ = parse(read_lines(REAL_LOGS / "lightning_crash.log"))
    assert events[-1].detail == (
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error "
        "(run with NCCL_DEBUG=INFO for details)"
    )
    assert events[-1].planned is False


def test_a_traceback_at_end_of_file_waits_for_finish() -> None:
    """The exception line that ends the file is reported by ``finish()``, not before (and the
    events before it, held for a first printed time that never comes, go out untimed with it,
    after the file's ``no_timestamps`` report)."""
    parser = make_parser("auto")
    lines = read_lines(REAL_LOGS / "lightning_crash.log")
    fed = [e for lineno, line in enumerate(lines, 1) for e in parser.feed(line, lineno)]
    assert fed == []
    finished = parser.finish()
    assert [(e.kind, e.line, e.time) for e in finished] == [
        (EventKind.NO_TIMESTAMPS, 1, None),
        (EventKind.RUN_START, 1, None),
        (START, 19, None),
        (START, 20, None),
        (START, 21, None),
        (STEP, 22, None),
        (FAIL, 23, None),
    ]
