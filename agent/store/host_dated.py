"""Which of a job's stored events the host dated: the read of the events of log files that
printed no time, for the estimator's columns (``rules.timeline.Timeline.host_dated``).

A file that has printed no time is dated by the host (the read time live, the file's mtime in a
backfill: ``agent/tail/dating.py``) until it prints one; the parsers say so once per file with
a ``no_timestamps`` event ahead of its first event (``parsers/clock.py``, ``parsers/logs.py``:
the clock's findings go first). When the file's first printed time comes within a few hundred
lines (a Megatron-LM resume line before the run's first stamp), the parser dates those events
at it instead, an upper bound, and says so with a ``dated_at_first_time`` event in the same
place: their time is not the log's own either, and they are read the same way. What is stored
is enough to tell those events again, so no column is added for them. Standard library only;
the SQL is the one both backends speak (``?`` placeholders, turned into the driver's by the
caller).

An event belongs to the file it was read from by its ``file_id`` (the ``files`` row), never by
its name: a name reused by a rotation (``train.log`` again) is another row. A file truncated
and rewritten keeps its row (``files.truncations`` counts), and its line numbers start again
at 1, so lines cannot tell the old content's events from the new one's either; the order the
events were stored in does (``events.id`` grows with each commit, and within one in the
parser's order), as the parser that read the new content is a fresh one that reports its own
``no_timestamps`` (docs/RELIABILITY.md, scenario 33).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Query = Callable[[str, Sequence[Any]], list[Any]]
"""Runs one SQL statement with its parameters and returns all its rows (tuples)."""

Stretch = tuple[Any, int, int | None]
"""(file_id, first event id, id of the first stamped event after it or None) of one
``no_timestamps`` or ``dated_at_first_time`` finding: the events stored from that file between
them that the host dated (or the first time)."""


def host_dated_flags(query: Query, job: str, kinds: Sequence[str]) -> dict[str, list[bool]]:
    """Per log source of ``job`` with a ``no_timestamps`` or ``dated_at_first_time`` finding,
    whether each of its events of ``kinds`` that have a time (in time order, ties by id: the
    order of the estimator's columns) was dated by the host (or at the file's first time).

    An event was when it is marked ``time_estimated`` and was stored from the finding's file
    (``file_id``) at or after the finding and before that file's first event with a printed
    time stored after it (a truncated and rewritten file, or a name that another file took
    over, holds events of the other content: module docstring). Exact but for a stamp printed
    on a line that gave no event (the parser then dates the events after it by that stamp):
    those are taken as host-dated too, the cautious side. A few small queries per finding;
    none for a job without one.
    """
    findings = query(
        "SELECT source, file_id, id FROM events WHERE job = ? "
        "AND kind IN ('no_timestamps', 'dated_at_first_time') ORDER BY id",
        (job,),
    )
    stretches: dict[str, list[Stretch]] = {}
    for source, file_id, first_id in findings:
        [(stamped,)] = query(
            "SELECT MIN(id) FROM events WHERE job = ? AND file_id = ? AND id > ? "
            "AND time_estimated = 0 AND time_s IS NOT NULL AND from_timing_file = 0",
            (job, file_id, first_id),
        )
        stretches.setdefault(source, []).append((file_id, first_id, stamped))
    marks = ",".join("?" * len(kinds))
    out: dict[str, list[bool]] = {}
    for source, found in stretches.items():
        rows = query(
            "SELECT file_id, id, time_estimated FROM events "
            f"WHERE job = ? AND source = ? AND kind IN ({marks}) "
            "AND time_s IS NOT NULL AND from_timing_file = 0 ORDER BY time_s, id",
            (job, source, *kinds),
        )
        out[source] = [bool(estimated) and _within(found, f, i) for f, i, estimated in rows]
    return out


def _within(stretches: Sequence[Stretch], file_id: Any, event_id: int) -> bool:
    """Whether event ``event_id`` of file ``file_id`` lies in one of ``stretches``."""
    return any(
        f == file_id and first <= event_id and (until is None or event_id < until)
        for f, first, until in stretches
    )
