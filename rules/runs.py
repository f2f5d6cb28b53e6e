"""Runs and running time: which observations belong to one stretch of running, the exposure
behind the MTBF, a running-time clock, and the lives between interruptions."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ckpt_advisor.rules._checks import require_positive
from ckpt_advisor.rules.interruptions import Interruption
from ckpt_advisor.rules.timeline import START_KINDS, FloatArray, IntArray, Kind, Timeline


def split_runs(
    timeline: Timeline, interruptions: Sequence[Interruption], *, idle_gap_s: float
) -> IntArray:
    """Label each observation with the run it belongs to.

    The gap between two consecutive observations is running time unless it is longer than
    ``idle_gap_s``, or the earlier one lies inside an interruption (from its first to its last
    failure, so downtime and failed restart attempts are excluded) or is a clean ``run_end``, or
    the later one opens a run (a start kind not preceded by another start, or the first line of a
    new log source). Each such non-running gap starts a new run.

    Args:
        timeline: the job's observations.
        interruptions: from :func:`cluster_interruptions` on the same timeline.
        idle_gap_s: seconds of silence after which the job is taken to have stopped, > 0.

    Returns:
        Shape (n,) run numbers, non-decreasing from 0; two observations share a run exactly
        when every gap between them is running time.

    Raises:
        ValueError: ``idle_gap_s`` is not finite or not > 0.
    """
    idle_gap = require_positive("idle_gap_s", idle_gap_s)
    times = timeline.time_s
    if times.size == 0:
        return np.zeros(0, np.intp)
    interrupted = np.zeros(times.size, np.bool_)
    if interruptions:
        # each observation belongs to the latest interruption begun at or before it, and is
        # inside it up to that one's end: one slice per interruption, not a search per row
        starts = np.array([i.start_s for i in interruptions], np.float64)
        ends = np.array([i.end_s for i in interruptions], np.float64)
        first = np.searchsorted(times, starts, "left")
        below_next = np.append(first[1:], times.size)
        until = np.minimum(np.searchsorted(times, ends, "right"), below_next)
        for lo, hi in zip(first.tolist(), until.tolist(), strict=True):
            interrupted[lo:hi] = True
    opens = timeline.is_kind(*START_KINDS)
    breaks = (
        (np.diff(times) > idle_gap)
        | interrupted[:-1]
        | timeline.is_kind(Kind.RUN_END)[:-1]
        | (opens[1:] & ~opens[:-1])
        | timeline.new_source[1:]
    )
    run_id = np.zeros(times.size, np.intp)
    np.cumsum(breaks, out=run_id[1:])
    return run_id


def exposure_s(timeline: Timeline, run_id: IntArray, *, since_s: float = -np.inf) -> float:
    """Running time at or after ``since_s``: the summed length of runs, clipped to the window.

    Args:
        timeline: the job's observations.
        run_id: shape (n,), from :func:`split_runs`.
        since_s: epoch seconds where the window opens (default: all history).

    Returns:
        Seconds of exposure, >= 0.
    """
    later, earlier = _running_segments(timeline.time_s, run_id)
    lengths = np.subtract(later, np.maximum(earlier, since_s, out=earlier), out=later)
    return float(np.clip(lengths, 0.0, None, out=lengths).sum())


def measured_runs(timeline: Timeline, run_id: IntArray) -> IntArray:
    """The run labels of :attr:`Timeline.measured` (the observations not host-dated), as
    :func:`split_runs` gave them on the whole ``timeline``, numbered again from 0 without
    gaps (a run of host-dated observations only drops out): shape (m,), non-decreasing."""
    runs = run_id[~timeline.host_dated]
    if runs.size == run_id.size:
        return run_id
    dense = np.zeros(runs.size, np.intp)
    np.cumsum(runs[1:] != runs[:-1], out=dense[1:])
    return dense


def stepped_exposure_s(
    timeline: Timeline, run_id: IntArray, *, since_s: float = -np.inf
) -> tuple[float, int]:
    """Running time of stretches of :attr:`Timeline.host_dated` observations, from their steps.

    A log that printed no time (read alone, or in a backfill, where the host dates all its
    events at the file's mtime) has no span to measure, and its events are in their lines'
    order but at no time of their own, so :func:`split_runs` cannot tell its runs. Its steps
    still say how far it got: a stretch is a row of consecutive host-dated observations
    (timeline order: a file's lines' order), ended by a failure or a clean ``run_end`` and
    broken by a placed observation, a new source or a start. Its running time is the steps it
    advanced (its highest step less its lowest) times its own seconds per step as the file
    printed them (the median ``duration_s`` of its ``step`` observations: a progress bar's
    rate): a lower bound (the steps before its first event are not seen, nor its saves'
    stalls). A stretch with no printed rate, or no advance, gives none; so does one inside a
    run that placed observations measure already (:func:`exposure_s`; a log read live beside
    a timed one).

    Args:
        timeline: the job's observations, host-dated ones included.
        run_id: shape (n,), from :func:`split_runs` on it.
        since_s: epoch seconds where the window opens: a stretch counts when its last
            observation is at or after it (by the host's date: the only one it has).

    Returns:
        ``(seconds, stretches)``: the running time, >= 0, and how many stretches gave it.
    """
    host = timeline.host_dated
    rows = np.flatnonzero(host)
    if not rows.size:
        return 0.0, 0
    opens = timeline.is_kind(*START_KINDS)
    ended = timeline.is_kind(Kind.FAILURE, Kind.RUN_END)
    breaks = (np.diff(rows) > 1) | ended[rows[:-1]] | timeline.new_source[rows[1:]]
    breaks |= opens[rows[1:]] & ~opens[rows[:-1]]
    stretch = np.concatenate(([0], np.cumsum(breaks)))
    placed = np.bincount(run_id[~host], minlength=int(run_id[-1]) + 1) >= 2
    total_s, n_stretches = 0.0, 0
    bounds = np.flatnonzero(np.concatenate(([True], stretch[1:] != stretch[:-1], [True])))
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        members = rows[lo:hi]
        if placed[run_id[members]].any() or timeline.time_s[members[-1]] < since_s:
            continue
        steps = timeline.step[members]
        steps = steps[np.isfinite(steps)]
        rates = timeline.duration_s[members[timeline.is_kind(Kind.STEP)[members]]]
        rates = rates[np.isfinite(rates) & (rates > 0.0)]
        if steps.size and rates.size and steps.max() > steps.min():
            total_s += float(steps.max() - steps.min()) * float(np.median(rates))
            n_stretches += 1
    return total_s, n_stretches


def _running_segments(times: FloatArray, run_id: IntArray) -> tuple[FloatArray, FloatArray]:
    """The end and start times of each gap between consecutive observations of one run:
    two fresh arrays the callers may overwrite (at ten million observations every new
    80 MB array costs its page faults, so the callers compute in them in place)."""
    running = run_id[1:] == run_id[:-1]
    return times[1:][running], times[:-1][running]


def running_time_at_s(timeline: Timeline, run_id: IntArray, at_s: FloatArray) -> FloatArray:
    """Running time accumulated from the first observation up to each of ``at_s``.

    The same runs as :func:`exposure_s` (downtime between a failure and the next start is not
    running time), read as a clock that only ticks while the job runs.

    Args:
        timeline: the job's observations.
        run_id: shape (n,), from :func:`split_runs`.
        at_s: shape (k,), epoch seconds, any order.

    Returns:
        Shape (k,) seconds of running time before each ``at_s``, >= 0.
    """
    ends, starts = _running_segments(timeline.time_s, run_id)
    done = np.zeros(starts.size + 1)
    np.cumsum(np.subtract(ends, starts, out=done[1:]), out=done[1:])
    at = np.asarray(at_s, np.float64)
    if starts.size == 0:
        return np.zeros(at.shape)
    full = np.searchsorted(ends, at, "right")  # segments that end at or before each time
    inside = np.minimum(full, starts.size - 1)
    partial = np.where(
        full < starts.size, np.clip(at - starts[inside], 0.0, ends[inside] - starts[inside]), 0.0
    )
    running_s: FloatArray = done[full] + partial
    return running_s


def lives_s(
    timeline: Timeline,
    run_id: IntArray,
    interruptions: Sequence[Interruption],
    *,
    since_s: float = -np.inf,
) -> tuple[FloatArray, float]:
    """Running time between consecutive interruptions, and the censored time since the last.

    The times between failures that a Weibull fit or a backtest needs: each interruption's start
    on the running-time clock (:func:`running_time_at_s`), differenced, beginning where the
    window opens.

    Args:
        timeline: the job's observations.
        run_id: shape (n,), from :func:`split_runs`.
        interruptions: the interruptions that count (unplanned ones), in time order.
        since_s: epoch seconds where the window opens.

    Returns:
        ``(gaps, tail)``: shape (f,) seconds of running time before each interruption in the
        window (the first measured from the window's opening), and seconds of running time from
        the last of them to the newest observation (right-censored; the whole window with none).
    """
    newest = timeline.newest_s
    if newest is None:
        return np.zeros(0), 0.0
    starts = np.array([i.start_s for i in interruptions if i.start_s >= since_s], np.float64)
    opened = max(since_s, float(timeline.time_s[0]))
    clock = running_time_at_s(timeline, run_id, np.concatenate(([opened], starts, [newest])))
    gaps = np.diff(clock)
    return gaps[:-1], float(gaps[-1])
