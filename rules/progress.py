"""What a job's runs measure besides C and M: which observations are saves, the current
interval (in seconds and steps), the step time, failure times re-dated by the steps a run
reached, and the restart cost R.

They read a :class:`rules.timeline.Timeline` and its run labels
(:func:`rules.runs.split_runs`). Results are seconds; unknown values are ``None``, never 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ckpt_advisor.rules.interruptions import Interruption
from ckpt_advisor.rules.recovery import recoveries
from ckpt_advisor.rules.saves import TimedSaves, record_start_s
from ckpt_advisor.rules.timeline import (
    BoolArray,
    FloatArray,
    IntArray,
    Kind,
    Timeline,
)

CLAMP_NOTE_S = 60.0
"""A failure time clamped to the next line by more than this is counted (less is a bar
clock's rounding or a step time's noise)."""


def save_index(timeline: Timeline, run_id: IntArray) -> IntArray:
    """Indices of the observations that mark when checkpoints were taken, ascending: one per
    save.

    One source only, as C and the interval count saves (goodput and R place every save, from
    either source: :func:`every_save_index`): timing-file saves when there are any
    (:class:`rules.saves.TimedSaves`: the records of one run, step and tier whose times touch
    are one save, marked by the record that ended last), else log saves. Per run,
    ``checkpoint_end`` observations, or ``checkpoint_start`` ones in a run that has no end (HF
    Trainer and Lightning log only the start); a log save at the same step as the previous one
    in the same run (another rank's line) is dropped.

    Args:
        timeline: the job's observations.
        run_id: shape (n,), from :func:`rules.runs.split_runs`.

    Returns:
        Shape (s,) indices into the timeline.
    """
    if (timeline.from_timing_file & timeline.is_kind(Kind.CHECKPOINT_END)).any():
        return TimedSaves.of(timeline, run_id).index
    return _log_save_index(timeline, run_id)


def every_save_index(timeline: Timeline, run_id: IntArray) -> IntArray:
    """Indices of the observations that mark every save the job made, from either source,
    ascending: where the saves happened, for goodput and the restarts (the C and the interval
    of :func:`save_index` keep to one source).

    The timing-file saves, and the log saves (:func:`save_index`'s rule for a log) no timing
    record has: a log save at the step of a timing record (of any tier, a fast tier's too) that
    began in the log save's run is that record's save, counted once, by the timing file (the
    run a record began in: a save's last record may end after its run's last line). A log save
    with no step is one of the timed saves of its run when it has any (nothing tells which),
    else a save of its own.

    Args:
        timeline: the job's observations.
        run_id: shape (n,), from :func:`rules.runs.split_runs`.

    Returns:
        Shape (s,) indices into the timeline.
    """
    logged = _log_save_index(timeline, run_id)
    records = np.flatnonzero(
        timeline.from_timing_file & timeline.is_kind(Kind.CHECKPOINT_END, Kind.FAST_SAVE)
    )
    if not records.size:
        return logged
    began = np.searchsorted(timeline.time_s, record_start_s(timeline, records), "right") - 1
    began_in = run_id[np.maximum(began, 0)]
    step = timeline.step[logged]
    # (run, step) as one complex number; a NaN step matches nothing
    timed = np.isin(run_id[logged] + 1j * step, began_in + 1j * timeline.step[records])
    timed |= np.isnan(step) & np.isin(run_id[logged], began_in)
    alone = logged[~timed]
    return np.sort(np.concatenate((TimedSaves.of(timeline, run_id).index, alone)))


def _log_save_index(timeline: Timeline, run_id: IntArray) -> IntArray:
    """The log saves of :func:`save_index` (its docstring), ascending."""
    timed = timeline.from_timing_file
    end_rows = np.flatnonzero(timeline.is_kind(Kind.CHECKPOINT_END) & ~timed)
    start_rows = np.flatnonzero(timeline.is_kind(Kind.CHECKPOINT_START) & ~timed)
    alone = ~np.isin(run_id[start_rows], np.unique(run_id[end_rows]))  # starts of runs no end
    chosen = np.sort(np.concatenate((end_rows, start_rows[alone])))
    steps, runs = timeline.step[chosen], run_id[chosen]
    new = np.ones(chosen.size, np.bool_)
    new[1:] = (steps[1:] != steps[:-1]) | (runs[1:] != runs[:-1])  # NaN steps never repeat
    return chosen[new]


def saves_since_change(
    timeline: Timeline, run_id: IntArray, saves: IntArray
) -> tuple[IntArray, float | None]:
    """The saves that measure the interval in force now, and the interval the job declared.

    A job that adopted an advised interval logs an ``interval_change`` (``parsers/adoption.py``);
    save gaps from before it measure the old interval and must not be averaged with the new
    one. So only the saves at or after the last change count; when a run began after that
    change (a restart: the callbacks start again from the interval the job was launched with),
    only the saves from that run's start on. Without any change, every save counts, but the
    save each run that ended cleanly made as it ended (:func:`_without_final_saves`).

    Args:
        timeline: the job's observations.
        run_id: shape (n,), from :func:`rules.runs.split_runs`.
        saves: from :func:`save_index`.

    Returns:
        The saves that count (a subset of ``saves``), and the new interval the last change
        logged (compute time, seconds) when that change is in the newest run, else None: the
        interval in force until two saves measure it.
    """
    saves = _without_final_saves(timeline, run_id, saves)
    changes = np.flatnonzero(timeline.is_kind(Kind.INTERVAL_CHANGE))
    if not changes.size:
        return saves, None
    last = int(changes[-1])
    later = np.flatnonzero(run_id > run_id[last])
    since_s = float(timeline.time_s[later[0] if later.size else last])
    declared = float(timeline.duration_s[last])
    declared_s = declared if not later.size and math.isfinite(declared) and declared > 0 else None
    return saves[timeline.time_s[saves] >= since_s], declared_s


def _without_final_saves(timeline: Timeline, run_id: IntArray, saves: IntArray) -> IntArray:
    """``saves`` without the last save of each run that ended cleanly (a ``run_end`` in it):
    the save a framework makes when training ends, whatever its interval (HF Trainer saves at
    ``max_steps``: a new user's ``save_steps=25`` job ending at step 160 read "now 18 steps",
    the median of 25 and 10). Kept when no run would be left two saves."""
    if saves.size < 3:
        return saves
    ended = np.unique(run_id[timeline.is_kind(Kind.RUN_END)])
    runs = run_id[saves]
    final = np.append(runs[1:] != runs[:-1], True) & np.isin(runs, ended)
    kept = saves[~final]
    return kept if np.any(run_id[kept][1:] == run_id[kept][:-1]) else saves


def current_interval_s(
    timeline: Timeline,
    run_id: IntArray,
    saves: IntArray,
    *,
    window: int,
    cost_s: float | None = None,
) -> float | None:
    """The job's checkpoint interval now, as compute time between saves (Daly's T).

    The median spacing of consecutive saves of one run (one save's mark to the next one's; not
    from or to a save the host dated, :attr:`Timeline.host_dated`) is
    ``T + C`` when saves block training for C; Daly (FGCS 22(3), 2006) and Young (1974) define
    the interval T as the compute time between checkpoints, without the checkpoint, so C is
    subtracted when known (the spacing itself is returned when C is unknown, or when it does
    not exceed C).

    Args:
        timeline: the job's observations.
        run_id: shape (n,), from :func:`rules.runs.split_runs`.
        saves: from :func:`save_index`.
        window: how many of the most recent intervals to use, >= 1.
        cost_s: blocking checkpoint cost C, seconds, or None when unknown.

    Returns:
        Seconds, or None when no run has two saves.
    """
    gaps_s = _within_runs(timeline.time_s[saves], _placed_runs(timeline, run_id, saves))
    recent = gaps_s[gaps_s > 0.0][-window:]
    if not recent.size:
        return None
    spacing_s = float(np.median(recent))
    if cost_s is not None and spacing_s > cost_s:
        return spacing_s - cost_s
    return spacing_s


def interval_steps_across_runs(timeline: Timeline, saves: IntArray, *, window: int) -> int | None:
    """The save spacing in steps read across runs, for a job where no run lives to two saves
    (failures come faster than the saves): N when the job saves every N steps.

    The ``window`` + 1 highest distinct steps of ``saves`` are sorted; N is the median of their
    consecutive differences, given when at least two of them and at least half are exactly N
    (HF Trainer's ``save_steps``, Lightning's ``every_n_train_steps`` and Megatron-LM's
    ``--save-interval`` save at multiples of N; a run resumes at its last save, so a save is
    seen again at most); else None (a last save at the end of training, a changed interval).
    """
    steps = timeline.step[saves]
    steps = np.unique(steps[np.isfinite(steps)])[-(window + 1) :]
    gaps = np.diff(steps)
    if gaps.size < 2:
        return None
    n = float(np.median(gaps))
    exact = int(np.count_nonzero(gaps == n))
    return int(n) if exact >= 2 and 2 * exact >= gaps.size else None


def current_interval_steps(timeline: Timeline, run_id: IntArray, saves: IntArray) -> int | None:
    """Median step distance between consecutive saves of one run (the training steps computed
    between them, e.g. ``save_steps``), or None without steps."""
    steps = _within_runs(timeline.step[saves], run_id[saves])
    steps = steps[steps > 0]  # NaN compares False
    return round(float(np.median(steps))) if steps.size else None


STEP_TIME_CHANGE = 0.2
"""How far the newest run's step time may lie from the window's (a fraction of it) before the
job is taken to run at a new pace: a resize, a new batch size, other nodes."""

MIN_RUN_STEP_SAMPLES = 5
"""Per-step values a run must give for its own step time to be taken (one redraw's rate, or one
pair of saves, is noise)."""

NEWEST_RUNS = 3
"""Runs, newest first, searched for one that gives its own step time (the newest may be a
restart's first minutes, or a final save alone)."""


def step_time_s(
    timeline: Timeline,
    run_id: IntArray,
    saves: IntArray,
    *,
    cost_s: float | None,
    since_s: float,
) -> float | None:
    """Seconds per training step, from observations at or after ``since_s``.

    The first source that gives a value wins, most direct first:

    1. the median ``duration_s`` of ``step`` observations: the framework's own seconds per step
       (the HF Trainer parser reads tqdm's rate into it);
    Sources 2 and 3 measure time between two observations, so neither may be host-dated
    (:attr:`Timeline.host_dated`); a rate a file printed is its own measure, whoever dated it.

    2. consecutive saves of one run that carry steps: the median of ``(Δt − C)/Δstep`` (one save
       stalls training for C per pair); needs C. Save lines carry their own time stamps, which
       step lines often lack (a parser then gives them the last stamp seen);
    3. consecutive ``step`` observations of one run: the median of ``(Δt − k·C)/Δstep``, k the
       saves between them (k·C left out when C is unknown).

    The same sources over one run alone give its own step time: the newest of the last
    :data:`NEWEST_RUNS` runs with a step that gives :data:`MIN_RUN_STEP_SAMPLES` values or more.
    When it lies more than :data:`STEP_TIME_CHANGE` from the window's, the job runs at a new
    pace, and that run's is returned: the interval is set in steps of the pace it has now.

    Args:
        timeline: the job's observations.
        run_id: shape (n,), from :func:`rules.runs.split_runs`.
        saves: from :func:`save_index`.
        cost_s: checkpoint cost C in seconds, or None when unknown.
        since_s: epoch seconds where the window opens.

    Returns:
        Seconds per step (> 0), or None when nothing gives it.
    """
    recent = timeline.time_s >= since_s
    stepped = np.flatnonzero(recent & timeline.is_kind(Kind.STEP) & np.isfinite(timeline.step))
    recent_saves = saves[recent[saves]]
    window = _per_step_samples(timeline, run_id, saves, stepped, recent_saves, cost_s)
    if window is None:
        return None
    window_s = float(np.median(window))
    with_step = run_id[np.flatnonzero(recent & np.isfinite(timeline.step))]
    for run in list(dict.fromkeys(with_step[::-1].tolist()))[:NEWEST_RUNS]:
        own = _per_step_samples(
            timeline,
            run_id,
            saves,
            stepped[run_id[stepped] == run],
            recent_saves[run_id[recent_saves] == run],
            cost_s,
        )
        if own is not None and own.size >= MIN_RUN_STEP_SAMPLES:
            own_s = float(np.median(own))
            return own_s if abs(own_s / window_s - 1.0) > STEP_TIME_CHANGE else window_s
    return window_s


def _per_step_samples(
    timeline: Timeline,
    run_id: IntArray,
    saves: IntArray,
    stepped: IntArray,
    within_saves: IntArray,
    cost_s: float | None,
) -> FloatArray | None:
    """The per-step values of :func:`step_time_s`'s first source that gives any, from the
    ``step`` observations ``stepped`` and the saves ``within_saves`` (indices; ``saves``: every
    save, the stalls between steps); None when none does."""
    sources: tuple[Callable[[], FloatArray], ...] = (  # each computed only when those before fail
        lambda: timeline.duration_s[stepped],
        lambda: _step_time_from_saves(timeline, run_id, within_saves, cost_s),
        lambda: _step_time_from_steps(timeline, run_id, saves, stepped, cost_s),
    )
    for source in sources:
        per_step = source()
        per_step = per_step[np.isfinite(per_step) & (per_step > 0.0)]
        if per_step.size:
            return per_step
    return None


def _step_time_from_saves(
    timeline: Timeline, run_id: IntArray, saves: IntArray, cost_s: float | None
) -> FloatArray:
    """Per pair of consecutive saves of one run with Δstep > 0: ``(Δt − C)/Δstep``."""
    return _save_pairs(timeline, run_id, saves, cost_s)[0]


def _save_pairs(
    timeline: Timeline, run_id: IntArray, saves: IntArray, cost_s: float | None
) -> tuple[FloatArray, IntArray]:
    """:func:`_step_time_from_saves`' values and the run of each."""
    useful = saves[np.isfinite(timeline.step[saves])]
    if cost_s is None or useful.size < 2:
        return np.zeros(0), np.zeros(0, np.int64)
    runs = _placed_runs(timeline, run_id, useful)
    same = runs[1:] == runs[:-1]
    elapsed_s = np.diff(timeline.time_s[useful])[same] - cost_s
    steps = np.diff(timeline.step[useful])[same]
    forward = steps > 0.0  # NaN compares False
    return elapsed_s[forward] / steps[forward], runs[1:][same][forward]


def run_step_times_s(
    timeline: Timeline,
    run_id: IntArray,
    saves: IntArray,
    *,
    cost_s: float | None,
    step_time_s: float,
) -> FloatArray:
    """Each observation's run's own seconds per step, shape (n,): the median of its ``step``
    observations' ``duration_s`` (tqdm's rate), else of its pairs of saves (``(Δt − C)/Δstep``,
    needs C), where it lies more than :data:`STEP_TIME_CHANGE` from ``step_time_s`` (the
    job's, :func:`step_time_s`); else the job's.

    A failure is re-dated by the pace of the run that failed (:func:`redated_failures`): runs
    of one job differ (a loaded host, other nodes), and a step time taken from another run
    moved a failure of a run 40% faster past the next run's start, leaving a restart cost of
    0.46 s where it was 8 s (a new user's trial, HF runs under load).
    """
    stepped = np.flatnonzero(timeline.is_kind(Kind.STEP) & np.isfinite(timeline.duration_s))
    by_run = {
        **_medians_by_run(*_save_pairs(timeline, run_id, saves, cost_s)),
        **_medians_by_run(timeline.duration_s[stepped], run_id[stepped]),
    }
    if not by_run:
        return np.full(run_id.size, step_time_s)
    runs = np.fromiter(by_run, np.int64, len(by_run))
    paces = np.fromiter(by_run.values(), np.float64, len(by_run))
    order = np.argsort(runs)
    runs, paces = runs[order], paces[order]
    paces = np.where(np.abs(paces / step_time_s - 1.0) > STEP_TIME_CHANGE, paces, step_time_s)
    at = np.minimum(np.searchsorted(runs, run_id), runs.size - 1)
    return np.where(runs[at] == run_id, paces[at], step_time_s)


def _medians_by_run(values: FloatArray, runs: IntArray) -> dict[int, float]:
    """The median of the finite, positive ``values`` of each run in ``runs``."""
    keep = np.isfinite(values) & (values > 0.0)
    values, runs = values[keep], runs[keep]
    order = np.lexsort((values, runs))
    values, runs = values[order], runs[order]
    unique, first, count = np.unique(runs, return_index=True, return_counts=True)
    medians = (values[first + (count - 1) // 2] + values[first + count // 2]) / 2.0
    return dict(zip(unique.tolist(), medians.tolist(), strict=True))


def _step_time_from_steps(
    timeline: Timeline, run_id: IntArray, saves: IntArray, stepped: IntArray, cost_s: float | None
) -> FloatArray:
    """Per pair of consecutive step observations of one run with Δstep > 0:
    ``(Δt − k·C)/Δstep``."""
    times = timeline.time_s[stepped]
    elapsed_s = np.diff(times)
    if cost_s is not None:
        save_s = timeline.time_s[saves]
        stalls = np.searchsorted(save_s, times[1:]) - np.searchsorted(save_s, times[:-1])
        elapsed_s = elapsed_s - stalls * cost_s
    runs = _placed_runs(timeline, run_id, stepped)
    same = runs[1:] == runs[:-1]
    return _per_step(elapsed_s[same], np.diff(timeline.step[stepped])[same])


def _per_step(elapsed_s: FloatArray, steps: FloatArray) -> FloatArray:
    """``elapsed_s / steps`` where the step advanced: a bar line and the timed record of the
    same step (HF Trainer) give Δstep = 0, a resume from an earlier save read without its
    start line gives Δstep < 0; neither says anything about the step time."""
    forward = steps > 0.0  # NaN compares False
    per_step: FloatArray = elapsed_s[forward] / steps[forward]
    return per_step


def failure_times_s(
    timeline: Timeline, interruptions: Sequence[Interruption], *, step_time_s: float
) -> FloatArray:
    """Failure times moved forward to where the failed run's steps say it had got: the times
    of :func:`redated_failures`."""
    return redated_failures(timeline, interruptions, step_time_s=step_time_s)[0]


def redated_failures(
    timeline: Timeline, interruptions: Sequence[Interruption], *, step_time_s: float | FloatArray
) -> tuple[FloatArray, int]:
    """Failure times moved forward to where the failed run's steps say it had got, and how
    many were clamped to the next line.

    Tracebacks and progress bars carry no wall-clock time, so a failure is often stamped with
    the time of the last stamped line, up to a whole checkpoint interval too early, which
    would shrink the exposure and inflate R. Every observation at step ``s_a`` and time ``t_a``
    bounds the time step ``s`` was reached from below by ``t_a + (s − s_a)·step_time`` (and a
    carried time, being early, keeps it a bound), ``step_time`` the pace of that observation's
    run when known (a faster run's failure moved by a slower run's pace lands too late). Per
    interruption, with ``s`` the highest step its failures report, the bound from the
    observations since the previous interruption moves the interruption later (all its
    failures by the same shift), but never past the first non-failure line of a log after its
    first failure (the next run's first line). Interruptions
    whose failures report no step keep their times, and so do failures dated by the host
    (:attr:`Timeline.host_dated`): their time says nothing to move from, and a host-dated
    observation anchors no bound (its time is not the log's).

    Args:
        timeline: the job's observations.
        interruptions: from :func:`rules.interruptions.cluster_interruptions` on ``timeline``.
        step_time_s: seconds per training step, > 0: the job's, or per observation, shape (n,)
            (:func:`run_step_times_s`: each observation's bound is reckoned at its run's pace).

    Returns:
        ``(times, clamped)``: shape (f,) epoch seconds, aligned with
        ``timeline.failure_index``; how many interruptions the steps would have put more than
        :data:`CLAMP_NOTE_S` after the next line, and were clamped to it (the step time, or
        the step a failure reports, is off).
    """
    times, steps = timeline.time_s, timeline.step
    failures = timeline.failure_index
    moved_s = times[failures].copy()
    if not interruptions:
        return moved_s, 0
    host_dated = timeline.host_dated
    anchors = np.isfinite(steps) & ~timeline.is_kind(Kind.FAILURE) & ~host_dated
    next_lines = np.flatnonzero(~timeline.from_timing_file & ~timeline.is_kind(Kind.FAILURE))
    # each interruption's members are one slice of the failures, in order (as clustered): by
    # counts, not times (two interruptions of a file without stamps share one host date)
    bounds = np.concatenate(([0], np.cumsum([i.n_observations for i in interruptions])))
    firsts = failures[bounds[:-1]]  # per interruption, shape (i,): its first failure
    since = np.concatenate(([0], failures[bounds[1:-1] - 1] + 1))  # after the one before's last
    after = np.searchsorted(next_lines, firsts, "right")
    until = np.full(firsts.size, times.size)  # the next log line that is no failure, or the end
    until[after < next_lines.size] = next_lines[after[after < next_lines.size]]
    until_s = np.full(firsts.size, np.inf)
    until_s[until < times.size] = times[until[until < times.size]]
    failure_steps = steps[failures]
    reached = np.fmax.reduceat(failure_steps, bounds[:-1])  # the highest step reported (nanmax)
    movable = np.logical_or.reduceat(np.isfinite(failure_steps), bounds[:-1]) & ~host_dated[firsts]
    paces_s = np.broadcast_to(np.asarray(step_time_s, np.float64), times.shape)
    clamped = 0
    for k in np.flatnonzero(movable).tolist():
        window = slice(int(since[k]), int(until[k]))  # views: no index array per window
        step, end_s = reached[k], float(until_s[k])
        usable = anchors[window] & (steps[window] <= step)
        if usable.any():
            ahead = (step - steps[window][usable]) * paces_s[window][usable]
            reach_s = times[window][usable] + ahead
            bound_s = float(np.max(reach_s))
            clamped += bound_s - end_s > CLAMP_NOTE_S
            shift_s = max(0.0, min(bound_s, end_s) - times[firsts[k]])
            members = slice(int(bounds[k]), int(bounds[k + 1]))
            part = moved_s[members]  # a view: written through
            early = (part < end_s) & ~host_dated[failures[members]]
            part[early] = np.minimum(part[early] + shift_s, end_s)
    return moved_s, clamped


def restart_cost_s(
    timeline: Timeline,
    interruptions: Sequence[Interruption],
    run_id: IntArray,
    saves: IntArray,
    *,
    step_time_s: float | None,
) -> float | None:
    """Restart cost R: median time from an interruption to training progressing again.

    Measured from the interruption's first failure to when the progress of the run that
    recovered began (:func:`rules.recovery.recoveries`: its first ``step`` or checkpoint
    observation dated back by its steps, the end goodput's restart time has too), so it holds
    detection, queueing, start-up, loading the checkpoint and failed restart attempts.
    Interruptions the job never recovered from are skipped, and so are those with an end the
    host dated (:attr:`Interruption.host_dated`, or a first progress after it that is
    :attr:`Timeline.host_dated`): a file that printed no time cannot say when it failed or
    progressed again.

    Args:
        timeline: the job's observations.
        interruptions: the interruptions to measure (usually the unplanned ones in the window),
            ascending.
        run_id: shape (n,), from :func:`rules.runs.split_runs`.
        saves: from :func:`every_save_index`.
        step_time_s: seconds per step, or None when unknown.

    Returns:
        Seconds, or None when no interruption was followed by progress.
    """
    starts = np.array([i.start_s for i in interruptions], np.float64)
    ends = np.array([i.end_s for i in interruptions], np.float64)
    found = recoveries(timeline, run_id, saves, ends, step_time_s=step_time_s)
    usable = found.recovered
    if timeline.host_dated.any():
        placed = np.array([not i.host_dated for i in interruptions], np.bool_)
        usable &= placed & ~timeline.host_dated[np.maximum(found.progress, 0)]
    costs_s = found.end_s[usable] - starts[usable]
    return float(np.median(costs_s)) if costs_s.size else None


def _placed_runs(timeline: Timeline, run_id: IntArray, rows: IntArray) -> IntArray:
    """The run of each of ``rows`` for :func:`_within_runs`, a host-dated row
    (:attr:`Timeline.host_dated`) given a run of its own (-1 - its position): no difference
    from or to it is taken, since its time is not the log's."""
    runs = run_id[rows]
    host = timeline.host_dated[rows]
    if not host.any():
        return runs
    return np.where(host, -1 - np.arange(rows.size), runs)


def _within_runs(values: FloatArray, runs: IntArray) -> FloatArray:
    """Differences of consecutive ``values`` whose two ends lie in the same run."""
    same: BoolArray = runs[1:] == runs[:-1]
    return np.diff(values)[same]
