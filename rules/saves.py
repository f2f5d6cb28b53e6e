"""Which timing records make one save, and what that save cost: the one rule every estimate
(C, the current interval, goodput, the tiers) counts saves by.

A timing record is one file written (``parsers/timing.py``: one ``checkpoint_end`` per record);
a save is every file the job wrote at one checkpoint. The project's own Lightning callback
(``agent/training.py`` ``lightning_callback``) writes a record per file, so ``save_last=True``
gives two per save (``epoch=0-step=10.ckpt`` then ``last.ckpt``: Lightning's
``ModelCheckpoint.on_train_batch_end`` writes the top-k file, then the last one, in one call);
a job whose ranks each time their own shard gives one record per rank. The rule:

    the records of one save are those of one run, one step and one tier whose times touch: each
    starts no later than :data:`SAVE_JOIN_GAP_S` after the latest end of the ones before it
    (in start order).

Records of different tiers at one step are two saves (a two-tier job's fast and persistent
copies are costed apart: ``rules/tier_estimate.py``), and so are records of one step that a
longer pause separates (something else ran in between: a validation loop, then its own save).

A save's blocking time is its span, from its first record's start to its latest blocking end,
not the records' sum: training does not advance between the files of one save (the callback
returns after the last one), and ranks writing in parallel would be counted once per rank by a
sum. For an asynchronous record (``blocking_s`` given) the blocking end is ``start +
blocking_s``; its whole save ends at ``end``, and the save's persist time is the span to the
latest end. A save is marked by the record that ended last (the save is complete then).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ckpt_advisor.rules.timeline import FloatArray, IntArray, Kind, Timeline

SAVE_JOIN_GAP_S = 1.0
"""The longest pause between two records of one save (seconds). Lightning's files of one save
follow each other within milliseconds (``tests/parsers/fixtures/lightning/ckpt_timings.jsonl``:
at most 7 ms); a pause longer than this at one step is other work between two saves."""


@dataclass(frozen=True, eq=False)
class TimedSaves:
    """A job's timing-file saves (module docstring), oldest mark first; shapes (s,).

    Attributes:
        index: the timeline index of each save's mark (its record that ended last), ascending.
        start_s: when the save began (its first record's start), epoch seconds.
        blocking_s: how long it stalled training (first start to latest blocking end), seconds.
        persist_s: its whole span (first start to latest end) when a record gave ``blocking_s``
            (an asynchronous save), else NaN.
    """

    index: IntArray
    start_s: FloatArray
    blocking_s: FloatArray
    persist_s: FloatArray

    @classmethod
    def of(cls, timeline: Timeline, run_id: IntArray) -> TimedSaves:
        """The saves of ``timeline``'s timing records (``checkpoint_end`` rows read from a timing
        file), grouped by the module's rule; ``run_id`` shape (n,), from
        :func:`rules.runs.split_runs`."""
        rows = np.flatnonzero(timeline.is_kind(Kind.CHECKPOINT_END) & timeline.from_timing_file)
        end_s, start_s = timeline.time_s[rows], record_start_s(timeline, rows)
        is_async = np.isfinite(timeline.persist_s[rows])
        block_end_s = start_s + timeline.duration_s[rows]
        step, tier, run = timeline.step[rows], timeline.tier[rows], run_id[rows]
        order = np.lexsort((start_s, step, tier, run))
        rows, run, tier, is_async = rows[order], run[order], tier[order], is_async[order]
        end_s, start_s, block_end_s, step = (a[order] for a in (end_s, start_s, block_end_s, step))
        new_key = np.ones(rows.size, np.bool_)
        new_key[1:] = (run[1:] != run[:-1]) | (tier[1:] != tier[:-1]) | (step[1:] != step[:-1])
        # the latest end so far within each key: ends shifted by key so that no key's ends reach
        # the next one's (relative to the earliest start, so the shift keeps 1 ms resolution)
        key = np.cumsum(new_key) - 1
        origin_s = float(start_s.min()) if rows.size else 0.0
        spread_s = float(end_s.max()) - origin_s + 2 * SAVE_JOIN_GAP_S if rows.size else 0.0
        lifted = (end_s - origin_s) + key * spread_s
        reach = np.maximum.accumulate(lifted) if rows.size else lifted
        new = new_key.copy()
        new[1:] |= (start_s[1:] - origin_s) + key[1:] * spread_s > reach[:-1] + SAVE_JOIN_GAP_S
        first = np.flatnonzero(new)
        last_end = np.maximum.reduceat(end_s, first) if rows.size else end_s
        begun_s = np.minimum.reduceat(start_s, first) if rows.size else start_s
        blocked_s = np.maximum.reduceat(block_end_s, first) if rows.size else block_end_s
        any_async = np.logical_or.reduceat(is_async, first) if rows.size else is_async
        # the mark: the group's record that ended last (the last such in time order on ties)
        group = np.cumsum(new) - 1
        by_end = np.lexsort((rows, end_s, group))
        last_of_group = np.concatenate((group[by_end][1:] != group[by_end][:-1], [True]))
        marks = rows[by_end[last_of_group]] if rows.size else rows
        keep = np.argsort(marks, kind="stable")
        return cls(
            index=marks[keep],
            start_s=begun_s[keep],
            blocking_s=(blocked_s - begun_s)[keep],
            persist_s=np.where(any_async, last_end - begun_s, np.nan)[keep],
        )


def record_start_s(timeline: Timeline, rows: IntArray) -> FloatArray:
    """When each timing record at ``rows`` (shape (r,) timeline indices) began, epoch seconds:
    its end less its whole span (``persist_s`` for an asynchronous record, else
    ``duration_s``)."""
    persist_s = timeline.persist_s[rows]
    span_s = np.where(np.isfinite(persist_s), persist_s, timeline.duration_s[rows])
    start_s: FloatArray = timeline.time_s[rows] - span_s
    return start_s
