"""Line stamps that no stack's header reads (``parsers/line_stamps.py``, docs/FORMATS.md §21):
a logger's stamp instead of the header, a container runtime's before the line.

The captures in ``fixtures/line_stamps/`` are real HF Trainer runs (transformers 5.24.0, torch
2.13.0 CPU, loguru 0.7.3; ``make_capture.py``): saves at steps 10 and 20, then a raised CUDA
error after step 25 (the bar shows 24). Before these stamps were read, each file was "no
timestamps" and no save had a time.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from ckpt_advisor.parsers import make_parser
from ckpt_advisor.parsers.events import EventKind
from ckpt_advisor.parsers.line_stamps import leading_stamp, parse_line_stamp, split_runtime
from tests.parsers._helpers import parse, read_lines, utc, without_clock

CAPTURES = Path(__file__).parent / "fixtures" / "line_stamps"
TOKYO = ZoneInfo("Asia/Tokyo")


@pytest.mark.parametrize(
    ("text", "time", "msg"),
    [
        (
            "2026-12-02 12:39:15,136 INFO transformers.trainer: Saving model checkpoint to /x",
            "2026-12-02 12:39:15,136",
            "Saving model checkpoint to /x",
        ),
        (
            "2026-12-02 18:14:54,322 - transformers.trainer - INFO - Saving model checkpoint",
            "2026-12-02 18:14:54,322",
            "Saving model checkpoint",
        ),
        (
            "2026-12-02 18:14:54,322 - INFO - __main__ - Epoch 3: loss 2.5",
            "2026-12-02 18:14:54,322",
            "Epoch 3: loss 2.5",
        ),
        (
            "[2026-12-02 18:15:11,307] INFO transformers.trainer: ***** Running training *****",
            "2026-12-02 18:15:11,307",
            "***** Running training *****",
        ),
        (
            "2026-12-02 18:15:36.714 | INFO     | transformers.trainer:_save:4149 - Saving x",
            "2026-12-02 18:15:36.714",
            "Saving x",
        ),
        (
            "2026-12-02T13:15:50-0500 INFO transformers.trainer: Saving x",
            "2026-12-02T13:15:50-0500",
            "Saving x",
        ),
        ("2026-12-02 12:41:14,953 INFO transformers.trainer: ", "2026-12-02 12:41:14,953", ""),
        (
            "2026-12-02 12:41:14,953 INFO - Error: the message's first word is no logger",
            "2026-12-02 12:41:14,953",
            "Error: the message's first word is no logger",
        ),
        ("2026-12-02T12:39:19.923456789Z hello", "2026-12-02T12:39:19.923456789Z", "hello"),
    ],
)
def test_a_leading_stamp_is_found_and_the_message_follows_the_level_and_logger(
    text: str, time: str, msg: str
) -> None:
    m = leading_stamp(text)
    assert m is not None
    assert (m["time"], m["msg"]) == (time, msg)


@pytest.mark.parametrize(
    "text",
    ["Saving model checkpoint to /x", "[INFO|trainer.py:4149] 2026-11-29 22:11:38,483 >> x", ""],
)
def test_a_line_not_starting_with_a_stamp_has_none(text: str) -> None:
    assert leading_stamp(text) is None


def test_the_runtime_prefix_is_cut_off_and_only_it() -> None:
    """kubelet's ``RFC3339NanoFixed`` and a space: the rest is the line as printed."""
    line = "2026-12-02T18:16:03.444316414Z [transformers] Saving model checkpoint to /x"
    assert split_runtime(line) == (
        "2026-12-02T18:16:03.444316414Z",
        "[transformers] Saving model checkpoint to /x",
    )
    offset = "2026-12-02T19:16:03.444316414+01:00  33%|███▎      | 10/30"
    assert split_runtime(offset) == (
        "2026-12-02T19:16:03.444316414+01:00",
        " 33%|███▎      | 10/30",
    )
    for line in (
        "2026-12-02 18:16:03,444 INFO x: y",  # a logger's stamp: the record's, not the line's
        "2026-12-02T18:16:03.444Z three fraction digits are no runtime's",
        "Saving model checkpoint",
    ):
        assert split_runtime(line) == (None, line)


def test_zoned_stamps_are_absolute_and_naive_ones_in_the_job_zone() -> None:
    assert parse_line_stamp("2026-12-02T12:39:19.923456789Z", TOKYO) == utc(
        "2026-12-02 12:39:19.923456"
    )
    assert parse_line_stamp("2026-12-02T13:15:50-0500", TOKYO) == utc("2026-12-02 18:15:50")
    assert parse_line_stamp("2026-12-02 12:39:15,136", TOKYO) == utc("2026-12-02 03:39:15.136")
    with pytest.raises(ValueError):
        parse_line_stamp("2026-02-30 12:39:15,136", UTC)


def _timing(capture: str) -> list[tuple[int, datetime, datetime]]:
    path = CAPTURES / f"ckpt_timings_{capture}.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [
        (r["step"], datetime.fromisoformat(r["start"]), datetime.fromisoformat(r["end"]))
        for r in rows
    ]


CAPTURE_NAMES = ["basic", "dashes", "bracket", "iso", "loguru", "kubectl_default", "kubectl_basic"]


@pytest.mark.parametrize("capture", CAPTURE_NAMES)
def test_every_capture_is_dated_and_its_saves_measured(capture: str) -> None:
    """Each save starts within its stamp's resolution of the timing file's start (the ISO
    format prints whole seconds) and ends no later than the timing file's end (HF prints no
    line when the optimizer is written, docs/FORMATS.md §0.2)."""
    events, parser = parse(read_lines(CAPTURES / f"hf_{capture}.log"), clock=True)
    assert parser.name == "hf_trainer"
    kinds = [e.kind for e in events]
    assert EventKind.NO_TIMESTAMPS not in kinds
    starts = [e for e in events if e.kind is EventKind.CHECKPOINT_START]
    ends = [e for e in events if e.kind is EventKind.CHECKPOINT_END]
    resolution_s = 1.0 if capture == "iso" else 0.004
    for (step, t_start, t_end), start, end in zip(_timing(capture), starts, ends, strict=True):
        assert (start.step, end.step) == (step, step)
        assert start.time is not None and not start.time_estimated
        assert abs((start.time - t_start).total_seconds()) < resolution_s
        assert end.duration_s is not None
        assert 0 <= end.duration_s <= (t_end - t_start).total_seconds() + resolution_s
    (failure,) = [e for e in events if e.kind is EventKind.FAILURE]
    assert (failure.step, failure.failure_class) == (24, "cuda_illegal_memory_access")
    assert failure.time is not None


@pytest.mark.parametrize("capture", ["kubectl_default", "kubectl_basic"])
def test_the_runtime_stamp_dates_the_traceback_at_its_header(capture: str) -> None:
    """The interpreter's traceback prints no time; the runtime's stamp of its header's line
    (glued after the bar's last redraw, line 39) dates it, not an estimate."""
    lines = read_lines(CAPTURES / f"hf_{capture}.log")
    events, _ = parse(lines)
    (failure,) = [e for e in events if e.kind is EventKind.FAILURE]
    assert failure.line == 39 and "Traceback" in lines[38]
    stamp, _ = split_runtime(lines[38])
    assert stamp is not None
    assert not failure.time_estimated
    assert failure.time == parse_line_stamp(stamp, UTC)


def test_the_programs_own_stamp_wins_over_the_runtimes() -> None:
    """Under kubectl over the basic format, a record is dated by its logger's stamp (when it
    was made), not by when the runtime read its line."""
    events, _ = parse(read_lines(CAPTURES / "hf_kubectl_basic.log"))
    start = next(e for e in events if e.kind is EventKind.CHECKPOINT_START)
    assert start.time == utc("2026-12-02 18:16:18.236")  # the runtime read it at .236609544


def test_runtime_stamps_ignore_the_job_zone_and_naive_stamps_follow_it() -> None:
    default = read_lines(CAPTURES / "hf_kubectl_default.log")
    in_utc, _ = parse(default)
    in_tokyo, _ = parse(default, tz=TOKYO)
    assert [e.time for e in in_tokyo] == [e.time for e in in_utc]
    iso = read_lines(CAPTURES / "hf_iso.log")
    assert [e.time for e in parse(iso, tz=TOKYO)[0]] == [e.time for e in parse(iso)[0]]
    basic = read_lines(CAPTURES / "hf_basic.log")
    basic_utc, _ = parse(basic)
    basic_tokyo, _ = parse(basic, tz=TOKYO)
    start_utc, start_tokyo = (
        next(e.time for e in events if e.kind is EventKind.CHECKPOINT_START)
        for events in (basic_utc, basic_tokyo)
    )
    assert start_utc is not None and start_tokyo is not None
    assert (start_utc - start_tokyo).total_seconds() == 9 * 3600


def test_a_stamped_error_record_dates_its_failure() -> None:
    """A failure line under a basicConfig stamp, and one under a runtime's, gets that time."""
    events, _ = parse(
        [
            "2026-12-02 12:39:15,136 ERROR __main__: RuntimeError: CUDA error: an illegal "
            "memory access was encountered",
            "2026-12-02T12:40:00.000000001Z slurmstepd: error: *** JOB 42 ON n1 CANCELLED AT "
            "2026-12-02T12:40:00 DUE TO TIME LIMIT ***",
            "2026-12-02T12:41:00.500000000Z Segmentation fault (core dumped)",
        ]
    )
    assert [(e.line, e.time) for e in events if e.kind is EventKind.FAILURE] == [
        (1, utc("2026-12-02 12:39:15.136")),
        (2, utc("2026-12-02 12:40:00")),
        (3, utc("2026-12-02 12:41:00.5")),
    ]


RUNTIME = "2026-12-02T17:39:19.923456789Z"


def _samples() -> list[tuple[str, str]]:
    """(stack, sample line) of every stack pattern that gives an event, and of every failure
    rule (read by the ``auto`` parser)."""
    from ckpt_advisor.parsers.failures import RULES
    from ckpt_advisor.parsers.registry import ENTRIES

    found = [
        (entry.name, pattern.sample)
        for entry in ENTRIES
        for pattern in entry.load().patterns
        if pattern.kind is not None
    ]
    return found + [("auto", rule.sample) for rule in RULES if rule.kind is not None]


@pytest.mark.parametrize(("fmt", "sample"), _samples())
def test_a_runtime_prefix_changes_nothing_but_the_time_of_what_has_none(
    fmt: str, sample: str
) -> None:
    """Every sample line gives the same events under kubectl's prefix, each with its own time
    where it printed one (a stamp without a year, glog's ``E1129 23:03:27``, in the year of the
    prefix, a full date of the same line, as with that year known), else the prefix's."""
    parser = make_parser(fmt, year_hint=2026)
    bare = without_clock([*parser.feed(sample, 1), *parser.finish()])
    prefixed, _ = parse([f"{RUNTIME} {sample}"], fmt)
    assert [replace(e, time=None, time_estimated=False) for e in prefixed] == [
        replace(e, time=None, time_estimated=False) for e in bare
    ]
    at = utc("2026-12-02 17:39:19.923456")
    assert [e.time for e in prefixed] == [e.time or at for e in bare]


def _messages() -> list[tuple[str, str]]:
    """(stack, message of its sample line without the stack's header) of every stack pattern
    that gives an event and prints no Unix time."""
    from ckpt_advisor.parsers.registry import ENTRIES
    from tests.parsers.test_api import _message

    return [
        (entry.name, _message(stack, pattern.sample))
        for entry in ENTRIES
        for stack in (entry.load(),)
        for pattern in stack.patterns
        if pattern.kind is not None and "epoch_s" not in pattern.regex.groupindex
    ]  # a Unix time in the message is moved onto its stamp's clock (Stack.epoch_time)


@pytest.mark.parametrize(("fmt", "message"), _messages())
def test_a_basic_config_stamp_instead_of_the_header_dates_every_stacks_records(
    fmt: str, message: str
) -> None:
    """Every stack message under ``basicConfig``'s ``%(asctime)s %(levelname)s %(name)s:``
    instead of its stack's header gives the events of the bare message, dated by the stamp
    (or by the time the message prints itself)."""
    bare, _ = parse([message], fmt)
    stamped, _ = parse([f"2026-12-02 12:39:15,136 INFO some.module: {message}"], fmt)
    assert [replace(e, time=None, time_estimated=False) for e in stamped] == [
        replace(e, time=None, time_estimated=False) for e in bare
    ]
    at = utc("2026-12-02 12:39:15.136")
    assert [e.time for e in stamped] == [e.time or at for e in bare]
