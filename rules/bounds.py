"""The advice over the plausible checkpoint cost: a bound of C carried to the interval and waste.

C from a timing file is exact up to its confidence interval. C from log lines is a lower bound
(HF Trainer logs no end of the optimizer-state write: 43 s seen where a save took 120 s), with
an upper bound only where a progress bar keeps time after the save
(:func:`rules.estimates.checkpoint_upper_bounds_s`). Daly's interval grows with C (within its
branch, FGCS 22(3), 2006, eq. 37), so the plausible C gives a range of recommended intervals,
open above when C is; the excess GPU-hours of the current interval are given over the same C.
"""

from __future__ import annotations

import itertools

import numpy as np

from ckpt_advisor.rules.estimates import CheckpointCost, MtbfEstimate
from ckpt_advisor.rules.interval import (
    daly_interval_s,
    excess_gpu_hours_per_day,
    exponential_waste_fraction,
)

GRID_POINTS = 9
"""Costs, log-spaced over the plausible C, at which the excess is evaluated (it need not be
monotone in C: the current interval and the optimum both move with it)."""


def interval_range_s(
    mtbf: MtbfEstimate, cost: CheckpointCost | None
) -> tuple[float, float | None] | None:
    """Daly's interval over the corners of M's confidence interval and the plausible C
    (:attr:`CheckpointCost.range_s`): ``(low, high)`` seconds, ``high`` None when C has no
    upper bound; None when M's interval or C is unknown."""
    if mtbf.ci_s is None or cost is None:
        return None
    low_c, high_c = cost.range_s
    lows = [daly_interval_s(m, low_c) for m in mtbf.ci_s]
    if high_c is None:
        return min(lows), None
    corners = [daly_interval_s(m, c) for m, c in itertools.product(mtbf.ci_s, (low_c, high_c))]
    return min(corners), max(corners)


def excess_range(
    mtbf_s: float,
    cost: CheckpointCost,
    spacing_s: float,
    restart_s: float,
    gpus: int,
) -> tuple[float, float] | None:
    """The excess GPU-hours a day of the current interval over the plausible C.

    For each C on a grid over :attr:`CheckpointCost.range_s`, the current interval is the save
    spacing minus C (as :func:`rules.estimates.current_interval_s` measures it) and the excess
    is :func:`rules.interval.excess_gpu_hours_per_day` of its waste over the waste at Daly's
    interval for that C (:func:`rules.interval.exponential_waste_fraction`).

    Args:
        mtbf_s: M, seconds, > 0.
        cost: the checkpoint cost estimate.
        spacing_s: median spacing of consecutive saves, seconds, > 0.
        restart_s: restart cost R, seconds, >= 0.
        gpus: the job's GPU count, >= 1.

    Returns:
        ``(low, high)`` GPU-hours a day; None when C has no upper bound.
    """
    low_c, high_c = cost.range_s
    if high_c is None:
        return None
    excess: list[float] = []
    for cost_s in np.geomspace(low_c, high_c, GRID_POINTS) if high_c > low_c else [low_c]:
        cost_s = float(cost_s)
        current_s = spacing_s - cost_s if spacing_s > cost_s else spacing_s
        optimum_s = daly_interval_s(mtbf_s, cost_s)
        waste_now = exponential_waste_fraction(current_s, mtbf_s, cost_s, restart_s)
        waste_best = exponential_waste_fraction(optimum_s, mtbf_s, cost_s, restart_s)
        excess.append(excess_gpu_hours_per_day(waste_now, waste_best, gpus))
    return min(excess), max(excess)
