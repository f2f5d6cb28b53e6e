"""The rules' typed notes rendered at the edge: every code has a sentence, in one duration style."""

from __future__ import annotations

import re

import pytest

from ckpt_advisor.agent.notes import render_note
from ckpt_advisor.rules.model import Note, NoteCode

VALUES = {
    "previous_s": 240.0,
    "cost_s": 300.0,
    "n_saves": 3,
    "exposure_s": 11_520.0,
    "window_s": 30 * 86400.0,
    "mtbf_lower_s": 3845.0,
    "n_failures": 2,
    "n_preemptions": 2,
    "mtbf_s": 21_600.0,
    "interval_s": 3_403.0,
    "n_runs": 1,
    "persist_s": 10_800.0,
    "shape": 0.71,
    "shape_low": 0.6,
    "shape_high": 0.82,
    "unit_exposure_s": 4000 * 86400.0,
    "units": 4,
    "cost_ratio": 2.0,
    "waste_fraction": 0.95,
    "n_untimed_files": 2,
    "n_more": 1,
    "seconds": 9000.0,
    "interval_steps": 600,
    "offset_s": 18_000.0,
    "ahead_s": 31_343.0,
    "gap_s": 3600.0,
    "n_resumes": 1,
    "step_s": 2.0,
    "spacing_s": 6.2e-06,
}


@pytest.mark.parametrize("code", list(NoteCode))
def test_every_code_renders_without_a_second_duration_style(code: NoteCode) -> None:
    """Each code gives a sentence; no duration is written as ``3.2 h`` or ``12.5 min``: the
    tables' and Slack's ``format_duration`` style (``3h 00m``) is the only one."""
    text = render_note(Note(code, VALUES, by_name={"/runs/a/train.log": 120}))
    assert text and not text.endswith(".")
    assert not re.search(r"\d(\.\d+)? (s|min|h|d)\b", text)


def test_durations_and_counts_are_rendered_from_the_values() -> None:
    """The numbers in the sentence are the note's values, formatted for people."""
    steps = Note(NoteCode.CURRENT_INTERVAL_FROM_STEPS, {"interval_steps": 1200, "step_s": 6.0})
    assert render_note(steps) == (
        "the current interval is 1,200 steps between saves × 6s a step: no run lived to two "
        "saves to time it (failures come faster than the saves)"
    )
    close = Note(NoteCode.SPACING_BELOW_COST, {"spacing_s": 6.2e-06, "cost_s": 1.11})
    assert render_note(close) == (
        "the saves are 6.2e-06s apart, no more than C (1.11s): saves that each take C cannot be "
        "that close (their times are not the log's own?), so no current interval is measured "
        "from them"
    )
    untimed = Note(steps.code, {**steps.values, "n_untimed_files": 2})
    assert render_note(untimed).endswith(": no save is timed (2 log file(s) print no timestamps)")
    cost = Note(NoteCode.COST_CHANGED, {"previous_s": 240.0, "cost_s": 300.0, "n_saves": 3})
    assert render_note(cost) == (
        "checkpoint cost changed from 4m 00s to 5m 00s over the last 3 saves: C uses those only"
    )
    none = Note(
        NoteCode.NO_FAILURE,
        {"exposure_s": 11_520.0, "window_s": 30 * 86400.0, "mtbf_lower_s": 3845.0},
    )
    assert render_note(none) == (
        "no failure in 3h 12m of running time (last 30d 0h): M is at least 1h 04m"
    )
    planned = Note(NoteCode.PLANNED_ENDS, by_name={"preemption": 2, "time_limit": 1})
    assert render_note(planned).startswith("planned ends (preemption: 2, time_limit: 1) censor")
    high = Note(NoteCode.HIGH_COST, {"cost_ratio": 2.0, "waste_fraction": 0.95})
    assert render_note(high).startswith(
        "checkpoint cost is 2x the MTBF: even the recommended interval loses 95%"
    )


def test_clock_notes_name_the_file_and_line() -> None:
    """The parsers' clock findings read with their file, line and the step in the one style."""
    step = Note(NoteCode.CLOCK_STEP, {"n_more": 0, "seconds": 9000.0}, by_name={"/l.log": 88})
    assert render_note(step).startswith("the clock of /l.log stepped back 2h 30m at line 88:")
    untimed = Note(NoteCode.NO_TIMESTAMPS, by_name={"a.log": 19, "b.log": 3})
    assert render_note(untimed).startswith(
        "no timestamps in a.log (first event at line 19), b.log (first event at line 3):"
    )
    cause = Note(NoteCode.COST_UNKNOWN, {"n_untimed_files": 1})
    assert render_note(cause).startswith("no checkpoint duration seen: 1 log file(s) print no")
    assert render_note(Note(NoteCode.COST_UNKNOWN, {"n_untimed_files": 0})) == (
        "no checkpoint duration seen; C is unknown (a timing file gives it exactly)"
    )
