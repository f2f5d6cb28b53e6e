"""The optimum checkpoint interval (Young 1974, Daly 2006) and the waste it minimises.

All arguments and results are seconds (or a dimensionless fraction for the waste). Every function
raises :class:`ValueError` naming the argument when a duration is non-finite or out of range.
"""

from __future__ import annotations

import math

from rules._checks import require_count, require_non_negative, require_positive


def young_interval_s(mtbf_s: float, cost_s: float) -> float:
    """Young's first-order optimum checkpoint interval, ``T = sqrt(2·M·C)``.

    Source: J. W. Young, "A first order approximation to the optimum checkpoint interval",
    CACM 17(9), 1974. It minimises the first-order waste ``C/T + T/(2M)`` (see
    :func:`waste_fraction`) and is accurate while ``C << M``.

    Args:
        mtbf_s: mean time between failures M, seconds, finite and > 0.
        cost_s: wall-clock cost C of one checkpoint, seconds, finite and > 0.

    Returns:
        The interval T between the ends of consecutive checkpoints, seconds.

    Raises:
        ValueError: an argument is non-finite or <= 0.
    """
    mtbf = require_positive("mtbf_s", mtbf_s)
    cost = require_positive("cost_s", cost_s)
    return math.sqrt(2.0 * mtbf * cost)


def daly_interval_s(mtbf_s: float, cost_s: float) -> float:
    """Daly's higher-order optimum checkpoint interval.

    Source: J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart
    dumps", Future Generation Computer Systems 22(3), 2006, eq. 37::

        T = sqrt(2·C·M) · [1 + (1/3)·sqrt(C/(2M)) + (1/9)·(C/(2M))] − C    for C < 2M
        T = M                                                               for C >= 2M

    As ``C/M -> 0`` it tends to Young's ``sqrt(2·M·C)``. Within each branch T grows with M and
    with C; at ``C = 2M`` the first branch gives ``(8/9)·M`` and the second ``M``, so T jumps
    there (the paper's choice, kept as published).

    Args:
        mtbf_s: mean time between failures M, seconds, finite and > 0.
        cost_s: wall-clock cost C of one checkpoint, seconds, finite and > 0.

    Returns:
        The compute time T between checkpoints, seconds.

    Raises:
        ValueError: an argument is non-finite or <= 0.
    """
    mtbf = require_positive("mtbf_s", mtbf_s)
    cost = require_positive("cost_s", cost_s)
    if cost >= 2.0 * mtbf:
        return mtbf
    ratio = cost / (2.0 * mtbf)
    return math.sqrt(2.0 * cost * mtbf) * (1.0 + math.sqrt(ratio) / 3.0 + ratio / 9.0) - cost


def waste_fraction(
    interval_s: float, mtbf_s: float, cost_s: float, restart_s: float = 0.0
) -> float:
    """First-order fraction of wall-clock time lost to checkpoints and failures.

    ``W(T) = C/T + T/(2M) + R/M``: writing a checkpoint of cost C every T seconds loses
    ``C/T``; a failure (one per M seconds on average) lands mid-interval on average and loses
    ``T/2`` of work, ``T/(2M)`` per second; and each failure costs the restart time R, ``R/M``.
    This is the model of DESIGN.md and of Young (CACM 17(9), 1974), whose minimum is Young's
    interval ``sqrt(2·M·C)`` with ``W* = sqrt(2C/M) + R/M``; R shifts the waste but not the
    optimum. It is chosen over higher-order forms because its shape is what the advice relies on:
    running at k times the optimum multiplies the non-restart waste by ``(k + 1/k)/2``. Being
    first order, it is meaningful while ``C`` and ``T`` are small against ``M``; it is not clipped
    at 1.

    Args:
        interval_s: checkpoint interval T, seconds, finite and > 0.
        mtbf_s: mean time between failures M, seconds, finite and > 0.
        cost_s: checkpoint cost C, seconds, finite and > 0.
        restart_s: restart cost R (failure to progress again), seconds, finite and >= 0.

    Returns:
        The waste fraction W (dimensionless, 0.05 means 5% of wall-clock time).

    Raises:
        ValueError: an argument is non-finite or out of range.
    """
    interval = require_positive("interval_s", interval_s)
    mtbf = require_positive("mtbf_s", mtbf_s)
    cost = require_positive("cost_s", cost_s)
    restart = require_non_negative("restart_s", restart_s)
    return cost / interval + interval / (2.0 * mtbf) + restart / mtbf


def excess_gpu_hours_per_day(waste_current: float, waste_recommended: float, gpus: int) -> float:
    """GPU-hours a day that the current interval loses beyond the recommended one.

    ``(W_current − W_recommended) × gpus × 24``: waste fractions (:func:`waste_fraction`) are
    fractions of wall-clock time, and every GPU of the job idles (or redoes work) during it.

    Args:
        waste_current: waste fraction at the current interval.
        waste_recommended: waste fraction at the recommended interval.
        gpus: the job's GPU count, >= 1.

    Returns:
        GPU-hours per day; negative when the current interval is the better one.

    Raises:
        ValueError: ``gpus`` < 1, or a non-finite waste.
    """
    count = require_count("gpus", gpus, minimum=1)
    if not (math.isfinite(waste_current) and math.isfinite(waste_recommended)):
        raise ValueError("waste fractions must be finite")
    return (waste_current - waste_recommended) * count * 24.0
