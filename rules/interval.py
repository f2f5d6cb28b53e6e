"""The optimum checkpoint interval (Young 1974, Daly 2006) and the waste it minimises.

All arguments and results are seconds (or a dimensionless fraction for the waste). Every function
raises :class:`ValueError` naming the argument when a duration is non-finite or out of range.
"""

from __future__ import annotations

import math

from ckpt_advisor.rules._checks import require_count, require_non_negative, require_positive
from ckpt_advisor.rules.model import Note, NoteCode

HIGH_COST_RATIO = 0.5
"""C/M above which checkpointing is nearly pointless: at C = M/2 even Daly's interval loses 70%
of the running time (:func:`exponential_waste_fraction`; 38% at C = M/10), most of it writing
checkpoints and redoing work."""


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
    at 1. Reported waste fractions use :func:`exponential_waste_fraction`, which is exact for
    exponential failures at any C/M; this form stays for the flatness argument.

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


def exponential_waste_fraction(
    interval_s: float, mtbf_s: float, cost_s: float, restart_s: float = 0.0
) -> float:
    """Expected fraction of wall-clock time lost, under exponential failures (Daly's full model).

    Daly (FGCS 22(3), 2006, the complete model that his eq. 37 approximates): with failures at
    rate 1/M, computing T and then saving for C, the expected wall time per unit of work is
    ``T_w/T_s = M·e^(R/M)·(e^((T+C)/M) − 1)/T``, and the waste is ``1 − T_s/T_w``. Unlike the
    first-order :func:`waste_fraction` it stays in [0, 1) for any C/M, it is minimised near
    Daly's interval (so Daly's interval never wastes more than Young's by this measure), and it
    matches the Monte Carlo of :mod:`rules.simulate` at large C/M, where the first-order form
    overstates it (M = 4 h, C = 20 min, R = 10 min at Daly's interval: 45.4% first order,
    38.1% here, 38.3% ± 0.2% simulated).
    The factor ``e^(R/M)`` lets failures strike during the restart; a simulation that does not
    (``(M + R)`` in its place) differs by order ``(R/M)²/2``.

    Args:
        interval_s: compute time T between checkpoints, seconds, finite and > 0.
        mtbf_s: mean time between failures M, seconds, finite and > 0.
        cost_s: blocking checkpoint cost C, seconds, finite and > 0.
        restart_s: restart cost R, seconds, finite and >= 0.

    Returns:
        The waste fraction, in [0, 1) (1.0 only when the exponent overflows a float).

    Raises:
        ValueError: an argument is non-finite or out of range.
    """
    interval = require_positive("interval_s", interval_s)
    mtbf = require_positive("mtbf_s", mtbf_s)
    cost = require_positive("cost_s", cost_s)
    restart = require_non_negative("restart_s", restart_s)
    x = (interval + cost) / mtbf
    # ln(e^x − 1), without overflow for large x
    log_expm1 = x + math.log(-math.expm1(-x)) if x > 1.0 else math.log(math.expm1(x))
    log_goodput = math.log(interval / mtbf) - restart / mtbf - log_expm1
    return -math.expm1(log_goodput)


def excess_gpu_hours_per_day(waste_current: float, waste_recommended: float, gpus: int) -> float:
    """GPU-hours a day that the current interval loses beyond the recommended one.

    ``(W_current − W_recommended) × gpus × 24``: waste fractions (the estimate uses
    :func:`exponential_waste_fraction`) are fractions of wall-clock time, and every GPU of the
    job idles (or redoes work) during it.

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


def high_cost_note(
    cost_s: float, mtbf_s: float, waste_recommended: float, *, ratio: float = HIGH_COST_RATIO
) -> Note | None:
    """A ``high_cost`` note when the checkpoint cost C is large against M, else None.

    Daly's optimum assumes ``C`` small against ``M``; from about ``C/M > 0.5`` on, even the best
    interval loses a large part of the running time (Daly 2006: ``T = M`` once ``C >= 2M``), so
    the job mostly writes checkpoints and lost work: the remedy is a cheaper save (asynchronous
    or smaller checkpoints) or a more reliable machine, not a different interval.

    Args:
        cost_s: checkpoint cost C, seconds, > 0.
        mtbf_s: MTBF M, seconds, > 0.
        waste_recommended: waste fraction at the recommended interval (exponential model).
        ratio: the C/M threshold, > 0.

    Returns:
        The note (``cost_ratio`` C/M, ``waste_fraction``), or None when ``C/M <= ratio``.
    """
    cost_ratio = require_positive("cost_s", cost_s) / require_positive("mtbf_s", mtbf_s)
    if cost_ratio <= require_positive("ratio", ratio):
        return None
    return Note(NoteCode.HIGH_COST, {"cost_ratio": cost_ratio, "waste_fraction": waste_recommended})
