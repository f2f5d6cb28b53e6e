"""The chi-square quantiles and tail that M's intervals need, from the standard library.

Why not scipy.special: importing it costs ~0.2 s of CPU (scipy 1.17: its array-API layer pulls
in numpy.testing and numpy.f2py), as much as the rest of an ``ingest`` of a small log needs,
and every estimate needs these numbers. Only two cases occur, both with exact forms:

- an even number of degrees of freedom ``2m`` (the exponential MLE's interval): the chi-square
  CDF is the regularized lower incomplete gamma ``P(m, x/2)``, which for an integer ``m`` is
  one minus a Poisson CDF, ``P(m, x) = 1 − e^(−x) Σ_{k<m} x^k / k!`` (Abramowitz & Stegun
  6.5.13 and 26.4.21); it is summed as a series that only adds positive terms (A&S 6.5.29
  below ``x = m + 1``, the Poisson sum above) and inverted by safeguarded Newton steps;
- one degree of freedom (the Weibull fit's likelihood-ratio test): ``χ²₁ = Z²``, so its tail is
  ``erfc(√(x/2))`` and its quantiles are the normal's (:class:`statistics.NormalDist`).

Tests compare every function with scipy's over a grid of arguments (to ~1e-12 relative).
"""

from __future__ import annotations

import math
from statistics import NormalDist

_EPS = 1e-17
"""A series stops once a term is below this fraction of its sum."""


def gamma_lower_regularized(m: int, x: float) -> float:
    """``P(m, x)``, the regularized lower incomplete gamma function of an integer ``m >= 1`` at
    ``x >= 0`` (scipy.special.gammainc(m, x)).

    Raises:
        ValueError: ``m`` below 1, or ``x`` negative or not finite.
    """
    _check(m, x)
    return _series(m, x) if x < m + 1.0 else 1.0 - _poisson_cdf(m - 1, x)


def gamma_upper_regularized(m: int, x: float) -> float:
    """``Q(m, x) = 1 − P(m, x)`` (scipy.special.gammaincc(m, x)), summed directly where it is
    the smaller, so a tail far below 1 keeps its relative precision.

    Raises:
        ValueError: ``m`` below 1, or ``x`` negative or not finite.
    """
    _check(m, x)
    return 1.0 - _series(m, x) if x < m + 1.0 else _poisson_cdf(m - 1, x)


def _series(m: int, x: float) -> float:
    """``P(m, x)`` for ``x < m + 1``: ``x^m e^(−x) / m! · Σ_j x^j / ((m+1)…(m+j))``, whose
    terms fall by ``x / (m + j) < 1`` each."""
    if x == 0.0:
        return 0.0
    term = total = 1.0
    j = m
    while term > total * _EPS:
        j += 1
        term *= x / j
        total += term
    return math.exp(m * math.log(x) - x - math.lgamma(m + 1.0)) * total


def _poisson_cdf(top: int, x: float) -> float:
    """``e^(−x) Σ_{k<=top} x^k / k!`` for ``x >= top + 2``, summed from ``k = top`` down, where
    the terms fall by ``k / x < 1`` each."""
    term = math.exp(top * math.log(x) - x - math.lgamma(top + 1.0))
    total = term
    k = top
    while k > 0 and term > total * _EPS:
        term *= k / x
        total += term
        k -= 1
    return total


def gamma_quantile(m: int, p: float) -> float:
    """The ``x`` with ``P(m, x) = p``: the inverse of :func:`gamma_lower_regularized` in ``x``
    (scipy.special.gammaincinv(m, p)), for an integer ``m >= 1`` and ``0 < p < 1``.

    The chi-square quantile of ``2m`` degrees of freedom is twice this. Newton's steps on
    ``P(m, x) − p`` (derivative ``x^(m−1) e^(−x) / (m−1)!``) from the Wilson–Hilferty
    approximation, kept inside a bracket that bisection narrows when a step leaves it.

    Raises:
        ValueError: ``m`` below 1, or ``p`` not strictly between 0 and 1.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be strictly between 0 and 1, got {p!r}")
    _check(m, 0.0)
    z = NormalDist().inv_cdf(p)  # Wilson & Hilferty (1931): (x/m)^(1/3) is nearly normal
    c = 1.0 / (9.0 * m)
    base = 1.0 - c + z * math.sqrt(c)
    # far in the lower tail P(m, x) ≈ x^m / m!, which the cube root's normal misses
    x = m * base**3 if base > 0.5 else math.exp((math.log(p) + math.lgamma(m + 1.0)) / m)
    lo, hi = 0.0, math.inf
    upper, q = p > 0.5, 1.0 - p  # solve Q(m, x) = q there: the small tail keeps its digits
    for _ in range(200):
        f = q - gamma_upper_regularized(m, x) if upper else gamma_lower_regularized(m, x) - p
        if f == 0.0:
            return x
        if f < 0.0:
            lo = x
        else:
            hi = x
        slope = math.exp((m - 1) * math.log(x) - x - math.lgamma(m))
        step = x - f / slope if slope > 0.0 else math.nan
        if not lo < step < hi:  # Newton left the bracket (or underflowed): bisect instead
            step = 0.5 * (lo + hi) if math.isfinite(hi) else 2.0 * x
        if abs(step - x) <= 1e-15 * x:
            return step
        x = step
    return x


def chi2_1_sf(x: float) -> float:
    """``Pr(χ²₁ > x)``, the tail of one degree of freedom (scipy.special.chdtrc(1, x)), for
    ``x >= 0``: ``erfc(√(x/2))``."""
    return math.erfc(math.sqrt(x / 2.0))


def chi2_1_isf(q: float) -> float:
    """The ``x`` with ``Pr(χ²₁ > x) = q`` (scipy.special.chdtri(1, q)), ``0 < q < 1``: the
    square of the normal quantile at ``q/2``.

    Raises:
        ValueError: ``q`` not strictly between 0 and 1.
    """
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be strictly between 0 and 1, got {q!r}")
    return NormalDist().inv_cdf(q / 2.0) ** 2


def _check(m: int, x: float) -> None:
    if m < 1:
        raise ValueError(f"m must be an integer >= 1, got {m!r}")
    if not (math.isfinite(x) and x >= 0.0):
        raise ValueError(f"x must be finite and >= 0, got {x!r}")
