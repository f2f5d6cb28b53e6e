"""Every second of a job's wall time put in one goodput bucket (:mod:`rules.goodput` defines
them), from the estimate's timeline, interruptions, runs and saves."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ckpt_advisor.rules.bounds import SaveBounds
from ckpt_advisor.rules.cost import SAVE_END_STACKS, log_save_durations_s
from ckpt_advisor.rules.goodput import Bucket, GoodputSpans
from ckpt_advisor.rules.interruptions import Interruption
from ckpt_advisor.rules.recovery import recoveries
from ckpt_advisor.rules.saves import TimedSaves
from ckpt_advisor.rules.timeline import (
    BoolArray,
    FloatArray,
    IntArray,
    Timeline,
)


def goodput_spans(
    timeline: Timeline,
    interruptions: Sequence[Interruption],
    run_id: IntArray,
    saves: IntArray,
    *,
    step_time_s: float | None,
    save_bounds: SaveBounds | None = None,
    stack: str | None = None,
) -> GoodputSpans:
    """Label every second from the timeline's first observation (or the start of a timed save
    that began before it) to its newest.

    Each bucket is the set of times :mod:`rules.goodput` describes; an instant in several
    takes the first of restart, idle (not running), checkpoint, idle (a run's start-up), lost,
    productive. A run's first progress is re-dated to when its steps began, and a restart ends
    there (:func:`rules.recovery.recoveries`, the reckoning R uses too).

    Args:
        timeline: the job's observations, failures re-dated
            (:func:`rules.progress.redated_failures`) and silent deaths added
            (:meth:`Timeline.with_unseen_interruptions`), as the estimate uses them.
        interruptions: :func:`rules.interruptions.cluster_interruptions` on ``timeline``, all
            of them (a planned end loses the work since the last save too).
        run_id: shape (n,), :func:`rules.runs.split_runs` on ``timeline``.
        saves: :func:`rules.progress.every_save_index` on ``timeline``: every save, from
            either source.
        step_time_s: seconds per step, or None when unknown.
        save_bounds: the upper bound of each log save's blocking time, found by its
            observation's :attr:`Timeline.row` (:class:`rules.bounds.SaveBounds`; the estimate
            has them from before it re-dated the failures); computed from ``timeline`` when
            None.
        stack: the stack that wrote the log saves (the parser's name), or None: the saves of a
            stack that logs a save's end (``rules/cost.py`` ``SAVE_END_STACKS``) have no
            unlogged part.

    Returns:
        The labelled spans (adjacent spans of one label merged).
    """
    times = timeline.time_s
    saves_at = _Saves.of(timeline, run_id, saves, save_bounds, stack not in SAVE_END_STACKS)
    int_start = np.array([i.start_s for i in interruptions], np.float64)
    int_end = np.array([i.end_s for i in interruptions], np.float64)
    ids = np.array([i.id for i in interruptions], np.intp)
    if not times.size:
        return GoodputSpans(
            start_s=np.zeros(0),
            end_s=np.zeros(0),
            bucket=np.zeros(0, np.int8),
            unlogged=np.zeros(0, np.bool_),
            interruption=np.zeros(0, np.intp),
            save_end_s=saves_at.end_s,
            save_logged=saves_at.logged,
            interruption_start_s=int_start,
            interruption_inferred=np.array([-1 in i.rows for i in interruptions], np.bool_),
            step_dated=step_time_s is not None,
            checkpoint_stack=stack,
        )
    # runs: first and last line, and the moment their progress began
    first_of_run = np.flatnonzero(np.concatenate(([True], run_id[1:] != run_id[:-1])))
    last_of_run = np.concatenate((first_of_run[1:] - 1, [times.size - 1]))
    run_first_s, run_last_s = times[first_of_run], times[last_of_run]
    recovered = recoveries(timeline, run_id, saves, int_end, step_time_s=step_time_s)
    began_s, restart_end_s, resumed = recovered.began_s, recovered.end_s, recovered.resumed
    np.minimum.at(run_first_s, run_id[saves], saves_at.start_s)  # a timed save's own start
    first_s = float(run_first_s.min())
    first = recovered.progress  # the restart's first progress: the step it began from, at most
    first_step = np.where(first >= 0, timeline.step[np.maximum(first, 0)], np.nan)
    kept_s = saves_at.kept_s(int_start, resumed, first_step)
    # every edge, then the label of each elementary stretch by its midpoint
    edges = (
        run_first_s, run_last_s, began_s, saves_at.start_s, saves_at.block_end_s,
        saves_at.upper_end_s, int_start, restart_end_s, kept_s,
    )  # fmt: skip
    window_s = np.array([first_s, times[-1]])
    points = np.clip(np.concatenate((window_s, *edges)), first_s, times[-1])
    points = np.unique(points[np.isfinite(points)])  # NaN: no such edge
    if points.size < 2:
        points = window_s  # a single moment: one empty span
    mids = (points[:-1] + points[1:]) / 2.0
    label = np.full(mids.size, Bucket.PRODUCTIVE, np.int8)
    label[_covered(mids, kept_s, int_start)] = Bucket.LOST
    label[_covered(mids, run_first_s, began_s)] = Bucket.IDLE
    label[_covered(mids, saves_at.start_s, saves_at.block_end_s)] = Bucket.CHECKPOINT
    label[~_covered(mids, run_first_s, run_last_s)] = Bucket.IDLE
    restarting = _covered(mids, int_start, restart_end_s)
    label[restarting] = Bucket.RESTART
    unlogged = _covered(mids, saves_at.block_end_s, saves_at.upper_end_s)
    unlogged &= np.isin(label, (Bucket.PRODUCTIVE, Bucket.LOST))
    owner = np.zeros(mids.size, np.intp)
    if ids.size:
        lost = label == Bucket.LOST
        owner[restarting] = ids[np.searchsorted(int_start, mids[restarting], "right") - 1]
        owner[lost] = ids[_lost_to(mids[lost], kept_s, int_start)]
    keep = np.concatenate(([True], np.diff(label) != 0))
    keep[1:] |= (unlogged[1:] != unlogged[:-1]) | (owner[1:] != owner[:-1])
    starts = np.flatnonzero(keep)
    return GoodputSpans(
        start_s=points[:-1][starts],
        end_s=np.concatenate((points[:-1][starts[1:]], [points[-1]])),
        bucket=label[starts],
        unlogged=unlogged[starts],
        interruption=owner[starts],
        save_end_s=saves_at.end_s,
        save_logged=saves_at.logged,
        interruption_start_s=int_start,
        interruption_inferred=np.array([-1 in i.rows for i in interruptions], np.bool_),
        step_dated=step_time_s is not None,
        checkpoint_stack=stack,
    )


def _next_line_s(times_s: FloatArray, run_id: IntArray, saves: IntArray) -> FloatArray:
    """Per log save with no bound from a step (:func:`rules.bounds.checkpoint_upper_bounds_s`),
    the latest its blocking can have lasted to in the spans: the next line of its run dated
    after it (training logged again, so the save returned, or the run failed), else its own
    end (nothing of the run follows it: there is no running time it can hide in)."""
    nxt = np.searchsorted(times_s, times_s[saves], "right")
    at = np.minimum(nxt, times_s.size - 1)
    same = (nxt < times_s.size) & (run_id[at] == run_id[saves])
    out: FloatArray = np.where(same, times_s[at], times_s[saves])
    return out


@dataclass(frozen=True, eq=False)
class _Saves:
    """The saves of :func:`rules.progress.every_save_index` as spans, shapes (s,): when each
    blocked training (``start_s`` to ``block_end_s``; a timing-file save from its first
    record's start for its blocking span, :class:`rules.saves.TimedSaves`; a log save by its
    logged duration, as in a job without a timing file), when it completed (``end_s``, its
    mark), its step, whether it is known from log lines only (``logged``), and for those the
    end of its plausible unlogged part (``upper_end_s``: from the first step after it, else its
    run's next line, :func:`_next_line_s`; NaN for a timing file's, and with ``unlogged``
    False: a stack that logs a save's end)."""

    start_s: FloatArray
    block_end_s: FloatArray
    end_s: FloatArray
    step: FloatArray
    upper_end_s: FloatArray
    logged: BoolArray

    @classmethod
    def of(
        cls,
        timeline: Timeline,
        run_id: IntArray,
        saves: IntArray,
        save_bounds: SaveBounds | None,
        unlogged: bool = True,
    ) -> _Saves:
        end_s = timeline.time_s[saves]
        timed = timeline.from_timing_file[saves]
        blocking_s = np.full(saves.size, np.nan)
        log_ends, logged_s = log_save_durations_s(timeline, run_id)
        at = np.minimum(np.searchsorted(log_ends, saves), max(log_ends.size - 1, 0))
        is_log_end = log_ends.size > 0
        if is_log_end:
            matched = log_ends[at] == saves
            blocking_s[matched] = logged_s[at[matched]]
        blocking_s = np.where(np.isfinite(blocking_s) & (blocking_s > 0), blocking_s, 0.0)
        persist_s = timeline.persist_s[saves]
        whole_s = np.where(np.isfinite(persist_s) & (persist_s > blocking_s), persist_s, blocking_s)
        start_s = end_s - whole_s
        if timed.any():  # a timing-file save spans its records (rules/saves.py)
            grouped = TimedSaves.of(timeline, run_id)
            at = np.searchsorted(grouped.index, saves[timed])
            start_s[timed] = grouped.start_s[at]
            blocking_s[timed] = grouped.blocking_s[at]
        upper_end_s = np.full(saves.size, np.nan)
        if is_log_end and unlogged and not timed.all():
            bounds = SaveBounds.of(timeline, run_id) if save_bounds is None else save_bounds
            upper_end_s[~timed] = start_s[~timed] + bounds.upper_at(timeline.row[saves[~timed]])
            open_ = ~timed & ~np.isfinite(upper_end_s)
            upper_end_s[open_] = _next_line_s(timeline.time_s, run_id, saves[open_])
        return cls(
            start_s=start_s,
            block_end_s=start_s + blocking_s,
            end_s=end_s,
            step=timeline.step[saves],
            upper_end_s=upper_end_s,
            logged=~timed,
        )

    def kept_s(
        self, before_s: FloatArray, step: FloatArray, first_step: FloatArray | None = None
    ) -> FloatArray:
        """Per interruption (its start ``before_s`` and its next run's ``resume`` step, NaN
        unknown), when the work it kept was saved: the latest save at that step completed
        before it, else the latest save completed before it, else -inf (nothing saved).
        "Latest" is the last in the saves' order; ``end_s <= before_s`` is "completed before".
        Without a resume step, ``first_step`` (the step of the next run's first progress, NaN
        unknown) bounds the one it began from: when the latest save is past it (the run began
        again from scratch, or from an earlier save), the latest save at or below it is taken,
        else -inf (the interrupted run lost all its work: an HF Trainer run restarted without
        ``resume_from_checkpoint`` starts at step 1).

        Sorted look-ups, not a scan of every save per interruption: O((s + i) log s), and a
        scan of the saves for each interruption whose restart began below its latest save."""
        out = np.full(before_s.size, -np.inf)
        asked = ~np.isnan(before_s)
        done = _last_done(self.end_s, before_s)  # the last save done by then, -1: none
        found = asked & (done >= 0)
        out[found] = self.end_s[done[found]]
        usable = np.flatnonzero(~np.isnan(self.step) & ~np.isnan(self.end_s))
        wanted = asked & ~np.isnan(step)
        if usable.size and wanted.any():
            # saves as (step, end) pairs in lexicographic order: complex numbers sort so
            pairs = _pairs(self.step[usable], self.end_s[usable])
            order = np.argsort(pairs, kind="stable")
            index = usable[order]  # each pair's save
            steps = pairs[order].real
            group = np.cumsum(np.concatenate(([False], steps[1:] != steps[:-1])))
            offset = group * (self.end_s.size + 1)  # running max of index within each step
            latest = np.maximum.accumulate(offset + index) - offset
            query = _pairs(step[wanted], before_s[wanted])
            upto = np.searchsorted(pairs[order], query, "right") - 1
            start = np.searchsorted(steps, step[wanted], "left")
            exact = upto >= start  # some save at that step is done by then
            hit = np.flatnonzero(wanted)[exact]
            out[hit] = self.end_s[latest[upto[exact]]]
        if first_step is not None and self.step.size:
            chosen_step = np.where(found, self.step[np.maximum(done, 0)], np.nan)
            behind = found & np.isnan(step) & (first_step < chosen_step)  # NaN compares False
            for k in np.flatnonzero(behind).tolist():
                done_by = np.flatnonzero((self.end_s <= before_s[k]) & (self.step <= first_step[k]))
                out[k] = self.end_s[done_by[-1]] if done_by.size else -np.inf
        return out


def _pairs(first: FloatArray, second: FloatArray) -> npt.NDArray[np.complex128]:
    """(first, second) pairs as complex numbers, which numpy sorts and searches in
    lexicographic order (built part by part: ``1j * inf`` would be ``nan+infj``)."""
    out = np.empty(first.size, np.complex128)
    out.real, out.imag = first, second
    return out


def _last_done(end_s: FloatArray, before_s: FloatArray) -> IntArray:
    """Per time of ``before_s``, the largest index ``i`` with ``end_s[i] <= before_s``, -1 when
    there is none (NaN ends are never done; a NaN time finds none)."""
    by_end = np.argsort(end_s, kind="stable")  # NaN last
    latest = np.maximum.accumulate(by_end) if by_end.size else by_end
    count = np.searchsorted(end_s[by_end], before_s, "right")
    count = np.where(np.isnan(before_s), 0, count)
    count = np.minimum(count, np.count_nonzero(~np.isnan(end_s)))
    return np.where(count > 0, latest[np.maximum(count - 1, 0)] if latest.size else -1, -1)


def _covered(at_s: FloatArray, starts_s: FloatArray, ends_s: FloatArray) -> BoolArray:
    """Shape of ``at_s``: True where a time lies inside one of the intervals
    ``[starts_s[i], ends_s[i])`` (any order, overlapping allowed; NaN or -inf starts are taken
    as open below, NaN ends as empty)."""
    starts = np.where(np.isnan(starts_s), np.inf, starts_s)
    ends = np.where(np.isnan(ends_s), -np.inf, ends_s)
    if not starts.size:
        return np.zeros(at_s.shape, np.bool_)
    order = np.argsort(starts, kind="stable")
    reach = np.maximum.accumulate(ends[order])
    which = np.searchsorted(starts[order], at_s, "right") - 1
    return (which >= 0) & (at_s < reach[np.maximum(which, 0)])


def _lost_to(at_s: FloatArray, kept_s: FloatArray, int_start_s: FloatArray) -> IntArray:
    """Per lost moment, the index of the first interruption after it that it was not kept
    through (the first ``i`` with ``kept_s[i] <= t < int_start_s[i]``)."""
    out = np.searchsorted(int_start_s, at_s, "right")
    out = np.minimum(out, int_start_s.size - 1)
    for j in np.flatnonzero(kept_s[out] > at_s).tolist():  # kept through that one: rare
        later = np.flatnonzero((kept_s <= at_s[j]) & (int_start_s > at_s[j]))
        out[j] = later[0] if later.size else out[j]
    return out
