"""Estimators of C, M, R, the current interval and the step time."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from ckpt_advisor.rules.bounds import checkpoint_upper_bounds_s
from ckpt_advisor.rules.cost import (
    checkpoint_durations_s,
    estimate_checkpoint_cost,
    log_save_durations_s,
    persist_latency_s,
)
from ckpt_advisor.rules.interruptions import cluster_interruptions
from ckpt_advisor.rules.job import estimate_job
from ckpt_advisor.rules.model import NoteCode, Observation
from ckpt_advisor.rules.mtbf import (
    MtbfEstimate,
    estimate_mtbf,
    fit_weibull,
    mtbf_by_class,
    scale_mtbf,
    widen_mtbf_ci,
)
from ckpt_advisor.rules.progress import (
    current_interval_s,
    current_interval_steps,
    failure_times_s,
    restart_cost_s,
    save_index,
    step_time_s,
)
from ckpt_advisor.rules.runs import split_runs
from ckpt_advisor.rules.timeline import Kind, Timeline
from tests.rules.simulate import T0, hf_like_crash, obs, real_hf_observations


def prepared(observations: list[Observation]) -> tuple[Timeline, np.ndarray]:
    """The timeline and its run labels (idle gap 6 h)."""
    timeline = Timeline.of(observations)
    return timeline, split_runs(timeline, cluster_interruptions(timeline), idle_gap_s=21600)


def test_cost_is_the_median_of_the_most_recent_window() -> None:
    """Only the last `window` durations count: old slow saves fall out of C."""
    durations = [1000.0] * 30 + [10.0, 20.0, 30.0, 40.0, 50.0]
    cost = estimate_checkpoint_cost(durations, [], window=5)
    assert cost is not None
    assert (cost.cost_s, cost.n, cost.source) == (30.0, 5, "timing_file")


def test_timing_file_durations_win_over_log_durations() -> None:
    """Log durations are ignored as soon as one timing-file duration exists."""
    cost = estimate_checkpoint_cost([90.0], [10.0, 10.0, 10.0])
    assert cost is not None
    assert (cost.cost_s, cost.n, cost.source) == (90.0, 1, "timing_file")


def test_log_durations_are_used_when_there_is_no_timing_file() -> None:
    """Without timing-file durations C comes from the log, and says so."""
    cost = estimate_checkpoint_cost([], [10.0, 30.0, 20.0, 0.0, math.nan])
    assert cost is not None
    assert (cost.cost_s, cost.n, cost.source) == (20.0, 3, "log")


def test_cost_is_none_without_any_duration() -> None:
    """No durations at all (or only unusable ones) give None, not 0."""
    assert estimate_checkpoint_cost([], []) is None
    assert estimate_checkpoint_cost([0.0], [-1.0]) is None


def test_cost_interval_is_the_order_statistic_interval_of_the_median() -> None:
    """For n = 20 at 90% the interval is [x(6), x(15)]: P(Bin(20, 1/2) <= 5) = 0.0207 <= 0.05."""
    shuffled = (7, 14, 2, 19, 11, 5, 16, 9, 1, 20, 13, 4, 17, 8, 12, 3, 18, 10, 6, 15)
    cost = estimate_checkpoint_cost([float(v) for v in shuffled], [], window=20)
    assert cost is not None
    assert cost.cost_s == 10.5
    assert cost.ci_s == (6.0, 15.0)


def test_cost_interval_is_none_when_too_few_saves_reach_the_confidence() -> None:
    """With 4 saves even [min, max] covers the median only 87.5% of the time: no 90% interval."""
    few = estimate_checkpoint_cost([1.0, 2.0, 3.0, 4.0], [])
    five = estimate_checkpoint_cost([1.0, 2.0, 3.0, 4.0, 5.0], [])
    assert few is not None and few.ci_s is None
    assert five is not None and five.ci_s == (1.0, 5.0)


def test_cost_rejects_bad_settings() -> None:
    """window < 1 and confidence outside (0, 1) are ValueErrors naming the setting."""
    with pytest.raises(ValueError, match="window"):
        estimate_checkpoint_cost([1.0], [], window=0)
    with pytest.raises(ValueError, match="confidence"):
        estimate_checkpoint_cost([1.0], [], confidence=1.0)


def test_mtbf_with_one_failure_has_the_closed_form_chi_square_bounds() -> None:
    """n = 1: M = E, bounds 2E/χ²(0.95; 4) = E/4.7439 and 2E/χ²(0.05; 2) = E/(−ln 0.95)."""
    mtbf = estimate_mtbf(1000.0, 1)
    assert mtbf.mtbf_s == 1000.0
    assert mtbf.lower_s == pytest.approx(2000.0 / 9.487729, rel=1e-6)
    assert mtbf.upper_s == pytest.approx(1000.0 / -math.log(0.95), rel=1e-9)
    assert mtbf.ci_s == (mtbf.lower_s, mtbf.upper_s)


def test_mtbf_with_ten_failures_matches_chi_square_tables() -> None:
    """n = 10 over 100 days: M = 10 d, 90% bounds 200/33.924 d and 200/10.851 d."""
    day_s = 86400.0
    mtbf = estimate_mtbf(100 * day_s, 10)
    assert mtbf.mtbf_s == pytest.approx(10 * day_s)
    assert mtbf.lower_s == pytest.approx(200 * day_s / 33.924438, rel=1e-6)
    assert mtbf.upper_s == pytest.approx(200 * day_s / 10.850811, rel=1e-6)


def test_mtbf_without_failures_has_only_a_lower_bound() -> None:
    """n = 0: M unknown, lower bound 2E/χ²(0.95; 2) = E/(−ln 0.05), no upper bound."""
    mtbf = estimate_mtbf(1000.0, 0)
    assert mtbf.mtbf_s is None and mtbf.upper_s is None and mtbf.ci_s is None
    assert mtbf.lower_s == pytest.approx(1000.0 / -math.log(0.05), rel=1e-9)


def test_mtbf_without_exposure_is_entirely_unknown() -> None:
    """No running time gives None everywhere (never 0 or infinity)."""
    mtbf = estimate_mtbf(0.0, 3)
    assert (mtbf.mtbf_s, mtbf.lower_s, mtbf.upper_s) == (None, None, None)


def test_mtbf_rejects_bad_arguments() -> None:
    """Negative exposure, negative counts and bad confidences are ValueErrors naming them."""
    with pytest.raises(ValueError, match="exposure_s"):
        estimate_mtbf(-1.0, 1)
    with pytest.raises(ValueError, match="n_failures"):
        estimate_mtbf(1.0, -1)
    with pytest.raises(ValueError, match="confidence"):
        estimate_mtbf(1.0, 1, confidence=0.0)


def test_log_durations_come_from_the_parser_or_from_start_end_pairs() -> None:
    """A log end without duration takes the time since its start; timing durations stay apart."""
    timeline, run_id = prepared(
        [
            obs("checkpoint_start", 0, step=10),
            obs("checkpoint_end", 40, step=10),
            obs("checkpoint_end", 100, step=20, duration_s=25.0),
            obs("checkpoint_end", 101, step=20, duration_s=31.0, from_timing_file=True),
            obs("checkpoint_end", 200, step=30),  # no start before it: no duration
        ]
    )
    timed, logged, _ = checkpoint_durations_s(timeline, run_id)
    assert timed.tolist() == [31.0]
    assert logged.tolist() == [40.0, 25.0]


def test_log_ends_of_one_run_at_one_step_are_one_save_costed_by_their_sum() -> None:
    """NeMo 2 writes a top-k and a -last checkpoint at a step, one after the other (the Evo2
    paste: 1.718 s and 1.136 s at step 99): training waits for both, so that save costs their
    sum, and so does the one at step 199; the same step again in the run after a crash is
    another save. An upper bound of such a save is its first end's (it runs to the first step
    after both), kept when it is at least the sum."""
    timeline, run_id = prepared(
        [
            obs("checkpoint_end", 100, step=99, duration_s=1.718),
            obs("checkpoint_end", 102, step=99, duration_s=1.136),
            obs("checkpoint_end", 200, step=199, duration_s=1.7),
            obs("checkpoint_end", 202, step=199, duration_s=1.1),
            obs("failure", 250, step=220),
            obs("run_start", 300),
            obs("checkpoint_end", 400, step=199, duration_s=1.5),
        ]
    )
    _, logged, _ = checkpoint_durations_s(timeline, run_id)
    assert logged.tolist() == pytest.approx([2.854, 2.8, 1.5])
    uppers = np.array([4.0, 1.2, 2.0, 1.0, 9.0])  # one per end: a save's first end bounds it
    assert checkpoint_durations_s(timeline, run_id, uppers)[2].tolist() == pytest.approx(
        [4.0, math.nan, 9.0], nan_ok=True
    )


def test_saves_prefer_ends_and_fall_back_to_starts_per_run() -> None:
    """A run with ends uses them; a run with only starts (HF Trainer) uses its starts."""
    timeline, run_id = prepared(
        [
            obs("run_start", 0),
            obs("checkpoint_start", 100, step=100),
            obs("checkpoint_end", 130, step=100),
            obs("checkpoint_start", 700, step=700),
            obs("checkpoint_end", 730, step=700),
            obs("failure", 800, failure_class="oom"),
            obs("restart", 900),
            obs("checkpoint_start", 1000, step=800),
            obs("checkpoint_start", 1400, step=1200),
            obs("checkpoint_start", 1400.5, step=1200),  # another rank's line
        ]
    )
    saves = save_index(timeline, run_id)
    assert (timeline.time_s[saves] - T0).tolist() == [130, 730, 1000, 1400]
    assert current_interval_s(timeline, run_id, saves, window=20) == 500.0
    assert current_interval_steps(timeline, run_id, saves) == 500


def test_current_interval_is_none_without_two_saves_in_one_run() -> None:
    """One save per run gives no interval (the gap across a failure is not an interval)."""
    timeline, run_id = prepared(
        [
            obs("checkpoint_end", 0, step=1),
            obs("failure", 10, failure_class="oom"),
            obs("restart", 20),
            obs("checkpoint_end", 500, step=2),
        ]
    )
    saves = save_index(timeline, run_id)
    assert current_interval_s(timeline, run_id, saves, window=20) is None
    assert current_interval_steps(timeline, run_id, saves) is None


def test_step_time_from_step_lines_leaves_out_the_save_stalls() -> None:
    """2 s per step, steps logged every 100, a 60 s save inside every fifth gap: 2.0 s/step."""
    lines = []
    t = 0.0
    for k in range(1, 51):
        t += 200.0
        lines.append(obs("step", t, step=100 * k))
        if k % 5 == 0:
            lines.append(obs("checkpoint_end", t + 60.0, step=100 * k, duration_s=60.0))
            t += 60.0
    timeline, run_id = prepared(lines)
    saves = save_index(timeline, run_id)
    assert step_time_s(timeline, run_id, saves, cost_s=60.0, since_s=-np.inf) == 2.0


def test_step_time_from_saves_needs_c() -> None:
    """Without step lines: (Δt − C)/Δstep over saves, and None when C is unknown."""
    timeline, run_id = prepared(
        [obs("checkpoint_end", 1000.0 * k + 40.0 * k, step=500 * k) for k in range(1, 6)]
    )
    saves = save_index(timeline, run_id)
    assert step_time_s(timeline, run_id, saves, cost_s=40.0, since_s=-np.inf) == 2.0
    assert step_time_s(timeline, run_id, saves, cost_s=None, since_s=-np.inf) is None


def test_a_failure_after_a_clean_run_end_interrupts_nothing() -> None:
    """torchtitan's paste: the last-step save, 'Training completed', then SIGABRT at teardown
    and the launcher's ChildFailedError: one interruption, after_end, so M counts none and a
    note says why. A crash after a run_end that a new run (a start, then a step) follows is an
    interruption as any."""
    ended = [
        obs("run_start", 0),
        obs("step", 10, step=640),
        obs("checkpoint_start", 17, step=644),
        obs("checkpoint_end", 22, step=644, duration_s=5.53),
        obs("run_end", 25),
        obs("failure", 30, failure_class="abort"),
        obs("failure", 37, failure_class="child_failed"),
    ]
    [crash] = cluster_interruptions(Timeline.of(ended))
    assert crash.after_end and not crash.planned and crash.n_observations == 2
    est = estimate_job("tt", ended, now_s=T0 + 40)
    assert est.n_failures == 0
    assert [n.code for n in est.notes if n.code is NoteCode.AFTER_RUN_END] == [
        NoteCode.AFTER_RUN_END
    ]
    again = [*ended[:5], obs("run_start", 100), obs("step", 110, step=650)]
    again.append(obs("failure", 120, failure_class="abort"))
    [crash] = cluster_interruptions(Timeline.of(again))
    assert not crash.after_end
    assert estimate_job("tt", again, now_s=T0 + 130).n_failures == 1


def test_restart_cost_runs_from_the_failure_to_progress_again() -> None:
    """R = first failure of the burst to when progress began again; median over interruptions.
    Without a step time a restart ends at the recovering run's first line (400 s, 2000 s: R
    300 and 1000 s); at 100 s per step the step-2 line at 700 s began at 700 − 2·100 = 500 s
    (nothing saved: steps count from 0), so R 400 and 1000 s."""
    timeline, run_id = prepared(
        [
            obs("step", 0, step=1),
            obs("failure", 100, failure_class="oom"),
            obs("failure", 110, failure_class="python_exception"),
            obs("restart", 400),
            obs("step", 700, step=2),
            obs("failure", 1000, failure_class="oom"),
            obs("step", 2000, step=3),
            obs("failure", 3000, failure_class="oom"),  # never recovered: skipped
        ]
    )
    interruptions = cluster_interruptions(timeline)
    assert len(interruptions) == 3
    saves = save_index(timeline, run_id)
    no_tau = restart_cost_s(timeline, interruptions, run_id, saves, step_time_s=None)
    assert no_tau == pytest.approx((300 + 1000) / 2)
    tau = restart_cost_s(timeline, interruptions, run_id, saves, step_time_s=100.0)
    assert tau == pytest.approx((400 + 1000) / 2)
    assert restart_cost_s(timeline, [], run_id, saves, step_time_s=None) is None


def test_step_time_prefers_the_frameworks_own_seconds_per_step() -> None:
    """tqdm's s/it on step observations wins over anything derived from time stamps."""
    timeline, run_id = prepared(
        [obs("step", 0, step=k * 10, duration_s=2.5) for k in range(5)]  # carried-forward times
        + [obs("checkpoint_end", 1000.0 * k, step=500 * k, duration_s=40.0) for k in (1, 2)]
    )
    saves = save_index(timeline, run_id)
    assert step_time_s(timeline, run_id, saves, cost_s=40.0, since_s=-np.inf) == 2.5


def test_failures_stamped_too_early_move_to_where_their_steps_got() -> None:
    """The burst moves by the step-extrapolated 600 s, all of it, so it stays one interruption."""
    timeline = Timeline.of(hf_like_crash())
    interruptions = cluster_interruptions(timeline)
    moved_s = failure_times_s(timeline, interruptions, step_time_s=2.0)
    assert (moved_s - T0).tolist() == [1640.0, 1640.0, 1641.0]
    moved = timeline.with_failure_times(moved_s)
    [interruption] = cluster_interruptions(moved)
    assert (interruption.start_s - T0, interruption.end_s - T0) == (1640.0, 1641.0)
    assert interruption.failure_class == "cuda_illegal_memory_access"


def test_moved_failures_never_pass_the_next_runs_first_line() -> None:
    """With a step time far too slow, the failure stops at the next run's first line."""
    timeline = Timeline.of(hf_like_crash())
    moved_s = failure_times_s(timeline, cluster_interruptions(timeline), step_time_s=100.0)
    assert (moved_s - T0).tolist() == [2500.0, 2500.0, 2500.0]


def test_failures_without_a_step_keep_their_time() -> None:
    """An interruption whose failures report no step is not moved."""
    timeline = Timeline.of(
        [obs("step", 0, step=1), obs("failure", 10, failure_class="oom"), obs("restart", 99)]
    )
    moved_s = failure_times_s(timeline, cluster_interruptions(timeline), step_time_s=5.0)
    assert (moved_s - T0).tolist() == [10.0]


def noisy_saves(rng: np.random.Generator, median_s: float, n: int) -> list[float]:
    """``n`` save durations, lognormal around ``median_s`` with a 10% spread."""
    return list(median_s * np.exp(0.1 * rng.standard_normal(n)))


def test_slower_storage_is_noticed_within_three_saves() -> None:
    """After 17 saves near 30 s, three near 60 s move C to about 60 s at once, and the earlier
    level is reported; two slow saves are not yet enough."""
    rng = np.random.default_rng(5)
    before, after = noisy_saves(rng, 30.0, 17), noisy_saves(rng, 60.0, 3)
    two = estimate_checkpoint_cost(before + after[:2], [])
    assert two is not None and two.previous_cost_s is None
    assert two.cost_s == pytest.approx(30.0, rel=0.1)
    three = estimate_checkpoint_cost(before + after, [])
    assert three is not None
    assert three.n == 3
    assert three.cost_s == pytest.approx(60.0, rel=0.1)
    assert three.previous_cost_s == pytest.approx(30.0, rel=0.1)


def test_the_cut_reaches_back_to_the_first_save_at_the_new_level() -> None:
    """Ten saves at the new level after ten at the old one: C is the median of the ten."""
    cost = estimate_checkpoint_cost([30.0] * 10 + [60.0 + i for i in range(10)], [])
    assert cost is not None
    assert cost.n == 10
    assert cost.cost_s == 64.5


def test_one_stalled_save_or_a_small_drift_does_not_move_c() -> None:
    """One 10x save among twenty, or a last three 15% slower, leave C the window's median."""
    rng = np.random.default_rng(6)
    stalled = estimate_checkpoint_cost([*noisy_saves(rng, 30.0, 19), 300.0], [])
    assert stalled is not None and stalled.previous_cost_s is None
    assert stalled.cost_s == pytest.approx(30.0, rel=0.1)
    drift = estimate_checkpoint_cost([30.0] * 17 + [34.5] * 3, [])
    assert drift is not None and drift.previous_cost_s is None and drift.n == 20


def test_persist_latency_is_the_median_of_the_recent_asynchronous_saves() -> None:
    """Timing records with a persist time give its median over the window; none give None."""
    records = [
        obs("checkpoint_end", 100.0 * i, duration_s=2.0, persist_s=p, from_timing_file=True)
        for i, p in enumerate((500.0, 40.0, 50.0, 60.0))
    ]
    assert persist_latency_s(*prepared(records), window=3) == 50.0
    assert persist_latency_s(*prepared([obs("step", 1.0)]), window=3) is None


def test_mtbf_by_class_shares_the_exposure_and_the_rates_add_up() -> None:
    """3 NCCL and 1 Xid failures in 400 h: M_nccl = 133 h, M_xid = 400 h, rates sum to 4/400."""
    by_class = mtbf_by_class(400 * 3600.0, {"nccl_error": 3, "xid_79": 1})
    nccl, xid = by_class["nccl_error"].mtbf_s, by_class["xid_79"].mtbf_s
    assert nccl == pytest.approx(400 * 3600.0 / 3)
    assert xid == pytest.approx(400 * 3600.0)
    assert nccl is not None and xid is not None
    assert 1 / nccl + 1 / xid == pytest.approx(estimate_mtbf(400 * 3600.0, 4).mtbf_s ** -1)  # type: ignore[operator]


def test_per_node_mtbf_rescales_to_another_job_size() -> None:
    """A 16-node job with M = 10 h is a 160 h per-node MTBF and a 5 h MTBF on 32 nodes."""
    job = estimate_mtbf(100 * 3600.0, 10)
    per_node = scale_mtbf(job, 16)
    assert per_node.mtbf_s == pytest.approx(160 * 3600.0)
    assert per_node.exposure_s == pytest.approx(1600 * 3600.0)
    resized = scale_mtbf(per_node, 1 / 32)
    assert resized.mtbf_s == pytest.approx(5 * 3600.0)
    assert job.lower_s is not None and resized.lower_s == pytest.approx(job.lower_s / 2)


@pytest.mark.parametrize(("shape", "seed"), [(0.7, 1), (1.0, 2), (1.6, 3)])
def test_weibull_fit_recovers_the_shape_and_the_mean(shape: float, seed: int) -> None:
    """From 400 Weibull lives the fit's shape is within 10% and its mean within 10% of the truth,
    and its interval covers the true shape."""
    rng = np.random.default_rng(seed)
    lives = 3600.0 * rng.weibull(shape, 400)
    fit = fit_weibull(lives, 1800.0)
    assert fit is not None
    assert fit.shape == pytest.approx(shape, rel=0.1)
    assert fit.shape_ci[0] <= shape <= fit.shape_ci[1]
    assert fit.mean_s == pytest.approx(3600.0 * math.gamma(1 + 1 / shape), rel=0.1)
    assert fit.not_exponential is (shape != 1.0)


def test_weibull_fit_needs_enough_failures() -> None:
    """Fewer failures than min_failures give no fit."""
    assert fit_weibull([100.0] * 9, 10.0, min_failures=10) is None
    assert fit_weibull([100.0, 200.0, 0.0], min_failures=2) is not None


def test_exponential_lives_are_rarely_called_weibull() -> None:
    """Over 300 seeds of 30 exponential lives, the 1% test calls at most 3% of them Weibull."""
    flagged = 0
    for seed in range(300):
        fit = fit_weibull(np.random.default_rng(seed).exponential(1.0, 30), 0.5)
        assert fit is not None
        flagged += fit.not_exponential
    assert flagged / 300 <= 0.03


def test_widened_interval_covers_the_mean_of_weibull_lives_at_its_nominal_rate() -> None:
    """For 60 lives of a Weibull of shape 0.7, the chi-square 90% interval covers the mean less
    than 82% of the time; stretched by the fitted CV it covers 85-95% of the time (400 seeds)."""
    truth = math.gamma(1 + 1 / 0.7)
    plain = widened = 0
    for seed in range(400):
        lives = np.random.default_rng(seed).weibull(0.7, 60)
        mtbf = estimate_mtbf(float(lives.sum()), lives.size)
        fit = fit_weibull(lives)
        assert fit is not None and mtbf.ci_s is not None
        wide = widen_mtbf_ci(mtbf, fit.cv).ci_s
        assert wide is not None
        plain += mtbf.ci_s[0] <= truth <= mtbf.ci_s[1]
        widened += wide[0] <= truth <= wide[1]
    assert plain / 400 < 0.82
    assert 0.85 <= widened / 400 <= 0.95


def test_mtbf_estimates_converge_as_data_grows() -> None:
    """The median relative error of M over 100 seeds shrinks like 1/sqrt(n): below 15% with 30
    failures' worth of running time and below 5% with 1000."""
    errors = {}
    for expected in (30, 1000):
        errs = []
        for seed in range(100):
            lives = np.random.default_rng(seed).exponential(1.0, expected)
            errs.append(abs(estimate_mtbf(float(lives.sum()), expected).mtbf_s - 1.0))  # type: ignore[operator]
        errors[expected] = float(np.median(errs))
    assert errors[30] < 0.15
    assert errors[1000] < 0.05
    assert errors[1000] < errors[30] / 3


def test_widening_keeps_m_and_handles_unknowns() -> None:
    """Widening moves only the bounds, about M in log scale; an unknown M stays as it was."""
    mtbf = MtbfEstimate(100.0, 50.0, 300.0, 5, 500.0)
    wide = widen_mtbf_ci(mtbf, 2.0)
    assert wide.mtbf_s == 100.0
    assert wide.lower_s == pytest.approx(25.0)
    assert wide.upper_s == pytest.approx(900.0)
    unknown = MtbfEstimate(None, 10.0, None, 0, 10.0)
    assert widen_mtbf_ci(unknown, 2.0) == unknown


def test_step_time_skips_repeated_and_backward_steps_without_warnings() -> None:
    """A bar line and the timed record of the same step (Δstep = 0) and steps going back after
    an unseen resume (Δstep < 0) are skipped, silently: 2 s per step from the other pairs."""
    lines = [
        obs("step", 0.0, step=100),
        obs("step", 200.0, step=200),
        obs("step", 200.5, step=200),  # the record line of the same step
        obs("step", 400.5, step=300),
        obs("step", 500.0, step=150),  # resumed from an earlier save, in the same log run
        obs("step", 700.0, step=250),
    ]
    timeline, run_id = prepared(lines)
    saves = save_index(timeline, run_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert step_time_s(timeline, run_id, saves, cost_s=None, since_s=-np.inf) == 2.0


def test_real_hf_trainer_logs_give_a_step_time_without_warnings() -> None:
    """The captured HF crash and resume logs, parsed, give tqdm's seconds per step and no
    divide-by-zero warning from their steps going back (the resume restarts at step 55)."""
    observations = real_hf_observations()
    timeline, run_id = prepared(observations)
    assert (np.diff(timeline.step[timeline.kind == Kind.STEP]) < 0).any()  # the trap is in the data
    saves = save_index(timeline, run_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        step_s = step_time_s(timeline, run_id, saves, cost_s=0.06, since_s=-np.inf)
    assert step_s is not None
    assert 0.1 < step_s < 0.2


def _saves_then_steps(step_after_s: float) -> list[Observation]:
    """6 s steps; saves at steps 100, 200, 300 whose log shows 48 s of each; the first step
    after each save (s + 1) is shown ``step_after_s`` after the save's start."""
    observations = [obs("run_start", 0)]
    t = 0.0
    for save_step in (100, 200, 300):
        observations += [obs("step", t + 6.0 * k, step=save_step - 100 + k, duration_s=6.0)
                         for k in range(1, 100, 9)]  # fmt: skip
        t += 600.0
        observations += [
            obs("checkpoint_start", t, step=save_step),
            obs("checkpoint_end", t + 48.0, step=save_step, duration_s=48.0),
            obs("step", t + step_after_s, step=save_step + 1, duration_s=6.0),
        ]
        t += step_after_s - 6.0
    return observations


def test_a_bar_that_keeps_time_after_a_save_bounds_a_log_cost_from_above() -> None:
    """A save logged as 48 s whose next step is shown 126 s after its start, at 6 s a step,
    blocked training at most 126 + 1 − 6 = 121 s: C from the log is a lower bound (48 s) with an
    upper bound (121 s), and its range holds the true 120 s."""
    timeline, run_id = prepared(_saves_then_steps(126.0))
    uppers = checkpoint_upper_bounds_s(timeline, run_id)
    np.testing.assert_allclose(uppers, [121.0, 121.0, 121.0])
    timed, logged, logged_upper = checkpoint_durations_s(timeline, run_id, uppers)
    cost = estimate_checkpoint_cost(timed, logged, logged_upper_s=logged_upper)
    assert cost is not None
    assert (cost.cost_s, cost.upper_s, cost.is_lower_bound) == (48.0, 121.0, True)
    assert cost.range_s == (48.0, 121.0)


def test_a_step_that_carries_the_saves_time_gives_no_upper_bound() -> None:
    """A step dated at the save's last line (a bar that does not keep time) says nothing of
    when training resumed: C from the log stays a one-sided bound, ``(48, None)``."""
    timeline, run_id = prepared(_saves_then_steps(48.0))
    uppers = checkpoint_upper_bounds_s(timeline, run_id)
    assert np.isnan(uppers).all()
    timed, logged, logged_upper = checkpoint_durations_s(timeline, run_id, uppers)
    cost = estimate_checkpoint_cost(timed, logged, logged_upper_s=logged_upper)
    assert cost is not None and cost.range_s == (48.0, None)


def _upper_bounds_one_save_at_a_time(timeline: Timeline, run_id: np.ndarray) -> np.ndarray:
    """The definition of ``checkpoint_upper_bounds_s``, one save at a time (quadratic)."""
    ends, logged = log_save_durations_s(timeline, run_id)
    ends, logged = ends[np.isfinite(logged)], logged[np.isfinite(logged)]
    uppers = np.full(ends.size, np.nan)
    stepped = np.flatnonzero(
        (timeline.kind == Kind.STEP) & np.isfinite(timeline.step) & ~timeline.from_timing_file
    )
    rates = timeline.duration_s[stepped]
    rates = rates[np.isfinite(rates) & (rates > 0.0)]
    if not rates.size or not ends.size:
        return uppers
    step_s = float(np.median(rates))
    times, steps = timeline.time_s, timeline.step
    for i, (end, logged_s) in enumerate(zip(ends.tolist(), logged.tolist(), strict=True)):
        saved = steps[end]
        after = stepped[np.searchsorted(stepped, end, "right") :]
        after = after[run_id[after] == run_id[end]]
        after = after[steps[after] > saved] if np.isfinite(saved) else after[:0]
        if after.size and times[after[0]] - times[end] >= 1.0:
            k = int(after[0])
            upper_s = times[k] + 1.0 - (times[end] - logged_s) - (steps[k] - saved) * step_s
            uppers[i] = upper_s if upper_s >= logged_s else np.nan
    return uppers


@pytest.mark.parametrize("seed", range(20))
def test_upper_bounds_of_every_save_at_once_equal_their_definition(seed: int) -> None:
    """The vectorised upper bounds equal the per-save definition on random timelines of saves,
    steps that go back, stall or jump, unknown steps and restarts (runs)."""
    rng = np.random.default_rng(seed)
    observations = []
    t, step = 0.0, 0
    for _ in range(400):
        t += float(rng.exponential(20.0))
        roll = rng.random()
        if roll < 0.25:
            observations.append(obs("checkpoint_start", t, step=step))
            t += float(rng.uniform(0.0, 90.0))
            duration = None if rng.random() < 0.3 else float(rng.uniform(1.0, 60.0))
            observations.append(obs("checkpoint_end", t, step=step, duration_s=duration))
        elif roll < 0.3:
            observations.append(obs("resume", t, step=step - int(rng.integers(0, 50))))
        else:
            step += int(rng.choice([-3, 0, 0, 1, 5, 20]))
            shown = None if rng.random() < 0.05 else step
            observations.append(obs("step", t, step=shown, duration_s=float(rng.uniform(0.5, 2))))
    timeline, run_id = prepared(observations)
    np.testing.assert_array_equal(
        checkpoint_upper_bounds_s(timeline, run_id),
        _upper_bounds_one_save_at_a_time(timeline, run_id),
    )


def test_a_timing_file_cost_is_exact_and_its_range_is_its_interval() -> None:
    """C from a timing file is no bound: its range is its confidence interval."""
    cost = estimate_checkpoint_cost([float(x) for x in range(100, 120)], [48.0] * 20)
    assert cost is not None and not cost.is_lower_bound
    assert cost.ci_s is not None and cost.range_s == cost.ci_s
