"""Which of a job's stored events the host dated: the read of the events of log files that
printed no time, for the estimator's columns (``rules.timeline.Timeline.host_dated``).

A file that has printed no time is dated by the host (the read time live, the file's mtime in a
backfill: ``agent/tail/dating.py``) until it prints one; the parsers say so once per file with
a ``no_timestamps`` event at its first event's line (``parsers/clock.py``). When the file's
first printed time comes within a few hundred lines (a Megatron-LM resume line before the
run's first stamp), the parser dates those events at it instead, an upper bound, and says so
with a ``dated_at_first_time`` event at the same place: their time is no more the log's own,
and they are read the same way. What is stored is enough to tell those events again, so no
column is added for them. Standard library only; the
SQL is the one both backends speak (``?`` placeholders, turned into the driver's by the
caller).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Query = Callable[[str, Sequence[Any]], list[Any]]
"""Runs one SQL statement with its parameters and returns all its rows (tuples)."""


def host_dated_flags(query: Query, job: str, kinds: Sequence[str]) -> dict[str, list[bool]]:
    """Per log source of ``job`` with a ``no_timestamps`` or ``dated_at_first_time`` finding,
    whether each of its events of ``kinds`` that have a time (in time order, ties by id: the
    order of the estimator's columns) was dated by the host (or at the file's first time).

    An event was when it is marked ``time_estimated``, lies at or after the finding's line and
    before the file's first event with a printed time. Exact but for a stamp printed on a line
    that gave no event (the parser then dates the events after it by that stamp): those are
    taken as host-dated too, the cautious side. A few small queries per file without stamps;
    none for a job without one.
    """
    marks = ",".join("?" * len(kinds))
    findings = query(
        "SELECT source, MIN(line) FROM events WHERE job = ? "
        "AND kind IN ('no_timestamps', 'dated_at_first_time') GROUP BY source",
        (job,),
    )
    out: dict[str, list[bool]] = {}
    for source, line in findings:
        [(stamped,)] = query(
            "SELECT MIN(line) FROM events WHERE job = ? AND source = ? "
            "AND time_estimated = 0 AND time_s IS NOT NULL AND from_timing_file = 0",
            (job, source),
        )
        until = "" if stamped is None else f" AND line < {int(stamped)}"
        rows = query(
            f"SELECT CASE WHEN time_estimated = 1 AND line >= ?{until} THEN 1 ELSE 0 END "
            f"FROM events WHERE job = ? AND source = ? AND kind IN ({marks}) "
            "AND time_s IS NOT NULL AND from_timing_file = 0 ORDER BY time_s, id",
            (int(line), job, source, *kinds),
        )
        out[source] = [bool(r[0]) for r in rows]
    return out
