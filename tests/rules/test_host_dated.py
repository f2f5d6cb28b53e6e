"""Observations the host dated (a log that printed no time, read live beside a checkpoint
timing file): spans are measured between the others only, within the runs the whole timeline
splits (docs/RELIABILITY.md, scenario 33)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ckpt_advisor.rules.job import estimate_job
from ckpt_advisor.rules.model import NoteCode, Observation, ReasonCode
from ckpt_advisor.rules.runs import split_runs, stepped_exposure_s
from ckpt_advisor.rules.timeline import Timeline

T0 = 1.8e9


def _save(at_s: float, step: int) -> Observation:
    return Observation(
        "checkpoint_end", T0 + at_s, step, 50.0, from_timing_file=True, source="t.jsonl"
    )


def _log(
    kind: str,
    at_s: float,
    step: int,
    duration_s: float | None = None,
    failure_class: str | None = None,
) -> Observation:
    """A line of a log without stamps, dated by the host at ``at_s`` (its read time)."""
    return Observation(
        kind, T0 + at_s, step, duration_s, failure_class, source="pl.log", host_dated=True
    )


LIVE = [
    _save(600, 200),
    _save(1200, 400),
    _save(3000, 600),
    _save(3600, 800),
    _log("step", 300, 100, duration_s=1.0),
    _log("checkpoint_start", 610, 200),
    _log("step", 900, 300, duration_s=1.0),
    _log("failure", 1500, 450, failure_class="nccl_error"),
    _log("step", 3300, 700, duration_s=1.0),
]


def test_live_log_beside_a_timing_file_measures_between_the_timing_records() -> None:
    """A Lightning log read live (its lines at read times) beside a timing file: the running
    time is the timing records' spans within each run (600→1200 s and 3000→3600 s: 1200 s),
    the failure read at 1500 s counts (M = 1200 s) and still ends its run, no restart is
    measured from its read time (R unknown), the current interval is the records' spacing
    less C (600 − 50 s), and the goodput split leaves 1200→2950 s to idle, not restart: each
    record's save blocked the 50 s before it, the first and the one after the gap from their own
    starts (550 s, 2950 s: the job was saving then), so the wall runs 550→3600 s (productive,
    checkpoint, lost, restart, idle: 1100, 4 × 50, 0, 0, 1750 s)."""
    est = estimate_job("pl", LIVE, now_s=T0 + 4000)
    assert est.exposure_s == pytest.approx(1200.0)
    assert est.mtbf_s == pytest.approx(1200.0) and est.n_failures == 1
    assert est.restart_cost_s is None
    assert est.current_interval_s == pytest.approx(550.0)
    assert est.checkpoint_cost_s == pytest.approx(50.0)
    assert est.goodput_spans is not None
    g = est.goodput_spans.breakdown(since_s=-np.inf)
    assert g.wall_s == 3050.0 and g.n_interruptions == 0
    assert g.seconds.tolist() == [1100.0, 200.0, 0.0, 0.0, 1750.0]


def test_m_from_host_dated_interruptions_is_a_lower_bound_with_an_open_band() -> None:
    """The live job with a second failure read at 3400 s: both interruptions count in M, but
    no running time ends at them, so M (325 s) is a lower bound; Daly's interval grows with M,
    so its range is open above and a current interval above the optimum (550 s, 3.7×) is
    within what the data allow (no band_high_s), not drift. The same failures with printed
    times measure their spans: M is no bound, its band closed."""
    obs = [*LIVE, _log("failure", 3400, 750, failure_class="nccl_error")]
    est = estimate_job("pl", obs, now_s=T0 + 4000)
    assert est.mtbf_is_lower_bound and est.n_failures == 2
    assert est.mtbf_s == pytest.approx(325.0)
    assert est.recommended_interval_range_s is not None
    assert est.recommended_interval_range_s[1] is None
    assert est.reason.code is ReasonCode.WITHIN_CONFIDENCE and est.drift_ratio is not None
    assert est.drift_ratio > 3 and "band_high_s" not in est.reason.values
    stamped = [replace(o, host_dated=False) if o.kind == "failure" else o for o in obs]
    est = estimate_job("pl", stamped, now_s=T0 + 4000)
    assert not est.mtbf_is_lower_bound
    assert est.recommended_interval_range_s is not None
    assert est.recommended_interval_range_s[1] is not None
    assert "band_high_s" in est.reason.values


def test_stepped_exposure_only_where_no_placed_span_measures() -> None:
    """The steps of host-dated stretches give running time (Δstep × the printed rate) only in
    runs without two placed observations: none in the live job above; the same log read alone
    gives its stretch to the failure, steps 100 to 450 at the printed 1 s (350 s), and none
    for the stretch after it (one step: no advance)."""
    timeline = Timeline.of(LIVE)
    run_id = split_runs(timeline, [], idle_gap_s=7200.0)
    assert stepped_exposure_s(timeline, run_id) == (0.0, 0)
    alone = Timeline.of([o for o in LIVE if o.host_dated])
    alone_runs = split_runs(alone, [], idle_gap_s=7200.0)
    assert stepped_exposure_s(alone, alone_runs) == (350.0, 1)


def test_a_crash_reported_also_by_an_untimed_log_keeps_its_placed_restart() -> None:
    """A stamped log's failure at 1000 s and a launcher log without stamps that reports the
    same crash when read 10 s later are one interruption (M counts 1), and R is measured from
    the stamped failure to when the next run's steps began, as goodput's restart bucket (step
    100 shown at 1400 s, at 1 s a step, began at 1300 s, the run's start: R = 300 s; to the
    step line itself it would be 400 s)."""
    stamped = [
        Observation("run_start", T0, source="hf.log"),
        Observation("step", T0 + 100, 100, 1.0, source="hf.log"),
        Observation("step", T0 + 900, 900, 1.0, source="hf.log"),
        Observation("failure", T0 + 1000, failure_class="nccl_error", source="hf.log"),
        Observation("run_start", T0 + 1300, source="hf.log"),
        Observation("step", T0 + 1400, 100, 1.0, source="hf.log"),
    ]
    launcher = Observation(
        "failure", T0 + 1010, failure_class="child_failed", source="run.out", host_dated=True
    )
    est = estimate_job("hf", [*stamped, launcher], now_s=T0 + 2000)
    assert est.n_failures == 1 and len(est.interruptions) == 1
    assert est.failure_classes == {"nccl_error": 1}
    assert est.restart_cost_s == pytest.approx(300.0)
    assert est.goodput_spans is not None
    restart_s = est.goodput_spans.breakdown(since_s=-np.inf).seconds[3]
    assert restart_s == pytest.approx(300.0)


def test_save_spacing_shorter_than_the_cost_is_refused() -> None:
    """Saves that each stall training for C = 50 s (timing records) cannot be 30 s apart (read
    times a tailer gave lines it read in one go, or a clock gone wrong): that spacing is
    refused with a note naming both, and the current interval is the save steps (every 40)
    times the 0.5 s step the log printed, 20 s, not the 30 s spacing."""
    saves = [_save(1000 + 30 * k, 40 * (k + 1)) for k in range(4)]
    steps = [Observation("step", T0 + 900 + k, 10 * k, 0.5, source="t.log") for k in range(3)]
    est = estimate_job("pl", saves + steps, now_s=T0 + 4000)
    assert est.checkpoint_cost_s == pytest.approx(50.0) and est.step_time_s == 0.5
    assert est.current_interval_s == pytest.approx(40 * 0.5)
    note = next(n for n in est.notes if n.code is NoteCode.SPACING_BELOW_COST)
    assert note.values == {"spacing_s": 30.0, "cost_s": 50.0}
    assert any(n.code is NoteCode.CURRENT_INTERVAL_FROM_STEPS for n in est.notes)
