"""ckpt-advisor's interval-change line, in a real HF Trainer run that followed its advice file."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

from ckpt_advisor.parsers import adoption
from ckpt_advisor.parsers.events import EventKind
from tests.parsers._helpers import parse, read_lines, utc

CAPTURE = Path(__file__).parent / "fixtures" / "adoption"
MIN_S, MAX_S, FACTOR = 1.2, 30.0, 2.0  # the bounds make_capture.py gave the callback
CHANGE = re.compile(r"\((?P<old_s>[\d.]+) s -> (?P<new_s>[\d.]+) s\)")


def test_sample_line_gives_its_event() -> None:
    """The module's sample (a real line, examples logging format) gives interval_change at
    step 61, 3.6 s, dated by the line's own ``now``, not by the prefix's seconds."""
    event = adoption.interval_change(adoption.SAMPLE, 7)
    assert event is not None
    assert (event.kind, event.step, event.duration_s, event.line) == (
        EventKind.INTERVAL_CHANGE,
        61,
        3.6,
        7,
    )
    assert event.time == utc("2026-12-01 10:16:37.041")
    assert event.detail == "50 -> 25 steps"
    assert adoption.interval_change("checkpoint interval changed at step 5", 1) is None


def test_the_change_line_is_found_in_any_log() -> None:
    """A change line amid other text (no stack detected; bare, or with a logging prefix) is
    recognised by the auto parser, and a broken ``now`` leaves the event undated, not dropped."""
    bare = adoption.SAMPLE[adoption.SAMPLE.index("ckpt-advisor: ") :]
    events, _ = parse(["hello", bare, adoption.SAMPLE.replace("now 2026-12-01T10:16", "now x")])
    changes = [e for e in events if e.kind is EventKind.INTERVAL_CHANGE]
    assert [e.line for e in changes] == [2, 3]
    assert changes[1].time is None


def _changes_in_text(lines: list[str]) -> list[tuple[float, float]]:
    return [
        (float(m["old_s"]), float(m["new_s"]))
        for line in lines
        if adoption.KEYWORD in line
        for m in [CHANGE.search(line[line.index(adoption.KEYWORD) :])]
        if m is not None
    ]


def test_real_run_moves_its_saves_to_the_advised_interval_within_the_bounds() -> None:
    """transformers 5.24.0 on CPU, save_steps=50, advised 0.8 s at step 60: the parser sees
    every change line; each change at most halves the interval (factor 2) and none goes below
    the 1.2 s bound; the saves (timing file) come every 50 steps before the first change and,
    after it, every interval in force counted from the previous save; the stale advice at step
    200 changes nothing."""
    lines = read_lines(CAPTURE / "hf_adoption.log")
    events, _ = parse(lines)
    changes = [e for e in events if e.kind is EventKind.INTERVAL_CHANGE]
    text_changes = _changes_in_text(lines)
    assert len(changes) == len(text_changes) == 5
    assert [e.step for e in changes] == [61, 75, 82, 93, 109]
    assert [e.detail for e in changes] == [
        "50 -> 25 steps",
        "25 -> 13 steps",
        "13 -> 9 steps",
        "9 -> 10 steps",
        "10 -> 11 steps",
    ]
    for (old_s, new_s), event in zip(text_changes, changes, strict=True):
        assert event.duration_s == new_s
        assert MIN_S - 0.05 <= new_s <= MAX_S  # the line rounds to 0.1 s
        assert old_s / FACTOR - 0.05 <= new_s <= old_s * FACTOR + 0.05
    assert all(e.time is not None and e.time.year == 2026 for e in changes)

    saves = [json.loads(line)["step"] for line in read_lines(CAPTURE / "ckpt_timings.jsonl")]
    interval = {0: 50}
    for event in changes:
        assert event.step is not None
        interval[event.step] = int(event.detail.split()[2])  # "old -> new steps"
    in_force = 50
    for previous, save in itertools.pairwise(saves):
        in_force = interval[max(s for s in interval if s < save)]  # a change counts after its step
        if save == 300:
            break  # the Trainer's final save at max_steps
        assert save - previous == in_force, (previous, save)
    assert in_force == 11
    assert saves[:2] == [50, 75]  # 25 steps after 50: the new interval counts from the last save
    assert sum(1 for line in lines if "ckpt-advisor: advice file" in line) == 3  # warned once each


@pytest.mark.parametrize("problem", ["not found", "malformed", "is stale"])
def test_each_advice_problem_is_warned_once(problem: str) -> None:
    """Missing, malformed and stale advice each print one warning in the real run."""
    lines = read_lines(CAPTURE / "hf_adoption.log")
    assert sum(1 for line in lines if "ckpt-advisor: advice file" in line and problem in line) == 1
