"""MTBF M: the censored exponential MLE with its chi-square interval, per class, rescaled to
another job size, and the Weibull fit of the lives that widens its interval.

Results are seconds; unknown values are ``None``, never 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ckpt_advisor.rules._checks import (
    require_count,
    require_non_negative,
    require_positive,
    require_probability,
)
from ckpt_advisor.rules.chi2 import chi2_1_isf, chi2_1_sf, gamma_quantile
from ckpt_advisor.rules.timeline import FloatArray


@dataclass(frozen=True, slots=True)
class MtbfEstimate:
    """The MTBF M with its chi-square confidence bounds.

    Attributes:
        mtbf_s: ``exposure_s / n_failures``, seconds; None with no failure or no exposure.
        lower_s: lower confidence bound, seconds; None with no exposure.
        upper_s: upper confidence bound, seconds; None with no failure (M may be unbounded).
        n_failures: failures counted.
        exposure_s: running time observed, seconds.
    """

    mtbf_s: float | None
    lower_s: float | None
    upper_s: float | None
    n_failures: int
    exposure_s: float

    @property
    def ci_s(self) -> tuple[float, float] | None:
        """(lower_s, upper_s) when both are known, else None."""
        if self.lower_s is None or self.upper_s is None:
            return None
        return self.lower_s, self.upper_s


def estimate_mtbf(exposure_s: float, n_failures: int, *, confidence: float = 0.9) -> MtbfEstimate:
    """Exponential maximum-likelihood MTBF with right-censoring, and its confidence interval.

    ``M = E / n``; the two-sided interval for time-truncated observation is
    ``[2E / χ²(1−α/2; 2n+2), 2E / χ²(α/2; 2n)]`` with ``α = 1 − confidence`` (DESIGN.md;
    Meeker & Escobar, "Statistical Methods for Reliability Data", 1998, section 7.6; the
    Garwood interval, conservative: it covers at or above its nominal rate). With no failure
    only the lower bound ``2E / χ²(1−α/2; 2)`` exists. Quantiles come from
    ``χ²(p; k) = 2·P⁻¹(k/2, p)``, ``P`` the regularized lower incomplete gamma
    (:func:`rules.chi2.gamma_quantile`).

    Args:
        exposure_s: running time E, seconds, finite and >= 0.
        n_failures: unplanned interruptions n during that time, >= 0.
        confidence: confidence level, strictly between 0 and 1.

    Returns:
        The estimate; every number is None when ``exposure_s`` is 0.

    Raises:
        ValueError: a negative or non-finite exposure, a negative count, a bad confidence.
    """
    exposure = require_non_negative("exposure_s", exposure_s)
    n = require_count("n_failures", n_failures)
    alpha = 1.0 - require_probability("confidence", confidence)
    if exposure == 0.0:
        return MtbfEstimate(None, None, None, n, exposure)
    # 2E / χ²(p; 2m) = 2E / (2·P⁻¹(m, p)) = E / P⁻¹(m, p)
    lower_s = exposure / gamma_quantile(n + 1, 1.0 - alpha / 2.0)
    if n == 0:
        return MtbfEstimate(None, lower_s, None, n, exposure)
    upper_s = exposure / gamma_quantile(n, alpha / 2.0)
    return MtbfEstimate(exposure / n, lower_s, upper_s, n, exposure)


def scale_mtbf(mtbf: MtbfEstimate, factor: float) -> MtbfEstimate:
    """The estimate with its exposure, M and bounds multiplied by ``factor``.

    Failures of independent units add up: a job on ``u`` nodes has ``u`` times the failure rate
    of one node, so with ``factor = u`` a job's estimate becomes the per-node MTBF (exposure in
    node-seconds), and with ``factor = 1/u'`` a per-node estimate becomes the MTBF of a job on
    ``u'`` nodes (DESIGN.md: "a per-node rate can be rescaled to another node count"). The
    chi-square bounds scale the same way, since they are linear in the exposure.

    Raises:
        ValueError: ``factor`` is not finite and > 0.
    """
    k = require_positive("factor", factor)

    def times(value: float | None) -> float | None:
        return None if value is None else value * k

    return MtbfEstimate(
        times(mtbf.mtbf_s),
        times(mtbf.lower_s),
        times(mtbf.upper_s),
        mtbf.n_failures,
        mtbf.exposure_s * k,
    )


def mtbf_by_class(
    exposure_s: float, counts: dict[str, int], *, confidence: float = 0.9
) -> dict[str, MtbfEstimate]:
    """The MTBF of each failure class over the same running time (competing risks).

    Each class is its own Poisson process observed over the whole exposure, so its MLE is
    ``E / n_class`` with the chi-square interval of :func:`estimate_mtbf`; the rates add up to
    the job's rate (Meeker & Escobar 1998, section 15.2, "competing risks").

    Args:
        exposure_s: running time E, seconds, >= 0.
        counts: failure class -> interruptions of that class.
        confidence: confidence level, in (0, 1).

    Returns:
        Class -> estimate, in the order of ``counts``.
    """
    return {
        name: estimate_mtbf(exposure_s, count, confidence=confidence)
        for name, count in counts.items()
    }


@dataclass(frozen=True, slots=True)
class WeibullFit:
    """A Weibull fit of the running time between interruptions.

    Attributes:
        shape: MLE of the shape k (k < 1: failures cluster after a restart, the usual case in
            HPC fleets; k = 1: exponential; k > 1: wear-out).
        shape_ci: profile-likelihood confidence interval of k.
        scale_s: MLE of the scale λ, seconds.
        mean_s: mean time between failures of the fit, ``λ·Γ(1 + 1/k)``, seconds.
        n_failures: interruptions the fit used.
        p_exponential: p-value of the likelihood-ratio test of k = 1 (the exponential).
    """

    shape: float
    shape_ci: tuple[float, float]
    scale_s: float
    mean_s: float
    n_failures: int
    p_exponential: float

    @property
    def not_exponential(self) -> bool:
        """True when the shape is clearly not 1: the likelihood-ratio test rejects the
        exponential at the 1% level. A 10% level would call one exponential job in ten Weibull."""
        return self.p_exponential < 0.01

    @property
    def cv(self) -> float:
        """Coefficient of variation of the fitted lives,
        ``sqrt(Γ(1 + 2/k) / Γ(1 + 1/k)² − 1)`` (1 for the exponential; ≈ 1.46 at k = 0.7)."""
        return math.sqrt(
            math.gamma(1.0 + 2.0 / self.shape) / math.gamma(1.0 + 1.0 / self.shape) ** 2 - 1.0
        )


def widen_mtbf_ci(mtbf: MtbfEstimate, cv: float) -> MtbfEstimate:
    """The chi-square interval of M stretched (in log scale, about M) by the lives' CV.

    The chi-square interval of :func:`estimate_mtbf` assumes exponential lives, whose
    coefficient of variation is 1; a mean of n lives has a standard deviation of ``CV·M/√n``, so
    for lives with another CV (a Weibull fit, :attr:`WeibullFit.cv`) each bound becomes
    ``M·(bound/M)^CV``: wider for k < 1 (failures in bursts), narrower for k > 1. A delta-method
    approximation (Meeker & Escobar 1998, appendix B.2); M itself is unchanged.

    Raises:
        ValueError: ``cv`` is not finite and > 0.
    """
    stretch = require_positive("cv", cv)
    point = mtbf.mtbf_s
    if point is None:
        return mtbf

    def bound(value: float | None) -> float | None:
        return None if value is None else point * (value / point) ** stretch

    return replace(mtbf, lower_s=bound(mtbf.lower_s), upper_s=bound(mtbf.upper_s))


def fit_weibull(
    gaps_s: Sequence[float] | FloatArray,
    censored_s: float = 0.0,
    *,
    confidence: float = 0.9,
    min_failures: int = 10,
) -> WeibullFit | None:
    """Maximum-likelihood Weibull fit of times between failures, the last one right-censored.

    With r failure times ``t_i`` and all times (censored included) ``u_j``, the scale that
    maximises the likelihood for a given shape is ``λ^k = Σ u_j^k / r``, leaving the profile
    log-likelihood ``ℓ(k) = r·ln k − r·ln(Σ u_j^k / r) + (k − 1)·Σ ln t_i − r``, maximised over k
    numerically; the shape's interval is ``{k : 2(ℓ(k̂) − ℓ(k)) <= χ²(confidence; 1)}``
    (Lawless, "Statistical Models and Methods for Lifetime Data", 2nd ed., 2003, sections 5.2
    and 5.4). Times between failures of HPC systems fit a Weibull with k ≈ 0.7–0.8 (Schroeder &
    Gibson, "A large-scale study of failures in high-performance computing systems", DSN 2006).

    Args:
        gaps_s: shape (r,), running time before each failure, seconds, > 0 (others dropped).
        censored_s: running time since the last failure, seconds, >= 0 (0: none).
        confidence: level of the shape's interval, in (0, 1).
        min_failures: fewer usable failures than this give None, >= 2.

    Returns:
        The fit, or None with too few failures.

    Raises:
        ValueError: bad ``censored_s``, ``confidence`` or ``min_failures``.
    """
    level = require_probability("confidence", confidence)
    tail = require_non_negative("censored_s", censored_s)
    require_count("min_failures", min_failures, minimum=2)
    failed = np.asarray(gaps_s, np.float64)
    failed = failed[np.isfinite(failed) & (failed > 0.0)]
    r = int(failed.size)
    if r < min_failures:
        return None
    unit = float(np.mean(failed))  # work in units of the mean gap: no overflow in u**k
    log_failed = np.log(failed / unit)
    log_all = np.concatenate((log_failed, [math.log(tail / unit)] if tail > 0 else []))
    sum_log = float(log_failed.sum())

    def log_sum_pow(k: float) -> float:  # ln Σ u_j^k, without overflow
        scaled = k * log_all
        top = float(scaled.max())
        return top + math.log(float(np.exp(scaled - top).sum()))

    def loglik(log_k: float) -> float:
        k = math.exp(log_k)
        return r * log_k - r * (log_sum_pow(k) - math.log(r)) + (k - 1) * sum_log

    def score(log_k: float) -> float:  # dℓ/d(ln k) = k·dℓ/dk, decreasing: ℓ is unimodal
        k = math.exp(log_k)
        weights = np.exp(k * log_all - k * float(log_all.max()))
        mean_log = float(weights @ log_all) / float(weights.sum())  # Σ u^k ln u / Σ u^k
        return r - r * k * mean_log + k * sum_log

    lo, hi = math.log(0.02), math.log(50.0)
    log_k = lo if score(lo) <= 0 else hi if score(hi) >= 0 else _bisect(score, lo, hi)
    top = loglik(log_k)
    drop = chi2_1_isf(1.0 - level) / 2.0

    def edge(bound: float) -> float:
        if top - loglik(bound) <= drop:
            return math.exp(bound)
        return math.exp(_bisect(lambda x: top - loglik(x) - drop, log_k, bound))

    k = math.exp(log_k)
    p_exponential = chi2_1_sf(max(0.0, 2.0 * (top - loglik(0.0))))
    scale_s = unit * math.exp((log_sum_pow(k) - math.log(r)) / k)
    return WeibullFit(
        shape=k,
        shape_ci=(edge(lo), edge(hi)),
        scale_s=scale_s,
        mean_s=scale_s * math.gamma(1.0 + 1.0 / k),
        n_failures=r,
        p_exponential=p_exponential,
    )


def _bisect(f: Callable[[float], float], a: float, b: float) -> float:
    """A root of ``f`` between ``a`` and ``b``, where ``f`` changes sign once (monotone), to
    ~1e-12: bisection, which cannot fail on such a function."""
    fa = f(a)
    for _ in range(200):
        mid = 0.5 * (a + b)
        if abs(b - a) <= 1e-12 or mid in (a, b):
            break
        fm = f(mid)
        if fm == 0.0:
            return mid
        if (fm < 0.0) == (fa < 0.0):
            a, fa = mid, fm
        else:
            b = mid
    return 0.5 * (a + b)
