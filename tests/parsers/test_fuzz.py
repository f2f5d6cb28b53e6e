"""Property tests: no input makes a parser raise, and escapes or junk do not change events."""

from __future__ import annotations

import json
import math
from datetime import UTC

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckpt_advisor.parsers import available_formats
from ckpt_advisor.parsers.events import Event
from tests.parsers._helpers import REAL_LOGS, parse, read_lines

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

LOG_ALPHABET = st.sampled_from(
    [*"abc XYZ019:,./-_|[]{}'\"=%<>?*\t", "\r", "\x1b", "\x00", "\ufffd", "█", "━", "\n"]
)
TOKENS = st.sampled_from(
    [
        "Traceback (most recent call last):",
        "[rank0]: ",
        '  File "x.py", line 1, in f',
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "During handling of the above exception, another exception occurred:",
        "[INFO|trainer.py:4149] 2026-11-29 22:11:38,483 >> ",
        "10/20/2023 15:41:03 - INFO - transformers.trainer - ",
        "Saving model checkpoint to /c/checkpoint-25",
        " saved in /c/checkpoint-25/x",
        "\r 21%|██        | 25/120 [00:03<00:15,  6.24it/s]",
        "Epoch 0, global step 40: 'l' reached 0.1 (best 0.1), saving model to '/c/s=4' as top 1",
        "Restored all states from the checkpoint at /c/step=9.ckpt",
        "`Trainer.fit` stopped: `max_steps=200` reached.",
        "Total optimization steps = 1,200",
        '{"step": 1, "end": 1795993260, "duration_s": 3}',
        "step,start,end",
        "9" * 40,
    ]
)
LINES = st.lists(
    st.lists(st.one_of(TOKENS, st.text(LOG_ALPHABET, max_size=30)), max_size=6).map("".join),
    max_size=40,
)


def _check(events: list[Event], n_lines: int) -> None:
    for event in events:
        assert 0 <= event.line <= n_lines
        assert event.time is None or event.time.tzinfo is UTC
        assert event.duration_s is None or (
            math.isfinite(event.duration_s) and event.duration_s >= 0
        )


@FUZZ
@given(lines=LINES, fmt=st.sampled_from(available_formats()))
def test_no_text_makes_a_parser_raise_or_fail_inside(lines: list[str], fmt: str) -> None:
    """Random mixes of real tokens, escapes, NUL and CRs never raise nor hit an internal error."""
    events, parser = parse(lines, fmt=fmt)
    _check(events, len(lines))
    assert not [reason for _, reason in parser.errors if reason.startswith("internal error")]


@FUZZ
@given(
    values=st.dictionaries(
        st.sampled_from(["step", "start", "end", "duration_s", "blocking_s", "bytes", "path"]),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(min_value=-(10**20), max_value=10**20),
            st.floats(allow_nan=True, allow_infinity=True),
            st.text(max_size=30),
            st.lists(st.integers(), max_size=2),
        ),
    )
)
def test_any_json_record_is_an_event_or_a_miss(values: dict[str, object]) -> None:
    """Every JSON object gives either one event or one reported miss, never an exception."""
    events, parser = parse([json.dumps(values)], fmt="timing_jsonl")
    _check(events, 1)
    assert len(events) + parser.misses == 1
    assert not [reason for _, reason in parser.errors if reason.startswith("internal error")]


@FUZZ
@given(data=st.data())
def test_ansi_escapes_anywhere_do_not_change_events(data: st.DataObject) -> None:
    """Colour codes inserted at random places in a real log leave its events unchanged."""
    name = data.draw(st.sampled_from(sorted(p.name for p in REAL_LOGS.glob("*.log"))))
    lines = read_lines(REAL_LOGS / name)
    index = data.draw(st.integers(0, len(lines) - 1))
    at = data.draw(st.integers(0, len(lines[index])))
    escape = data.draw(st.sampled_from(["\x1b[31m", "\x1b[38;2;180;60;0m", "\x1b[0m", "\x1b[A"]))
    coloured = [*lines]
    coloured[index] = lines[index][:at] + escape + lines[index][at:]
    assert parse(coloured)[0] == parse(lines)[0]


def test_a_huge_line_is_handled() -> None:
    """A multi-megabyte line of redraws and junk is read without error."""
    bar = "\r 21%|██        | 25/120 [00:03<00:15,  6.24it/s]"
    line = (bar + "\x00\ufffd junk Error: x" * 3) * 20_000
    events, parser = parse(["***** Running training *****", line])
    assert parser.misses == 0
    assert [e.kind for e in events] == ["run_start", "step"]
