"""The optimum pair of checkpoint intervals for a job that saves to two tiers.

The pattern (Benoit, Cavelan, Le Fèvre, Robert, Sun, "Towards Optimal Multi-Level
Checkpointing", IEEE Trans. Computers 66(7):1212-1226, 2017; Di, Robert, Vivien, Cappello,
"Toward an Optimal Online Checkpoint Solution under a Two-Level HPC Checkpoint Model", IEEE
TPDS 28(1):244-259, 2017, who show that periodic patterns are optimal for two levels): the job
computes ``T1`` seconds, then saves; every ``k``-th save goes to the persistent tier, the others
to the fast tier (host memory or local disk). So ``T2 = k·T1`` of compute separates persistent
saves. In our notation:

* ``C1`` — blocking cost of a fast save; ``C2`` — blocking cost of a persistent save. A
  persistent save stands in for the fast save at its point and leaves a copy the fast tier
  restores from (DLRover's storage save writes shared memory first, then persists it), so the
  extra cost of a persistent point is ``C2 − C1``; Benoit et al.'s level-2 cost is that extra.
* ``M1`` — MTBF of the interruptions a fast copy survives (a crashed process, an NCCL timeout:
  :mod:`rules.tiers`), restart ``R1``; the job rolls back to its last save of either tier.
* ``M2`` — MTBF of the interruptions that need the persistent copy (a lost node), restart
  ``R2``; the job rolls back to its last persistent save.

First order (the model Benoit et al. minimise; it extends Young's ``C/T + T/(2M)``): per unit of
time the saves cost ``((k−1)·C1 + C2)/(k·T1)``, an ``M1`` interruption loses ``T1/2 + R1`` on
average and an ``M2`` one ``k·T1/2 + R2``::

    W(T1, k) = C1/T1 + (C2 − C1)/(k·T1) + (T1/2 + R1)/M1 + (k·T1/2 + R2)/M2

Setting both partial derivatives to zero gives, for real ``k``::

    T1* = sqrt(2·M1·C1)          T2* = k*·T1* = sqrt(2·M2·(C2 − C1))
    k*  = sqrt((C2 − C1)·M2 / (C1·M1))
    W*  = sqrt(2·C1/M1) + sqrt(2·(C2 − C1)/M2) + R1/M1 + R2/M2

which is Benoit et al.'s overhead ``Σ_ℓ sqrt(2·λ_ℓ·C_ℓ)`` (their abstract) for two levels: each
tier takes Young's interval for its own extra cost and its own failures. ``k`` must be a whole
number: for a fixed ``k`` the best ``T1`` is ``sqrt(2·(C1 + (C2−C1)/k) / (1/M1 + k/M2))``, and
:func:`first_order_plan` keeps the better of ``floor(k*)`` and ``ceil(k*)``.

Exact model (:func:`two_tier_waste_fraction`; the approach of Di et al., who rely on no
first-order approximation, and of Moody, Bronevetsky, Mohror, de Supinski, "Design, Modeling,
and Evaluation of a Scalable Multi-level Checkpointing System", SC'10, whose Markov model of SCR
they search numerically for the best intervals): with exponential interruptions the pattern is a
renewal cycle, and the expected wall time of one pattern has a closed form (derived in
:func:`two_tier_waste_fraction`). :func:`optimal_plan` minimises it over ``T1`` and whole ``k``,
starting from the first-order pair; ``rules/simulate_tiers.py`` checks the pair against a brute
force over both intervals in a Monte Carlo of the same job (within 1% goodput; a test, and
``python -m bench.two_tier`` for a bigger sweep).

All durations are seconds. ``M1`` may be ``math.inf`` (no interruption a fast copy survives:
the fast tier is useless, ``k = 1``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ckpt_advisor.rules._checks import require_count, require_non_negative, require_positive

_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
MAX_SAVES_PER_PERSISTENT = 100_000
"""Largest ``k`` considered: fast saves of a few milliseconds against hourly persistent ones."""


@dataclass(frozen=True, slots=True)
class TwoTierJob:
    """What the two-level model needs about a job.

    Attributes:
        fast_cost_s: blocking cost C1 of a save to the fast tier, > 0.
        persistent_cost_s: blocking cost C2 of a persistent save, > 0.
        mtbf_recoverable_s: M1, MTBF of the interruptions a fast copy survives, > 0 (inf: none).
        mtbf_persistent_s: M2, MTBF of the interruptions that need the persistent copy, > 0.
        fast_restart_s: R1, downtime before training runs again from a fast copy, >= 0.
        persistent_restart_s: R2, downtime before it runs again from the persistent copy, >= 0.

    Raises:
        ValueError: a value out of range (named).
    """

    fast_cost_s: float
    persistent_cost_s: float
    mtbf_recoverable_s: float
    mtbf_persistent_s: float
    fast_restart_s: float = 0.0
    persistent_restart_s: float = 0.0

    def __post_init__(self) -> None:
        require_positive("fast_cost_s", self.fast_cost_s)
        require_positive("persistent_cost_s", self.persistent_cost_s)
        if not (self.mtbf_recoverable_s > 0.0):  # inf allowed
            raise ValueError(f"mtbf_recoverable_s must be > 0, got {self.mtbf_recoverable_s!r}")
        require_positive("mtbf_persistent_s", self.mtbf_persistent_s)
        require_non_negative("fast_restart_s", self.fast_restart_s)
        require_non_negative("persistent_restart_s", self.persistent_restart_s)

    @classmethod
    def from_fraction(
        cls,
        *,
        fast_cost_s: float,
        persistent_cost_s: float,
        mtbf_s: float,
        recoverable_fraction: float,
        fast_restart_s: float = 0.0,
        persistent_restart_s: float = 0.0,
    ) -> TwoTierJob:
        """The job whose interruptions (MTBF ``mtbf_s``) a fast copy survives in the given share.

        ``M1 = M / f`` and ``M2 = M / (1 − f)`` (a Poisson process thinned with probability f).

        Raises:
            ValueError: ``recoverable_fraction`` outside [0, 1) or a bad duration.
        """
        mtbf = require_positive("mtbf_s", mtbf_s)
        if not 0.0 <= recoverable_fraction < 1.0:
            raise ValueError(
                f"recoverable_fraction must be in [0, 1), got {recoverable_fraction!r}"
            )
        return cls(
            fast_cost_s,
            persistent_cost_s,
            mtbf / recoverable_fraction if recoverable_fraction > 0 else math.inf,
            mtbf / (1.0 - recoverable_fraction),
            fast_restart_s,
            persistent_restart_s,
        )


@dataclass(frozen=True, slots=True)
class TwoTierPlan:
    """A pair of intervals and the waste the exact model gives it.

    Attributes:
        fast_interval_s: T1, compute time between consecutive saves (of either tier).
        saves_per_persistent: k >= 1; every k-th save is persistent (1: all are).
        waste_fraction: expected share of wall time lost (:func:`two_tier_waste_fraction`).
        model: ``"first_order"`` (Benoit et al.'s closed form) or ``"exact"`` (minimised).
    """

    fast_interval_s: float
    saves_per_persistent: int
    waste_fraction: float
    model: str

    @property
    def persistent_interval_s(self) -> float:
        """T2 = k·T1, compute time between persistent saves."""
        return self.fast_interval_s * self.saves_per_persistent

    @property
    def goodput(self) -> float:
        """``1 − waste_fraction``."""
        return 1.0 - self.waste_fraction


def first_order_waste_fraction(job: TwoTierJob, fast_interval_s: float, k: int) -> float:
    """``W(T1, k)`` of the first-order model (module docstring); not clipped at 1.

    Raises:
        ValueError: ``fast_interval_s`` <= 0 or ``k`` < 1.
    """
    t1 = require_positive("fast_interval_s", fast_interval_s)
    require_count("k", k, minimum=1)
    c1, c2 = job.fast_cost_s, job.persistent_cost_s
    rate1, rate2 = 1.0 / job.mtbf_recoverable_s, 1.0 / job.mtbf_persistent_s
    return (
        ((k - 1) * c1 + c2) / (k * t1)
        + rate1 * (t1 / 2.0 + job.fast_restart_s)
        + rate2 * (k * t1 / 2.0 + job.persistent_restart_s)
    )


def _first_order_t1(job: TwoTierJob, k: int) -> float:
    """The best T1 of the first-order model for a fixed k."""
    rate1, rate2 = 1.0 / job.mtbf_recoverable_s, 1.0 / job.mtbf_persistent_s
    extra = job.persistent_cost_s - job.fast_cost_s
    return math.sqrt(2.0 * (job.fast_cost_s + extra / k) / (rate1 + rate2 * k))


def first_order_saves_per_persistent(job: TwoTierJob) -> float:
    """The real ``k* = sqrt((C2 − C1)·M2 / (C1·M1))``; 1 when ``C2 <= C1`` or ``M1`` is inf."""
    extra = job.persistent_cost_s - job.fast_cost_s
    if extra <= 0.0 or math.isinf(job.mtbf_recoverable_s):
        return 1.0
    k = math.sqrt(extra * job.mtbf_persistent_s / (job.fast_cost_s * job.mtbf_recoverable_s))
    return min(max(k, 1.0), float(MAX_SAVES_PER_PERSISTENT))


def first_order_plan(job: TwoTierJob) -> TwoTierPlan:
    """Benoit et al.'s first-order optimum (module docstring), with a whole number of saves.

    Returns:
        The better (by first-order waste) of ``floor(k*)`` and ``ceil(k*)`` with its best T1;
        its ``waste_fraction`` is the exact model's, so plans compare on one scale.
    """
    k_real = first_order_saves_per_persistent(job)
    candidates = {max(1, math.floor(k_real)), max(1, math.ceil(k_real))}
    k = min(candidates, key=lambda n: first_order_waste_fraction(job, _first_order_t1(job, n), n))
    t1 = _first_order_t1(job, k)
    return TwoTierPlan(t1, k, two_tier_waste_fraction(job, t1, k), "first_order")


def two_tier_waste_fraction(job: TwoTierJob, fast_interval_s: float, k: int) -> float:
    """Expected share of wall time lost by the pattern (T1, k), exponential interruptions.

    A pattern is ``k`` segments: compute ``T1``, then save (``C1``; the k-th, ``C2``). Each
    interruption class is a Poisson process (rates ``λ1 = 1/M1``, ``λ2 = 1/M2``, ``λ = λ1 + λ2``);
    an interruption during a segment of length ``s`` (compute or save) costs the time spent in
    it, then ``R1`` and a retry of the segment (``λ1``), or ``R2`` and a restart of the pattern
    from its start (``λ2``). Restarts are not interrupted (as in :mod:`rules.simulate`). With
    ``p = e^(−λ·s)``, ``q = 1 − p``, the expected time ``F_j`` from the start of segment j to the
    pattern's end satisfies::

        F_j = q/λ + q·(λ1/λ)·(R1 + F_j) + q·(λ2/λ)·(R2 + F_1) + p·F_(j+1),   F_(k+1) = 0

    (``E[min(X, s)] = q/λ`` for an exponential X). Segments 1..k−1 are alike, so the recurrence
    ``F_j = α + β·F_(j+1) + γ·F_1`` sums as a geometric series and ``F_1`` is found in closed
    form. By the renewal-reward theorem the goodput is ``k·T1 / F_1``; the waste is
    ``1 − k·T1 / F_1``. For ``k = 1`` and ``λ1 = 0`` this is Daly's full model with a restart
    that is never interrupted: ``(e^((T+C)/M) − 1)·(M + R)`` per pattern.

    Args:
        job: costs, MTBFs, restarts.
        fast_interval_s: T1, seconds, > 0.
        k: saves per persistent save, >= 1.

    Returns:
        The waste fraction in [0, 1].

    Raises:
        ValueError: ``fast_interval_s`` <= 0 or ``k`` < 1.
    """
    t1 = require_positive("fast_interval_s", fast_interval_s)
    require_count("k", k, minimum=1)
    time_s = _pattern_time_s(job, t1, k)
    return 1.0 if math.isinf(time_s) else max(0.0, 1.0 - k * t1 / time_s)


def _pattern_time_s(job: TwoTierJob, t1: float, k: int) -> float:
    """Expected wall time ``F_1`` of one pattern (see :func:`two_tier_waste_fraction`)."""
    rate1, rate2 = 1.0 / job.mtbf_recoverable_s, 1.0 / job.mtbf_persistent_s
    rate = rate1 + rate2
    per_failure = 1.0 + rate1 * job.fast_restart_s + rate2 * job.persistent_restart_s

    def segment(length_s: float) -> tuple[float, float, float, float]:
        """(α, β, γ, 1 − β) of ``F = α + β·F_next + γ·F_1`` for one segment."""
        x = rate * length_s
        if x > 700.0:
            return math.inf, 0.0, 0.0, 1.0
        grow = math.expm1(x)  # e^x − 1 = q/p
        denom = rate2 * (grow + 1.0) + rate1  # λ·d/p
        alpha = grow * per_failure / denom
        gamma = grow * rate2 / denom
        beta = rate / denom
        one_minus_beta = rate2 * grow / denom
        return alpha, beta, gamma, one_minus_beta

    a_last, _, g_last, _ = segment(t1 + job.persistent_cost_s)
    if k == 1:
        alpha, beta, gamma, m = 0.0, 1.0, 0.0, 0
    else:
        alpha, beta, gamma, one_minus_beta = segment(t1 + job.fast_cost_s)
        m = k - 1
    if math.isinf(a_last) or math.isinf(alpha):
        return math.inf
    # S = 1 + β + … + β^(m−1), computed without cancellation when β is near 1
    if m == 0:
        series, beta_m = 0.0, 1.0
    elif one_minus_beta <= 1e-12:
        series, beta_m = float(m), 1.0
    else:
        beta_m = math.exp(m * math.log(beta))
        series = -math.expm1(m * math.log(beta)) / one_minus_beta
    denominator = 1.0 - gamma * series - beta_m * g_last
    if denominator <= 0.0:
        return math.inf
    return (alpha * series + beta_m * a_last) / denominator


def _golden_min(f: Callable[[float], float], lo: float, hi: float, iters: int) -> float:
    """The argmin of a unimodal ``f`` on [lo, hi] by golden-section search."""
    a, b = lo, hi
    c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - _GOLDEN * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + _GOLDEN * (b - a)
            fd = f(d)
    return (a + b) / 2.0


def _best_t1(job: TwoTierJob, k: int) -> tuple[float, float]:
    """(T1, waste) minimising the exact waste for a fixed k (golden section in log T1)."""
    seed = _first_order_t1(job, k)

    def waste_at(log_t1: float) -> float:
        return two_tier_waste_fraction(job, math.exp(log_t1), k)

    log_t1 = _golden_min(waste_at, math.log(seed) - 3.0, math.log(seed) + 1.5, 60)
    return math.exp(log_t1), waste_at(log_t1)


def optimal_plan(job: TwoTierJob) -> TwoTierPlan:
    """The pair (T1, k) that minimises the exact model's waste.

    For each whole ``k`` the best T1 is found by golden-section search around the first-order
    T1 (the exact waste is unimodal in T1); ``k`` walks from the first-order ``k*`` towards
    smaller and larger values while the waste falls.

    Returns:
        The plan, ``model = "exact"``.
    """
    start = max(1, round(first_order_saves_per_persistent(job)))
    best: dict[int, tuple[float, float]] = {start: _best_t1(job, start)}
    for step in (-1, 1):
        k = start
        while 1 <= k + step <= MAX_SAVES_PER_PERSISTENT:
            nxt = k + step
            best[nxt] = _best_t1(job, nxt)
            if best[nxt][1] >= best[k][1]:
                break
            k = nxt
    k_best = min(best, key=lambda n: best[n][1])
    t1, waste = best[k_best]
    return TwoTierPlan(t1, k_best, waste, "exact")


def single_tier_plan(job: TwoTierJob) -> TwoTierPlan:
    """The best plan that saves only to the persistent tier (``k = 1``): the baseline.

    Every save costs C2 and every interruption rolls back to the last save, as with a single
    tier; the exact model is minimised over T (Daly's full model with failure-free restarts).
    """
    t1, waste = _best_t1(job, 1)
    return TwoTierPlan(t1, 1, waste, "exact")
