"""Checkpoint cost C: the median of recent save durations, its interval, a level shift, and
the durations a timeline gives (timing file or log lines) with asynchronous persist times.

Results are seconds; unknown values are ``None``, never 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ckpt_advisor.rules._checks import (
    require_count,
    require_positive,
    require_probability,
)
from ckpt_advisor.rules.rank_test import rank_sum_p_value
from ckpt_advisor.rules.saves import TimedSaves
from ckpt_advisor.rules.timeline import FloatArray, IntArray, Kind, Timeline

SAVE_END_STACKS = frozenset(("megatron", "nemo", "torchtitan", "deepspeed"))
"""Stacks whose logs print a save's end or its blocking time (docs/FORMATS.md §0, "Few stacks
print a save's end"): Megatron's ``save-checkpoint`` timer block, NeMo's ``Save duration`` (and
an async save's finalize), torchtitan's ``Finished saving the checkpoint in {t} seconds``,
DeepSpeed 0.16's ``Checkpoint … is ready now!`` (older DeepSpeed prints no end, so no duration).
C read from their lines is measured, not a lower bound; the HF Trainer (no end of the
optimizer-state write), Lightning (a start only) and the others give a lower bound."""


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
            one (a bar that does not keep time, no bar at all) or C comes from a timing file
            or a stack that logs a save's end.
        stack: for C from log lines, the stack that wrote them (the parser's name, e.g.
            ``hf_trainer``, ``megatron``), None when unknown or from a timing file: whether the
            lines mark a save's end (:data:`SAVE_END_STACKS`), and what a lower bound misses.
    """

    cost_s: float
    ci_s: tuple[float, float] | None
    n: int
    source: str
    previous_cost_s: float | None = None
    upper_s: float | None = None
    stack: str | None = None

    @property
    def is_lower_bound(self) -> bool:
        """True for C from log lines of a stack that does not log a save's end (any stack not
        in :data:`SAVE_END_STACKS`, or an unknown one): they may not mark the end of every
        part of a save."""
        return self.source == "log" and self.stack not in SAVE_END_STACKS

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
    stack: str | None = None,
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
        stack: the stack that wrote the log lines (the parser's name), or None: C from the
            lines of a stack in :data:`SAVE_END_STACKS` is measured (no ``upper_s``), from any
            other a lower bound.

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
    lower_bound = source == "log" and stack not in SAVE_END_STACKS
    if lower_bound and bounded.size and 2 * bounded.size >= recent.size:
        upper_s = max(cost_s, float(np.median(bounded)))
    return CheckpointCost(
        cost_s=cost_s,
        ci_s=_median_ci_s(ordered, level),
        n=int(ordered.size),
        source=source,
        previous_cost_s=previous_s,
        upper_s=upper_s,
        stack=stack if source == "log" else None,
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


def checkpoint_durations_s(
    timeline: Timeline, run_id: IntArray, upper_s: FloatArray | None = None
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Blocking checkpoint durations, oldest first: (from timing files, from logs), and the
    upper bound of each log one.

    A timing-file save (:class:`rules.saves.TimedSaves`: its records of one run, step and tier)
    gives its blocking span, first start to latest blocking end. A log ``checkpoint_end`` gives
    its ``duration_s`` when the parser set one, else the time since a log ``checkpoint_start``
    that directly precedes it among the log's saves in the same run, unless either was dated by
    the host (:attr:`Timeline.host_dated`: a file that printed no time). Log ends of one run at
    one step are one save, costed by the sum of their durations (NeMo 2 writes a top-k and a
    ``-last`` checkpoint at a step, one after the other, and training waits for both); its
    upper bound is its first end's in ``upper_s``, which runs to the first step after the save
    (so after all of its ends), NaN when that is below the sum.

    Args:
        timeline: the job's observations.
        run_id: shape (n,), from :func:`rules.runs.split_runs`.
        upper_s: :func:`rules.bounds.checkpoint_upper_bounds_s` on the same timeline and runs
            (one per log end with a known duration), or None: no bound.

    Returns:
        Three arrays of seconds (possibly empty), in time order: the timed saves, the log
        saves and the log saves' upper bounds (NaN unknown; as long as the log saves).
    """
    timed = TimedSaves.of(timeline, run_id).blocking_s
    ends, logged = log_save_durations_s(timeline, run_id)
    known = np.isfinite(logged)
    ends, logged = ends[known], logged[known]
    uppers = np.full(logged.size, np.nan) if upper_s is None else upper_s
    if ends.size < 2:
        return timed, logged, uppers
    steps, runs = timeline.step[ends], run_id[ends]
    same = (steps[1:] == steps[:-1]) & (runs[1:] == runs[:-1])  # NaN steps never equal
    if not same.any():
        return timed, logged, uppers
    first = np.flatnonzero(np.concatenate(([True], ~same)))  # each save's first end
    summed_s = np.add.reduceat(logged, first)
    return timed, summed_s, np.where(uppers[first] >= summed_s, uppers[first], np.nan)


def log_save_durations_s(timeline: Timeline, run_id: IntArray) -> tuple[IntArray, FloatArray]:
    """Indices of the log ``checkpoint_end`` observations and their durations (NaN unknown),
    as :func:`checkpoint_durations_s` reads them: shapes (b,) and (b,)."""
    log_ends = timeline.is_kind(Kind.CHECKPOINT_END) & ~timeline.from_timing_file
    index = np.flatnonzero(log_ends)
    durations_s = timeline.duration_s[index]  # a copy, filled in below
    saves = np.flatnonzero(timeline.is_kind(Kind.CHECKPOINT_START, Kind.CHECKPOINT_END))
    saves = saves[~timeline.from_timing_file[saves]]
    before, after = saves[:-1], saves[1:]
    paired = (
        timeline.is_kind(Kind.CHECKPOINT_START)[before]
        & log_ends[after]
        & np.isnan(timeline.duration_s[after])
        & (run_id[before] == run_id[after])
        & ~timeline.host_dated[before]
        & ~timeline.host_dated[after]
    )
    ended, began = after[paired], before[paired]
    durations_s[np.searchsorted(index, ended)] = timeline.time_s[ended] - timeline.time_s[began]
    return index, durations_s


def persist_latency_s(timeline: Timeline, run_id: IntArray, *, window: int) -> float | None:
    """Median background persist time of the most recent asynchronous saves, seconds.

    An asynchronous save (torch.distributed.checkpoint ``async_save``, Megatron
    ``--async-save``, NeMo ``async_save``) stalls training only for its blocking part, which is
    C; the copy to storage continues in the background. Timing files give the whole save as
    ``persist_s`` when they give ``blocking_s`` (DESIGN.md timing-file schema); a save of
    several records (:class:`rules.saves.TimedSaves`) persists from its first start to its
    latest end. Log saves give the ``persist_s`` their parser read (NeMo).

    Args:
        timeline: the job's observations.
        run_id: shape (n,), from :func:`rules.runs.split_runs`.
        window: how many of the most recent saves with a persist time to use, >= 1.

    Returns:
        Seconds, or None when no save carries a persist time.
    """
    require_count("window", window, minimum=1)
    log_ends = timeline.is_kind(Kind.CHECKPOINT_END) & ~timeline.from_timing_file
    persist = timeline.persist_s.copy()
    persist[~log_ends] = np.nan
    timed = TimedSaves.of(timeline, run_id)
    persist[timed.index] = timed.persist_s
    persist = persist[np.isfinite(persist) & (persist > 0.0)][-window:]
    return float(np.median(persist)) if persist.size else None
