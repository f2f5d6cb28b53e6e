"""Young/Daly intervals and the first-order waste: hand-computed tables and properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckpt_advisor.rules.interval import (
    daly_interval_s,
    excess_gpu_hours_per_day,
    exponential_waste_fraction,
    high_cost_note,
    waste_fraction,
    young_interval_s,
)
from ckpt_advisor.rules.model import Note, NoteCode

# C/M between 1e-6 and 1e-2 covers real jobs (a 30 s save on a 1-year MTBF up to a
# 15 min save on a one-day MTBF) and keeps Daly within 7% of Young.
mtbfs_s = st.floats(min_value=600.0, max_value=1e8)
cost_ratios = st.floats(min_value=1e-6, max_value=1e-2)
scales = st.floats(min_value=1e-3, max_value=1e3)


@pytest.mark.parametrize(
    ("mtbf_s", "cost_s", "young_s", "daly_s"),
    [
        # sqrt(2·86400·300) = 7200; sqrt(C/2M) = 1/24: 7200·(1 + 1/72 + 1/5184) − 300
        (86400.0, 300.0, 7200.0, 7200.0 + 100.0 + 7200.0 / 5184.0 - 300.0),
        # sqrt(2·3600·200) = 1200; sqrt(C/2M) = 1/6: 1200·(1 + 1/18 + 1/324) − 200
        (3600.0, 200.0, 1200.0, 1200.0 + 1200.0 / 18.0 + 1200.0 / 324.0 - 200.0),
        # sqrt(2·10000·50) = 1000; sqrt(C/2M) = 1/20: 1000·(1 + 1/60 + 1/3600) − 50
        (10000.0, 50.0, 1000.0, 1000.0 + 1000.0 / 60.0 + 1000.0 / 3600.0 - 50.0),
    ],
)
def test_young_and_daly_match_hand_computed_values(
    mtbf_s: float, cost_s: float, young_s: float, daly_s: float
) -> None:
    """Young is sqrt(2MC) and Daly is eq. 37 of Daly 2006 on hand-computed cases."""
    assert young_interval_s(mtbf_s, cost_s) == pytest.approx(young_s, rel=1e-12)
    assert daly_interval_s(mtbf_s, cost_s) == pytest.approx(daly_s, rel=1e-12)


def test_daly_example_values_are_the_ones_the_docs_quote() -> None:
    """For M = 1 day and C = 5 min the intervals are 2 h (Young) and 7001.39 s (Daly)."""
    assert young_interval_s(86400.0, 300.0) == 7200.0
    assert daly_interval_s(86400.0, 300.0) == pytest.approx(7001.3889, abs=1e-4)


@pytest.mark.parametrize(
    ("mtbf_s", "cost_s"), [(100.0, 200.0), (100.0, 500.0), (1.0, 1e6), (3600.0, 7200.0)]
)
def test_daly_is_the_mtbf_when_the_cost_is_at_least_twice_it(mtbf_s: float, cost_s: float) -> None:
    """For C >= 2M Daly's interval is M itself."""
    assert daly_interval_s(mtbf_s, cost_s) == mtbf_s


def test_daly_just_below_the_branch_point_is_eight_ninths_of_m() -> None:
    """As C -> 2M from below eq. 37 tends to (2 − 4/3 + 2/9)·M = (8/9)·M."""
    assert daly_interval_s(1000.0, 1999.9999) == pytest.approx(8000.0 / 9.0, rel=1e-5)


@given(mtbfs_s)
def test_daly_tends_to_young_as_the_cost_vanishes(mtbf_s: float) -> None:
    """Daly/Young -> 1 as C/M -> 0, with the gap shrinking like (2/3)·sqrt(C/(2M))."""
    previous_gap = math.inf
    for ratio in (1e-2, 1e-4, 1e-6, 1e-8):
        cost_s = ratio * mtbf_s
        gap = 1.0 - daly_interval_s(mtbf_s, cost_s) / young_interval_s(mtbf_s, cost_s)
        assert 0.0 < gap < previous_gap
        assert gap == pytest.approx((2.0 / 3.0) * math.sqrt(ratio / 2.0), rel=0.1)
        previous_gap = gap


@given(mtbfs_s, cost_ratios, st.floats(min_value=1.01, max_value=100.0))
def test_intervals_grow_with_the_mtbf(mtbf_s: float, ratio: float, factor: float) -> None:
    """A longer MTBF never shortens the Young or Daly interval (cost fixed, C < 2M)."""
    cost_s = ratio * mtbf_s
    assert young_interval_s(factor * mtbf_s, cost_s) > young_interval_s(mtbf_s, cost_s)
    assert daly_interval_s(factor * mtbf_s, cost_s) > daly_interval_s(mtbf_s, cost_s)


@given(mtbfs_s, st.floats(min_value=1e-6, max_value=0.9), st.floats(min_value=1.01, max_value=2.2))
def test_intervals_grow_with_the_cost(mtbf_s: float, ratio: float, factor: float) -> None:
    """A dearer checkpoint never shortens the Young or Daly interval (MTBF fixed)."""
    cost_s = ratio * mtbf_s
    assert young_interval_s(mtbf_s, factor * cost_s) > young_interval_s(mtbf_s, cost_s)
    assert daly_interval_s(mtbf_s, factor * cost_s) > daly_interval_s(mtbf_s, cost_s)


@given(mtbfs_s, cost_ratios, scales)
def test_intervals_scale_with_time_units(mtbf_s: float, ratio: float, k: float) -> None:
    """T(k·M, k·C) = k·T(M, C) for Young and Daly: only the ratio C/M shapes the answer."""
    cost_s = ratio * mtbf_s
    assert young_interval_s(k * mtbf_s, k * cost_s) == pytest.approx(
        k * young_interval_s(mtbf_s, cost_s), rel=1e-9
    )
    assert daly_interval_s(k * mtbf_s, k * cost_s) == pytest.approx(
        k * daly_interval_s(mtbf_s, cost_s), rel=1e-9
    )


@given(mtbfs_s, cost_ratios, st.floats(min_value=0.0, max_value=1e4))
def test_waste_at_daly_beats_twenty_percent_either_side(
    mtbf_s: float, ratio: float, restart_s: float
) -> None:
    """W(T_daly) <= W(0.8·T_daly) and W(1.2·T_daly): Daly sits near the waste minimum."""
    cost_s = ratio * mtbf_s
    daly_s = daly_interval_s(mtbf_s, cost_s)
    best = waste_fraction(daly_s, mtbf_s, cost_s, restart_s)
    assert best <= waste_fraction(0.8 * daly_s, mtbf_s, cost_s, restart_s)
    assert best <= waste_fraction(1.2 * daly_s, mtbf_s, cost_s, restart_s)


def test_waste_fraction_matches_hand_computed_values() -> None:
    """W = C/T + T/(2M) + R/M gives 1/12 for M = 1 day, C = 5 min at T = 2 h; R = M/100 adds 1%."""
    assert waste_fraction(7200.0, 86400.0, 300.0) == pytest.approx(1.0 / 12.0, rel=1e-12)
    assert waste_fraction(7200.0, 86400.0, 300.0, 864.0) == pytest.approx(
        1.0 / 12.0 + 0.01, rel=1e-12
    )
    assert waste_fraction(3600.0, 86400.0, 300.0) == pytest.approx(
        300.0 / 3600.0 + 3600.0 / 172800.0, rel=1e-12
    )


@given(mtbfs_s, cost_ratios, st.floats(min_value=0.1, max_value=10.0))
def test_waste_off_the_optimum_grows_by_k_plus_one_over_k_halved(
    mtbf_s: float, ratio: float, k: float
) -> None:
    """At k times Young's interval the waste is (k + 1/k)/2 times the optimum (DESIGN.md)."""
    cost_s = ratio * mtbf_s
    young_s = young_interval_s(mtbf_s, cost_s)
    assert waste_fraction(k * young_s, mtbf_s, cost_s) == pytest.approx(
        (k + 1.0 / k) / 2.0 * waste_fraction(young_s, mtbf_s, cost_s), rel=1e-9
    )


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_intervals_reject_non_positive_or_non_finite_arguments(bad: float) -> None:
    """Every duration argument is checked, and the error names the argument."""
    with pytest.raises(ValueError, match="mtbf_s"):
        young_interval_s(bad, 300.0)
    with pytest.raises(ValueError, match="cost_s"):
        daly_interval_s(86400.0, bad)
    with pytest.raises(ValueError, match="interval_s"):
        waste_fraction(bad, 86400.0, 300.0)


def test_waste_accepts_zero_restart_but_rejects_negative_restart() -> None:
    """R = 0 is allowed (no restart cost); a negative R is a ValueError naming restart_s."""
    assert waste_fraction(7200.0, 86400.0, 300.0, 0.0) == pytest.approx(1.0 / 12.0)
    with pytest.raises(ValueError, match="restart_s"):
        waste_fraction(7200.0, 86400.0, 300.0, -1.0)


@pytest.mark.parametrize(
    ("mtbf_s", "optimum_min", "published_digits"),
    [(24 * 3600.0, 117.0, 0.5), (6 * 3600.0, 57.0, 0.5), (15 * 60.0, 9.1, 0.05)],
)
def test_daly_reproduces_the_optima_published_in_daly_2006(
    mtbf_s: float, optimum_min: float, published_digits: float
) -> None:
    """Daly 2006 (FGCS 22(3)), Figs. 3-5, with δ = 5 min and R = 10 min, prints τopt = 117 min
    (M = 24 h), 57 min (M = 6 h) and 9.1 min (M = 15 min); eq. 37 gives them to the digits
    shown."""
    assert daly_interval_s(mtbf_s, 300.0) / 60.0 == pytest.approx(optimum_min, abs=published_digits)


def test_excess_gpu_hours_per_day_is_the_waste_gap_times_gpus_times_24() -> None:
    """(0.12 − 0.08) × 64 GPUs × 24 h = 61.44 GPU-hours a day; the sign says which is better."""
    assert excess_gpu_hours_per_day(0.12, 0.08, 64) == pytest.approx(61.44)
    assert excess_gpu_hours_per_day(0.08, 0.12, 64) == pytest.approx(-61.44)
    with pytest.raises(ValueError, match="gpus"):
        excess_gpu_hours_per_day(0.1, 0.1, 0)


def test_exponential_waste_matches_hand_computed_values() -> None:
    """With T = C = M, R = 0 the expected wall time per unit of work is (e² − 1), so waste is
    1 − 1/(e² − 1); R = M multiplies the wall time by e."""
    assert exponential_waste_fraction(3600.0, 3600.0, 3600.0) == pytest.approx(
        1.0 - 1.0 / math.expm1(2.0), rel=1e-12
    )
    assert exponential_waste_fraction(3600.0, 3600.0, 3600.0, 3600.0) == pytest.approx(
        1.0 - 1.0 / (math.e * math.expm1(2.0)), rel=1e-12
    )


@pytest.mark.parametrize("ratio", [1e-5, 1e-3, 0.01, 0.1, 0.5, 1.0, 1.9, 2.0, 5.0, 50.0])
def test_daly_wastes_no_more_than_young_in_the_exponential_model(ratio: float) -> None:
    """At Daly's interval the exponential waste is at most the waste at Young's, for small and
    large C/M (under the first-order form Daly always looked slightly worse)."""
    mtbf_s, restart_s = 3600.0, 300.0
    cost_s = ratio * mtbf_s
    daly_s, young_s = daly_interval_s(mtbf_s, cost_s), young_interval_s(mtbf_s, cost_s)
    daly_waste = exponential_waste_fraction(daly_s, mtbf_s, cost_s, restart_s)
    assert daly_waste <= exponential_waste_fraction(young_s, mtbf_s, cost_s, restart_s) + 1e-12


@given(
    st.floats(min_value=1e-3, max_value=1e9),
    st.floats(min_value=1.0, max_value=1e8),
    st.floats(min_value=1e-3, max_value=1e9),
    st.floats(min_value=0.0, max_value=1e8),
)
def test_exponential_waste_is_a_fraction_for_any_cost(
    interval_s: float, mtbf_s: float, cost_s: float, restart_s: float
) -> None:
    """The exponential waste lies in [0, 1] whatever T, M, C and R (no 250% for C = 2M)."""
    assert 0.0 <= exponential_waste_fraction(interval_s, mtbf_s, cost_s, restart_s) <= 1.0


def test_a_cost_near_the_mtbf_is_warned_about() -> None:
    """C = 2 h against M = 1 h gives a high-cost note with the ratio and the waste; C = M/10
    none; C/M = 0.53 (just over the 0.5 threshold) one."""
    note = high_cost_note(7200.0, 3600.0, 0.95)
    assert note == Note(NoteCode.HIGH_COST, {"cost_ratio": 2.0, "waste_fraction": 0.95})
    assert high_cost_note(360.0, 3600.0, 0.38) is None
    assert high_cost_note(1900.0, 3600.0, 0.7) is not None
