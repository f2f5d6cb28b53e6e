"""Estimators of checkpoint cost C, MTBF M, restart cost R, current interval and step time.

``estimate_checkpoint_cost`` and ``estimate_mtbf`` work on plain numbers; the other estimators
read a :class:`rules.timeline.Timeline` and its run labels (:func:`rules.timeline.split_runs`).
Results are seconds; unknown values are ``None``, never 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ckpt_advisor.rules._checks import (
    require_count,
    require_non_negative,
    require_positive,
    require_probability,
)
from ckpt_advisor.rules.rank_test import rank_sum_p_value
from ckpt_advisor.rules.timeline import (
    PROGRESS_KINDS,
    BoolArray,
    FloatArray,
    IntArray,
    Interruption,
    Kind,
    Timeline,
)

CLAMP_NOTE_S = 60.0
"""A failure time clamped to the next line by more than this is counted (less is a bar
clock's rounding or a step time's noise)."""


@dataclass(frozen=True, slots=True)
class CheckpointCost:
    """The checkpoint cost C with a distribution-free confidence interval.

    Attributes:
        cost_s: median blocking duration of the recent saves, seconds.
        ci_s: (low, high) confidence interval of the median, seconds; None when there are too
            few saves for the requested confidence (fewer than 5 at 90%).
        n: how many durations the median is taken over.
        source: ``"timing_file"`` or ``"log"``.
        previous_cost_s: when the most recent saves shifted to a new level (storage got slower
            or faster), the median of the window's saves before the shift; else None. ``cost_s``
            is then the median of the saves since the shift only.
        upper_s: for C from log lines (a lower bound), an upper bound: the median, over the
            same saves, of the time from each save's start to the first step shown after it
            minus the compute time of the steps in between
            (:func:`rules.bounds.checkpoint_upper_bounds_s`); None when too few saves have
            one (a bar that does not keep time, no bar at all) or C comes from a timing file.
    """

    cost_s: float
    ci_s: tuple[float, float] | None
    n: int
    source: str
    previous_cost_s: float | None = None
    upper_s: float | None = None

    @property
    def is_lower_bound(self) -> bool:
        """True for C from log lines: logs may not mark the end of every part of a save."""
        return self.source == "log"

    @property
    def range_s(self) -> tuple[float, float | None]:
        """The plausible C: the confidence interval of an exact C (the point when too few saves
        give one); ``(cost_s, upper_s)`` for C from log lines, the upper end None (open) when
        unknown."""
        if self.is_lower_bound:
            return self.cost_s, self.upper_s
        return self.ci_s or (self.cost_s, self.cost_s)


def estimate_checkpoint_cost(
    timed_s: Sequence[float] | FloatArray,
    logged_s: Sequence[float] | FloatArray,
    *,
    window: int = 20,
    confidence: float = 0.9,
    change_saves: int = 3,
    change_p: float = 0.01,
    change_ratio: float = 1.25,
    logged_upper_s: Sequence[float] | FloatArray | None = None,
) -> CheckpointCost | None:
    """Estimate C as the median of the most recent checkpoint durations.

    Durations from timing files are exact and are used whenever there is at least one; the
    durations read from log lines are used only when there are none (a log often misses the end
    of a save, so its durations are lower bounds). Non-finite and non-positive durations are
    dropped (second-resolution stamps give 0 for fast saves). The median resists the occasional
    save that stalls on a busy filesystem.

    The interval is the order-statistic interval for the median: ``[x_(k), x_(n-k+1)]`` with
    the largest k such that ``P(B <= k-1) <= (1-confidence)/2`` for ``B ~ Binomial(n, 1/2)``;
    its coverage is at least ``confidence`` for any continuous distribution (Hollander, Wolfe &
    Chicken, "Nonparametric Statistical Methods", 3rd ed., section 3.6).

    A change of level (the storage got slower) is noticed within ``change_saves`` saves instead
    of after half a window: when the last ``change_saves`` durations differ from the rest of the
    window by a two-sided Mann-Whitney U test (exact p below ``change_p``, ties included:
    :func:`rules.rank_test.rank_sum_p_value`; Hollander, Wolfe & Chicken section 4.1) and
    their median differs from the earlier median by more than a factor ``change_ratio``, the
    window is cut at the shift (extended back over saves nearer the new level, in log scale)
    and C is the median of the saves since. With 17 saves before and 3 after, three saves all
    slower than every earlier one give p = 2/C(20, 3) ≈ 0.0018.

    Args:
        timed_s: shape (a,), durations from checkpoint timing files, seconds, oldest first.
        logged_s: shape (b,), durations derived from log lines, seconds, oldest first.
        window: how many of the most recent durations to use, >= 1.
        confidence: confidence level of the interval, strictly between 0 and 1.
        change_saves: recent saves compared with the rest of the window, >= 1.
        change_p: significance level of the change test, in (0, 1).
        change_ratio: smallest factor between the two medians that counts as a change, > 1.
        logged_upper_s: shape (b,), aligned with ``logged_s``: an upper bound of each logged
            save's cost, NaN where none is known
            (:func:`rules.bounds.checkpoint_upper_bounds_s`). C from log lines gets
            ``upper_s``, the median of the bounds of the saves it is taken over, when at least
            half of them have one (and never below C).

    Returns:
        The estimate, or None when neither source has a usable duration.

    Raises:
        ValueError: ``window`` < 1 or ``confidence`` outside (0, 1).
    """
    require_count("window", window, minimum=1)
    require_count("change_saves", change_saves, minimum=1)
    level = require_probability("confidence", confidence)
    require_probability("change_p", change_p)
    if require_positive("change_ratio", change_ratio) <= 1.0:
        raise ValueError(f"change_ratio must be > 1, got {change_ratio!r}")
    timed = _usable(timed_s)
    logged = np.asarray(logged_s, np.float64)
    uppers = np.full(logged.size, np.nan) if logged_upper_s is None else logged_upper_s
    usable = np.isfinite(logged) & (logged > 0.0)
    uppers = np.asarray(uppers, np.float64)[usable][-window:]
    durations, source = (timed, "timing_file") if timed.size else (logged[usable], "log")
    if durations.size == 0:
        return None
    recent = durations[-window:]
    shift = _level_shift(recent, change_saves, change_p, change_ratio)
    previous_s = None
    if shift is not None:
        previous_s = float(np.median(recent[:shift]))
        recent, uppers = recent[shift:], uppers[shift:]
    ordered = np.sort(recent)
    cost_s = float(np.median(ordered))
    upper_s = None
    bounded = uppers[np.isfinite(uppers)]
    if source == "log" and bounded.size and 2 * bounded.size >= recent.size:
        upper_s = max(cost_s, float(np.median(bounded)))
    return CheckpointCost(
        cost_s=cost_s,
        ci_s=_median_ci_s(ordered, level),
        n=int(ordered.size),
        source=source,
        previous_cost_s=previous_s,
        upper_s=upper_s,
    )


def _level_shift(durations_s: FloatArray, last: int, p_value: float, ratio: float) -> int | None:
    """Index where the durations moved to a new level, or None (see
    :func:`estimate_checkpoint_cost`)."""
    if durations_s.size < 2 * last:
        return None
    before, after = durations_s[:-last], durations_s[-last:]
    new_s, old_s = float(np.median(after)), float(np.median(before))
    if max(new_s / old_s, old_s / new_s) <= ratio:
        return None
    if rank_sum_p_value(after, before) >= p_value:
        return None
    logs = np.log(durations_s)
    nearer_new = np.abs(logs - math.log(new_s)) < np.abs(logs - math.log(old_s))
    shift = durations_s.size - last
    while shift > 1 and nearer_new[shift - 1]:
        shift -= 1
    return shift


def _usable(durations_s: Sequence[float] | FloatArray) -> FloatArray:
    values = np.asarray(durations_s, np.float64)
    return values[np.isfinite(values) & (values > 0.0)]


def _median_ci_s(sorted_s: FloatArray, confidence: float) -> tuple[float, float] | None:
    """Order-statistic interval of the median of ``sorted_s`` (ascending); None if too few."""
    n = int(sorted_s.size)
    budget = (1.0 - confidence) / 2.0 * 2.0**n  # P(B <= k-1) * 2**n may not exceed this
    k, tail = 0, 0
    while k < n and tail + math.comb(n, k) <= budget:
        tail += math.comb(n, k)
        k += 1
    if k == 0:
        return None
    return float(sorted_s[k - 1]), float(sorted_s[n - k])


@dataclass(frozen=True, slots=True)
class MtbfEstimate:
    """The MTBF M with its chi-square confidence bounds.

    Attributes:
        mtbf_s: ``exposure_s / n_failures``, seconds; None with no failure or no exposure.
        lower_s: lower confidence bound, seconds; None with no exposure.
        upper_s: upper confidence bound, seconds; None with no failure (M may be unbounded).
        n_failures: failures counted.
        exposure_s: running time observed, seconds.
    """

    mtbf_s: float | None
    lower_s: float | None
    upper_s: float | None
    n_failures: int
    exposure_s: float

    @property
    def ci_s(self) -> tuple[float, float] | None:
        """(lower_s, upper_s) when both are known, else None."""
        if self.lower_s is None or self.upper_s is None:
            return None
        return self.lower_s, self.upper_s


def estimate_mtbf(exposure_s: float, n_failures: int, *, confidence: float = 0.9) -> MtbfEstimate:
    """Exponential maximum-likelihood MTBF with right-censoring, and its confidence interval.

    ``M = E / n``; the two-sided interval for time-truncated observation is
    ``[2E / χ²(1−α/2; 2n+2), 2E / χ²(α/2; 2n)]`` with ``α = 1 − confidence`` (DESIGN.md;
    Meeker & Escobar, "Statistical Methods for Reliability Data", 1998, section 7.6; the
    Garwood interval, conservative: it covers at or above its nominal rate). With no failure
    only the lower bound ``2E / χ²(1−α/2; 2)`` exists. Quantiles come from
    ``χ²(p; k) = 2·gammaincinv(k/2, p)`` (scipy, imported on first use).

    Args:
        exposure_s: running time E, seconds, finite and >= 0.
        n_failures: unplanned interruptions n during that time, >= 0.
        confidence: confidence level, strictly between 0 and 1.

    Returns:
        The estimate; every number is None when ``exposure_s`` is 0.

    Raises:
        ValueError: a negative or non-finite exposure, a negative count, a bad confidence.
    """
    exposure = require_non_negative("exposure_s", exposure_s)
    n = require_count("n_failures", n_failures)
    alpha = 1.0 - require_probability("confidence", confidence)
    if exposure == 0.0:
        return MtbfEstimate(None, None, None, n, exposure)
    from scipy.special import gammaincinv  # lazy: scipy costs CLI start-up time

    # 2E / χ²(p; 2m) = 2E / (2·gammaincinv(m, p)) = E / gammaincinv(m, p)
    lower_s = exposure / float(gammaincinv(n + 1, 1.0 - alpha / 2.0))
    if n == 0:
        return MtbfEstimate(None, lower_s, None, n, exposure)
    upper_s = exposure / float(gammaincinv(n, alpha / 2.0))
    return MtbfEstimate(exposure / n, lower_s, upper_s, n, exposure)


def checkpoint_durations_s(timeline: Timeline, run_id: IntArray) -> tuple[FloatArray, FloatArray]:
    """Blocking checkpoint durations, oldest first: (from timing files, from logs).

    A timing-file ``checkpoint_end`` gives its ``duration_s``. A log ``checkpoint_end`` gives its
    ``duration_s`` when the parser set one, else the time since a log ``checkpoint_start`` that
    directly precedes it among the log's saves in the same run.

    Args:
        timeline: the job's observations.
        run_id: shape (n,), from :func:`rules.timeline.split_runs`.

    Returns:
        Two arrays of seconds (possibly empty), in time order.
    """
    ends = timeline.kind == Kind.CHECKPOINT_END
    timed = timeline.duration_s[ends & timeline.from_timing_file]
    _, logged = log_save_durations_s(timeline, run_id)
    return timed, logged[np.isfinite(logged)]


def log_save_durations_s(timeline: Timeline, run_id: IntArray) -> tuple[IntArray, FloatArray]:
    """Indices of the log ``checkpoint_end`` observations and their durations (NaN unknown),
    as :func:`checkpoint_durations_s` reads them: shapes (b,) and (b,)."""
    log_ends = (timeline.kind == Kind.CHECKPOINT_END) & ~timeline.from_timing_file
    durations_s = np.where(log_ends, timeline.duration_s, np.nan)
    saves = np.flatnonzero(timeline.is_kind(Kind.CHECKPOINT_START, Kind.CHECKPOINT_END))
    saves = saves[~timeline.from_timing_file[saves]]
    before, after = saves[:-1], saves[1:]
    paired = (
        (timeline.kind[before] == Kind.CHECKPOINT_START)
        & log_ends[after]
        & np.isnan(durations_s[after])
        & (run_id[before] == run_id[after])
    )
    durations_s[after[paired]] = timeline.time_s[after[paired]] - timeline.time_s[before[paired]]
    index = np.flatnonzero(log_ends)
    return index, durations_s[index]


def save_index(timeline: Timeline, run_id: IntArray) -> IntArray:
    """Indices of the observations that mark when checkpoints were taken, ascending.

    One source only, so a save seen in both is not counted twice: timing-file saves when there
    are any, else log saves. Per run, ``checkpoint_end`` observations, or ``checkpoint_start``
    ones in a run that has no end (HF Trainer and Lightning log only the start). A save at the
    same step as the previous one in the same run (another rank's line) is dropped.

    Args:
        timeline: the job's observations.
        run_id: shape (n,), from :func:`rules.timeline.split_runs`.

    Returns:
        Shape (s,) indices into the timeline.
    """
    ends = timeline.kind == Kind.CHECKPOINT_END
    timed = timeline.from_timing_file
    source = timed if (ends & timed).any() else ~timed
    source_ends = ends & source
    source_starts = (timeline.kind == Kind.CHECKPOINT_START) & source
    runs_with_end = np.unique(run_id[source_ends])
    chosen = np.flatnonzero(source_ends | (source_starts & ~np.isin(run_id, runs_with_end)))
    steps, runs = timeline.step[chosen], run_id[chosen]
    keep = np.ones(chosen.size, np.bool_)
    keep[1:] = (steps[1:] != steps[:-1]) | (runs[1:] != runs[:-1])  # NaN steps never repeat
    return chosen[keep]


def current_interval_s(
    timeline: Timeline,
    run_id: IntArray,
    saves: IntArray,
    *,
    window: int,
    cost_s: float | None = None,
) -> float | None:
    """The job's checkpoint interval now, as compute time between saves (Daly's T).

    The median spacing of consecutive saves of one run (one save's mark to the next one's) is
    ``T + C`` when saves block training for C; Daly (FGCS 22(3), 2006) and Young (1974) define
    the interval T as the compute time between checkpoints, without the checkpoint, so C is
    subtracted when known (the spacing itself is returned when C is unknown, or when it does
    not exceed C).

    Args:
        timeline: the job's observations.
        run_id: shape (n,), from :func:`rules.timeline.split_runs`.
        saves: from :func:`save_index`.
        window: how many of the most recent intervals to use, >= 1.
        cost_s: blocking checkpoint cost C, seconds, or None when unknown.

    Returns:
        Seconds, or None when no run has two saves.
    """
    gaps_s = _within_runs(timeline.time_s[saves], run_id[saves])
    recent = gaps_s[gaps_s > 0.0][-window:]
    if not recent.size:
        return None
    spacing_s = float(np.median(recent))
    if cost_s is not None and spacing_s > cost_s:
        return spacing_s - cost_s
    return spacing_s


def current_interval_steps(timeline: Timeline, run_id: IntArray, saves: IntArray) -> int | None:
    """Median step distance between consecutive saves of one run (the training steps computed
    between them, e.g. ``save_steps``), or None without steps."""
    steps = _within_runs(timeline.step[saves], run_id[saves])
    steps = steps[steps > 0]  # NaN compares False
    return round(float(np.median(steps))) if steps.size else None


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
    2. consecutive saves of one run that carry steps: the median of ``(Δt − C)/Δstep`` (one save
       stalls training for C per pair); needs C. Save lines carry their own time stamps, which
       step lines often lack (a parser then gives them the last stamp seen);
    3. consecutive ``step`` observations of one run: the median of ``(Δt − k·C)/Δstep``, k the
       saves between them (k·C left out when C is unknown).

    Args:
        timeline: the job's observations.
        run_id: shape (n,), from :func:`rules.timeline.split_runs`.
        saves: from :func:`save_index`.
        cost_s: checkpoint cost C in seconds, or None when unknown.
        since_s: epoch seconds where the window opens.

    Returns:
        Seconds per step (> 0), or None when nothing gives it.
    """
    recent = timeline.time_s >= since_s
    stepped = np.flatnonzero(recent & (timeline.kind == Kind.STEP) & np.isfinite(timeline.step))
    for per_step in (
        timeline.duration_s[stepped],
        _step_time_from_saves(timeline, run_id, saves[recent[saves]], cost_s),
        _step_time_from_steps(timeline, run_id, saves, stepped, cost_s),
    ):
        per_step = per_step[np.isfinite(per_step) & (per_step > 0.0)]
        if per_step.size:
            return float(np.median(per_step))
    return None


def _step_time_from_saves(
    timeline: Timeline, run_id: IntArray, saves: IntArray, cost_s: float | None
) -> FloatArray:
    """Per pair of consecutive saves of one run with Δstep > 0: ``(Δt − C)/Δstep``."""
    useful = saves[np.isfinite(timeline.step[saves])]
    if cost_s is None or useful.size < 2:
        return np.zeros(0)
    elapsed_s = _within_runs(timeline.time_s[useful], run_id[useful]) - cost_s
    return _per_step(elapsed_s, _within_runs(timeline.step[useful], run_id[useful]))


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
    same = run_id[stepped][1:] == run_id[stepped][:-1]
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
    timeline: Timeline, interruptions: Sequence[Interruption], *, step_time_s: float
) -> tuple[FloatArray, int]:
    """Failure times moved forward to where the failed run's steps say it had got, and how
    many were clamped to the next line.

    Tracebacks and progress bars carry no wall-clock time, so a failure is often stamped with
    the time of the last stamped line, up to a whole checkpoint interval too early, which
    would shrink the exposure and inflate R. Every observation at step ``s_a`` and time ``t_a``
    bounds the time step ``s`` was reached from below by ``t_a + (s − s_a)·step_time`` (and a
    carried time, being early, keeps it a bound). Per interruption, with ``s`` the highest step
    its failures report, the bound from the observations since the previous interruption moves
    the interruption later (all its failures by the same shift), but never past the first
    non-failure line of a log after its first failure (the next run's first line). Interruptions
    whose failures report no step keep their times.

    Args:
        timeline: the job's observations.
        interruptions: from :func:`rules.timeline.cluster_interruptions` on ``timeline``.
        step_time_s: seconds per training step, > 0.

    Returns:
        ``(times, clamped)``: shape (f,) epoch seconds, aligned with
        ``timeline.failure_index``; how many interruptions the steps would have put more than
        :data:`CLAMP_NOTE_S` after the next line, and were clamped to it (the step time, or
        the step a failure reports, is off).
    """
    times, steps = timeline.time_s, timeline.step
    failures = timeline.failure_index
    moved_s = times[failures].copy()
    anchors = np.isfinite(steps) & (timeline.kind != Kind.FAILURE)
    next_lines = np.flatnonzero(~timeline.from_timing_file & (timeline.kind != Kind.FAILURE))
    member = np.searchsorted([i.start_s for i in interruptions], moved_s, "right") - 1
    since = clamped = 0
    for k in range(len(interruptions)):
        members = np.flatnonzero(member == k)
        first = failures[members[0]]
        after = np.searchsorted(next_lines, first, "right")
        until = int(next_lines[after]) if after < next_lines.size else times.size
        until_s = float(times[until]) if until < times.size else np.inf
        reached = steps[failures[members]]
        if np.isfinite(reached).any():
            step = np.nanmax(reached)
            window = np.arange(since, until)
            window = window[anchors[window] & (steps[window] <= step)]
            if window.size:
                bound_s = float(np.max(times[window] + (step - steps[window]) * step_time_s))
                clamped += bound_s - until_s > CLAMP_NOTE_S
                shift_s = max(0.0, min(bound_s, until_s) - times[first])
                early = members[moved_s[members] < until_s]
                moved_s[early] = np.minimum(moved_s[early] + shift_s, until_s)
        since = int(failures[members[-1]]) + 1
    return moved_s, clamped


def restart_cost_s(timeline: Timeline, interruptions: Sequence[Interruption]) -> float | None:
    """Restart cost R: median time from an interruption to training progressing again.

    Measured from the interruption's first failure to the first ``step`` or checkpoint
    observation after its last failure, so it holds detection, queueing, start-up, loading the
    checkpoint and failed restart attempts. Interruptions the job never recovered from are
    skipped.

    Args:
        timeline: the job's observations.
        interruptions: the interruptions to measure (usually the unplanned ones in the window).

    Returns:
        Seconds, or None when no interruption was followed by progress.
    """
    progress_s = timeline.time_s[timeline.is_kind(*PROGRESS_KINDS)]
    starts = np.array([i.start_s for i in interruptions], np.float64)
    ends = np.array([i.end_s for i in interruptions], np.float64)
    following = np.searchsorted(progress_s, ends, "right")
    recovered = following < progress_s.size
    costs_s = progress_s[following[recovered]] - starts[recovered]
    return float(np.median(costs_s)) if costs_s.size else None


def _within_runs(values: FloatArray, runs: IntArray) -> FloatArray:
    """Differences of consecutive ``values`` whose two ends lie in the same run."""
    same: BoolArray = runs[1:] == runs[:-1]
    return np.diff(values)[same]


def persist_latency_s(timeline: Timeline, *, window: int) -> float | None:
    """Median background persist time of the most recent asynchronous saves, seconds.

    An asynchronous save (torch.distributed.checkpoint ``async_save``, Megatron
    ``--async-save``, NeMo ``async_save``) stalls training only for its blocking part, which is
    C; the copy to storage continues in the background. Timing files give the whole save as
    ``persist_s`` when they give ``blocking_s`` (DESIGN.md timing-file schema).

    Args:
        timeline: the job's observations.
        window: how many of the most recent saves with a persist time to use, >= 1.

    Returns:
        Seconds, or None when no save carries a persist time.
    """
    require_count("window", window, minimum=1)
    ends = timeline.kind == Kind.CHECKPOINT_END
    persist = timeline.persist_s[ends]
    persist = persist[np.isfinite(persist) & (persist > 0.0)][-window:]
    return float(np.median(persist)) if persist.size else None


def scale_mtbf(mtbf: MtbfEstimate, factor: float) -> MtbfEstimate:
    """The estimate with its exposure, M and bounds multiplied by ``factor``.

    Failures of independent units add up: a job on ``u`` nodes has ``u`` times the failure rate
    of one node, so with ``factor = u`` a job's estimate becomes the per-node MTBF (exposure in
    node-seconds), and with ``factor = 1/u'`` a per-node estimate becomes the MTBF of a job on
    ``u'`` nodes (DESIGN.md: "a per-node rate can be rescaled to another node count"). The
    chi-square bounds scale the same way, since they are linear in the exposure.

    Raises:
        ValueError: ``factor`` is not finite and > 0.
    """
    k = require_positive("factor", factor)

    def times(value: float | None) -> float | None:
        return None if value is None else value * k

    return MtbfEstimate(
        times(mtbf.mtbf_s),
        times(mtbf.lower_s),
        times(mtbf.upper_s),
        mtbf.n_failures,
        mtbf.exposure_s * k,
    )


def mtbf_by_class(
    exposure_s: float, counts: dict[str, int], *, confidence: float = 0.9
) -> dict[str, MtbfEstimate]:
    """The MTBF of each failure class over the same running time (competing risks).

    Each class is its own Poisson process observed over the whole exposure, so its MLE is
    ``E / n_class`` with the chi-square interval of :func:`estimate_mtbf`; the rates add up to
    the job's rate (Meeker & Escobar 1998, section 15.2, "competing risks").

    Args:
        exposure_s: running time E, seconds, >= 0.
        counts: failure class -> interruptions of that class.
        confidence: confidence level, in (0, 1).

    Returns:
        Class -> estimate, in the order of ``counts``.
    """
    return {
        name: estimate_mtbf(exposure_s, count, confidence=confidence)
        for name, count in counts.items()
    }


@dataclass(frozen=True, slots=True)
class WeibullFit:
    """A Weibull fit of the running time between interruptions.

    Attributes:
        shape: MLE of the shape k (k < 1: failures cluster after a restart, the usual case in
            HPC fleets; k = 1: exponential; k > 1: wear-out).
        shape_ci: profile-likelihood confidence interval of k.
        scale_s: MLE of the scale λ, seconds.
        mean_s: mean time between failures of the fit, ``λ·Γ(1 + 1/k)``, seconds.
        n_failures: interruptions the fit used.
        p_exponential: p-value of the likelihood-ratio test of k = 1 (the exponential).
    """

    shape: float
    shape_ci: tuple[float, float]
    scale_s: float
    mean_s: float
    n_failures: int
    p_exponential: float

    @property
    def not_exponential(self) -> bool:
        """True when the shape is clearly not 1: the likelihood-ratio test rejects the
        exponential at the 1% level. A 10% level would call one exponential job in ten Weibull."""
        return self.p_exponential < 0.01

    @property
    def cv(self) -> float:
        """Coefficient of variation of the fitted lives,
        ``sqrt(Γ(1 + 2/k) / Γ(1 + 1/k)² − 1)`` (1 for the exponential; ≈ 1.46 at k = 0.7)."""
        return math.sqrt(
            math.gamma(1.0 + 2.0 / self.shape) / math.gamma(1.0 + 1.0 / self.shape) ** 2 - 1.0
        )


def widen_mtbf_ci(mtbf: MtbfEstimate, cv: float) -> MtbfEstimate:
    """The chi-square interval of M stretched (in log scale, about M) by the lives' CV.

    The chi-square interval of :func:`estimate_mtbf` assumes exponential lives, whose
    coefficient of variation is 1; a mean of n lives has a standard deviation of ``CV·M/√n``, so
    for lives with another CV (a Weibull fit, :attr:`WeibullFit.cv`) each bound becomes
    ``M·(bound/M)^CV``: wider for k < 1 (failures in bursts), narrower for k > 1. A delta-method
    approximation (Meeker & Escobar 1998, appendix B.2); M itself is unchanged.

    Raises:
        ValueError: ``cv`` is not finite and > 0.
    """
    stretch = require_positive("cv", cv)
    point = mtbf.mtbf_s
    if point is None:
        return mtbf

    def bound(value: float | None) -> float | None:
        return None if value is None else point * (value / point) ** stretch

    return replace(mtbf, lower_s=bound(mtbf.lower_s), upper_s=bound(mtbf.upper_s))


def fit_weibull(
    gaps_s: Sequence[float] | FloatArray,
    censored_s: float = 0.0,
    *,
    confidence: float = 0.9,
    min_failures: int = 10,
) -> WeibullFit | None:
    """Maximum-likelihood Weibull fit of times between failures, the last one right-censored.

    With r failure times ``t_i`` and all times (censored included) ``u_j``, the scale that
    maximises the likelihood for a given shape is ``λ^k = Σ u_j^k / r``, leaving the profile
    log-likelihood ``ℓ(k) = r·ln k − r·ln(Σ u_j^k / r) + (k − 1)·Σ ln t_i − r``, maximised over k
    numerically; the shape's interval is ``{k : 2(ℓ(k̂) − ℓ(k)) <= χ²(confidence; 1)}``
    (Lawless, "Statistical Models and Methods for Lifetime Data", 2nd ed., 2003, sections 5.2
    and 5.4). Times between failures of HPC systems fit a Weibull with k ≈ 0.7–0.8 (Schroeder &
    Gibson, "A large-scale study of failures in high-performance computing systems", DSN 2006).

    Args:
        gaps_s: shape (r,), running time before each failure, seconds, > 0 (others dropped).
        censored_s: running time since the last failure, seconds, >= 0 (0: none).
        confidence: level of the shape's interval, in (0, 1).
        min_failures: fewer usable failures than this give None, >= 2.

    Returns:
        The fit, or None with too few failures.

    Raises:
        ValueError: bad ``censored_s``, ``confidence`` or ``min_failures``.
    """
    level = require_probability("confidence", confidence)
    tail = require_non_negative("censored_s", censored_s)
    require_count("min_failures", min_failures, minimum=2)
    failed = np.asarray(gaps_s, np.float64)
    failed = failed[np.isfinite(failed) & (failed > 0.0)]
    r = int(failed.size)
    if r < min_failures:
        return None
    from scipy.special import chdtrc, chdtri  # χ² survival function and its inverse

    unit = float(np.mean(failed))  # work in units of the mean gap: no overflow in u**k
    log_failed = np.log(failed / unit)
    log_all = np.concatenate((log_failed, [math.log(tail / unit)] if tail > 0 else []))
    sum_log = float(log_failed.sum())

    def log_sum_pow(k: float) -> float:  # ln Σ u_j^k, without overflow
        scaled = k * log_all
        top = float(scaled.max())
        return top + math.log(float(np.exp(scaled - top).sum()))

    def loglik(log_k: float) -> float:
        k = math.exp(log_k)
        return r * log_k - r * (log_sum_pow(k) - math.log(r)) + (k - 1) * sum_log

    def score(log_k: float) -> float:  # dℓ/d(ln k) = k·dℓ/dk, decreasing: ℓ is unimodal
        k = math.exp(log_k)
        weights = np.exp(k * log_all - k * float(log_all.max()))
        mean_log = float(weights @ log_all) / float(weights.sum())  # Σ u^k ln u / Σ u^k
        return r - r * k * mean_log + k * sum_log

    lo, hi = math.log(0.02), math.log(50.0)
    log_k = lo if score(lo) <= 0 else hi if score(hi) >= 0 else _bisect(score, lo, hi)
    top = loglik(log_k)
    drop = float(chdtri(1, 1.0 - level)) / 2.0

    def edge(bound: float) -> float:
        if top - loglik(bound) <= drop:
            return math.exp(bound)
        return math.exp(_bisect(lambda x: top - loglik(x) - drop, log_k, bound))

    k = math.exp(log_k)
    p_exponential = float(chdtrc(1, max(0.0, 2.0 * (top - loglik(0.0)))))
    scale_s = unit * math.exp((log_sum_pow(k) - math.log(r)) / k)
    return WeibullFit(
        shape=k,
        shape_ci=(edge(lo), edge(hi)),
        scale_s=scale_s,
        mean_s=scale_s * math.gamma(1.0 + 1.0 / k),
        n_failures=r,
        p_exponential=p_exponential,
    )


def _bisect(f: Callable[[float], float], a: float, b: float) -> float:
    """A root of ``f`` between ``a`` and ``b``, where ``f`` changes sign once (monotone), to
    ~1e-12: bisection, which cannot fail on such a function."""
    fa = f(a)
    for _ in range(200):
        mid = 0.5 * (a + b)
        if abs(b - a) <= 1e-12 or mid in (a, b):
            break
        fm = f(mid)
        if fm == 0.0:
            return mid
        if (fm < 0.0) == (fa < 0.0):
            a, fa = mid, fm
        else:
            b = mid
    return 0.5 * (a + b)
