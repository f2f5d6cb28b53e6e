"""The ``events`` rows of a commit, built in one pass as plain tuples (standard library only).

A dense backfill stores about a thousand events per MB of log (issue 15), so this loop is the
store's share of it in Python: attribute reads are hoisted into locals, and what is the same for
many events (the kind's text and the group key of ``events.numbers``, which hashes source,
parser, timing flag, kind and tier) is computed once per distinct combination in the batch.
Each row is what :data:`EVENT_COLUMNS` names, in that order, in the types both drivers bind
as they are (str, int, float, bytes, None: no enum, no bool), so SQLite's ``executemany`` and
PostgreSQL's ``COPY`` take the same tuples.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ckpt_advisor.agent.store.schema import NUMBERS, group_key

if TYPE_CHECKING:  # the parsers' package is not imported for its type alone
    from ckpt_advisor.parsers.events import Event

EVENT_COLUMNS = (
    "job",
    "file_id",
    "source",
    "agent",
    "line",
    "kind",
    "time_s",
    "time_estimated",
    "step",
    "duration_s",
    "failure_class",
    "planned",
    "persist_s",
    "detail",
    "parser",
    "from_timing_file",
    "tier",
    "numbers",
)
"""The columns of a row of :func:`event_rows`, in order (every column of ``events`` but its
id, which the database gives)."""


@functools.cache
def insert_sql(n_rows: int) -> str:
    """The INSERT of ``n_rows`` rows (:data:`EVENT_COLUMNS` each, one after another) in
    sqlite3's placeholders (made once per size: sqlite3 finds its prepared statement by it)."""
    one = f"({', '.join('?' * len(EVENT_COLUMNS))})"
    return f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) VALUES {', '.join([one] * n_rows)}"


COPY_SQL = f"COPY events ({', '.join(EVENT_COLUMNS)}) FROM STDIN"
"""PostgreSQL's bulk load of rows in this order (psycopg's ``Cursor.copy``)."""

Row = tuple[Any, ...]


def event_rows(
    job: str,
    source: str,
    file_id: int,
    agent: str,
    events: Sequence[Event],
    timed: bool | Callable[[Event], bool],
) -> list[Row]:
    """The rows (:data:`EVENT_COLUMNS`) of ``events`` read from ``source`` (file ``file_id``)
    of ``job`` by ``agent``; ``timed``: whether they came from a timing file, the same for all
    or a function of the event.

    ``time_s`` is the event's time as Unix epoch seconds (None without a time); the flags are
    0/1; ``numbers`` is :func:`~agent.store.schema.event_numbers` of the row (NaN for None).
    """
    pack = NUMBERS.pack
    nan = math.nan
    groups: dict[tuple[Any, ...], tuple[str, int]] = {}
    of = timed if callable(timed) else None
    fixed = 1 if timed is True else 0
    rows: list[Row] = []
    append = rows.append
    for ev in events:
        timing = fixed if of is None else (1 if of(ev) else 0)
        parser, tier, kind = ev.parser, ev.tier, ev.kind
        found = groups.get((kind, parser, timing, tier))
        if found is None:
            text = str(kind)
            found = groups[kind, parser, timing, tier] = (
                text,
                group_key(source, parser, timing, text, tier),
            )
        when, step, duration_s, persist_s = ev.time, ev.step, ev.duration_s, ev.persist_s
        time_s = None if when is None else when.timestamp()
        append(
            (
                job,
                file_id,
                source,
                agent,
                ev.line,
                found[0],
                time_s,
                1 if ev.time_estimated else 0,
                step,
                duration_s,
                ev.failure_class,
                1 if ev.planned else 0,
                persist_s,
                ev.detail,
                parser,
                timing,
                tier,
                pack(
                    nan if time_s is None else time_s,
                    nan if step is None else step,
                    nan if duration_s is None else duration_s,
                    nan if persist_s is None else persist_s,
                    found[1],
                ),
            )
        )
    return rows
