"""A job's observations as one sorted timeline: interruptions, runs and exposure.

The estimators work on numpy arrays built once per job (:class:`Timeline`), so a job with
100k observations costs a few array passes, not 100k Python iterations per question.

Vocabulary (DESIGN.md, "M from data"):

- An *interruption* is one unexpected (or planned) end of training: a burst of failure lines from
  many ranks, the launcher and the scheduler, plus any failed restart attempts before training
  progresses again. Its class is the root cause, the first specific class in the burst.
- A *run* is a stretch of time during which the job was running: from a start (``run_start``,
  ``restart``, ``resume``, the first event after an interruption or an idle gap, the first event
  of a new log file) to its end (a failure, a clean ``run_end``, the last event before an idle
  gap). Exposure, the denominator of the MTBF, is the summed length of runs; downtime between a
  failure and the next start is not exposure; the time since the last failure is (right-censored).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from ckpt_advisor.rules._checks import require_non_negative, require_positive
from ckpt_advisor.rules.model import Observation

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]
BoolArray = npt.NDArray[np.bool_]


class Kind(IntEnum):
    """Integer codes of observation kinds in :attr:`Timeline.kind`."""

    CHECKPOINT_START = 0
    CHECKPOINT_END = 1
    FAILURE = 2
    RESTART = 3
    RESUME = 4
    RUN_START = 5
    RUN_END = 6
    STEP = 7
    OTHER = 8


_KIND_CODES: dict[str, int] = {kind.name.lower(): kind.value for kind in Kind}


def kind_code(kind: str) -> int:
    """The :class:`Kind` code of an observation kind string (``Kind.OTHER`` when unknown)."""
    return _KIND_CODES.get(kind, Kind.OTHER)


START_KINDS = (Kind.RUN_START, Kind.RESTART, Kind.RESUME)
"""Kinds that open a run: the gap before them is downtime."""

PROGRESS_KINDS = (Kind.STEP, Kind.CHECKPOINT_START, Kind.CHECKPOINT_END)
"""Kinds that prove training advances: they close a run of failed restart attempts."""

GENERIC_FAILURE_CLASSES = frozenset(
    {
        "python_exception",
        "child_failed",
        "exit_code",
        "killed",
        "abort",
        "segfault",
        "bus_error",
        "terminated",
        "signal",
        "slurm_task_failure",
        "ray_worker_died",
        "unknown",
    }
)
"""Failure classes that say *that* a process died, not *why* (a traceback's last line, a signal,
the launcher's ``ChildFailedError``, srun's exit code); equal to ``parsers/vocabulary.py``
``GENERIC_CLASSES`` (a test checks it). The root cause of a burst is its first
class outside this set; a burst with only generic classes keeps its first one."""


@dataclass(frozen=True, eq=False)
class Timeline:
    """One job's observations as parallel arrays sorted by time (stable for equal times).

    Attributes:
        time_s: shape (n,), Unix epoch seconds, ascending.
        kind: shape (n,), :class:`Kind` codes; unknown kind strings map to ``Kind.OTHER``.
        step: shape (n,), training step as float, NaN when unknown.
        duration_s: shape (n,), seconds, NaN when unknown.
        persist_s: shape (n,), background persist seconds of asynchronous saves, NaN when unknown.
        from_timing_file: shape (n,), True for observations read from a checkpoint timing file.
        new_source: shape (n,), True at the first observation of each log source after the
            first one (a new log file is a new process; timing files never set it).
        failure_index: shape (f,), indices of the ``failure`` observations, ascending.
        failure_class: length f, the failure class of each, aligned with ``failure_index``.
        failure_planned: shape (f,), the ``planned`` flag of each.
        row: shape (n,), where each observation came from: its index in the observations
            given to :meth:`of` (or the columns' row for :meth:`from_columns`); -1 for one the
            rules added (:meth:`with_unseen_interruptions`).
    """

    time_s: FloatArray
    kind: npt.NDArray[np.int8]
    step: FloatArray
    duration_s: FloatArray
    persist_s: FloatArray
    from_timing_file: BoolArray
    new_source: BoolArray
    failure_index: IntArray
    failure_class: tuple[str | None, ...]
    failure_planned: BoolArray
    row: IntArray

    @classmethod
    def of(cls, observations: Iterable[Observation]) -> Timeline:
        """Sort and vectorise observations (any order, any kinds).

        Raises:
            ValueError: an observation's ``time_s`` is not finite.
        """
        items: Sequence[Observation] = (
            observations if isinstance(observations, Sequence) else list(observations)
        )
        count = len(items)
        nan = float("nan")
        time_s = np.fromiter((o.time_s for o in items), np.float64, count)
        if not np.isfinite(time_s).all():
            raise ValueError("observation time_s must be finite")
        order = np.argsort(time_s, kind="stable")
        timing = np.fromiter((o.from_timing_file for o in items), np.bool_, count)[order]
        source_codes: dict[str, int] = {}
        source = np.fromiter(
            (source_codes.setdefault(o.source, len(source_codes)) for o in items), np.intp, count
        )[order]
        log_index = np.flatnonzero(~timing)
        _, first = np.unique(source[log_index], return_index=True)
        first_of_source = np.zeros(count, np.bool_)
        first_of_source[log_index[first]] = True
        kind = np.fromiter((_KIND_CODES.get(o.kind, Kind.OTHER) for o in items), np.int8, count)
        failures = [items[i] for i in order[np.flatnonzero(kind[order] == Kind.FAILURE)]]
        timeline = cls.from_columns(
            time_s=time_s[order],
            kind=kind[order],
            step=np.fromiter((nan if o.step is None else o.step for o in items), np.float64, count)[
                order
            ],
            duration_s=np.fromiter(
                (nan if o.duration_s is None else o.duration_s for o in items), np.float64, count
            )[order],
            persist_s=np.fromiter(
                (nan if o.persist_s is None else o.persist_s for o in items), np.float64, count
            )[order],
            from_timing_file=timing,
            first_of_source=first_of_source,
            failure_class=tuple(o.failure_class for o in failures),
            failure_planned=np.fromiter((o.planned for o in failures), np.bool_, len(failures)),
        )
        return replace(timeline, row=order.astype(np.intp))

    @classmethod
    def from_columns(
        cls,
        *,
        time_s: FloatArray,
        kind: npt.NDArray[np.int8],
        step: FloatArray,
        duration_s: FloatArray,
        persist_s: FloatArray,
        from_timing_file: BoolArray,
        first_of_source: BoolArray,
        failure_class: Sequence[str | None],
        failure_planned: BoolArray,
    ) -> Timeline:
        """A timeline from columns already in time order (ties: in the lines' order), the form
        a store can hand over without building an :class:`Observation` per row.

        Args:
            time_s: shape (n,), epoch seconds, finite, non-decreasing.
            kind: shape (n,), :class:`Kind` codes.
            step, duration_s, persist_s: shape (n,), NaN when unknown.
            from_timing_file: shape (n,).
            first_of_source: shape (n,), True at the first observation of each log source
                (timing-file observations are ignored).
            failure_class, failure_planned: length f, for the ``Kind.FAILURE`` rows in order.

        Raises:
            ValueError: times not finite or not sorted, shapes that disagree.
        """
        count = time_s.size
        if not np.isfinite(time_s).all():
            raise ValueError("observation time_s must be finite")
        if count > 1 and not (np.diff(time_s) >= 0).all():
            raise ValueError("time_s must be in ascending order")
        columns = (kind, step, duration_s, persist_s, from_timing_file, first_of_source)
        if any(c.shape != (count,) for c in columns):
            raise ValueError(f"every column must have shape ({count},)")
        failure_index = np.flatnonzero(kind == Kind.FAILURE)
        if len(failure_class) != failure_index.size or failure_planned.shape != (
            failure_index.size,
        ):
            raise ValueError(f"expected {failure_index.size} failure classes and planned flags")
        new_source = first_of_source & ~from_timing_file
        log_index = np.flatnonzero(~from_timing_file)
        if log_index.size:
            new_source[log_index[0]] = False
        return cls(
            time_s=time_s,
            kind=kind,
            step=step,
            duration_s=duration_s,
            persist_s=persist_s,
            from_timing_file=from_timing_file,
            new_source=new_source,
            failure_index=failure_index,
            failure_class=tuple(failure_class),
            failure_planned=failure_planned,
            row=np.arange(count, dtype=np.intp),
        )

    def with_failure_times(self, failure_time_s: FloatArray) -> Timeline:
        """A copy with the failures at ``failure_time_s`` (shape (f,), aligned with
        ``failure_index``), re-sorted by time."""
        time_s = self.time_s.copy()
        time_s[self.failure_index] = failure_time_s
        order = np.argsort(time_s, kind="stable")
        kind = self.kind[order]
        failure_order = np.argsort(failure_time_s, kind="stable")
        return Timeline(
            time_s=time_s[order],
            kind=kind,
            step=self.step[order],
            duration_s=self.duration_s[order],
            persist_s=self.persist_s[order],
            from_timing_file=self.from_timing_file[order],
            new_source=self.new_source[order],
            failure_index=np.flatnonzero(kind == Kind.FAILURE),
            failure_class=tuple(self.failure_class[i] for i in failure_order),
            failure_planned=self.failure_planned[failure_order],
            row=self.row[order],
        )

    def with_unseen_interruptions(self) -> tuple[Timeline, int]:
        """A copy with a ``failure`` of class ``unknown`` where a run died without a word.

        A run that progressed (``step``, ``checkpoint_*``) and is followed by a new run (a start
        kind not preceded by another start) with no failure and no clean ``run_end`` anywhere
        since its own start (a traceback dated by the bar clock may sort before the run's last
        save) was interrupted by something that printed nothing: a Kubernetes SIGKILL, a lost node,
        an OOM kill (docs/FORMATS.md §15, "the log simply stops"). Not counting it would overstate
        M. The failure is placed at the time of the dead run's last observation, so its
        exposure ends there. ``unknown`` is a generic class (:data:`GENERIC_FAILURE_CLASSES`),
        so a failure line of another source clustered with it (one stamped after the new start,
        before progress) names the root cause. The run before the first start seen, and runs
        with a failure (planned or not) or a ``run_end``, add none.

        Returns:
            ``(timeline, k)``: the new timeline (``self`` when k is 0) and the k failures added.
        """
        opens = self.is_kind(*START_KINDS)
        openings = np.flatnonzero(opens & ~np.concatenate(([False], opens[:-1])))
        # per run between two openings: any progress, any failure or clean end
        progressed = _any_between(self.is_kind(*PROGRESS_KINDS), openings)
        ended = _any_between(self.is_kind(Kind.FAILURE, Kind.RUN_END), openings)
        dead = openings[1:][progressed & ~ended]
        if dead.size == 0:
            return self, 0
        # one failure after each dead run's last observation (index dead - 1), at its time
        at = dead - 1
        order = np.argsort(np.concatenate((np.arange(len(self)), at)), kind="stable")
        n_new = int(at.size)

        def grown(values: npt.NDArray[Any], fill: object) -> npt.NDArray[Any]:
            return np.concatenate((values, np.full(n_new, fill, values.dtype)))[order]

        time_s = np.concatenate((self.time_s, self.time_s[at]))[order]
        kind = grown(self.kind, Kind.FAILURE)
        failure_index = np.flatnonzero(kind == Kind.FAILURE)
        is_new = order[failure_index] >= len(self)
        old_class = iter(self.failure_class)
        old_planned = iter(self.failure_planned.tolist())
        return (
            Timeline(
                time_s=time_s,
                kind=kind,
                step=grown(self.step, np.nan),
                duration_s=grown(self.duration_s, np.nan),
                persist_s=grown(self.persist_s, np.nan),
                from_timing_file=grown(self.from_timing_file, False),
                new_source=grown(self.new_source, False),
                failure_index=failure_index,
                failure_class=tuple("unknown" if new else next(old_class) for new in is_new),
                failure_planned=np.array(
                    [False if new else next(old_planned) for new in is_new], np.bool_
                ),
                row=grown(self.row, -1),
            ),
            n_new,
        )

    def __len__(self) -> int:
        return int(self.time_s.size)

    def is_kind(self, *kinds: Kind) -> BoolArray:
        """Shape (n,): True where the observation's kind is one of ``kinds``."""
        return np.isin(self.kind, np.array(kinds, np.int8))

    @property
    def newest_s(self) -> float | None:
        """Epoch seconds of the newest observation, None for an empty timeline."""
        return float(self.time_s[-1]) if self.time_s.size else None


@dataclass(frozen=True, slots=True)
class Interruption:
    """One interruption of training, however many lines reported it.

    Attributes:
        start_s: epoch seconds of its first failure observation (the run ended here).
        end_s: epoch seconds of its last failure observation (failed restarts included).
        failure_class: root cause: the first planned class if the burst holds a planned end,
            else the first class outside the generic set, else the first class (``unknown``
            when none is known).
        planned: True when any observation of the burst is a planned end (time limit,
            cancel): the other ranks' dying messages are then consequences, not causes.
        n_observations: how many failure observations it groups.
        id: its number, 1 for the first in the timeline, in time order.
        rows: the :attr:`Timeline.row` of each failure observation it groups (-1 for a failure
            the rules inferred), in time order: which lines were counted as this one.
    """

    start_s: float
    end_s: float
    failure_class: str
    planned: bool
    n_observations: int
    id: int = 0
    rows: tuple[int, ...] = ()


def cluster_interruptions(
    timeline: Timeline,
    *,
    gap_s: float = 60.0,
    silent_gap_s: float = 1800.0,
    generic_classes: frozenset[str] = GENERIC_FAILURE_CLASSES,
) -> list[Interruption]:
    """Group the timeline's failure observations into interruptions.

    A failure joins the interruption before it when it comes within ``gap_s`` of that
    interruption's latest failure (all ranks, the launcher and Slurm report one crash within
    seconds, and other ranks may still flush a progress line meanwhile), or when no progress
    (``step``, ``checkpoint_start``, ``checkpoint_end``) lies between them and either a start
    (``run_start``, ``restart``, ``resume``) does — a restart attempt that failed before training
    progressed — or they are at most ``silent_gap_s`` apart (the NCCL watchdog of the surviving
    ranks fires 10–30 minutes after the root cause, with nothing logged in between).

    Caveat: a restart that ran a long time without logging any progress before failing again is
    merged into the interruption before it.

    Args:
        timeline: the job's observations.
        gap_s: seconds within which failures always belong together, >= 0.
        silent_gap_s: seconds within which failures with no progress between belong together.
        generic_classes: classes that name no root cause (see ``GENERIC_FAILURE_CLASSES``).

    Returns:
        Interruptions in time order, numbered from 1 (``id``), each with the rows of the
        failure observations merged into it (``rows``).

    Raises:
        ValueError: ``gap_s`` or ``silent_gap_s`` is negative or not finite.
    """
    gap = require_non_negative("gap_s", gap_s)
    silent_gap = require_non_negative("silent_gap_s", silent_gap_s)
    failures = timeline.failure_index
    times = timeline.time_s[failures]
    if times.size == 0:
        return []
    # between consecutive failures, in timeline order (ties in time keep the lines' order)
    progressed = _any_between(timeline.is_kind(*PROGRESS_KINDS), failures)
    restarted = _any_between(timeline.is_kind(*START_KINDS), failures)
    elapsed = np.diff(times)
    joins = (elapsed <= gap) | (~progressed & (restarted | (elapsed <= silent_gap)))
    bounds = np.flatnonzero(np.concatenate(([True], ~joins, [True])))
    rows = timeline.row[failures]
    return [
        replace(
            _interruption(
                times[first:last],
                timeline.failure_class[first:last],
                timeline.failure_planned[first:last],
                generic_classes,
            ),
            id=number,
            rows=tuple(rows[first:last].tolist()),
        )
        for number, (first, last) in enumerate(itertools.pairwise(bounds), 1)
    ]


def _any_between(marked: BoolArray, positions: IntArray) -> BoolArray:
    """Per pair of consecutive ``positions``, whether a marked index lies strictly between."""
    counts = np.concatenate(([0], np.cumsum(marked)))  # counts[i] = marked before index i
    return counts[positions[1:]] - counts[positions[:-1] + 1] > 0


def _interruption(
    times: FloatArray,
    classes: Sequence[str | None],
    planned: BoolArray,
    generic_classes: frozenset[str],
) -> Interruption:
    known = [c if c is not None else "unknown" for c in classes]
    if planned.any():
        root = known[int(np.argmax(planned))]
    else:
        root = next((c for c in known if c not in generic_classes), known[0])
    return Interruption(
        start_s=float(times[0]),
        end_s=float(times[-1]),
        failure_class=root,
        planned=bool(planned.any()),
        n_observations=len(known),
    )


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
        starts = np.array([i.start_s for i in interruptions], np.float64)
        ends = np.array([i.end_s for i in interruptions], np.float64)
        which = np.searchsorted(starts, times, "right") - 1
        interrupted = (which >= 0) & (times <= ends[np.maximum(which, 0)])
    opens = timeline.is_kind(*START_KINDS)
    breaks = (
        (np.diff(times) > idle_gap)
        | interrupted[:-1]
        | (timeline.kind[:-1] == Kind.RUN_END)
        | (opens[1:] & ~opens[:-1])
        | timeline.new_source[1:]
    )
    return np.concatenate(([0], np.cumsum(breaks))).astype(np.intp)


def exposure_s(timeline: Timeline, run_id: IntArray, *, since_s: float = -np.inf) -> float:
    """Running time at or after ``since_s``: the summed length of runs, clipped to the window.

    Args:
        timeline: the job's observations.
        run_id: shape (n,), from :func:`split_runs`.
        since_s: epoch seconds where the window opens (default: all history).

    Returns:
        Seconds of exposure, >= 0.
    """
    times = timeline.time_s
    running = run_id[1:] == run_id[:-1]
    lengths = times[1:][running] - np.maximum(times[:-1][running], since_s)
    return float(np.clip(lengths, 0.0, None).sum())


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
    times = timeline.time_s
    running = run_id[1:] == run_id[:-1]
    starts, ends = times[:-1][running], times[1:][running]
    done = np.concatenate(([0.0], np.cumsum(ends - starts)))
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
