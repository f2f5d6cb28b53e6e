"""Two-sample Wilcoxon rank-sum (Mann-Whitney U) test, exact for the sizes a checkpoint window has.

The checkpoint-cost estimator asks one question of it: do the last few save durations come from
the same distribution as the rest of the window? :func:`rank_sum_p_value` answers with the exact
permutation p-value of the rank sum, mid-ranks for ties (the distribution conditional on the
ties, counted by dynamic programming over subsets), and falls back to the normal approximation
with tie and continuity corrections only when counting would be slow. Without ties the exact
value equals ``scipy.stats.mannwhitneyu(x, y, method="exact")`` (tests compare them);
with ties scipy switches to the approximation, where this stays exact.

Sources: Hollander, Wolfe & Chicken, "Nonparametric Statistical Methods", 3rd ed., 2014,
section 4.1 (the test, the tie correction of the variance, the continuity correction);
Mann & Whitney, Ann. Math. Statist. 18(1), 1947 (the counting recursion).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

from ckpt_advisor.rules.timeline import FloatArray

EXACT_MAX_CELLS = 4_000_000
"""Largest table (pooled size × smaller sample size × twice the largest rank sum) counted
exactly; bigger samples use the normal approximation (a window of 20 saves needs ~24,000)."""


def rank_sum_p_value(x: Sequence[float] | FloatArray, y: Sequence[float] | FloatArray) -> float:
    """Two-sided p-value that samples ``x`` and ``y`` come from one continuous distribution.

    The statistic is the sum of the mid-ranks of ``x`` in the pooled sample (equivalent to
    Mann-Whitney's U); the p-value is twice the smaller tail of its permutation distribution,
    capped at 1.

    Args:
        x: shape (m,), m >= 1, finite.
        y: shape (n,), n >= 1, finite.

    Returns:
        The p-value, in (0, 1].

    Raises:
        ValueError: an empty sample or a value that is not finite.
    """
    a = np.asarray(x, np.float64)
    b = np.asarray(y, np.float64)
    if a.size == 0 or b.size == 0:
        raise ValueError("rank_sum_p_value needs two non-empty samples")
    pooled = np.concatenate((a, b))
    if not np.isfinite(pooled).all():
        raise ValueError("rank_sum_p_value needs finite values")
    _, inverse, ties = np.unique(pooled, return_inverse=True, return_counts=True)
    doubled = (2 * np.cumsum(ties) - ties + 1)[inverse]  # twice the mid-ranks: integers
    small = min(a.size, b.size)
    observed = int(doubled[: a.size].sum() if a.size == small else doubled[a.size :].sum())
    total = int(doubled.sum())
    if pooled.size * small * total <= EXACT_MAX_CELLS:
        return _exact(doubled, small, observed)
    return _normal(doubled.size, small, observed, ties)


def _exact(doubled: np.ndarray, m: int, observed: int) -> float:
    """Twice the smaller tail of the count of m-subsets of ``doubled`` by their sum."""
    total = int(doubled.sum())
    counts = np.zeros((m + 1, total + 1))  # counts[j, s]: j-subsets seen so far summing to s
    counts[0, 0] = 1.0
    for value in doubled.tolist():
        for j in range(m, 0, -1):
            counts[j, value:] += counts[j - 1, : total + 1 - value]
    sums = counts[m] / counts[m].sum()
    lower, upper = float(sums[: observed + 1].sum()), float(sums[observed:].sum())
    return min(1.0, 2.0 * min(lower, upper))


def _normal(size: int, m: int, observed: int, ties: np.ndarray) -> float:
    """The normal approximation of :func:`rank_sum_p_value` for large samples."""
    n = size - m
    mean = m * (size + 1)  # doubled, as ``observed``
    tie_term = float(np.sum(ties.astype(np.float64) ** 3 - ties)) / (size * (size - 1))
    sd = 2.0 * math.sqrt(m * n / 12.0 * ((size + 1) - tie_term))
    if sd == 0.0:
        return 1.0  # every value tied
    z = max(0.0, abs(observed - mean) - 1.0) / sd  # continuity: half a rank, doubled
    return min(1.0, 2.0 * NormalDist().cdf(-z))
