"""The ``events`` rows of a commit, built in one pass as plain tuples (standard library only).

A dense backfill stores about a thousand events per MB of log (issue 15), so this loop is the
store's share of it in Python: attribute reads are hoisted into locals, and what is the same for
many events (the kind's text and the group key of ``events.numbers``, which hashes source,
parser, timing flag, kind and tier) is computed once per distinct combination in the batch.
A row holds the columns that differ from event to event (:data:`ROW_COLUMNS`); the four that
a commit shares (:data:`FIXED_COLUMNS`: job, file, source, agent) are given once per batch.
Values are in the types both drivers bind as they are (str, int, float, bytes, and the
backend's NULL: no enum, no bool), so SQLite's ``executemany`` and PostgreSQL's ``COPY`` take
the same tuples.
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
"""Every column of ``events`` but its id (which the database gives), in the order a batch is
written: :data:`FIXED_COLUMNS`, then a row's :data:`ROW_COLUMNS`."""
FIXED_COLUMNS = EVENT_COLUMNS[:4]
"""The columns that all of one commit's rows share: job, file_id, source, agent."""
ROW_COLUMNS = EVENT_COLUMNS[4:]
"""The columns of a row of :func:`event_rows`, in order."""


@functools.cache
def insert_sql(n_rows: int) -> str:
    """The INSERT of ``n_rows`` rows in sqlite3's placeholders: ``?1`` to ``?4`` are
    :data:`FIXED_COLUMNS`, bound once for all the rows, then each row's :data:`ROW_COLUMNS`
    one row after another (a bare ``?`` is the number after the largest so far; made once per
    size: sqlite3 finds its prepared statement by it)."""
    shared = ", ".join(f"?{i + 1}" for i in range(len(FIXED_COLUMNS)))
    one = f"({shared}, {', '.join('?' * len(ROW_COLUMNS))})"
    return f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) VALUES {', '.join([one] * n_rows)}"


COPY_SQL = f"COPY events ({', '.join(EVENT_COLUMNS)}) FROM STDIN"
"""PostgreSQL's bulk load of rows in this order (psycopg's ``Cursor.copy``)."""

Row = tuple[Any, ...]


def event_rows(
    source: str,
    events: Sequence[Event],
    timed: bool | Callable[[Event], bool],
    *,
    null: Any = None,
    blob: Callable[[bytes], Any] | None = None,
) -> list[Row]:
    """The rows (:data:`ROW_COLUMNS`) of ``events`` read from ``source``; ``timed``: whether
    they came from a timing file, the same for all or a function of the event.

    ``time_s`` is the event's time as Unix epoch seconds; the flags are 0/1; ``numbers`` is
    :func:`~agent.store.schema.event_numbers` of the row (NaN for unknown). An unknown value
    (None in the event) is ``null``, and ``numbers`` is ``blob`` of its bytes (None: the bytes
    as they are). For SQLite these are NaN and ``bytearray``: it binds NaN as NULL
    (``sqlite3VdbeMemSetDouble`` in sqlite3.c) and a bytearray as the same BLOB, where CPython's
    sqlite3 takes None and bytes through its adapter protocol (``Modules/_sqlite/
    microprotocols.c``: ~1.3k instructions a value, ~6k of an event's row of ~40k).
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
        failure_class, detail = ev.failure_class, ev.detail
        time_s = nan if when is None else when.timestamp()
        step_n = nan if step is None else step
        duration_n = nan if duration_s is None else duration_s
        persist_n = nan if persist_s is None else persist_s
        packed = pack(time_s, step_n, duration_n, persist_n, found[1])
        append(
            (
                ev.line,
                found[0],
                null if when is None else time_s,
                1 if ev.time_estimated else 0,
                null if step is None else step,
                null if duration_s is None else duration_s,
                null if failure_class is None else failure_class,
                1 if ev.planned else 0,
                null if persist_s is None else persist_s,
                null if detail is None else detail,
                parser,
                timing,
                null if tier is None else tier,
                packed if blob is None else blob(packed),
            )
        )
    return rows
