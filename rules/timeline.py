"""A job's observations as one sorted timeline (numpy columns), and the vocabulary of its kinds.

Interruptions are grouped in :mod:`rules.interruptions`, runs and exposure measured in
:mod:`rules.runs`.

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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Any

import numpy as np
import numpy.typing as npt

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
    INTERVAL_CHANGE = 9
    FAST_SAVE = 10
    """A save of a two-tier job's fast tier, in the timeline of the persistent tier's
    estimates (:meth:`Timeline.as_fast_saves`): progress only, not one of its saves."""


_KIND_CODES: dict[str, int] = {kind.name.lower(): kind.value for kind in Kind}

TIER_CODES: dict[str, int] = {"memory": 0, "local": 1, "persistent": 2}
"""Codes of :attr:`Timeline.tier`, least durable first (``rules/tiers.py``'s ``Tier.rank``)."""


def tier_code(tier: str | None) -> int:
    """The :data:`TIER_CODES` code of a save's tier; -1 for None (or a name not listed)."""
    return -1 if tier is None else TIER_CODES.get(tier, -1)


def kind_code(kind: str) -> int:
    """The :class:`Kind` code of an observation kind string (``Kind.OTHER`` when unknown)."""
    return _KIND_CODES.get(kind, Kind.OTHER)


FAILURE_CODE = int(Kind.FAILURE)
"""``Kind.FAILURE`` as a plain int, for kind columns that are not yet a timeline's (compare
codes as ints: :meth:`Timeline.is_kind`)."""

START_KINDS = (Kind.RUN_START, Kind.RESTART, Kind.RESUME)
"""Kinds that open a run: the gap before them is downtime."""

PROGRESS_KINDS = (Kind.STEP, Kind.CHECKPOINT_START, Kind.CHECKPOINT_END, Kind.FAST_SAVE)
"""Kinds that prove training advances: they close a run of failed restart attempts."""


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
        tier: shape (n,), the save's tier code (:data:`TIER_CODES`: 0 memory, 1 local,
            2 persistent), -1 when not said (every log save, and timing records without one).
        host_dated: shape (n,), True for an observation of a log file that had printed no
            time before it, dated by the host (the read time live, the file's mtime in a
            backfill): its order among the job's observations is a guess, so no duration
            with an end at it is measured (:attr:`measured`).
        source: shape (n,), the file each observation came from, an index into ``sources``
            (-1 for one the rules added).
        sources: the job's files (:attr:`Observation.source`), each once.
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
    tier: npt.NDArray[np.int8]
    host_dated: BoolArray
    source: IntArray
    sources: tuple[str, ...]
    _masks: dict[tuple[int, ...], BoolArray] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """:meth:`is_kind`'s masks, by their kinds' codes (sorted): each built once."""

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
        failures = [items[i] for i in order[np.flatnonzero(kind[order] == FAILURE_CODE)]]
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
            tier=np.fromiter((tier_code(o.tier) for o in items), np.int8, count)[order],
            host_dated=np.fromiter((o.host_dated for o in items), np.bool_, count)[order],
            source=source,
            sources=tuple(source_codes),
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
        tier: npt.NDArray[np.int8] | None = None,
        host_dated: BoolArray | None = None,
        source: IntArray | None = None,
        sources: tuple[str, ...] = ("",),
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
            tier: shape (n,), :data:`TIER_CODES` (-1: not said); None: no tier anywhere.
            host_dated: shape (n,), :attr:`host_dated`; None: every time was printed or
                inferred from its own file.
            source, sources: :attr:`source` and :attr:`sources`; None: all of one source.

        Raises:
            ValueError: times not finite or not sorted, shapes that disagree.
        """
        count = time_s.size
        if not np.isfinite(time_s).all():
            raise ValueError("observation time_s must be finite")
        if count > 1 and not (time_s[1:] >= time_s[:-1]).all():
            raise ValueError("time_s must be in ascending order")
        tier = np.full(count, -1, np.int8) if tier is None else tier
        host_dated = np.zeros(count, np.bool_) if host_dated is None else host_dated
        source = np.zeros(count, np.intp) if source is None else source
        columns = (
            kind, step, duration_s, persist_s, from_timing_file, first_of_source, tier, host_dated,
            source,
        )  # fmt: skip
        if any(c.shape != (count,) for c in columns):
            raise ValueError(f"every column must have shape ({count},)")
        failure_index = np.flatnonzero(kind == FAILURE_CODE)
        if len(failure_class) != failure_index.size or failure_planned.shape != (
            failure_index.size,
        ):
            raise ValueError(f"expected {failure_index.size} failure classes and planned flags")
        new_source = first_of_source & ~from_timing_file
        first_log = int(np.argmin(from_timing_file)) if count else 0  # the first False
        if count and not from_timing_file[first_log]:
            new_source[first_log] = False
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
            tier=tier,
            host_dated=host_dated,
            source=source,
            sources=sources,
        )

    def with_failure_times(self, failure_time_s: FloatArray) -> Timeline:
        """A copy with the failures at ``failure_time_s`` (shape (f,), aligned with
        ``failure_index``), re-sorted by time."""
        time_s = self.time_s.copy()
        time_s[self.failure_index] = failure_time_s
        return self._retimed(time_s)

    def with_log_times_moved(self, by_s: float) -> Timeline:
        """A copy with every printed log time moved by ``by_s`` seconds (the observations not
        read from a timing file and not :attr:`host_dated`: a host's date is on the host's
        clock already), re-sorted by time: a log read in the wrong time zone put onto its
        timing file's clock (:func:`rules.sources.log_zone_offset`)."""
        return self.with_moved(~self.from_timing_file & ~self.host_dated, by_s)

    def with_moved(self, rows: BoolArray, by_s: float | FloatArray) -> Timeline:
        """A copy with the observations at ``rows`` (shape (n,)) moved by ``by_s`` seconds
        (one for all, or shape (n,): each its own), re-sorted by time."""
        return self._retimed(np.where(rows, self.time_s + by_s, self.time_s))

    def _retimed(self, time_s: FloatArray) -> Timeline:
        """A copy with ``time_s`` (shape (n,), aligned with the observations), re-sorted by
        time (stable: ties keep their order)."""
        if (time_s[1:] >= time_s[:-1]).all():  # still in order (the usual case): no re-sort
            return replace(self, time_s=time_s)
        order = np.argsort(time_s, kind="stable")
        kind = self.kind[order]
        ordinal = np.cumsum(self.is_kind(Kind.FAILURE)) - 1  # each failure's place among them
        failure_order = ordinal[order][kind == FAILURE_CODE]
        return Timeline(
            time_s=time_s[order],
            kind=kind,
            step=self.step[order],
            duration_s=self.duration_s[order],
            persist_s=self.persist_s[order],
            from_timing_file=self.from_timing_file[order],
            new_source=self.new_source[order],
            failure_index=np.flatnonzero(kind == FAILURE_CODE),
            failure_class=tuple(self.failure_class[i] for i in failure_order.tolist()),
            failure_planned=self.failure_planned[failure_order],
            row=self.row[order],
            tier=self.tier[order],
            host_dated=self.host_dated[order],
            source=self.source[order],
            sources=self.sources,
        )

    def select(self, keep: BoolArray) -> Timeline:
        """The observations where ``keep`` (shape (n,)) is True, in the same order."""
        kind = self.kind[keep]
        failures_kept = keep[self.failure_index]
        return Timeline(
            time_s=self.time_s[keep],
            kind=kind,
            step=self.step[keep],
            duration_s=self.duration_s[keep],
            persist_s=self.persist_s[keep],
            from_timing_file=self.from_timing_file[keep],
            new_source=self.new_source[keep],
            failure_index=np.flatnonzero(kind == FAILURE_CODE),
            failure_class=tuple(
                c for c, kept in zip(self.failure_class, failures_kept, strict=True) if kept
            ),
            failure_planned=self.failure_planned[failures_kept],
            row=self.row[keep],
            tier=self.tier[keep],
            host_dated=self.host_dated[keep],
            source=self.source[keep],
            sources=self.sources,
        )

    def as_fast_saves(self, rows: BoolArray) -> Timeline:
        """A copy whose observations at ``rows`` (shape (n,), a two-tier job's fast saves) are
        :attr:`Kind.FAST_SAVE`: the persistent tier's C and interval leave them out, while they
        still prove that training advanced (failure dedup, runs, restart cost). Dropping them
        instead merged every failure whose only progress in between was fast saves into one
        interruption, when the log printed no timed steps."""
        return replace(self, kind=np.where(rows, np.int8(Kind.FAST_SAVE), self.kind))

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
        progressed = any_between(self.is_kind(*PROGRESS_KINDS), openings)
        ended = any_between(self.is_kind(Kind.FAILURE, Kind.RUN_END), openings)
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
        failure_index = np.flatnonzero(kind == FAILURE_CODE)
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
                tier=grown(self.tier, -1),
                host_dated=np.concatenate((self.host_dated, self.host_dated[at]))[order],
                source=grown(self.source, -1),
                sources=self.sources,
            ),
            n_new,
        )

    def __len__(self) -> int:
        return int(self.time_s.size)

    def is_kind(self, *kinds: Kind) -> BoolArray:
        """Shape (n,), read-only: True where the observation's kind is one of ``kinds``.

        Built once per set of kinds and kept: the estimate asks for the same few sets dozens
        of times. One comparison per kind, with its code as a plain ``int``: an ``IntEnum``
        member against the int8 column took ~15x as long (numpy 2.4 types it int64, not as
        a Python int, and casts the whole column to int64), ``np.isin`` with a few values ~40x
        (0.4 s on 10M observations)."""
        key = tuple(sorted({int(kind) for kind in kinds}))
        found = self._masks.get(key)
        if found is None:
            found = np.zeros(self.kind.shape, np.bool_)
            for code in key:
                found |= self.kind == code
            found.flags.writeable = False
            self._masks[key] = found
        return found

    @property
    def measured(self) -> Timeline:
        """The observations whose times were printed, or inferred from their own file (all
        but :attr:`host_dated`), in the same order: the ones every span is measured between
        (``self`` when there is no host-dated one)."""
        return self.select(~self.host_dated) if self.host_dated.any() else self

    @property
    def newest_s(self) -> float | None:
        """Epoch seconds of the newest observation, None for an empty timeline."""
        return float(self.time_s[-1]) if self.time_s.size else None


def any_between(marked: BoolArray, positions: IntArray) -> BoolArray:
    """Per pair of consecutive ``positions`` (ascending indices into ``marked``), whether a
    marked index lies strictly between.

    One ``logical_or.reduceat`` over the stretches between them: no running count of the
    whole timeline (two 80 MB arrays at ten million observations, four times an estimate)."""
    if positions.size < 2:
        return np.zeros(0, np.bool_)
    return any_within(marked, positions[:-1] + 1, positions[1:])


def any_within(marked: BoolArray, starts: IntArray, ends: IntArray) -> BoolArray:
    """Per stretch ``[starts[k], ends[k])`` (shape (k,) each, indices into ``marked``, any
    order, ``ends`` below ``marked.size``), whether a marked index lies in it; False for an
    empty stretch (``ends[k] <= starts[k]``)."""
    between = np.empty(2 * starts.size, np.intp)
    between[0::2], between[1::2] = starts, ends  # reduceat's even stretches: start to end
    if not between.size:
        return np.zeros(0, np.bool_)
    found: BoolArray = np.logical_or.reduceat(marked, np.minimum(between, marked.size - 1))
    return found[0::2] & (ends > starts)
