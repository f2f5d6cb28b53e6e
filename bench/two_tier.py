"""The two-level pair against a brute force over both intervals: ``python -m bench.two_tier``.

For each generated job (fast-save cost C1, persistent cost C2, MTBF M of all interruptions, the
share f that a fast copy survives; restarts R1 = 1 min, R2 = 10 min), interruptions are drawn
per failure class (``nccl_timeout`` at rate f/M, which a memory copy survives; ``node_failure``
at (1−f)/M, which it does not; :mod:`rules.tiers`) for ``--replicates`` jobs of ``--days`` each,
and every plan of a grid (T1 over [T1*/3, 3·T1*] in 15 steps, k over 15 values from k*/3 to
3·k*) is replayed against the same interruptions (:mod:`rules.simulate_tiers`). It prints the
exact model's pair (:func:`rules.two_level.optimal_plan`), the brute-force best, the goodput
the model's pair leaves (its shortfall, with the paired standard error), the same for Benoit
et al.'s first-order pair, and the model's goodput beside the simulated one. The acceptance
bound of issue 17: a shortfall under 1% goodput on every job.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from dataclasses import asdict, dataclass

import numpy as np

from ckpt_advisor.rules.simulate_tiers import brute_force, draw_interruptions
from ckpt_advisor.rules.two_level import TwoTierJob, first_order_plan, optimal_plan

HOUR_S = 3600.0
DAY_S = 86400.0
FAST_COSTS_S = (1.0, 5.0, 30.0)
PERSISTENT_COSTS_S = (120.0, 600.0)
MTBFS_S = (2 * HOUR_S, 6 * HOUR_S, 24 * HOUR_S)
FRACTIONS = (0.25, 0.5, 0.75, 0.9)
R1_S, R2_S = 60.0, 600.0


@dataclass(frozen=True)
class Row:
    """One job: the model's pair, the brute force's, and the goodput between them."""

    fast_cost_s: float
    persistent_cost_s: float
    mtbf_s: float
    fraction: float
    model_t1_s: float
    model_k: int
    best_t1_s: float
    best_k: int
    shortfall: float
    shortfall_stderr: float
    first_order_shortfall: float
    model_goodput: float
    simulated_goodput: float
    seconds: float


def grid(t1_s: float, k: int) -> list[tuple[float, int]]:
    """15 × 15 plans around (T1, k), log-spaced in both."""
    ks = sorted({max(1, round(k * x)) for x in np.geomspace(1 / 3, 3, 15)} | {1})
    return [(float(t), n) for n in ks for t in t1_s * np.geomspace(1 / 3, 3, 15)]


def run_job(
    c1: float, c2: float, mtbf: float, fraction: float, *, days: float, replicates: int, seed: int
) -> Row:
    """Brute-force one job and compare the model's pair with the best."""
    started = time.perf_counter()
    job = TwoTierJob.from_fraction(
        fast_cost_s=c1,
        persistent_cost_s=c2,
        mtbf_s=mtbf,
        recoverable_fraction=fraction,
        fast_restart_s=R1_S,
        persistent_restart_s=R2_S,
    )
    plan, first = optimal_plan(job), first_order_plan(job)
    drawn = draw_interruptions(
        np.random.default_rng(seed),
        class_mtbf_s={"nccl_timeout": mtbf / fraction, "node_failure": mtbf / (1 - fraction)},
        fast_restart_s=R1_S,
        persistent_restart_s=R2_S,
        horizon_s=days * DAY_S,
        replicates=replicates,
    )
    pair = (plan.fast_interval_s, plan.saves_per_persistent)
    plans = grid(*pair)
    result = brute_force(pair, plans, drawn, fast_cost_s=c1, persistent_cost_s=c2)
    fo = brute_force(
        (first.fast_interval_s, first.saves_per_persistent),
        plans,
        drawn,
        fast_cost_s=c1,
        persistent_cost_s=c2,
    )
    return Row(
        c1, c2, mtbf, fraction, pair[0], pair[1], result.best[0], result.best[1],
        result.shortfall, result.difference_stderr, fo.shortfall, plan.goodput,
        result.plan_goodput, time.perf_counter() - started,
    )  # fmt: skip


def main() -> None:
    """Print the table (or JSON lines with ``--json``) for every generated job."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=float, default=60.0)
    parser.add_argument("--replicates", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [
        run_job(c1, c2, m, f, days=args.days, replicates=args.replicates, seed=args.seed + i)
        for i, (c1, c2, m, f) in enumerate(
            itertools.product(FAST_COSTS_S, PERSISTENT_COSTS_S, MTBFS_S, FRACTIONS)
        )
    ]
    if args.json:
        for row in rows:
            print(json.dumps(asdict(row)))
        return
    print(
        f"{'C1':>4} {'C2':>4} {'M':>4} {'f':>4} | {'T1':>6} {'k':>4} | {'best T1':>7} {'k':>4} | "
        f"{'short':>7} {'±':>6} {'1st ord':>7} | {'model':>6} {'sim':>6}"
    )
    for r in rows:
        print(
            f"{r.fast_cost_s:4.0f} {r.persistent_cost_s:4.0f} {r.mtbf_s / HOUR_S:3.0f}h "
            f"{r.fraction:4.2f} | {r.model_t1_s:6.0f} {r.model_k:4d} | {r.best_t1_s:7.0f} "
            f"{r.best_k:4d} | {r.shortfall:+7.2%} {r.shortfall_stderr:6.2%} "
            f"{r.first_order_shortfall:+7.2%} | {r.model_goodput:6.2%} {r.simulated_goodput:6.2%}"
        )
    worst = max(rows, key=lambda r: r.shortfall)
    print(
        f"{len(rows)} jobs, {args.replicates} x {args.days:g} days each: largest shortfall "
        f"{worst.shortfall:.2%} (first order: {max(r.first_order_shortfall for r in rows):.2%}); "
        f"largest |model - simulated| goodput "
        f"{max(abs(r.model_goodput - r.simulated_goodput) for r in rows):.2%}; "
        f"{sum(r.seconds for r in rows):.0f} s"
    )


if __name__ == "__main__":
    main()
