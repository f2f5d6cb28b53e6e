"""Goodput and badput from the logs alone: a job's wall time as labelled spans, summed.

The buckets (docs/DESIGN.md, "Goodput"), for the time from the job's first observation to its
newest:

- **restart**: from each interruption's first failure line to the first progress (a ``step`` or
  a save) of the run that recovers from it, that progress re-dated to when its steps began; the
  failed restart attempts in between belong to it (DESIGN.md, "M from data");
- **idle**: the time no run accounts for (between runs with no interruption before: a clean end,
  a silence longer than the idle gap) and the start-up of a run that follows no interruption
  (its first line to its first progress);
- **checkpoint**: each save's blocking time (a timing file's ``duration_s`` or ``blocking_s``;
  from logs, the save's first line to its last, a lower bound); every save counts, from
  whichever source has it (:func:`rules.progress.every_save_index`: a timing file may miss
  some), a save in both once, by its timing records;
- **lost**: running time, outside saves, from the completed save an interruption's next run
  resumed from (the save at its ``resume`` step, else the last completed save before the
  interruption) to the interruption: progress that was computed and then had to be computed
  again after the restart;
- **productive**: the rest of the running time: progress that was kept (and, after the last
  interruption, progress not lost yet).

Earlier buckets in that list take precedence (a save inside a lost stretch is checkpoint time).
The spans are built once per estimate (:func:`rules.goodput_spans.goodput_spans`, a few array
passes over the estimate's own timeline, interruptions, runs and saves); any window is summed
from them here (:meth:`GoodputSpans.breakdown`, :meth:`GoodputSpans.seconds`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from ckpt_advisor.rules.cost import SAVE_END_STACKS
from ckpt_advisor.rules.timeline import BoolArray, FloatArray, IntArray


class Bucket(IntEnum):
    """Where a second of wall time went; the codes of :attr:`GoodputSpans.bucket`."""

    PRODUCTIVE = 0
    CHECKPOINT = 1
    LOST = 2
    RESTART = 3
    IDLE = 4


BUCKETS: tuple[str, ...] = tuple(b.name.lower() for b in Bucket)
"""The bucket names in code order: ``productive``, ``checkpoint``, ``lost``, ``restart``,
``idle`` (the keys ``goodput --json`` puts ``_s`` after)."""

TIMING_FILE, LOG_LINES, BOTH_SOURCES = "timing_file", "log_lines", "timing_file_and_log_lines"
"""Where saves were seen (:attr:`Goodput.checkpoint_source`): each in a timing file, each in
log lines only, some each way."""


def source_of_saves(n_saves: int, n_log_saves: int) -> str | None:
    """Where ``n_saves`` saves were seen, ``n_log_saves`` of them in log lines only: one of
    :data:`TIMING_FILE`, :data:`LOG_LINES`, :data:`BOTH_SOURCES`; None without saves."""
    if not n_saves:
        return None
    return TIMING_FILE if not n_log_saves else LOG_LINES if n_log_saves == n_saves else BOTH_SOURCES


@dataclass(frozen=True, slots=True)
class Goodput:
    """One window's wall time split into buckets (seconds; they sum to ``wall_s``).

    Attributes:
        since_s, until_s: epoch seconds of the window.
        seconds: shape (5,), seconds per :class:`Bucket`, in code order.
        unlogged: shape (5,), seconds of each bucket that lie between a log save's last line
            and the first step after it: possibly the save's unlogged part (only productive and
            lost hold any).
        checkpoint_source: where the window's saves were seen (:func:`source_of_saves`),
            the job's when it holds none; None for a job without saves.
        n_saves: saves whose end lies in the window.
        n_log_saves: of those, the ones known from log lines only.
        n_interruptions: interruptions that began in the window.
        n_inferred: of those, the ones no failure line reported (a run that stopped silently
            before a new run: :meth:`rules.timeline.Timeline.with_unseen_interruptions`).
        step_dated: True when the first progress after a restart was re-dated by the step
            time (else restart runs to the first line of the run that recovered).
        checkpoint_stack: for log saves, the stack whose lines they are (the parser's name),
            None when unknown: a stack that logs a save's end (``rules/cost.py``
            ``SAVE_END_STACKS``) gives measured saves, any other a lower bound.
    """

    since_s: float
    until_s: float
    seconds: FloatArray
    unlogged: FloatArray
    checkpoint_source: str | None
    n_saves: int
    n_log_saves: int
    n_interruptions: int
    n_inferred: int
    step_dated: bool
    checkpoint_stack: str | None = None

    def __getitem__(self, bucket: Bucket) -> float:
        return float(self.seconds[bucket])

    @property
    def wall_s(self) -> float:
        """Seconds of wall time in the window."""
        return float(self.seconds.sum())

    @property
    def goodput(self) -> float | None:
        """Productive time over wall time, in [0, 1]; None for an empty window."""
        wall = self.wall_s
        return self[Bucket.PRODUCTIVE] / wall if wall > 0 else None

    @property
    def checkpoint_is_lower_bound(self) -> bool:
        """True when saves come from log lines (all or some of them) of a stack that may not
        mark a save's end (not in ``rules/cost.py`` ``SAVE_END_STACKS``)."""
        from_log = self.checkpoint_source in (LOG_LINES, BOTH_SOURCES)
        return from_log and self.checkpoint_stack not in SAVE_END_STACKS

    @property
    def checkpoint_upper_s(self) -> float:
        """The most the saves can have blocked: ``checkpoint_s`` for a timing file; with log
        saves, plus every stretch to the first step after each (else to its run's next line)."""
        if not self.checkpoint_is_lower_bound:
            return self[Bucket.CHECKPOINT]
        return self[Bucket.CHECKPOINT] + float(self.unlogged.sum())

    def range_s(self, bucket: Bucket) -> tuple[float, float]:
        """``(low, high)`` seconds the bucket may hold: a point for a timing file; with log
        saves, checkpoint from its value to :attr:`checkpoint_upper_s`, and productive and lost
        from their value less their possibly unlogged save parts to their value."""
        value = self[bucket]
        if not self.checkpoint_is_lower_bound:
            return value, value
        if bucket is Bucket.CHECKPOINT:
            return value, self.checkpoint_upper_s
        return value - float(self.unlogged[bucket]), value

    @property
    def goodput_range(self) -> tuple[float | None, float | None]:
        """``(low, high)``: goodput over :meth:`range_s` of productive; both None for an empty
        window."""
        wall = self.wall_s
        if wall <= 0:
            return None, None
        low, high = self.range_s(Bucket.PRODUCTIVE)
        return low / wall, high / wall


@dataclass(frozen=True, eq=False)
class GoodputSpans:
    """A job's wall time as labelled spans: disjoint, in time order, covering its first
    observation to its newest (empty for an empty timeline).

    Attributes:
        start_s, end_s: shape (m,), epoch seconds.
        bucket: shape (m,), :class:`Bucket` codes.
        unlogged: shape (m,), True inside a log save's possibly unlogged part (after its last
            line, before the first step after it).
        interruption: shape (m,), the :attr:`Interruption.id` a lost or restart span is owed
            to (lost work: the first interruption after it that it was not kept through), else 0.
        save_end_s: shape (s,), when each save completed.
        save_logged: shape (s,), True for a save known from log lines only (none of the
            timing file's records).
        interruption_start_s: shape (k,), when each interruption began;
            ``interruption_inferred``: shape (k,), True for one no failure line reported.
        step_dated: restarts end at progress re-dated by the step time (see :class:`Goodput`).
        checkpoint_stack: the stack of log saves (see :class:`Goodput`).
    """

    start_s: FloatArray
    end_s: FloatArray
    bucket: npt.NDArray[np.int8]
    unlogged: BoolArray
    interruption: IntArray
    save_end_s: FloatArray
    save_logged: BoolArray
    interruption_start_s: FloatArray
    interruption_inferred: BoolArray
    step_dated: bool
    checkpoint_stack: str | None = None

    def __len__(self) -> int:
        return int(self.start_s.size)

    def __eq__(self, other: object) -> bool:
        """Equal when every field is (arrays element by element): two estimates of the same
        history compare equal."""
        if not isinstance(other, GoodputSpans):
            return NotImplemented
        return all(
            np.array_equal(getattr(self, name), getattr(other, name))
            for name in self.__dataclass_fields__
        )

    __hash__ = None  # type: ignore[assignment]  # arrays: not hashable

    @property
    def checkpoint_source(self) -> str | None:
        """Where the job's saves were seen (:func:`source_of_saves`)."""
        return source_of_saves(self.save_end_s.size, int(np.count_nonzero(self.save_logged)))

    @property
    def first_s(self) -> float | None:
        """Epoch seconds where the spans begin, None when there are none."""
        return float(self.start_s[0]) if self.start_s.size else None

    @property
    def last_s(self) -> float | None:
        """Epoch seconds where the spans end, None when there are none."""
        return float(self.end_s[-1]) if self.end_s.size else None

    def seconds(self, edges_s: FloatArray, *, unlogged: bool = False) -> FloatArray:
        """Seconds of each bucket between consecutive ``edges_s`` (shape (e,), ascending):
        shape (e − 1, 5); with ``unlogged``, only the seconds inside possibly unlogged save
        parts."""
        edges = np.asarray(edges_s, np.float64)
        out = np.zeros((max(edges.size - 1, 0), len(Bucket)))
        for bucket in Bucket:
            chosen = self.bucket == bucket
            if unlogged:
                chosen &= self.unlogged
            before = _time_before(self.start_s[chosen], self.end_s[chosen], edges)
            out[:, bucket] = np.diff(before)
        return out

    def breakdown(self, *, since_s: float = -np.inf, until_s: float = np.inf) -> Goodput:
        """The buckets of the wall time from ``since_s`` to ``until_s``, clipped to the spans.

        Raises:
            ValueError: ``until_s`` before ``since_s``.
        """
        if until_s < since_s:
            raise ValueError(f"until_s ({until_s!r}) is before since_s ({since_s!r})")
        low = max(since_s, self.first_s or 0.0)
        high = max(low, min(until_s, self.last_s or 0.0))
        edges = np.array([low, high])
        saved = (self.save_end_s >= low) & (self.save_end_s <= high)
        n_saves = int(np.count_nonzero(saved))
        n_log_saves = int(np.count_nonzero(saved & self.save_logged))
        began = (self.interruption_start_s >= low) & (self.interruption_start_s <= high)
        return Goodput(
            since_s=low,
            until_s=high,
            seconds=self.seconds(edges)[0] if len(self) else np.zeros(len(Bucket)),
            unlogged=self.seconds(edges, unlogged=True)[0] if len(self) else np.zeros(len(Bucket)),
            checkpoint_source=source_of_saves(n_saves, n_log_saves) or self.checkpoint_source,
            n_saves=n_saves,
            n_log_saves=n_log_saves,
            n_interruptions=int(np.count_nonzero(began)),
            n_inferred=int(np.count_nonzero(began & self.interruption_inferred)),
            step_dated=self.step_dated,
            checkpoint_stack=self.checkpoint_stack,
        )


def _time_before(starts_s: FloatArray, ends_s: FloatArray, at_s: FloatArray) -> FloatArray:
    """Summed length of the disjoint sorted spans before each of ``at_s``."""
    if not starts_s.size:
        return np.zeros(at_s.shape)
    lengths = ends_s - starts_s
    done = np.concatenate(([0.0], np.cumsum(lengths)))
    full = np.searchsorted(ends_s, at_s, "right")
    inside = np.minimum(full, starts_s.size - 1)
    partial = np.where(
        full < starts_s.size, np.clip(at_s - starts_s[inside], 0.0, lengths[inside]), 0.0
    )
    total: FloatArray = done[full] + partial
    return total
