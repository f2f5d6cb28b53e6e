"""Monte Carlo of a job that saves to two tiers, to check the two-level model by brute force.

The job of :mod:`rules.two_level`: it computes ``T1``, then saves for ``C1`` to the fast tier
(every ``k``-th save: ``C2`` to the persistent tier), and so on; saves are scheduled by work
done (as ``save_steps`` is), so after a rollback the next persistent save is still at the next
multiple of ``k·T1``. Interruptions of each failure class arrive as a Poisson process in running
time, with its own rate; :func:`rules.tiers.surviving_tier` says whether a fast copy survives
it. One that a fast copy survives rolls the job back to its last completed save of either tier
and costs ``R1``; any other rolls it back to its last completed persistent save and costs ``R2``.
A save interrupted mid-way is not complete. The running time after the last interruption (a
censored tail) keeps its compute, as in :func:`rules.simulate.replay`.

Every plan is replayed against the same interruptions (common random numbers), so the
differences between plans are not noise between draws; replicates and plans are replayed
together as numpy arrays, one interruption at a time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ckpt_advisor.rules._checks import require_count, require_non_negative, require_positive
from ckpt_advisor.rules.tiers import DEFAULT_SURVIVAL, Survival, Tier, surviving_tier
from ckpt_advisor.rules.timeline import BoolArray, FloatArray

Plan = tuple[float, int]
"""``(T1 seconds, k)``: compute between saves, and saves per persistent save."""


@dataclass(frozen=True, slots=True)
class Interruptions:
    """Drawn interruptions of ``replicates`` jobs, padded to one length.

    Attributes:
        lives_s: shape (r, f), running time before each interruption, seconds (0 past the end).
        recoverable: shape (r, f), True where a fast copy survives the interruption.
        present: shape (r, f), False for padding.
        tail_s: shape (r,), censored running time after the last interruption, seconds.
        wall_s: shape (r,), each job's wall-clock length (lives, restarts and tail), seconds.
    """

    lives_s: FloatArray
    recoverable: BoolArray
    present: BoolArray
    tail_s: FloatArray
    wall_s: FloatArray


def draw_interruptions(
    rng: np.random.Generator,
    *,
    class_mtbf_s: Mapping[str, float],
    fast_tier: Tier = Tier.MEMORY,
    table: Mapping[str, Survival] = DEFAULT_SURVIVAL,
    fast_restart_s: float,
    persistent_restart_s: float,
    horizon_s: float,
    replicates: int,
) -> Interruptions:
    """Interruptions of ``replicates`` jobs that each run ``horizon_s`` of wall time.

    The classes are independent Poisson processes in running time (competing risks): lives
    are exponential with rate ``Σ 1/M_c`` and each interruption's class is drawn in proportion
    to its rate. The restart after it (``R1`` when a copy in ``fast_tier`` survives the class,
    else ``R2``) is downtime; the life running at the horizon is cut there (the tail).

    Args:
        rng: the random source.
        class_mtbf_s: failure class -> its MTBF, seconds, > 0 (at least one class).
        fast_tier: the fast tier (memory or local).
        table: which tier survives each class (:data:`rules.tiers.DEFAULT_SURVIVAL`).
        fast_restart_s: R1, seconds, >= 0.
        persistent_restart_s: R2, seconds, >= 0.
        horizon_s: wall-clock length of each job, seconds, > 0.
        replicates: jobs, >= 1.

    Raises:
        ValueError: an argument out of range.
    """
    if not class_mtbf_s:
        raise ValueError("class_mtbf_s needs at least one failure class")
    rates = np.array([1.0 / require_positive(name, m) for name, m in class_mtbf_s.items()])
    survives = np.array(
        [surviving_tier(name, table).tier.rank <= fast_tier.rank for name in class_mtbf_s]
    )
    restart = np.where(
        survives,
        require_non_negative("fast_restart_s", fast_restart_s),
        require_non_negative("persistent_restart_s", persistent_restart_s),
    )
    horizon = require_positive("horizon_s", horizon_s)
    require_count("replicates", replicates, minimum=1)
    total_rate = float(rates.sum())
    jobs = []
    for _ in range(replicates):
        n = int(horizon * total_rate * 1.3) + 16
        while True:
            lives = rng.standard_exponential(n) / total_rate
            classes = rng.choice(rates.size, size=n, p=rates / total_rate)
            ends = np.cumsum(lives + restart[classes]) - restart[classes]
            if ends[-1] >= horizon:
                break
            n *= 2
        last = int(np.searchsorted(ends, horizon, "right"))
        started = float(ends[last - 1] + restart[classes[last - 1]]) if last else 0.0
        jobs.append((lives[:last], survives[classes[:last]], max(0.0, horizon - started)))
    width = max(1, max(len(lives) for lives, _, _ in jobs))
    lives_s = np.zeros((replicates, width))
    recoverable = np.zeros((replicates, width), bool)
    present = np.zeros((replicates, width), bool)
    for i, (lives, surv, _) in enumerate(jobs):
        lives_s[i, : lives.size] = lives
        recoverable[i, : lives.size] = surv
        present[i, : lives.size] = True
    tail_s = np.array([tail for _, _, tail in jobs])
    return Interruptions(lives_s, recoverable, present, tail_s, np.full(replicates, horizon))


def _completed(
    done: FloatArray, x: FloatArray, t1: FloatArray, k: FloatArray, c1: float, c2: float
) -> FloatArray:
    """Segments completed in running time ``x`` from segment index ``done`` (all arrays).

    Segment g (0-based) is ``T1`` of compute and a save, persistent when ``(g+1) % k == 0``.
    """
    fast = t1 + c1
    period = k * fast + (c2 - c1)
    j = np.mod(done, k)  # segments already done in the current pattern
    rest = (k - j) * fast + (c2 - c1)  # time to finish the current pattern
    within = np.minimum(np.floor(x / fast), k - j - 1)
    over = np.maximum(x - rest, 0.0)
    full = np.floor(over / period)
    rem = over - full * period
    beyond = (k - j) + full * k + np.minimum(np.floor(rem / fast), k - 1)
    return np.where(x < rest, within, beyond)


def replay_plans(
    plans: Sequence[Plan],
    drawn: Interruptions,
    *,
    fast_cost_s: float,
    persistent_cost_s: float,
) -> FloatArray:
    """Goodput of each plan on each drawn job: useful work over wall time.

    Args:
        plans: ``(T1, k)`` pairs, T1 > 0 seconds, k >= 1.
        drawn: the jobs (:func:`draw_interruptions`).
        fast_cost_s: C1, seconds, > 0.
        persistent_cost_s: C2, seconds, > 0.

    Returns:
        Shape (plans, replicates), in [0, 1].

    Raises:
        ValueError: a plan or cost out of range.
    """
    c1 = require_positive("fast_cost_s", fast_cost_s)
    c2 = require_positive("persistent_cost_s", persistent_cost_s)
    for plan_t1, plan_k in plans:
        require_positive("T1", plan_t1)
        require_count("k", plan_k, minimum=1)
    t1 = np.array([float(p[0]) for p in plans])[:, None]
    k = np.array([float(p[1]) for p in plans])[:, None]
    done = np.zeros((len(plans), drawn.tail_s.size))
    for f in range(drawn.lives_s.shape[1]):
        reached = done + _completed(done, drawn.lives_s[None, :, f], t1, k, c1, c2)
        rolled = np.where(drawn.recoverable[None, :, f], reached, np.floor(reached / k) * k)
        done = np.where(drawn.present[None, :, f], rolled, done)
    tail = drawn.tail_s[None, :]
    finished = done + _completed(done, tail, t1, k, c1, c2)
    persistent = np.floor(finished / k) - np.floor(done / k)
    spent = (finished - done) * (t1 + c1) + persistent * (c2 - c1)
    useful = finished * t1 + np.minimum(tail - spent, t1)
    goodput: FloatArray = useful / drawn.wall_s[None, :]
    return goodput


@dataclass(frozen=True, slots=True)
class BruteForce:
    """The best plan of a grid, and how a given plan compares with it in the same simulation.

    Attributes:
        best: the grid's plan of highest mean goodput.
        best_goodput: its mean goodput over the replicates.
        plan_goodput: the mean goodput of the plan checked.
        difference_stderr: standard error of ``best_goodput − plan_goodput`` (paired).
    """

    best: Plan
    best_goodput: float
    plan_goodput: float
    difference_stderr: float

    @property
    def shortfall(self) -> float:
        """``best_goodput − plan_goodput``: goodput the checked plan leaves (may be < 0)."""
        return self.best_goodput - self.plan_goodput


def plan_grid(
    center: Plan, *, span: float = 3.0, points: int = 25, k_max: int | None = None
) -> list[Plan]:
    """A grid around ``center``: T1 log-spaced over [T1/span, T1·span], k from k/3 to k_max.

    ``k_max`` defaults to ``max(3·k, 6)``; k starts at ``max(1, k // 3)``.

    Raises:
        ValueError: ``span`` <= 1, ``points`` < 2, a bad center.
    """
    t1 = require_positive("T1", center[0])
    if require_positive("span", span) <= 1.0:
        raise ValueError(f"span must be > 1, got {span!r}")
    require_count("points", points, minimum=2)
    k_center = require_count("k", center[1], minimum=1)
    top = k_max if k_max is not None else max(3 * k_center, 6)
    return [
        (float(t), k)
        for k in range(max(1, k_center // 3), top + 1)
        for t in t1 * np.geomspace(1.0 / span, span, points)
    ]


def brute_force(
    plan: Plan,
    grid: Sequence[Plan],
    drawn: Interruptions,
    *,
    fast_cost_s: float,
    persistent_cost_s: float,
) -> BruteForce:
    """Replay ``plan`` and every plan of ``grid`` on the same jobs; report the best.

    Raises:
        ValueError: an empty grid, or a plan or cost out of range.
    """
    if not grid:
        raise ValueError("grid is empty")
    goodput = replay_plans(
        [plan, *grid], drawn, fast_cost_s=fast_cost_s, persistent_cost_s=persistent_cost_s
    )
    means = goodput.mean(axis=1)
    best = int(np.argmax(means[1:])) + 1
    diff = goodput[best] - goodput[0]
    stderr = float(diff.std(ddof=1) / math.sqrt(diff.size)) if diff.size > 1 else math.nan
    return BruteForce(grid[best - 1], float(means[best]), float(means[0]), stderr)
