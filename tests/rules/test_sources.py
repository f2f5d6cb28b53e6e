"""Notes about the log files' clocks name the file, the line and what was done about it."""

from __future__ import annotations

from ckpt_advisor.parsers.events import CLOCK_KINDS
from ckpt_advisor.rules.job import estimate_job
from ckpt_advisor.rules.model import ClockFinding, Note, NoteCode, Observation
from ckpt_advisor.rules.sources import FINDING_KINDS, clock_notes


def test_the_finding_kinds_are_the_parsers_clock_kinds() -> None:
    """The rules read exactly the clock kinds the parsers write (rules never import parsers)."""
    assert set(FINDING_KINDS) == {str(kind) for kind in CLOCK_KINDS}


def test_each_finding_is_one_note_naming_file_and_line() -> None:
    """A step back (3 h 00 m at line 120, with a second step later), a bar clock ignored and a
    file without stamps give one note each, naming the file and the first line (typed: the
    agent words them, tests/agent/test_notes.py)."""
    notes = clock_notes(
        [
            ClockFinding("clock_step", "/runs/a/train.log", 300, 60.0),
            ClockFinding("clock_step", "/runs/a/train.log", 120, 10800.0),
            ClockFinding("bar_clock_ignored", "/runs/b/train.log", 45),
            ClockFinding("no_timestamps", "/runs/c/lightning.log", 19),
        ]
    )
    assert notes == (
        Note(
            NoteCode.CLOCK_STEP,
            {"n_more": 1, "seconds": 10800.0},
            by_name={"/runs/a/train.log": 120},
        ),
        Note(NoteCode.BAR_CLOCK_IGNORED, by_name={"/runs/b/train.log": 45}),
        Note(NoteCode.NO_TIMESTAMPS, by_name={"/runs/c/lightning.log": 19}),
    )


def test_a_log_without_stamps_is_named_as_the_cause_of_an_unknown_interval() -> None:
    """Three saves dated all at one time (a Lightning log read in a backfill) leave the current
    interval and C unknown: the notes say it is for want of timestamps, not "no run with two
    saves"."""
    at = 1.7e9
    observations = [Observation("checkpoint_start", at, step=s, source="l.log") for s in (40, 80)]
    observations.append(Observation("failure", at, step=80, failure_class="nccl_error"))
    est = estimate_job(
        "lt", observations, now_s=at, clock_findings=[ClockFinding("no_timestamps", "l.log", 19)]
    )
    assert est.current_interval_s is None and est.checkpoint_cost_s is None
    assert Note(NoteCode.CURRENT_INTERVAL_UNKNOWN, {"n_untimed_files": 1}) in est.notes
    assert Note(NoteCode.COST_UNKNOWN, {"n_untimed_files": 1}) in est.notes
    assert Note(NoteCode.NO_TIMESTAMPS, by_name={"l.log": 19}) in est.notes
