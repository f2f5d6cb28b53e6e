"""The advice over the plausible checkpoint cost: a bound of C carried to the interval and waste.

C from a timing file is exact up to its confidence interval. C from log lines is a lower bound
(HF Trainer logs no end of the optimizer-state write: 43 s seen where a save took 120 s), with
an upper bound only where a progress bar keeps time after the save
(:func:`checkpoint_upper_bounds_s`). Daly's interval grows with C (within its
branch, FGCS 22(3), 2006, eq. 37), so the plausible C gives a range of recommended intervals,
open above when C is; the excess GPU-hours of the current interval are given over the same C.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ckpt_advisor.rules.advice import interval_steps
from ckpt_advisor.rules.cost import CheckpointCost, log_save_durations_s
from ckpt_advisor.rules.interval import (
    daly_interval_s,
    excess_gpu_hours_per_day,
    exponential_waste_fraction,
)
from ckpt_advisor.rules.mtbf import MtbfEstimate
from ckpt_advisor.rules.timeline import FloatArray, IntArray, Kind, Timeline

GRID_POINTS = 9
"""Costs, log-spaced over the plausible C, at which the excess is evaluated (it need not be
monotone in C: the current interval and the optimum both move with it)."""


def checkpoint_upper_bounds_s(timeline: Timeline, run_id: IntArray) -> FloatArray:
    """An upper bound of each log save's blocking cost, from the first step shown after it.

    A save stalls training from its start ``t_s`` (its end's time minus its logged duration)
    until the training computes again; the first ``step`` observation after its end, at time
    ``t_k`` and step ``s_k > s`` (the save's step), bounds that from above by
    ``t_k + 1 − t_s − (s_k − s)·τ`` (the second: a bar's reading may lie up to tqdm's
    resolution before the redraw), with τ the framework's own seconds per step (the median
    ``duration_s`` of the ``step`` observations: tqdm's rate for the HF Trainer; without it no
    bound is given, since a step time derived from the saves would hide the very cost it
    bounds). Logs that miss the end of part of a save (HF Trainer logs no end of the
    optimizer-state write) give only a lower bound of C; this closes it where a bar keeps time.
    A step dated less than a second after the save's logged end carries that line's time (a
    bar that does not keep time, no bar) and gives no bound (NaN), nor does a bound below the
    logged duration, nor does a save or step the host dated (:attr:`Timeline.host_dated`).

    Args:
        timeline: the job's observations.
        run_id: shape (n,), from :func:`rules.runs.split_runs`.

    Returns:
        Shape (b,) seconds, one per log end with a known duration
        (:func:`rules.cost.log_save_durations_s`), in its order: what
        :func:`rules.cost.checkpoint_durations_s` takes as ``upper_s``; NaN where no bound is
        known.
    """
    return SaveBounds.of(timeline, run_id).upper_s


@dataclass(frozen=True, eq=False)
class SaveBounds:
    """The upper bound of each log save of a timeline and its runs with a known logged
    duration (:func:`checkpoint_upper_bounds_s`), and where its end is: found once, for C and
    for the goodput spans. Not an array by row (NaN for every other observation: an 80 MB
    array at ten million observations) but the saves' own, looked up by row.

    Attributes:
        upper_s: shape (b,), seconds, NaN where no bound is known, in the order of the log
            ends (:func:`rules.cost.log_save_durations_s`).
        rows: shape (b,), the :attr:`Timeline.row` of each save's ``checkpoint_end``: rows
            survive the re-sorting of :meth:`Timeline.with_failure_times`, indices do not.
    """

    upper_s: FloatArray
    rows: IntArray

    @classmethod
    def of(cls, timeline: Timeline, run_id: IntArray) -> SaveBounds:
        """The bounds of ``timeline``'s log saves; ``run_id`` shape (n,), from
        :func:`rules.runs.split_runs`."""
        ends, logged = log_save_durations_s(timeline, run_id)
        ends, logged = ends[np.isfinite(logged)], logged[np.isfinite(logged)]
        return cls(_upper_bounds_s(timeline, run_id, ends, logged), timeline.row[ends])

    def upper_at(self, rows: IntArray) -> FloatArray:
        """Shape (k,): the upper bound of the save whose end has each of ``rows`` (shape (k,),
        :attr:`Timeline.row` values), NaN for a row that is none of theirs (or -1: an
        observation the rules added)."""
        order = np.argsort(self.rows, kind="stable")
        known = self.rows[order]
        at = np.minimum(np.searchsorted(known, rows), max(known.size - 1, 0))
        out = np.full(rows.size, np.nan)
        if known.size:
            hit = (known[at] == rows) & (rows >= 0)
            out[hit] = self.upper_s[order][at[hit]]
        return out


def _upper_bounds_s(
    timeline: Timeline, run_id: IntArray, ends: IntArray, logged: FloatArray
) -> FloatArray:
    """:func:`checkpoint_upper_bounds_s` of the log saves ending at ``ends`` (shape (b,)) with
    the logged durations ``logged`` (shape (b,), finite)."""
    uppers = np.full(ends.size, np.nan)
    stepped = np.flatnonzero(
        timeline.is_kind(Kind.STEP) & np.isfinite(timeline.step) & ~timeline.from_timing_file
    )
    rates = timeline.duration_s[stepped]
    rates = rates[np.isfinite(rates) & (rates > 0.0)]
    if not rates.size or not ends.size:
        return uppers
    step_s = float(np.median(rates, overwrite_input=True))  # rates: a copy, used only here
    times, steps = timeline.time_s, timeline.step
    first = _first_step_past(stepped, steps, run_id, ends)
    host = timeline.host_dated
    bounded = (first >= 0) & (times[np.maximum(first, 0)] - times[ends] >= 1.0)
    bounded &= ~host[ends] & ~host[np.maximum(first, 0)]
    k, at, logged_s = first[bounded], ends[bounded], logged[bounded]
    upper_s = times[k] + 1.0 - (times[at] - logged_s) - (steps[k] - steps[at]) * step_s
    uppers[bounded] = np.where(upper_s >= logged_s, upper_s, np.nan)
    return uppers


def _first_step_past(
    stepped: IntArray, steps: FloatArray, run_id: IntArray, ends: IntArray
) -> IntArray:
    """For each save end: the timeline index of the first ``step`` observation after it, in
    its run, whose step exceeds the save's, else -1 (also for a save with no step).

    Linear in the observations when the first steps after a save pass it (a bar counts up):
    a cursor per save moves over ``stepped``, all saves at once, one numpy pass per step
    passed over; the few saves still looking after :data:`_VECTOR_PASSES` passes scan their
    run's remaining steps one by one."""
    saved = steps[ends]
    cursor = np.searchsorted(stepped, ends, "right")
    result = np.full(ends.size, -1, np.intp)
    looking = np.flatnonzero(np.isfinite(saved) & (cursor < stepped.size))
    for _ in range(_VECTOR_PASSES):
        if not looking.size:
            return result
        candidate = stepped[cursor[looking]]
        same_run = run_id[candidate] == run_id[ends[looking]]
        past = same_run & (steps[candidate] > saved[looking])
        result[looking[past]] = candidate[past]
        going = looking[same_run & ~past]
        cursor[going] += 1
        looking = going[cursor[going] < stepped.size]
    for i in looking.tolist():  # a long stretch of steps at or below the save's: rare
        after = stepped[cursor[i] :]
        after = after[run_id[after] == run_id[ends[i]]]
        past_steps = after[steps[after] > saved[i]]
        if past_steps.size:
            result[i] = past_steps[0]
    return result


_VECTOR_PASSES = 32
"""Cursor passes of :func:`_first_step_past` before the saves still looking are scanned singly."""


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
    spacing minus C (as :func:`rules.progress.current_interval_s` measures it) and the excess
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


def steps_range(
    range_s: tuple[float, float | None], step_s: float | None
) -> tuple[int, int | None] | None:
    """A range of intervals in whole steps (:func:`rules.advice.interval_steps`), open above
    when it is; None without a step time."""
    if step_s is None:
        return None
    low_s, high_s = range_s
    high = None if high_s is None else interval_steps(high_s, step_s)
    return interval_steps(low_s, step_s), high


def daly_ci_s(mtbf: MtbfEstimate, cost: CheckpointCost | None) -> tuple[float, float] | None:
    """Daly's interval over the corners of the M and C confidence intervals (C's point value
    stands in for its interval when that is unknown)."""
    if mtbf.ci_s is None or cost is None:
        return None
    costs_s = cost.ci_s or (cost.cost_s, cost.cost_s)
    corners = [daly_interval_s(m, c) for m, c in itertools.product(mtbf.ci_s, costs_s)]
    return min(corners), max(corners)
