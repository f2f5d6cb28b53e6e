"""C and M per tier and the recommended pair, on generated two-tier jobs with known truth."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ckpt_advisor.rules.job import estimate_job
from ckpt_advisor.rules.model import NoteCode, Observation
from ckpt_advisor.rules.policy import EstimationPolicy, JobFacts
from ckpt_advisor.rules.simulate_tiers import brute_force, draw_interruptions, plan_grid
from ckpt_advisor.rules.tiers import with_overrides
from ckpt_advisor.rules.two_level import TwoTierJob, optimal_plan
from tests.rules.simulate import T0, TwoTierTrace, two_tier_trace

HOUR_S = 3600.0
DAY_S = 86400.0
CLASSES = {"nccl_timeout": 8 * HOUR_S, "node_failure": 24 * HOUR_S}
"""75% of the interruptions a memory copy survives (DLRover's share), MTBF 6 h in all."""
WHOLE_JOB = EstimationPolicy(mtbf_window_s=100 * DAY_S)
"""M over all 90 days (the default window is 30)."""
TRUTH = TwoTierJob(5.0, 300.0, 8 * HOUR_S, 24 * HOUR_S, 300.0, 300.0)


def _trace(**changes: object) -> TwoTierTrace:
    """The generated job of these tests (memory every 10 min, every 10th save persistent)."""
    kwargs: dict[str, object] = {
        "fast_cost_s": 5.0,
        "persistent_cost_s": 300.0,
        "fast_interval_s": 600.0,
        "saves_per_persistent": 10,
        "class_mtbf_s": CLASSES,
        "restart_s": 300.0,
        "days": 90.0,
        "seed": 4,
    }
    kwargs.update(changes)
    return two_tier_trace(**kwargs)  # type: ignore[arg-type]


def _job(**changes: object) -> list[Observation]:
    return _trace(**changes).observations


def test_costs_and_mtbfs_per_tier_match_the_truth() -> None:
    """90 days of a job saving to memory every 10 min (C1 = 5 s) and to storage every 10th save
    (C2 = 300 s), NCCL timeouts every 8 h and node losses every 24 h: each tier's C is its
    truth within 2%, the interruptions of each kind are counted within 5% (a failure before a
    restart made progress is one interruption with it), M1 and M2 are within 15% of the truth
    and their intervals hold it, the current pair is
    600 s x 10, and the single-tier numbers are the persistent saves' (C = C2)."""
    trace = _trace()
    est = estimate_job("two", trace.observations, now_s=T0 + 91 * DAY_S, policy=WHOLE_JOB)
    tiers = est.tiers
    assert tiers is not None and tiers.fast_tier == "memory"
    assert tiers.fast_cost_s == pytest.approx(5.0, rel=0.02)
    assert tiers.persistent_cost_s == pytest.approx(300.0, rel=0.02)
    assert est.checkpoint_cost_s == tiers.persistent_cost_s
    # an interruption within minutes of a restart that made no progress is one with it
    assert tiers.n_recoverable == pytest.approx(trace.n_recoverable, rel=0.05)
    assert tiers.n_unrecoverable == pytest.approx(trace.n_unrecoverable, rel=0.05)
    for mtbf, ci, truth in (
        (tiers.mtbf_recoverable_s, tiers.mtbf_recoverable_ci_s, 8 * HOUR_S),
        (tiers.mtbf_persistent_s, tiers.mtbf_persistent_ci_s, 24 * HOUR_S),
    ):
        assert mtbf == pytest.approx(truth, rel=0.15)
        assert ci is not None and ci[0] < truth < ci[1]
    assert tiers.current_fast_interval_s == pytest.approx(600.0, rel=0.02)
    assert tiers.current_saves_per_persistent == 10


def test_recommended_pair_is_within_one_percent_of_the_brute_force_best() -> None:
    """The pair recommended from the estimates is, replayed against the truth's interruptions,
    within 1% goodput of the best of a grid over both intervals, and near the truth's own
    optimum (T1 within 15%, the same k within 1); the current 600 s x 10 wastes more."""
    est = estimate_job("two", _job(), now_s=T0 + 91 * DAY_S, policy=WHOLE_JOB)
    tiers = est.tiers
    assert tiers is not None
    assert tiers.fast_interval_s is not None and tiers.saves_per_persistent is not None
    best = optimal_plan(TRUTH)
    assert tiers.fast_interval_s == pytest.approx(best.fast_interval_s, rel=0.15)
    assert abs(tiers.saves_per_persistent - best.saves_per_persistent) <= 1
    assert tiers.persistent_interval_s == pytest.approx(
        tiers.fast_interval_s * tiers.saves_per_persistent
    )
    assert tiers.waste_fraction_current is not None and tiers.waste_fraction_recommended is not None
    assert tiers.waste_fraction_recommended < tiers.waste_fraction_current
    drawn = draw_interruptions(
        np.random.default_rng(11),
        class_mtbf_s=CLASSES,
        fast_restart_s=300.0,
        persistent_restart_s=300.0,
        horizon_s=30 * DAY_S,
        replicates=60,
    )
    pair = (tiers.fast_interval_s, tiers.saves_per_persistent)
    result = brute_force(
        pair, plan_grid(pair, points=15), drawn, fast_cost_s=5.0, persistent_cost_s=300.0
    )
    assert result.shortfall < 0.01


def test_single_tier_jobs_have_no_tiers_and_unknown_m_gives_no_pair() -> None:
    """Saves without tiers give tiers None; a survival table that has memory copies survive
    node losses too (peer replication) leaves no interruption that needs the persistent copy,
    so M2 is unknown and no pair is advised (it would never persist)."""
    untiered = [dataclasses.replace(o, tier=None) for o in _job(days=20.0)]
    assert estimate_job("one", untiered, now_s=T0 + 21 * DAY_S).tiers is None
    peer = JobFacts(survival=with_overrides({"node_failure": "memory"}))
    tiers = estimate_job("two", _job(days=20.0), now_s=T0 + 21 * DAY_S, facts=peer).tiers
    assert tiers is not None and tiers.n_unrecoverable == 0 and tiers.mtbf_persistent_s is None
    assert tiers.fast_interval_s is None and tiers.persistent_interval_s is None
    notes = estimate_job("two", _job(days=20.0), now_s=T0 + 21 * DAY_S, facts=peer).notes
    assert [n.values for n in notes if n.code is NoteCode.TWO_TIERS] == [{}]


def test_a_two_tier_job_is_judged_by_its_pair() -> None:
    """The single interval of a two-tier job is its persistent one: saving to memory every 10
    min and persisting every 10th save is ok (the pair is near 487 s x 14), where persistent-only
    Daly (55 min) would have called it drift, and a note says the interval is the persistent
    one; every 50 min to memory and every 2nd save persistent is drift, with the two-level
    model's waste behind the ratio."""
    near = estimate_job("two", _job(days=30.0), now_s=T0 + 31 * DAY_S)
    assert near.tiers is not None and near.status == "ok"
    assert near.recommended_interval_s == near.tiers.persistent_interval_s
    assert near.current_interval_s == near.tiers.current_persistent_interval_s
    assert near.daly_interval_s is not None and near.daly_interval_s < 0.6 * 6000.0
    (note,) = [n for n in near.notes if n.code is NoteCode.TWO_TIERS]
    assert note.by_name == {"memory": near.tiers.n_fast_saves}
    assert note.values["fast_interval_s"] == near.tiers.fast_interval_s
    far = estimate_job(
        "two",
        _job(days=30.0, fast_interval_s=3000.0, saves_per_persistent=2),
        now_s=T0 + 31 * DAY_S,
    )
    assert far.tiers is not None and far.status == "drift"
    assert far.drift_ratio is not None and far.drift_ratio > 1.5
    assert far.waste_fraction_current == far.tiers.waste_fraction_current
    assert far.recommended_interval_steps == far.tiers.persistent_interval_steps


def test_a_host_dated_log_beside_the_tiers_measures_no_tier_cost_or_spacing() -> None:
    """A two-tier job's timing records beside a log that printed no time (backfilled: its saves
    and steps all dated at the file's mtime, mid-job): each tier's C and save count, and the
    current pair, are the timing records' alone, as without that log (the single-tier rule of
    Timeline.host_dated: C from timing-file saves, spacing not from or to a host-dated save)."""
    job = _job(days=20.0)
    read_s = T0 + 3 * DAY_S + 0.5 * HOUR_S
    untimed = [
        Observation(kind, read_s + 0.1 * i, 1000 + 100 * i, duration, source="untimed.log",
                    host_dated=True)
        for i, (kind, duration) in enumerate(
            [("checkpoint_start", None), ("checkpoint_end", 0.5), ("step", 2.0),
             ("checkpoint_start", None), ("checkpoint_end", None)]
        )
    ]  # fmt: skip
    now_s = T0 + 21 * DAY_S
    alone, mixed = (estimate_job("two", o, now_s=now_s).tiers for o in (job, job + untimed))
    assert alone is not None and mixed is not None
    for name in ("fast_cost_s", "fast_cost_ci_s", "n_fast_saves", "persistent_cost_s",
                 "persistent_cost_ci_s", "n_persistent_saves", "current_fast_interval_s",
                 "current_saves_per_persistent"):  # fmt: skip
        assert getattr(mixed, name) == getattr(alone, name), name
    assert mixed.fast_cost_s == pytest.approx(5.0, rel=0.05)
