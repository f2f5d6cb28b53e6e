"""Failure observations grouped into interruptions: one crash reported by every rank, the
launcher and the scheduler, with its failed restart attempts, is one interruption with one root
cause (docs/DESIGN.md, "M from data")."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ckpt_advisor.rules._checks import require_non_negative
from ckpt_advisor.rules.timeline import (
    PROGRESS_KINDS,
    START_KINDS,
    BoolArray,
    FloatArray,
    IntArray,
    Kind,
    Timeline,
    any_between,
    any_within,
)

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
        "peer_lost",
        "unknown",
    }
)
"""Failure classes that say *that* a process died, not *why* (a traceback's last line, a signal,
the launcher's ``ChildFailedError``, srun's exit code); equal to ``parsers/vocabulary.py``
``GENERIC_CLASSES`` (a test checks it). The root cause of a burst is its first
class outside this set; a burst with only generic classes keeps its first one that is not in
:data:`CONSEQUENCE_FAILURE_CLASSES`, else its first."""

CONSEQUENCE_FAILURE_CLASSES = frozenset({"peer_lost"})
"""Generic classes that report another process's death as its peers saw it (a collective's
socket closed, ``parsers/traceback.py``): the death itself, when reported (torchrun's root
cause, a signal), names the burst; equal to ``parsers/vocabulary.py`` ``CONSEQUENCE_CLASSES``."""


@dataclass(frozen=True, slots=True)
class Interruption:
    """One interruption of training, however many lines reported it.

    Attributes:
        start_s: epoch seconds of its first failure observation (the run ended here).
        end_s: epoch seconds of its last failure observation (failed restarts included).
        failure_class: root cause: the first planned class if the burst holds a planned end,
            else the first class outside the generic set, else the first that is not a
            consequence (``peer_lost``), else the first class (``unknown`` when none is known).
        planned: True when any observation of the burst is a planned end (time limit,
            cancel): the other ranks' dying messages are then consequences, not causes.
        n_observations: how many failure observations it groups.
        id: its number, 1 for the first in the timeline, in time order.
        rows: the :attr:`Timeline.row` of each failure observation it groups (-1 for a failure
            the rules inferred), in time order: which lines were counted as this one.
        host_dated: True when every failure it groups is :attr:`Timeline.host_dated` (files
            that printed no time): no time of it is one to measure from
            (:func:`placed_interruptions` gives the spans of the others).
        after_end: True when its first failure came after a clean ``run_end`` with no start
            and no progress between (torchtitan's ``Training completed``, then an abort at
            teardown): it interrupted no training, so it is no failure of M (nor a planned
            end), and the estimate says so.
    """

    start_s: float
    end_s: float
    failure_class: str
    planned: bool
    n_observations: int
    id: int = 0
    rows: tuple[int, ...] = ()
    host_dated: bool = False
    after_end: bool = False


def cluster_interruptions(
    timeline: Timeline,
    *,
    gap_s: float = 60.0,
    silent_gap_s: float = 1800.0,
    generic_classes: frozenset[str] = GENERIC_FAILURE_CLASSES,
    logs_progress: bool | None = None,
) -> list[Interruption]:
    """Group the timeline's failure observations into interruptions.

    A failure joins the interruption before it when it comes within ``gap_s`` of that
    interruption's latest failure (all ranks, the launcher and Slurm report one crash within
    seconds, and other ranks may still flush a progress line meanwhile) unless, between them, a
    start (``run_start``, ``restart``, ``resume``) is followed by progress (``step``,
    ``checkpoint_start``, ``checkpoint_end``): the job started again and trained, so the second
    failure ends a new run, however soon. Progress with no start before it (a stray flush) and
    a start with no progress after it (a restart attempt that failed before training, even when
    a flush came before that start) still join. Beyond ``gap_s``, it joins when no progress
    lies between them and either a start does — a restart attempt that failed before training
    progressed — or they are at most ``silent_gap_s`` apart (the NCCL watchdog of the surviving
    ranks fires 10–30 minutes after the root cause, with nothing logged in between).

    A job whose logs show no progress anywhere (a custom loop's prints under torchrun, which no
    parser reads) can show neither that a run trained nor that it did not: there a
    ``run_start`` (a new launch, torchrun's launch banner) between two failures makes them two,
    as a start followed by progress does. A ``restart`` does not: torchrun prints it at the
    failure, while the other ranks and nodes are still reporting the same crash.

    Caveat: a restart that ran a long time without logging any progress before failing again is
    merged into the interruption before it; so is a new launch, in a job that logs progress.

    Args:
        timeline: the job's observations.
        gap_s: seconds within which failures always belong together, >= 0.
        silent_gap_s: seconds within which failures with no progress between belong together.
        generic_classes: classes that name no root cause (see ``GENERIC_FAILURE_CLASSES``).
        logs_progress: whether the job's logs show progress anywhere; None: whether
            ``timeline`` holds a progress observation.

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
    progress = timeline.is_kind(*PROGRESS_KINDS)
    starts = np.flatnonzero(timeline.is_kind(*START_KINDS))  # few: about one per run
    progressed = any_between(progress, failures)
    restarted, trained = _started_and_trained(len(timeline), starts, progress, failures)
    if not (progress.any() if logs_progress is None else logs_progress):
        trained |= any_between(timeline.is_kind(Kind.RUN_START), failures)
    elapsed = np.diff(times)
    joins = ~trained & ((elapsed <= gap) | (~progressed & (restarted | (elapsed <= silent_gap))))
    bounds = np.flatnonzero(np.concatenate(([True], ~joins, [True])))
    rows = timeline.row[failures]
    host_dated = timeline.host_dated[failures]
    after_end = _after_end(timeline, starts, progress, failures[bounds[:-1]])
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
            host_dated=bool(host_dated[first:last].all()),
            after_end=bool(ended),
        )
        for number, ((first, last), ended) in enumerate(
            zip(itertools.pairwise(bounds), after_end.tolist(), strict=True), 1
        )
    ]


def _after_end(
    timeline: Timeline, starts: IntArray, progress: BoolArray, firsts: IntArray
) -> BoolArray:
    """Per interruption (its first failure's index, ascending, shape (i,)): whether a clean
    ``run_end`` came before it with no start (``starts``: their indices, ascending) and no
    progress (``progress``, shape (n,)) between: the run had ended, so the failure interrupted
    no training."""
    run_ends = np.flatnonzero(timeline.is_kind(Kind.RUN_END))
    prior = np.searchsorted(run_ends, firsts) - 1  # the latest run_end before each
    ended = prior >= 0
    if not ended.any():
        return ended
    since = np.minimum(run_ends[np.maximum(prior, 0)] + 1, firsts)
    started = np.searchsorted(starts, since) < np.searchsorted(starts, firsts)
    return ended & ~started & ~any_within(progress, since, firsts)


def placed_interruptions(
    timeline: Timeline,
    interruptions: Sequence[Interruption],
    *,
    gap_s: float = 60.0,
    silent_gap_s: float = 1800.0,
) -> list[Interruption]:
    """The interruptions as the times logs printed place them: :func:`cluster_interruptions`
    on the observations of ``timeline`` that are not :attr:`Timeline.host_dated` (a failure
    read from a file without stamps starts and ends no span), each numbered as the
    interruption of ``interruptions`` (the whole timeline's) its first failure belongs to.
    ``interruptions`` itself when nothing is host-dated.

    Raises:
        ValueError: as :func:`cluster_interruptions`.
    """
    if not timeline.host_dated.any():
        return list(interruptions)
    placed = cluster_interruptions(
        timeline.measured,
        gap_s=gap_s,
        silent_gap_s=silent_gap_s,
        logs_progress=bool(timeline.is_kind(*PROGRESS_KINDS).any()),
    )
    starts = np.array([i.start_s for i in interruptions], np.float64)
    within = np.searchsorted(starts, [i.start_s for i in placed], "right") - 1
    return [
        replace(i, id=interruptions[k].id) if k >= 0 else i
        for i, k in zip(placed, within.tolist(), strict=True)
    ]


def _started_and_trained(
    n: int, starts: IntArray, progress: BoolArray, failures: IntArray
) -> tuple[BoolArray, BoolArray]:
    """Per pair of consecutive ``failures`` (indices into the timeline of ``n`` observations,
    ascending): whether a start (``starts``: their indices, ascending) lies between them, and
    whether progress (``progress``, shape (n,)) follows the first such start before the later
    failure (a run that started again and trained).

    The first start after each earlier failure is searched among the starts (few: about one
    per run), then one ``reduceat`` asks each stretch from just after it to the later failure
    (:func:`rules.timeline.any_within`): no new array as long as the timeline. Linear."""
    earlier, later = failures[:-1], failures[1:]
    after = np.searchsorted(starts, earlier, "right")
    first_start = np.append(starts, n)[after]  # the timeline's end: no start after
    restarted = first_start < later
    trained = restarted & any_within(progress, np.minimum(first_start + 1, later), later)
    return restarted, trained


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
        root = next(
            (c for c in known if c not in generic_classes),
            next((c for c in known if c not in CONSEQUENCE_FAILURE_CLASSES), known[0]),
        )
    return Interruption(
        start_s=float(times[0]),
        end_s=float(times[-1]),
        failure_class=root,
        planned=bool(planned.any()),
        n_observations=len(known),
    )
