"""estimate_job: the whole estimate of one job from its observations."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest

from ckpt_advisor.agent.synth import simulate
from ckpt_advisor.rules.advice import interval_steps
from ckpt_advisor.rules.interval import daly_interval_s, exponential_waste_fraction
from ckpt_advisor.rules.job import estimate_job
from ckpt_advisor.rules.model import FleetRate, JobEstimate, Note, NoteCode, Observation, Status
from ckpt_advisor.rules.policy import EstimationPolicy, JobFacts
from tests.rules.simulate import (
    T0,
    Trace,
    hf_like_crash,
    obs,
    parsed_observations,
    real_hf_observations,
    simulate_trace,
)

DAY_S = 86400.0


def codes(estimate: JobEstimate) -> list[NoteCode]:
    """The codes of the estimate's notes, in order."""
    return [note.code for note in estimate.notes]


def ten_days_of_llama() -> Trace:
    """10 days with M = 1 day, 2 s steps, a 60 s save every 900 steps, 30 min down per failure."""
    return simulate_trace(
        np.random.default_rng(7),
        mtbf_s=DAY_S,
        horizon_s=10 * DAY_S,
        step_time_s=2.0,
        log_steps=50,
        save_steps=900,
        cost_s=60.0,
        downtime_s=1800.0,
    )


def test_a_simulated_job_is_estimated_from_its_truth() -> None:
    """Exposure, failures, C, step time and both intervals come out as simulated; the current
    interval is compute time between saves (Daly's T), 900 steps of 2 s, without the 60 s save."""
    trace = ten_days_of_llama()
    estimate = estimate_job("llama", trace.observations, now_s=T0 + 100 * DAY_S)
    assert estimate.n_failures == trace.n_failures == 8
    assert estimate.exposure_s == pytest.approx(trace.exposure_s, rel=1e-9)
    assert estimate.mtbf_s is not None
    assert estimate.mtbf_s == pytest.approx(trace.exposure_s / trace.n_failures)
    assert estimate.checkpoint_cost_s == 60.0
    assert estimate.checkpoint_cost_source == "log"
    assert estimate.checkpoint_cost_ci_s == (60.0, 60.0)
    # every save counts once (start + end lines are one save), not just the 20 behind C
    assert estimate.n_checkpoints == sum(o.kind == "checkpoint_end" for o in trace.observations)
    assert estimate.n_checkpoints > 20
    assert estimate.step_time_s == pytest.approx(2.0)
    assert estimate.current_interval_s == pytest.approx(900 * 2.0)
    assert estimate.current_interval_steps == 900
    # the 30 min down; the first step line, 50 steps of 2 s after the restart, is dated back
    assert estimate.restart_cost_s == pytest.approx(1800.0, abs=1.0)
    assert estimate.recommended_interval_s == daly_interval_s(estimate.mtbf_s, 60.0)
    assert estimate.recommended_interval_steps is not None
    assert estimate.recommended_interval_steps == pytest.approx(
        estimate.recommended_interval_s / 2.0, rel=0.05
    )
    assert estimate.drift_ratio == pytest.approx(1800.0 / estimate.recommended_interval_s)
    assert estimate.status is Status.DRIFT  # 31 min saves against a ~2.4 h optimum
    assert estimate.failure_classes == {"nccl_error": 8}
    assert estimate.newest_event_s == max(o.time_s for o in trace.observations)
    assert estimate.computed_at_s == T0 + 100 * DAY_S


def test_a_job_near_its_optimum_is_ok() -> None:
    """Saving at about Daly's interval gives status ok and a drift ratio near 1."""
    # M ≈ 1 day, C = 60 s: Daly ≈ 3.2e3 s ≈ 1600 steps of 2 s
    trace = simulate_trace(
        np.random.default_rng(3),
        mtbf_s=DAY_S,
        horizon_s=20 * DAY_S,
        step_time_s=2.0,
        log_steps=100,
        save_steps=1600,
        cost_s=60.0,
    )
    estimate = estimate_job("llama", trace.observations, now_s=0.0)
    assert estimate.drift_ratio is not None
    assert 1 / 1.5 <= estimate.drift_ratio <= 1.5
    assert estimate.status is Status.OK


def light_trace(
    rng: np.random.Generator, mtbf_s: float, horizon_s: float
) -> tuple[list[Observation], float, int]:
    """Runs of exponential length with random downtime: (observations, exposure_s, failures).

    Each run is a restart, a step one second later, and a failure (or, for the last run, a
    step at the horizon of running time): estimate it with an idle gap longer than any run.
    """
    observations: list[Observation] = []
    now_s, remaining_s, failures = T0, horizon_s, 0
    while True:
        life_s = float(rng.exponential(mtbf_s))
        observations += [Observation("restart", now_s), Observation("step", now_s + 1.0)]
        if life_s >= remaining_s:
            observations.append(Observation("step", now_s + remaining_s))
            return observations, horizon_s, failures
        observations.append(Observation("failure", now_s + life_s, failure_class="xid_79"))
        failures += 1
        remaining_s -= life_s
        now_s += life_s + float(rng.uniform(600.0, 7200.0))


def test_mtbf_interval_covers_the_truth_at_its_nominal_rate() -> None:
    """Over 400 seeds of simulated exponential traces the 90% CI covers the true M 85-95%."""
    mtbf_s = DAY_S
    covered = 0
    for seed in range(400):
        observations, exposure_s, failures = light_trace(
            np.random.default_rng(seed), mtbf_s, 50 * mtbf_s
        )
        estimate = estimate_job(
            "sim",
            observations,
            now_s=0.0,
            policy=EstimationPolicy(mtbf_window_s=1e9, idle_gap_s=1e9),
        )
        assert estimate.n_failures == failures
        assert estimate.exposure_s == pytest.approx(exposure_s, rel=1e-9)
        assert estimate.mtbf_ci_s is not None
        low_s, high_s = estimate.mtbf_ci_s
        covered += low_s <= mtbf_s <= high_s
    # the exact (Garwood) coverage for 50 expected failures is 0.910
    assert 0.85 <= covered / 400 <= 0.95


def test_windows_count_back_from_the_newest_observation_not_from_now() -> None:
    """The same history gives the same numbers whenever it is estimated (backfill = live)."""
    trace = simulate_trace(
        np.random.default_rng(1), mtbf_s=DAY_S / 2, horizon_s=5 * DAY_S, step_time_s=10.0
    )
    live = estimate_job("j", trace.observations, now_s=trace.observations[-1].time_s)
    backfill = estimate_job("j", trace.observations, now_s=T0 + 400 * DAY_S)
    assert dataclasses.replace(backfill, computed_at_s=live.computed_at_s) == live


def test_old_failures_fall_out_of_the_mtbf_window() -> None:
    """A failure 40 days before the newest observation is outside the 30-day window."""
    observations = [
        obs("step", 0, step=0),
        obs("failure", 10, failure_class="oom"),
        obs("restart", 100),
        *[obs("step", 100 + DAY_S * d, step=d) for d in range(1, 41)],
    ]
    estimate = estimate_job(
        "j", observations, now_s=0.0, policy=EstimationPolicy(idle_gap_s=2 * DAY_S)
    )
    assert estimate.n_failures == 0
    assert estimate.failure_classes == {}
    assert estimate.exposure_s == pytest.approx(30 * DAY_S)
    assert estimate.mtbf_s is None


def test_no_observations_give_unknowns_not_zeros() -> None:
    """An empty history: every number None, counts 0, status insufficient_data, with notes."""
    estimate = estimate_job("empty", [], now_s=5.0)
    numbers = [
        estimate.checkpoint_cost_s,
        estimate.mtbf_s,
        estimate.mtbf_ci_s,
        estimate.current_interval_s,
        estimate.recommended_interval_s,
        estimate.recommended_interval_ci_s,
        estimate.step_time_s,
        estimate.waste_fraction_current,
        estimate.drift_ratio,
        estimate.newest_event_s,
    ]
    assert numbers == [None] * len(numbers)
    assert (estimate.n_checkpoints, estimate.n_failures, estimate.exposure_s) == (0, 0, 0.0)
    assert estimate.status is Status.INSUFFICIENT_DATA
    assert codes(estimate)[0] is NoteCode.COST_UNKNOWN


def test_too_few_failures_is_insufficient_data_with_numbers_still_given() -> None:
    """One interruption: M and the intervals are computed, but the status is insufficient."""
    observations = [
        *[obs("checkpoint_end", 3600.0 * k, step=k, duration_s=120.0) for k in range(1, 11)],
        obs("failure", 40000, failure_class="xid_79"),
        obs("restart", 41000),
        *[obs("checkpoint_end", 41000 + 3600.0 * k, step=10 + k) for k in range(1, 4)],
    ]
    estimate = estimate_job("j", observations, now_s=0.0)
    assert estimate.n_failures == 1
    assert estimate.mtbf_s is not None and estimate.recommended_interval_s is not None
    assert estimate.status is Status.INSUFFICIENT_DATA
    assert Note(NoteCode.FEW_FAILURES, {"n_failures": 1, "window_s": 30 * DAY_S}) in estimate.notes


def test_recommended_interval_ci_brackets_the_recommendation() -> None:
    """Daly at the corners of the M and C intervals encloses Daly at the point estimates."""
    trace = simulate_trace(
        np.random.default_rng(5), mtbf_s=DAY_S, horizon_s=15 * DAY_S, step_time_s=10.0
    )
    estimate = estimate_job("j", trace.observations, now_s=0.0)
    assert estimate.recommended_interval_ci_s is not None
    assert estimate.recommended_interval_s is not None and estimate.mtbf_ci_s is not None
    low_s, high_s = estimate.recommended_interval_ci_s
    assert low_s < estimate.recommended_interval_s < high_s
    assert low_s == pytest.approx(daly_interval_s(estimate.mtbf_ci_s[0], 30.0))
    assert high_s == pytest.approx(daly_interval_s(estimate.mtbf_ci_s[1], 30.0))


def test_planned_ends_and_preemptions_censor_and_are_explained() -> None:
    """Time limits and preemptions are not failures; notes say so and what preemptions cost."""
    observations = []
    for k in range(6):
        start_s = k * DAY_S
        observations += [obs("run_start", start_s)]
        observations += [
            obs("checkpoint_end", start_s + 3600.0 * h, step=h, duration_s=60.0) for h in (1, 2, 3)
        ]
        kind = ("time_limit", "preemption", "oom")[k % 3]
        observations.append(
            obs("failure", start_s + 4 * 3600.0, failure_class=kind, planned=kind != "oom")
        )
    estimate = estimate_job("j", observations, now_s=0.0)
    assert estimate.n_failures == 2
    assert estimate.failure_classes == {"oom": 2}
    assert estimate.exposure_s == pytest.approx(6 * 4 * 3600.0)
    planned = Note(NoteCode.PLANNED_ENDS, by_name={"preemption": 2, "time_limit": 2})
    assert planned in estimate.notes
    [preempted] = [n for n in estimate.notes if n.code is NoteCode.PREEMPTIONS]
    assert preempted.values == {
        "n_preemptions": 2,
        "mtbf_s": pytest.approx(6 * 3600.0),  # 24 h of running time / (2 failures + 2)
        "interval_s": pytest.approx(daly_interval_s(6 * 3600.0, 60.0)),
    }


def test_log_derived_cost_carries_a_lower_bound_note() -> None:
    """C from log lines (no timing file) is flagged as a lower bound in the notes."""
    observations = [obs("checkpoint_end", 1000.0 * k, step=k, duration_s=30.0) for k in range(5)]
    estimate = estimate_job("j", observations, now_s=0.0)
    assert estimate.checkpoint_cost_source == "log"
    assert codes(estimate)[0] is NoteCode.COST_LOWER_BOUND


def test_bad_job_facts_are_rejected() -> None:
    """A job size below one is a ValueError naming the fact, when the facts are made."""
    with pytest.raises(ValueError, match="gpus"):
        JobFacts(gpus=0)
    with pytest.raises(ValueError, match="units"):
        JobFacts(units=-4)


def test_a_hundred_thousand_observations_take_well_under_a_second() -> None:
    """estimate_job over ~100k observations runs in under a second (vectorised)."""
    trace = simulate_trace(
        np.random.default_rng(11), mtbf_s=2 * DAY_S, horizon_s=20 * DAY_S, log_steps=17
    )
    assert len(trace.observations) > 100_000
    estimate_job("warm-up", trace.observations, now_s=0.0)  # lazy imports done once
    started = time.perf_counter()
    estimate = estimate_job("big", trace.observations, now_s=0.0)
    elapsed_s = time.perf_counter() - started
    assert estimate.checkpoint_cost_s == 30.0
    assert elapsed_s < 1.0


def test_carried_forward_failure_times_do_not_shrink_the_exposure() -> None:
    """A traceback stamped at the last save is moved to where its steps got: 1640 s, not 1040."""
    estimate = estimate_job("hf", hf_like_crash(), now_s=0.0)
    assert estimate.step_time_s == 2.0
    assert estimate.n_failures == 1
    assert estimate.exposure_s == pytest.approx(1640.0)  # the last run has no time yet
    assert estimate.restart_cost_s == pytest.approx(2500.0 - 1640.0)
    assert Note(NoteCode.FAILURES_REDATED, {"n_failures": 3}) in estimate.notes


def test_weibull_lives_are_reported_and_widen_the_interval_of_m() -> None:
    """80 days of Weibull(0.6) failures: the shape is found near 0.6, M stays E/n, and M's
    interval is wider than the chi-square one, so the optimum's band is wider too."""
    trace = simulate_trace(
        np.random.default_rng(4), mtbf_s=DAY_S / 2, horizon_s=80 * DAY_S, shape=0.6, log_steps=60
    )
    estimate = estimate_job(
        "w", trace.observations, now_s=0.0, policy=EstimationPolicy(mtbf_window_s=1e9)
    )
    assert estimate.weibull_shape == pytest.approx(0.6, rel=0.15)
    assert estimate.mtbf_source == "weibull"
    # a life shorter than one logged step is a failed restart of the interruption before it
    assert trace.n_failures - 2 <= estimate.n_failures <= trace.n_failures
    assert estimate.mtbf_s == pytest.approx(estimate.exposure_s / estimate.n_failures)
    exponential = estimate_job(
        "w",
        trace.observations,
        now_s=0.0,
        policy=EstimationPolicy(mtbf_window_s=1e9, min_weibull_failures=10_000),
    )
    assert exponential.mtbf_source == "exponential"
    assert estimate.mtbf_ci_s is not None and exponential.mtbf_ci_s is not None
    assert estimate.mtbf_ci_s[0] < exponential.mtbf_ci_s[0]
    assert estimate.mtbf_ci_s[1] > exponential.mtbf_ci_s[1]
    assert len(estimate.lives_s) == estimate.n_failures
    [weibull] = [n for n in estimate.notes if n.code is NoteCode.WEIBULL]
    assert weibull.values["shape"] == estimate.weibull_shape
    assert NoteCode.WEIBULL not in codes(exponential)


def test_a_job_without_failures_starts_from_its_fleets_per_node_rate() -> None:
    """A 4-node job with no failure in 2 days, in a fleet with 10 failures in 4000 node-days:
    M = (2·4 + 4000) node-days / 10 / 4 nodes ≈ 100.2 days, judged on 10 failures."""
    trace = simulate_trace(np.random.default_rng(1), mtbf_s=1e12, horizon_s=2 * DAY_S)
    fleet = FleetRate(unit_exposure_s=4000 * DAY_S, n_failures=10)
    estimate = estimate_job(
        "new", trace.observations, now_s=0.0, facts=JobFacts(units=4, fleet=fleet)
    )
    assert estimate.n_failures == 0
    assert estimate.mtbf_source == "fleet"
    assert estimate.mtbf_n_failures == 10
    assert estimate.mtbf_s == pytest.approx((trace.exposure_s * 4 + 4000 * DAY_S) / 10 / 4)
    assert estimate.mtbf_per_unit_s == pytest.approx(estimate.mtbf_s * 4)
    fleet_note = {"n_failures": 10, "unit_exposure_s": 4000 * DAY_S, "units": 4}
    assert Note(NoteCode.FLEET_RATE, fleet_note) in estimate.notes
    alone = estimate_job("new", trace.observations, now_s=0.0)
    assert alone.mtbf_s is None and alone.mtbf_source is None


def test_excess_waste_is_given_in_gpu_hours_and_money() -> None:
    """On 64 GPUs at 2.5 a GPU-hour the excess is (W_now − W_best)·64·24 GPU-hours a day, with
    W from Daly's exponential model."""
    trace = ten_days_of_llama()
    estimate = estimate_job(
        "llama",
        trace.observations,
        now_s=0.0,
        policy=EstimationPolicy(price_per_gpu_hour=2.5),
        facts=JobFacts(gpus=64),
    )
    assert estimate.waste_fraction_current is not None
    assert estimate.waste_fraction_recommended is not None
    assert estimate.mtbf_s is not None and estimate.current_interval_s is not None
    assert estimate.restart_cost_s is not None and estimate.recommended_interval_s is not None
    model = (estimate.mtbf_s, 60.0, estimate.restart_cost_s)
    assert estimate.waste_fraction_current == pytest.approx(
        exponential_waste_fraction(estimate.current_interval_s, *model)
    )
    assert estimate.waste_fraction_recommended == pytest.approx(
        exponential_waste_fraction(estimate.recommended_interval_s, *model)
    )
    gap = estimate.waste_fraction_current - estimate.waste_fraction_recommended
    assert estimate.excess_gpu_hours_per_day == pytest.approx(gap * 64 * 24)
    assert estimate.excess_cost_per_day == pytest.approx(gap * 64 * 24 * 2.5)
    assert estimate.status is Status.DRIFT
    tiny = estimate_job(
        "llama",
        trace.observations,
        now_s=0.0,
        policy=EstimationPolicy(min_excess_gpu_hours_per_day=5.0),
        facts=JobFacts(gpus=1),
    )
    assert tiny.status is Status.OK  # 3x off, but under 5 GPU-hours a day on one GPU


def test_a_persist_slower_than_the_interval_is_warned_about() -> None:
    """Asynchronous saves whose persist takes 3 h against a 1 h interval give a warning note."""
    observations = [
        obs("step", 0.0, step=0),
        *[
            obs(
                "checkpoint_end",
                3600.0 * i,
                step=100 * i,
                duration_s=5.0,
                persist_s=3 * 3600.0,
                from_timing_file=True,
            )
            for i in range(1, 6)
        ],
    ]
    estimate = estimate_job("async", observations, now_s=0.0)
    assert estimate.persist_latency_s == 3 * 3600.0
    assert estimate.checkpoint_cost_s == 5.0
    persist = {"persist_s": 3 * 3600.0, "interval_s": estimate.current_interval_s}
    assert Note(NoteCode.PERSIST_EXCEEDS_INTERVAL, persist) in estimate.notes


def test_per_class_mtbf_shares_the_exposure() -> None:
    """Each class's M is the exposure over that class's count."""
    trace = simulate_trace(np.random.default_rng(2), mtbf_s=DAY_S, horizon_s=10 * DAY_S)
    estimate = estimate_job("j", trace.observations, now_s=0.0)
    assert estimate.mtbf_by_class_s == {
        "nccl_error": pytest.approx(estimate.exposure_s / estimate.n_failures)
    }
    assert estimate.mtbf_by_class_ci_s["nccl_error"] == estimate.mtbf_ci_s


def test_a_checkpoint_cost_near_the_mtbf_gets_a_note_and_a_sane_waste() -> None:
    """Saves of 20 min on a job failing about every 30 min (C/M ≈ 0.7): the estimate notes that
    checkpointing is nearly pointless, and both waste fractions stay below 1."""
    trace = simulate_trace(
        np.random.default_rng(5),
        mtbf_s=1800.0,
        horizon_s=3 * DAY_S,
        step_time_s=1.0,
        save_steps=600,
        cost_s=1200.0,
    )
    estimate = estimate_job("slow-storage", trace.observations, now_s=0.0)
    assert estimate.mtbf_s is not None and estimate.checkpoint_cost_s == 1200.0
    assert estimate.checkpoint_cost_s / estimate.mtbf_s > 0.5
    [high] = [n for n in estimate.notes if n.code is NoteCode.HIGH_COST]
    assert high.values == {
        "cost_ratio": pytest.approx(1200.0 / estimate.mtbf_s),
        "waste_fraction": estimate.waste_fraction_recommended,
    }
    assert estimate.waste_fraction_current is not None
    assert estimate.waste_fraction_recommended is not None
    assert 0.5 < estimate.waste_fraction_recommended < 1.0
    assert estimate.waste_fraction_current < 1.0
    healthy = estimate_job("llama", ten_days_of_llama().observations, now_s=0.0)
    assert NoteCode.HIGH_COST not in codes(healthy)


def test_real_hf_runs_whose_failure_line_is_lost_still_count_one_interruption() -> None:
    """The captured HF crash and resume runs give one interruption whether or not the crash's
    traceback was seen: cuda_illegal_memory_access with it, unknown without it (at the crash
    run's last line, 22:11:44.640), never "no failure"."""
    seen = estimate_job("hf", real_hf_observations(), now_s=0.0)
    assert seen.n_failures == 1
    assert seen.failure_classes == {"cuda_illegal_memory_access": 1}
    lost = estimate_job("hf", real_hf_observations(drop_failures=True), now_s=0.0)
    assert lost.n_failures == 1
    assert lost.failure_classes == {"unknown": 1}
    assert lost.exposure_s == pytest.approx(seen.exposure_s, abs=1.0)
    assert Note(NoteCode.UNSEEN_INTERRUPTIONS, {"n_runs": 1}) in lost.notes
    assert NoteCode.NO_FAILURE not in codes(lost)


@pytest.mark.parametrize(("failure_step", "noted"), [(103, False), (150, True)])
def test_only_a_material_redating_of_a_failure_is_noted(failure_step: int, noted: bool) -> None:
    """A failure line dated by an earlier line is moved to where its step says the run had got;
    the note says so only when the move exceeds a minute (bar-clock rounding is not news)."""
    obs = [Observation("run_start", 0.0)]
    obs += [Observation("step", 10.0 * s, step=s, duration_s=10.0) for s in range(1, 101)]
    obs += [Observation("failure", 1000.0, step=failure_step, failure_class="nccl_error")]
    obs += [Observation("run_start", 5000.0), Observation("step", 5010.0, step=101)]
    est = estimate_job("j", obs, now_s=6000.0)
    assert est.n_failures == 1
    assert (NoteCode.FAILURES_REDATED in codes(est)) is noted


@pytest.mark.parametrize("frozen_bar_s", [None, 12 * 3600.0])
def test_a_cost_from_log_lines_is_a_lower_bound_and_the_advice_a_range(
    frozen_bar_s: float | None,
) -> None:
    """Ten days of real HF lines, saves of 120 s of which the log shows 48 s (no end of the
    optimizer-state write), no timing file: C is 48 s and flagged a lower bound; with a bar that
    keeps time the first step after each save bounds it from above, so the plausible C, the
    recommended range and the excess GPU-hours hold the truth (the old interval band,
    Daly at the corners of the CIs of M and of the 48 s, did not); with a frozen bar the range
    stays open above."""
    job = simulate(
        mtbf_s=6 * 3600.0, cost_s=120.0, interval_steps=200, duration_s=10 * DAY_S, seed=1,
        frozen_bar_s=frozen_bar_s,
    )  # fmt: skip
    lines = "".join(text for _, text in job.log).split("\n")
    est = estimate_job("hf", parsed_observations(lines), now_s=0.0, facts=JobFacts(gpus=64))
    assert est.checkpoint_cost_s == pytest.approx(48.0)
    assert est.checkpoint_cost_is_lower_bound
    assert est.checkpoint_cost_range_s is not None and est.recommended_interval_range_s is not None
    truth_s = daly_interval_s(job.exposure_s / job.n_interruptions, 120.0)
    low_s, high_s = est.recommended_interval_range_s
    assert low_s < truth_s
    assert est.step_time_s is not None and est.recommended_interval_steps_range is not None
    low_steps, high_steps = est.recommended_interval_steps_range
    assert low_steps == interval_steps(low_s, est.step_time_s)
    note = next(n for n in est.notes if n.code is NoteCode.COST_LOWER_BOUND)
    assert note.values["cost_s"] == pytest.approx(48.0)
    if frozen_bar_s is not None:
        assert est.checkpoint_cost_range_s == (48.0, None)
        assert high_s is None and est.excess_gpu_hours_per_day_range is None
        assert high_steps is None and "upper_s" not in note.values
        return
    assert est.checkpoint_cost_range_s[1] == pytest.approx(121.0, abs=2.0)
    assert note.values["upper_s"] == est.checkpoint_cost_range_s[1]
    assert high_s is not None and truth_s < high_s
    assert high_steps == interval_steps(high_s, est.step_time_s)
    assert est.recommended_interval_ci_s is not None
    assert est.recommended_interval_ci_s[1] < truth_s  # what the old band said
    assert est.excess_gpu_hours_per_day_range is not None
    low_h, high_h = est.excess_gpu_hours_per_day_range
    assert low_h <= est.excess_gpu_hours_per_day <= high_h  # type: ignore[operator]
    assert high_h > 2 * low_h


def test_each_interruption_has_an_id_and_the_failure_lines_merged_into_it() -> None:
    """The HF-like crash's traceback, its exception and srun's line are one interruption,
    numbered 1, listing the three observations (their rows in the input) it merged."""
    observations = hf_like_crash()
    est = estimate_job("hf", observations, now_s=0.0)
    [interruption] = est.interruptions
    failures = [i for i, o in enumerate(observations) if o.kind == "failure"]
    assert (interruption.id, interruption.rows) == (1, tuple(failures))
    assert interruption.failure_class == "cuda_illegal_memory_access"


def test_a_killed_run_is_numbered_with_no_line_of_its_own() -> None:
    """A run that stopped without a word is an interruption whose only row is -1 (inferred)."""
    est = estimate_job("hf", real_hf_observations(drop_failures=True), now_s=0.0)
    assert [(i.id, i.rows, i.failure_class) for i in est.interruptions] == [(1, (-1,), "unknown")]


def test_a_week_with_a_frozen_bar_clock_counts_every_interruption_once() -> None:
    """A week of real HF lines whose bar shows 12:00:00 on every redraw: each traceback is
    dated by the file's stamps and the steps its run reached, never 12 h after its run's start
    (after the next run's start), so no run is taken for one that "stopped with no failure
    line" and each interruption counts once (main counted 52 for 47, 4 of them such runs)."""
    job = simulate(
        mtbf_s=4 * 3600.0, cost_s=1200.0, interval_steps=1200, duration_s=7 * DAY_S, seed=5,
        frozen_bar_s=12 * 3600.0,
    )  # fmt: skip
    lines = "".join(text for _, text in job.log).split("\n")
    est = estimate_job("hf", parsed_observations(lines), now_s=0.0)
    assert est.n_failures == job.n_interruptions
    assert NoteCode.UNSEEN_INTERRUPTIONS not in codes(est)


def test_a_failure_time_clamped_to_the_next_line_is_counted_in_a_note() -> None:
    """A traceback reporting step 2000 of a run seen at step 800 would be moved, at 2 s a step,
    to 1040 + 1500·2 s, past the next run's start (2500 s): it is clamped there, and a note
    counts it rather than letting the exposure grow silently."""
    observations = [
        dataclasses.replace(o, step=2000) if o.kind == "failure" and o.step == 800 else o
        for o in hf_like_crash()
    ]
    est = estimate_job("hf", observations, now_s=0.0)
    assert est.exposure_s == pytest.approx(2500.0)
    assert Note(NoteCode.FAILURES_CLAMPED, {"n_failures": 1}) in est.notes
    plain = estimate_job("hf", hf_like_crash(), now_s=0.0)
    assert NoteCode.FAILURES_CLAMPED not in codes(plain)


def _saves(*ends_s: float) -> list[Observation]:
    """Saves of 10 s ending at ``ends_s`` (seconds after T0), at step = end (1 s a step)."""
    return [obs("checkpoint_end", t, step=int(t), duration_s=10.0) for t in ends_s]


@pytest.mark.parametrize(
    ("after", "interval_s", "steps"),
    [
        (_saves(360, 420), 50.0, 60),  # a gap of 60 s since the change: T = 60 - C
        (_saves(360), 45.0, 50),  # no gap since: the declared interval (0.9 s a step)
        (  # a restart after the change: the callbacks start from the launch interval again
            [
                *_saves(360, 420, 480),
                obs("failure", 500, failure_class="segfault"),
                obs("restart", 600),
                *_saves(700, 800),
            ],
            90.0,
            100,
        ),
    ],
)
def test_current_interval_counts_only_saves_since_the_last_interval_change(
    after: list[Observation], interval_s: float, steps: int
) -> None:
    """Saves every 100 s (C = 10 s, so T = 90 s), then an interval_change to 45 s at 350 s: the
    current interval is measured from the saves after it, is the declared 45 s until two saves
    measure it, and after a restart only the new run's saves count."""
    before = [obs("run_start", 0), *_saves(100, 200, 300)]
    change = obs("interval_change", 350, step=350, duration_s=45.0)
    est = estimate_job("j", [*before, change, *after], now_s=T0 + 1000)
    assert est.current_interval_s == pytest.approx(interval_s)
    assert est.current_interval_steps == steps


def test_the_current_interval_of_a_job_no_run_of_which_saves_twice() -> None:
    """Failures every ~15 min against a save every 600 steps of 2 s (20 min): no run of the six
    saves lives to a second one, yet the job saves every 600 steps (its save steps 600, 1200, …
    across runs), so the current interval is 600 × 2 s = 20 min, said in a note, and the job
    is judged (it was "no run with two saves" for good: the jobs that most need advice)."""
    trace = simulate_trace(
        np.random.default_rng(5),
        mtbf_s=900.0,
        horizon_s=6 * 3600.0,
        step_time_s=2.0,
        save_steps=600,
        log_steps=50,
        cost_s=60.0,
        downtime_s=600.0,
    )
    runs = np.cumsum([o.kind in ("run_start", "restart") for o in trace.observations])
    saves = [r for r, o in zip(runs, trace.observations, strict=True) if o.kind == "checkpoint_end"]
    assert len(saves) == len(set(saves)) == 6  # six saves, each in its own run
    est = estimate_job("j", trace.observations, now_s=trace.observations[-1].time_s + 10)
    assert (est.current_interval_s, est.current_interval_steps) == (1200.0, 600)
    assert est.status is not Status.INSUFFICIENT_DATA
    [note] = [n for n in est.notes if n.code is NoteCode.CURRENT_INTERVAL_FROM_STEPS]
    assert note.values == {"interval_steps": 600, "step_s": 2.0, "n_untimed_files": 0}
    cut = [o for o in trace.observations if o.kind != "checkpoint_end" or o.step != 1200]
    cut = [o for o in cut if o.kind != "checkpoint_start" or o.step != 1200]
    est = estimate_job("j", cut, now_s=cut[-1].time_s + 10)  # saves 600, 1800, 2400, …
    assert est.current_interval_s == 1200.0  # the gaps 1200, 600, 600, 600: half are 600
