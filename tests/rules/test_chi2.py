"""The standard-library chi-square functions equal scipy's."""

from __future__ import annotations

import pytest
from scipy.special import chdtrc, chdtri, gammainc, gammaincc, gammaincinv

from ckpt_advisor.rules.chi2 import (
    chi2_1_isf,
    chi2_1_sf,
    gamma_lower_regularized,
    gamma_quantile,
    gamma_upper_regularized,
)

SHAPES = [1, 2, 3, 4, 5, 7, 10, 31, 100, 300, 1000, 10_000]
LEVELS = [1e-12, 1e-6, 1e-3, 0.005, 0.025, 0.05, 0.3, 0.5, 0.7, 0.95, 0.975, 0.995, 1 - 1e-6]


def _close(a: float, b: float, m: int) -> bool:
    """Relative agreement: 1e-12 for the shapes a job's failure count has; above 1,000 the
    large ``m·ln x`` and ``lgamma`` terms that cancel leave ~1e-11."""
    return abs(a - b) <= (1e-12 if m <= 1000 else 1e-10) * abs(b)


@pytest.mark.parametrize("m", SHAPES)
def test_the_gamma_quantile_is_scipys_gammaincinv(m: int) -> None:
    """gamma_quantile(m, p) equals scipy.special.gammaincinv(m, p) for integer shapes from 1 to
    10,000 and levels from 1e-12 to 1 − 1e-6, both tails."""
    for p in LEVELS:
        assert _close(gamma_quantile(m, p), float(gammaincinv(m, p)), m), p


@pytest.mark.parametrize("m", SHAPES)
def test_the_incomplete_gammas_are_scipys(m: int) -> None:
    """P(m, x) and Q(m, x) equal scipy's gammainc and gammaincc on both sides of x = m + 1,
    where the series changes, and far into each tail."""
    for x in [0.0, 1e-8, 0.5, m / 10, m - 1.0, m + 0.5, m + 1.0, m + 2.0, 3.0 * m, 10.0 * m + 50]:
        for ours, theirs in (
            (gamma_lower_regularized, gammainc),
            (gamma_upper_regularized, gammaincc),
        ):
            want = float(theirs(m, x))
            if want > 1e-300:
                assert _close(ours(m, x), want, m), (ours.__name__, x)


def test_one_degree_of_freedom_is_scipys() -> None:
    """chi2_1_sf and chi2_1_isf equal scipy's chdtrc(1, ·) and chdtri(1, ·)."""
    for x in [0.0, 1e-6, 0.1, 1.0, 3.84, 6.63, 50.0, 200.0]:
        assert chi2_1_sf(x) == pytest.approx(float(chdtrc(1, x)), rel=1e-13)
    for q in [1e-12, 1e-6, 0.01, 0.05, 0.5, 0.9, 0.99]:
        assert chi2_1_isf(q) == pytest.approx(float(chdtri(1, q)), rel=1e-13)


def test_arguments_out_of_range_are_value_errors() -> None:
    """A shape below 1, a level outside (0, 1) and a negative x are ValueErrors naming them."""
    with pytest.raises(ValueError, match="m must"):
        gamma_quantile(0, 0.5)
    with pytest.raises(ValueError, match="p must"):
        gamma_quantile(3, 1.0)
    with pytest.raises(ValueError, match="x must"):
        gamma_lower_regularized(3, -1.0)
    with pytest.raises(ValueError, match="q must"):
        chi2_1_isf(0.0)
