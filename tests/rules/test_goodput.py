"""Goodput spans (rules/goodput_spans.py), their sums (rules/goodput.py) and the simulated
goodput of an interval (rules/simulate.py)."""

from __future__ import annotations

import numpy as np
import pytest

from ckpt_advisor.rules.goodput import BUCKETS, Bucket, GoodputSpans
from ckpt_advisor.rules.goodput_spans import _Saves
from ckpt_advisor.rules.interval import exponential_waste_fraction
from ckpt_advisor.rules.job import estimate_job
from ckpt_advisor.rules.model import Observation
from ckpt_advisor.rules.policy import EstimationPolicy
from ckpt_advisor.rules.simulate import simulated_goodput
from tests.rules.simulate import T0, hf_like_crash, obs, real_hf_observations, simulate_trace


def _spans(observations: list[Observation], **policy: float) -> GoodputSpans:
    est = estimate_job("j", observations, now_s=0.0, policy=EstimationPolicy(**policy))
    assert est.goodput_spans is not None
    return est.goodput_spans


def _table(observations: list[Observation]) -> list[tuple[float, float, str, int]]:
    spans = _spans(observations)
    return [
        (round(a - T0, 3), round(b - T0, 3), BUCKETS[c], int(i))
        for a, b, c, i in zip(
            spans.start_s.tolist(),
            spans.end_s.tolist(),
            spans.bucket.tolist(),
            spans.interruption.tolist(),
            strict=True,
        )
    ]


def test_a_crash_stamped_early_splits_into_the_five_buckets() -> None:
    """HF-like backfill: progress to the save at 1,000 s, the save's 40 s, the 600 s of steps
    until the failure (re-dated from 1,040 to 1,640 s by its step 800) lost, and restart until
    the next run's first step (dated back by 2 s a step, but never before its start at
    2,500 s); the save is bounded by its run's next line."""
    assert _table(hf_like_crash()) == [
        (0.0, 1000.0, "productive", 0),
        (1000.0, 1040.0, "checkpoint", 0),
        (1040.0, 1640.0, "lost", 1),
        (1640.0, 2500.0, "restart", 1),
    ]
    g = _spans(hf_like_crash()).breakdown()
    assert g.goodput == pytest.approx(1000.0 / 2500.0)
    assert g.checkpoint_is_lower_bound
    # the step after the save carries the save's stamp: no bound from it; the run's next line,
    # the failure re-dated to 1,640 s, closes the save (the lost 600 s may have been saving)
    assert g.checkpoint_upper_s == pytest.approx(640.0)
    assert g.range_s(Bucket.LOST) == (pytest.approx(0.0), pytest.approx(600.0))
    assert g.goodput_range == (pytest.approx(0.4), pytest.approx(0.4))
    assert (g.n_saves, g.n_interruptions, g.n_inferred) == (1, 1, 0)


def test_the_captured_hf_runs_are_accounted_second_by_second() -> None:
    """The real HF Trainer crash and resume logs: the 1.2 s of steps after checkpoint-50 are
    lost (1.38 s: the crash re-dated by the crash run's 0.154 s a step, the resumed run's bar
    giving no rate), restart runs from the crash to the resumed run's step 55 dated back by
    that step time (the checkpoint load included), and four saves are checkpoint time."""
    g = _spans(real_hf_observations()).breakdown()
    assert g[Bucket.LOST] == pytest.approx(1.38, abs=0.01)
    assert g[Bucket.RESTART] == pytest.approx(5.84, abs=0.01)
    assert g[Bucket.CHECKPOINT] == pytest.approx(0.072 + 0.037 + 0.061 + 0.008 + 0.007, abs=1e-3)
    assert g[Bucket.IDLE] == 0.0
    assert g.n_interruptions == 1 and g.n_saves == 5


def test_a_silent_death_is_an_inferred_interruption() -> None:
    """Without its failure lines the crash is still an interruption (the run stopped and a new
    one began), taken at the dead run's last line, and flagged as inferred."""
    g = _spans(real_hf_observations(drop_failures=True)).breakdown()
    assert (g.n_interruptions, g.n_inferred) == (1, 1)
    assert g[Bucket.LOST] == pytest.approx(1.22, abs=0.01)


def test_a_run_s_start_up_after_a_clean_end_is_idle() -> None:
    """After a clean end, the silence and the next run's start-up before its first step (its
    step 100 at 2 s a step began at 5,000 s though logged at 5,200 s; the run started at
    4,900 s) are idle; nothing is lost or restarting."""
    table = _table(
        [
            obs("run_start", 0),
            obs("step", 1000, step=500, duration_s=2.0),
            obs("run_end", 1000),
            obs("run_start", 4900),
            obs("step", 5200, step=100, duration_s=2.0),
            obs("step", 6000, step=500, duration_s=2.0),
        ]
    )
    assert table == [
        (0.0, 1000.0, "productive", 0),
        (1000.0, 5000.0, "idle", 0),
        (5000.0, 6000.0, "productive", 0),
    ]


def test_spans_cover_the_history_and_days_add_up() -> None:
    """On simulated month-long traces the spans are contiguous, start at the first observation
    and end at the newest; any cut of the window into days sums to the window's buckets."""
    for seed in range(5):
        trace = simulate_trace(
            np.random.default_rng(seed), mtbf_s=8 * 3600.0, horizon_s=30 * 86400.0
        )
        spans = _spans(trace.observations, mtbf_window_s=1e9)
        times = [o.time_s for o in trace.observations]
        assert spans.first_s == min(times) and spans.last_s == max(times)
        assert (spans.start_s[1:] == spans.end_s[:-1]).all()
        assert (spans.end_s >= spans.start_s).all()
        whole = spans.breakdown()
        assert whole.wall_s == pytest.approx(max(times) - min(times))
        edges = np.linspace(whole.since_s, whole.until_s, 31)
        by_day = spans.seconds(edges)
        assert by_day.sum(axis=0) == pytest.approx(whole.seconds)
        half = spans.breakdown(since_s=edges[15])
        assert half.seconds == pytest.approx(by_day[15:].sum(axis=0))
        assert (
            whole.n_interruptions
            == half.n_interruptions
            + spans.breakdown(until_s=np.nextafter(edges[15], -np.inf)).n_interruptions
        )


def test_an_empty_timeline_has_no_wall_time() -> None:
    """No observations: no spans, a breakdown of nothing and no goodput (not 0)."""
    g = _spans([]).breakdown(since_s=T0)
    assert g.wall_s == 0.0 and g.goodput is None
    assert g.goodput_range == (None, None)
    with pytest.raises(ValueError, match="before since_s"):
        _spans([]).breakdown(since_s=2.0, until_s=1.0)


def test_simulated_goodput_follows_daly_and_is_repeatable() -> None:
    """The simulated goodput at an interval is within half a point of Daly's exponential model
    (common random numbers), lower far from the optimum, and the same for the same seed."""
    mtbf_s, cost_s, restart_s = 6 * 3600.0, 240.0, 600.0
    current, best = simulated_goodput(
        [7200.0, 3400.0], mtbf_s=mtbf_s, cost_s=cost_s, restart_s=restart_s
    )
    for interval_s, good in ((7200.0, current), (3400.0, best)):
        model = 1.0 - exponential_waste_fraction(interval_s, mtbf_s, cost_s, restart_s)
        assert good == pytest.approx(model, abs=0.005)
    assert best - current == pytest.approx(0.045, abs=0.005)
    assert simulated_goodput([7200.0], mtbf_s=mtbf_s, cost_s=cost_s, restart_s=restart_s) == [
        current
    ]


def test_simulated_goodput_bounds_its_lives() -> None:
    """An interval of a day against a 1-minute MTBF keeps almost nothing (only the unfinished
    last lives of the ~5,000 a simulated job is cut to, not millions); a zero interval is an
    error naming it."""
    [good] = simulated_goodput([86400.0], mtbf_s=60.0, cost_s=10.0, restart_s=0.0)
    assert 0.0 <= good < 0.001
    with pytest.raises(ValueError, match="interval_s"):
        simulated_goodput([0.0], mtbf_s=60.0, cost_s=10.0, restart_s=0.0)


def test_the_estimate_carries_goodput_now_and_at_the_recommended_interval() -> None:
    """An estimate with C and M known has the simulated goodput at its current interval and at
    Daly's, near Daly's model; saving every hour where ~19 min is best, the recommended
    interval keeps more."""
    trace = simulate_trace(
        np.random.default_rng(3), mtbf_s=6 * 3600.0, horizon_s=30 * 86400.0, save_steps=3600
    )
    est = estimate_job("j", trace.observations, now_s=0.0)
    assert est.goodput_current is not None and est.goodput_recommended is not None
    assert est.daly_interval_s is not None and est.current_interval_s is not None
    expected = 1.0 - exponential_waste_fraction(
        est.daly_interval_s, est.mtbf_s or 0.0, est.checkpoint_cost_s or 0.0,
        est.restart_cost_s or 0.0,
    )  # fmt: skip
    assert est.goodput_recommended == pytest.approx(expected, abs=0.01)
    assert est.current_interval_s / est.daly_interval_s > 2.5
    assert est.goodput_recommended - est.goodput_current > 0.01


def test_a_restart_from_scratch_loses_the_whole_run() -> None:
    """Two HF-like runs, each saving at step 50 and crashing at 59; the second starts again at
    step 1 with no resume line (restarted without resume_from_checkpoint): the first run's
    work to its save was not kept, so its whole run is lost (0-118 s), not only 50-59. The
    second run's crash keeps its save (nothing follows to say otherwise)."""

    def run(at_s: float) -> list[Observation]:
        return [
            obs("run_start", at_s),
            obs("step", at_s + 2, step=1, duration_s=2.0),
            obs("checkpoint_start", at_s + 100, step=50),
            obs("checkpoint_end", at_s + 101, step=50, duration_s=1.0),
            obs("step", at_s + 117, step=58, duration_s=2.0),
            obs("failure", at_s + 118, step=59, failure_class="python_exception"),
        ]

    g = _spans([*run(0.0), *run(200.0)]).breakdown()
    low_s, high_s = g.range_s(Bucket.LOST)
    assert high_s == pytest.approx(118.0 + 18.0)  # the second from its save's start: C ≥ 1 s
    assert low_s >= 118.0  # before: 18 s + 18 s, the first run's save taken as kept


def _kept_by_scan(
    saves: _Saves, before_s: np.ndarray, step: np.ndarray, first_step: np.ndarray
) -> np.ndarray:
    """The definition, one scan of every save per interruption (the reference)."""
    out = np.full(before_s.size, -np.inf)
    for i, (limit, wanted) in enumerate(zip(before_s.tolist(), step.tolist(), strict=True)):
        done = saves.end_s <= limit
        exact = np.flatnonzero(done & (saves.step == wanted))
        if exact.size:
            out[i] = saves.end_s[exact[-1]]
        elif done.any():
            latest = np.flatnonzero(done)[-1]
            out[i] = saves.end_s[latest]
            if np.isnan(wanted) and first_step[i] < saves.step[latest]:  # began below it
                below = np.flatnonzero(done & (saves.step <= first_step[i]))
                out[i] = saves.end_s[below[-1]] if below.size else -np.inf
    return out


def test_kept_work_by_sorted_look_ups_is_the_scan_of_every_save() -> None:
    """When each interruption's kept work was saved (the latest save at its resume step done
    before it, else the latest done unless the restart began below its step, then the latest
    at or below that, else -inf) is what scanning every save gives, with ties, saves out of
    time order, unknown steps and times, and infinities."""
    rng = np.random.default_rng(3)

    def values(n: int) -> np.ndarray:
        v = rng.integers(0, 6, n).astype(float)
        v[rng.random(n) < 0.2] = np.nan
        v[rng.random(n) < 0.05] = rng.choice([np.inf, -np.inf])
        return v

    for _ in range(2000):
        end_s = values(int(rng.integers(0, 12)))
        step = values(end_s.size)
        if rng.random() < 0.5:
            end_s = np.sort(end_s)
        saves = _Saves(end_s, end_s, end_s, step, end_s, None)
        before_s, resumed, first = values(6), values(6), values(6)
        kept = saves.kept_s(before_s, resumed, first)
        np.testing.assert_array_equal(kept, _kept_by_scan(saves, before_s, resumed, first))
    ends = np.array([10.0, 20.0, 30.0])
    saves = _Saves(ends, ends, ends, np.array([1.0, 2.0, 1.0]), ends, None)
    kept = saves.kept_s(np.array([25.0, 35.0, 15.0, 5.0]), np.array([1.0, 2.0, 3.0, np.nan]))
    assert kept.tolist() == [10.0, 20.0, 10.0, -np.inf]
