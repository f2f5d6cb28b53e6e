"""The rank-sum test the checkpoint-cost estimator uses to notice a change of level."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from ckpt_advisor.rules.rank_test import EXACT_MAX_CELLS, rank_sum_p_value


@pytest.mark.parametrize(("m", "n", "seed"), [(3, 17, 0), (3, 17, 1), (5, 7, 2), (1, 4, 3)])
def test_without_ties_it_is_scipys_exact_mann_whitney(m: int, n: int, seed: int) -> None:
    """Without ties the p-value equals scipy's exact two-sided Mann-Whitney U p-value."""
    rng = np.random.default_rng(seed)
    x, y = rng.lognormal(0.3, 0.4, m), rng.lognormal(0.0, 0.4, n)
    expected = mannwhitneyu(x, y, alternative="two-sided", method="exact").pvalue
    assert rank_sum_p_value(x, y) == pytest.approx(expected, rel=1e-12)
    assert rank_sum_p_value(y, x) == pytest.approx(expected, rel=1e-12)


def test_three_saves_slower_than_seventeen_give_two_in_c_20_3() -> None:
    """Three durations above all of 17 others: p = 2 / C(20, 3), the estimator's example."""
    p = rank_sum_p_value([30.0, 31.0, 32.0], np.linspace(10.0, 12.0, 17))
    assert p == pytest.approx(2 / math.comb(20, 3), rel=1e-12)


def _brute_force(x: list[float], y: list[float]) -> float:
    """Twice the smaller tail of the rank sum of x over every way to pick len(x) of the pool."""
    pooled = sorted(x + y)
    mid_rank = {v: (2 * pooled.index(v) + pooled.count(v) + 1) / 2 for v in pooled}
    ranks = [mid_rank[v] for v in x + y]
    observed = sum(mid_rank[v] for v in x)
    sums = [sum(c) for c in itertools.combinations(ranks, len(x))]
    lower = sum(s <= observed + 1e-9 for s in sums) / len(sums)
    upper = sum(s >= observed - 1e-9 for s in sums) / len(sums)
    return min(1.0, 2 * min(lower, upper))


def test_ties_get_the_exact_permutation_p_value() -> None:
    """With tied durations (whole seconds) the p-value is the exact permutation one over
    mid-ranks, where scipy falls back to the normal approximation."""
    x = [14.0, 15.0, 15.0]
    y = [10.0, 11.0, 11.0, 12.0, 12.0, 12.0, 13.0, 15.0, 10.0, 11.0]
    assert rank_sum_p_value(x, y) == pytest.approx(_brute_force(x, y), rel=1e-12)
    assert rank_sum_p_value([5.0, 5.0], [5.0, 5.0, 5.0]) == 1.0


def test_large_samples_use_scipys_normal_approximation() -> None:
    """Beyond the exact table's size the p-value is scipy's asymptotic one (tie and continuity
    corrected), ties included."""
    rng = np.random.default_rng(7)
    x, y = np.round(rng.normal(0.2, 1.0, 400), 1), np.round(rng.normal(0.0, 1.0, 600), 1)
    assert x.size * 1000 * 2 * 500500 > EXACT_MAX_CELLS
    expected = mannwhitneyu(x, y, alternative="two-sided", method="asymptotic").pvalue
    assert rank_sum_p_value(x, y) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(("x", "y"), [([], [1.0]), ([1.0], [float("nan")])])
def test_empty_or_non_finite_samples_are_refused(x: list[float], y: list[float]) -> None:
    """An empty sample or a NaN raises ValueError."""
    with pytest.raises(ValueError, match="rank_sum_p_value"):
        rank_sum_p_value(x, y)
