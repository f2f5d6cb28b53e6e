"""Notes about the log files' clocks name the file, the line and what was done about it."""

from __future__ import annotations

from ckpt_advisor.parsers.events import CLOCK_KINDS
from ckpt_advisor.rules.job import estimate_job
from ckpt_advisor.rules.model import ClockFinding, Note, NoteCode, Observation
from ckpt_advisor.rules.sources import FINDING_KINDS, clock_notes
from tests.rules.simulate import T0


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


def _saving_job(log_shift_s: float) -> list[Observation]:
    """Six hours of a job that saves every 30 min (60 s each, timed in its timing file and
    logged) and fails four times, restarting 10 min later; its log's times ``log_shift_s``
    off the timing file's (a log read in the wrong zone)."""

    def log(kind: str, at_s: float, **fields: object) -> Observation:
        return Observation(kind, T0 + at_s + log_shift_s, source="train.log", **fields)  # type: ignore[arg-type]

    observations: list[Observation] = []
    at_s, step = 0.0, 0
    for run in range(5):
        observations.append(log("run_start", at_s))
        for _ in range(3):
            at_s, step = at_s + 1800, step + 600
            observations.append(log("checkpoint_start", at_s, step=step))
            observations.append(log("checkpoint_end", at_s + 60, step=step, duration_s=60.0))
            observations.append(
                Observation(
                    "checkpoint_end",
                    T0 + at_s + 60,
                    step=step,
                    duration_s=60.0,
                    from_timing_file=True,
                    source="t.jsonl",
                )
            )
        if run < 4:
            at_s += 900
            observations.append(log("failure", at_s, step=step, failure_class="nccl_error"))
            at_s += 600
    return observations


def test_a_log_a_zone_off_its_timing_file_is_estimated_on_the_timing_files_clock() -> None:
    """The job's log 5 h behind its timing file (a UTC-5 log read as UTC): its times are moved
    onto the timing file's clock, so C, M, the running time and the intervals are the ones of
    the job read in the right zone, and a note gives the offset; left on two clocks, 4.8 h
    between the sources counted as running time (M 3h 20m for 2h 08m, status ok for drift)."""
    right = estimate_job("j", _saving_job(0.0), now_s=T0 + 86400)
    wrong = estimate_job("j", _saving_job(-5 * 3600.0), now_s=T0 + 86400)
    figures = (
        "checkpoint_cost_s",
        "mtbf_s",
        "exposure_s",
        "n_failures",
        "current_interval_s",
        "status",
    )
    assert [getattr(wrong, f) for f in figures] == [getattr(right, f) for f in figures]
    assert right.exposure_s == 4 * (3 * 1800 + 900) + 3 * 1800 + 60  # to the crash, the last end
    assert right.n_failures == 4 and right.current_interval_s == 1740.0
    note = Note(NoteCode.ZONE_OFFSET, {"offset_s": -18000.0, "n_saves": 15})
    assert note in wrong.notes and not any(n.code is NoteCode.ZONE_OFFSET for n in right.notes)
