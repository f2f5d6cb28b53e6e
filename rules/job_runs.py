"""One job's interruptions and runs, as its estimate counts them: the first half of
:func:`rules.job.estimate_job`, on its own for callers that need only the interruptions (the
``events`` command numbers each failure line by the interruption it was counted in, without
the rest of an estimate: M, the intervals, the goodput, the notes)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ckpt_advisor.rules.bounds import SaveBounds
from ckpt_advisor.rules.cost import (
    CheckpointCost,
    checkpoint_durations_s,
    estimate_checkpoint_cost,
)
from ckpt_advisor.rules.interruptions import Interruption, cluster_interruptions
from ckpt_advisor.rules.model import ClockFinding, Observation
from ckpt_advisor.rules.policy import EstimationPolicy
from ckpt_advisor.rules.progress import (
    redated_failures,
    run_step_times_s,
    save_index,
    step_time_s,
)
from ckpt_advisor.rules.repeated_hour import RepeatedHours, place_repeated_hours
from ckpt_advisor.rules.runs import split_runs
from ckpt_advisor.rules.sources import ZoneOffset, log_zone_offset
from ckpt_advisor.rules.tier_estimate import fast_save_rows
from ckpt_advisor.rules.tiers import Tier
from ckpt_advisor.rules.timeline import IntArray, Timeline

MATERIAL_SHIFT_S = 60.0
"""A failure re-dated by more than this is worth a note (less is the bar clock's rounding)."""


@dataclass(frozen=True, slots=True)
class JobRuns:
    """A job's timeline split into runs at its interruptions, and what that split rests on.

    Attributes:
        full: the timeline as given, the files of a repeated hour placed in its pass
            (``repeated_hours``) and its log times moved by ``-zone_offset.offset_s`` when
            the log lies a whole time-zone offset from the timing file.
        repeated_hours: the files read in the hour repeated when clocks fall back, and where
            the timing file placed them (:func:`rules.repeated_hour.place_repeated_hours`).
        zone_offset: that offset (:func:`rules.sources.log_zone_offset`), or None.
        fast_tier: the fast tier of a job that saves to two (its saves then count as the
            persistent tier's only, in ``timeline``), else None.
        timeline: ``full`` with inferred interruptions (``n_unseen`` of them) and the failures
            re-dated by the step time.
        newest_s: epoch seconds of the newest observation before re-dating, or None.
        since_s: where the estimate's windows open (epoch s; -inf without a time).
        interruptions: the interruptions of ``timeline``, numbered from 1.
        run_id, saves: the runs of ``timeline`` (:func:`rules.runs.split_runs`) and its saves
            (:func:`rules.progress.save_index`).
        save_bounds: the log saves' upper bounds, on the timeline before re-dating
            (:class:`rules.bounds.SaveBounds`, for the goodput spans).
        cost: checkpoint cost C (None when unknown), on the timeline before re-dating.
        step_s: seconds per step, or None.
        n_moved, n_clamped: interruptions re-dated by more than :data:`MATERIAL_SHIFT_S`, and
            those clamped to the next line (:func:`rules.progress.redated_failures`).
    """

    full: Timeline
    repeated_hours: RepeatedHours
    zone_offset: ZoneOffset | None
    fast_tier: Tier | None
    timeline: Timeline
    n_unseen: int
    newest_s: float | None
    since_s: float
    interruptions: list[Interruption]
    run_id: IntArray
    saves: IntArray
    save_bounds: SaveBounds
    cost: CheckpointCost | None
    step_s: float | None
    n_moved: int
    n_clamped: int


def clustered_runs(
    timeline: Timeline, policy: EstimationPolicy
) -> tuple[list[Interruption], IntArray, IntArray]:
    """The timeline's interruptions (``policy``'s burst and silent gaps), its runs between them
    (its idle gap) and its saves."""
    interruptions = cluster_interruptions(
        timeline, gap_s=policy.burst_gap_s, silent_gap_s=policy.silent_gap_s
    )
    run_id = split_runs(timeline, interruptions, idle_gap_s=policy.idle_gap_s)
    return interruptions, run_id, save_index(timeline, run_id)


def job_runs(
    observations: Iterable[Observation] | Timeline,
    *,
    policy: EstimationPolicy,
    stack: str | None,
    clock_findings: Sequence[ClockFinding] = (),
) -> JobRuns:
    """The job's interruptions and runs as :func:`rules.job.estimate_job` counts them (see
    there): a two-tier job's saves as its persistent tier's, the interruptions no failure line
    reported inferred (:meth:`Timeline.with_unseen_interruptions`), C over the last
    ``policy.cost_window_saves`` saves (``stack``: the framework that wrote the logs), the step
    time within ``policy.mtbf_window_s`` before the newest observation not dated by the host,
    and the failures re-dated by it (:func:`rules.progress.redated_failures`), then split again.
    The files whose stamps of an hour repeated when clocks fell back no earlier stamp placed
    (``clock_findings``' ``ambiguous_stamp``) are put in the pass their saves pair with the
    timing file at (:func:`rules.repeated_hour.place_repeated_hours`) first. A log that lies
    a whole time-zone offset from its timing file at the same saves
    (:func:`rules.sources.log_zone_offset`) has its printed times moved onto the timing file's
    clock first: every span between the two sources (running time, restarts, save spacing,
    goodput) is then measured on one clock.

    Raises:
        ValueError: an observation time is not finite.
    """
    given = observations if isinstance(observations, Timeline) else Timeline.of(observations)
    repeated_hours = place_repeated_hours(given, clock_findings)
    full = repeated_hours.timeline
    zone_offset = log_zone_offset(full)
    if zone_offset is not None:
        full = full.with_log_times_moved(-zone_offset.offset_s)
    fast_tier, fast_rows = fast_save_rows(full)
    base = full if fast_tier is None else full.as_fast_saves(fast_rows)  # saves: persistent
    timeline, n_unseen = base.with_unseen_interruptions()
    newest_s = timeline.newest_s
    end_s = timeline.measured.newest_s  # a log's newest time: a host's date is only a bound
    end_s = newest_s if end_s is None else end_s
    since_s = -float("inf") if end_s is None else end_s - policy.mtbf_window_s
    interruptions, run_id, saves = clustered_runs(timeline, policy)
    save_bounds = SaveBounds.of(timeline, run_id)  # for C and goodput_spans
    timed_s, logged_s, logged_upper_s = checkpoint_durations_s(
        timeline, run_id, save_bounds.upper_s
    )
    cost = estimate_checkpoint_cost(
        timed_s,
        logged_s,
        logged_upper_s=logged_upper_s,
        window=policy.cost_window_saves,
        stack=stack,
        confidence=policy.confidence,
    )
    cost_s = None if cost is None else cost.cost_s
    step_s = step_time_s(timeline, run_id, saves, cost_s=cost_s, since_s=since_s)
    n_moved = n_clamped = 0
    if step_s is not None and interruptions:
        paces_s = run_step_times_s(timeline, run_id, saves, cost_s=cost_s, step_time_s=step_s)
        moved_s, n_clamped = redated_failures(timeline, interruptions, step_time_s=paces_s)
        shifted_s = moved_s - timeline.time_s[timeline.failure_index]
        n_moved = int(np.count_nonzero(shifted_s > MATERIAL_SHIFT_S))
        if shifted_s.any():  # else the timeline, and so its runs, stay as they are
            timeline = timeline.with_failure_times(moved_s)
            interruptions, run_id, saves = clustered_runs(timeline, policy)
    return JobRuns(
        full=full,
        repeated_hours=repeated_hours,
        zone_offset=zone_offset,
        fast_tier=fast_tier,
        timeline=timeline,
        n_unseen=n_unseen,
        newest_s=newest_s,
        since_s=since_s,
        interruptions=interruptions,
        run_id=run_id,
        saves=saves,
        save_bounds=save_bounds,
        cost=cost,
        step_s=step_s,
        n_moved=n_moved,
        n_clamped=n_clamped,
    )
