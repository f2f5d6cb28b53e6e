"""The two-level interval model: first-order closed form, exact waste, and its optimum."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckpt_advisor.rules.interval import daly_interval_s
from ckpt_advisor.rules.two_level import (
    TwoTierJob,
    first_order_plan,
    first_order_saves_per_persistent,
    first_order_waste_fraction,
    optimal_plan,
    single_tier_plan,
    two_tier_waste_fraction,
)

HOUR_S = 3600.0


def test_first_order_gives_young_per_tier() -> None:
    """C1 = 8 s, C2 = 408 s, M1 = 1 h, M2 = 16 h: T1* = sqrt(2·3600·8) = 240 s,
    T2* = sqrt(2·57600·400) = 6788 s, so k* = 28.28 and the plan takes k = 28 or 29."""
    job = TwoTierJob(8.0, 408.0, HOUR_S, 16 * HOUR_S)
    assert first_order_saves_per_persistent(job) == pytest.approx(
        math.sqrt(400.0 * 16 / 8.0), rel=1e-12
    )
    plan = first_order_plan(job)
    assert plan.saves_per_persistent in (28, 29)
    assert plan.persistent_interval_s == pytest.approx(math.sqrt(2 * 16 * HOUR_S * 400), rel=0.02)
    assert plan.fast_interval_s == pytest.approx(240.0, rel=0.02)


def test_first_order_waste_is_stationary_at_its_optimum() -> None:
    """For a fixed k the first-order T1 is the minimum of W(T1, k): 1% either side costs more."""
    job = TwoTierJob(8.0, 408.0, HOUR_S, 16 * HOUR_S, 30.0, 300.0)
    plan = first_order_plan(job)
    k, t1 = plan.saves_per_persistent, plan.fast_interval_s
    at = first_order_waste_fraction(job, t1, k)
    assert at < first_order_waste_fraction(job, t1 * 1.01, k)
    assert at < first_order_waste_fraction(job, t1 * 0.99, k)


def test_exact_model_with_one_tier_is_dalys_full_model() -> None:
    """k = 1 with no recoverable interruption is Daly's complete model with a restart that is
    never interrupted: goodput T / ((e^((T+C)/M) − 1)·(M + R))."""
    m, c, r = 6 * HOUR_S, 300.0, 600.0
    job = TwoTierJob(1.0, c, math.inf, m, 0.0, r)
    t = daly_interval_s(m, c)
    expected = 1.0 - t / (math.expm1((t + c) / m) * (m + r))
    assert two_tier_waste_fraction(job, t, 1) == pytest.approx(expected, rel=1e-12)


def test_exact_waste_of_a_hand_computed_pattern() -> None:
    """T1 = 100 s, k = 2, C1 = 10 s, C2 = 50 s, λ1 = λ2 = 1e-4/s, R1 = R2 = 0: the recurrence
    F2 = (e^(λ·150) − 1)(1/λ2·…) solved by hand gives F1 = 273.35 s, goodput 200/F1."""
    job = TwoTierJob(10.0, 50.0, 1e4, 1e4)
    lam, lam1, lam2 = 2e-4, 1e-4, 1e-4
    q1, q2 = -math.expm1(-lam * 110), -math.expm1(-lam * 150)
    p1, p2 = 1 - q1, 1 - q2
    # F2 = q2/λ + q2·λ1/λ·F2 + q2·λ2/λ·F1; F1 = q1/λ + q1·λ1/λ·F1 + q1·λ2/λ·F1 + p1·F2
    d2 = 1 - q2 * lam1 / lam
    a2, b2 = q2 / lam / d2, q2 * lam2 / lam / d2
    f1 = (q1 / lam + p1 * a2) / (1 - q1 * lam1 / lam - q1 * lam2 / lam - p1 * b2)
    assert p2 > 0
    assert two_tier_waste_fraction(job, 100.0, 2) == pytest.approx(1 - 200.0 / f1, rel=1e-12)


def test_optimum_beats_its_neighbours_and_the_single_tier() -> None:
    """The exact optimum is no worse than the first-order pair, than k ± 1 and T1 ± 5%, and
    than saving to the persistent tier only (DLRover-like: 75% recoverable, C1 = 5 s)."""
    job = TwoTierJob.from_fraction(
        fast_cost_s=5.0,
        persistent_cost_s=300.0,
        mtbf_s=6 * HOUR_S,
        recoverable_fraction=0.75,
        fast_restart_s=60.0,
        persistent_restart_s=600.0,
    )
    best = optimal_plan(job)
    t1, k = best.fast_interval_s, best.saves_per_persistent
    for other_t1, other_k in ((t1, k - 1), (t1, k + 1), (t1 * 1.05, k), (t1 * 0.95, k)):
        assert best.waste_fraction <= two_tier_waste_fraction(job, other_t1, other_k)
    assert best.waste_fraction <= first_order_plan(job).waste_fraction
    single = single_tier_plan(job)
    assert single.saves_per_persistent == 1
    assert best.waste_fraction < single.waste_fraction - 0.05


def test_no_recoverable_interruption_means_one_tier() -> None:
    """With a fraction 0 (M1 infinite) or a fast save dearer than a persistent one, every save
    is persistent (k = 1)."""
    none = TwoTierJob.from_fraction(
        fast_cost_s=5.0, persistent_cost_s=300.0, mtbf_s=HOUR_S, recoverable_fraction=0.0
    )
    assert optimal_plan(none).saves_per_persistent == 1
    dear = TwoTierJob(400.0, 300.0, HOUR_S, HOUR_S)
    assert first_order_plan(dear).saves_per_persistent == 1


def test_bad_jobs_are_refused_with_the_field_named() -> None:
    """Zero costs, a fraction of 1 and a zero M2 name their argument."""
    with pytest.raises(ValueError, match="fast_cost_s"):
        TwoTierJob(0.0, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="recoverable_fraction"):
        TwoTierJob.from_fraction(
            fast_cost_s=1.0, persistent_cost_s=2.0, mtbf_s=10.0, recoverable_fraction=1.0
        )
    with pytest.raises(ValueError, match="mtbf_persistent_s"):
        TwoTierJob(1.0, 1.0, 1.0, 0.0)


@given(
    st.floats(min_value=0.5, max_value=120.0),
    st.floats(min_value=1.0, max_value=40.0),
    st.floats(min_value=0.5 * HOUR_S, max_value=48 * HOUR_S),
    st.floats(min_value=0.05, max_value=0.95),
)
def test_optimum_scales_with_time(c1: float, ratio: float, m: float, f: float) -> None:
    """Multiplying every duration by 3 multiplies T1 by 3 and keeps k and the waste (the model
    has no absolute time scale; T1 to the search's 1e-4, where the waste is flat)."""
    job = TwoTierJob.from_fraction(
        fast_cost_s=c1, persistent_cost_s=c1 * ratio, mtbf_s=m, recoverable_fraction=f
    )
    big = TwoTierJob.from_fraction(
        fast_cost_s=3 * c1, persistent_cost_s=3 * c1 * ratio, mtbf_s=3 * m, recoverable_fraction=f
    )
    a, b = optimal_plan(job), optimal_plan(big)
    assert b.saves_per_persistent == a.saves_per_persistent
    assert b.fast_interval_s == pytest.approx(3 * a.fast_interval_s, rel=1e-4)
    assert b.waste_fraction == pytest.approx(a.waste_fraction, abs=1e-9)
