"""The SQLite store's queries, over the standard library's sqlite3 alone.

``ckpt-advisor estimates``, ``events`` and ``status`` only read, and used to spend most of
their start-up importing SQLAlchemy (~0.25 s): :class:`SqliteReader` opens the database
read-only (a WAL snapshot: it never blocks the daemon's writes) and runs these queries in plain
SQL. The writer (``writer.py``) runs the same queries over a connection it lends
(:class:`SqliteQueries` is the base of both), so each query exists once. The estimator's read
(:meth:`SqliteQueries.event_columns`) goes straight into numpy arrays.

Times are stored as Unix epoch seconds (UTC, REAL) and returned as aware UTC datetimes.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckpt_advisor.agent.store.records import EventColumns, OutboxItem, StoredEvent, StoreError
from ckpt_advisor.agent.store.sqlite.access import CORRUPT_ADVICE, explain, open_read_only
from ckpt_advisor.agent.store.sqlite.schema import (
    NUMBER_FIELDS,
    SCHEMA_VERSION,
    check_schema,
    group_key,
    schema_version,
)
from ckpt_advisor.parsers.events import Event, EventKind

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


def _parser_counts(timed: list[tuple[str, int, int]], untimed: list[Any]) -> dict[str, int]:
    """Log events per parser, most first, ties by the first seen in time order (events
    without time after those with, by id): the order of ``Counter.most_common`` over
    :meth:`SqliteQueries.events`. ``timed``: (parser, count, index of the first) of each group
    of timed log events; ``untimed``: (parser, count, first id) of the events without time."""
    ranks: dict[str, list[Any]] = {}
    for parser, n, first in timed:
        rank = ranks.setdefault(parser, [0, (0, first)])
        rank[0] += n
        rank[1] = min(rank[1], (0, first))
    for parser, n, first_id in untimed:
        rank = ranks.setdefault(parser, [0, (1, first_id)])
        rank[0] += n
    ranked = sorted(ranks.items(), key=lambda item: (-item[1][0], item[1][1]))
    return {parser: n for parser, (n, _) in ranked}


def _unknown_as_nan(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    values[values == float("inf")] = float(
        "nan"
    )  # NULL comes back as +inf (1e999): no NaN in SQLite
    return values


def _dt(s: float | None) -> datetime | None:
    return None if s is None else datetime.fromtimestamp(s, UTC)


def _stored_event(m: Any) -> StoredEvent:
    return StoredEvent(
        job=m["job"],
        source=m["source"],
        event=Event(
            kind=EventKind(m["kind"]),
            line=m["line"],
            parser=m["parser"],
            time=_dt(m["time_s"]),
            step=m["step"],
            duration_s=m["duration_s"],
            failure_class=m["failure_class"],
            planned=bool(m["planned"]),
            persist_s=m["persist_s"],
            detail=m["detail"],
            time_estimated=bool(m["time_estimated"]),
        ),
        from_timing_file=bool(m["from_timing_file"]),
    )


class SqliteQueries:
    """The read queries of a SQLite store, over the connection :meth:`_reading` lends.

    Args:
        path: the database file (named in errors).
        version: its schema version (:data:`~agent.store.sqlite.schema.SCHEMA_VERSION` or
            older: the columnar read needs version 4).
    """

    def __init__(self, path: Path, version: int) -> None:
        self.path = path
        self.location = str(path)
        self._version = version

    def _reading(self) -> AbstractContextManager[sqlite3.Connection]:
        """A sqlite3 connection to read with (the subclass's own, or one from its pool)."""
        raise NotImplementedError

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._reading() as conn:
            cur = conn.cursor()
            cur.row_factory = sqlite3.Row
            return cur.execute(sql, params).fetchall()

    def events(
        self,
        *,
        job: str | None = None,
        kinds: Iterable[str] | None = None,
        since_s: float | None = None,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        """Stored events in time order (events without time last), filtered as asked."""
        where: list[str] = ["1"]
        params: list[Any] = []
        if job is not None:
            where.append("job = ?")
            params.append(job)
        if kinds is not None:
            names = list(kinds)
            where.append(f"kind IN ({','.join('?' * len(names))})")
            params += names
        if since_s is not None:
            where.append("time_s >= ?")
            params.append(since_s)
        sql = (
            f"SELECT * FROM events WHERE {' AND '.join(where)} ORDER BY time_s IS NULL, time_s, id"
        )
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [_stored_event(r) for r in self._rows(sql, params)]

    def event_columns(self, job: str, kinds: Sequence[str]) -> EventColumns:
        """The job's events of ``kinds`` that have a time, as arrays (:class:`EventColumns`).

        The estimator's read path: one query concatenates the job's ``events.numbers`` blobs
        (:func:`~agent.store.sqlite.schema.event_numbers`) in time order from an index that
        holds them, so SQLite hands over one buffer that numpy reads whole; the blobs' group
        keys name each event's source, parser, timing flag and kind, resolved with one indexed
        look-up per distinct key. Small queries add the failures' classes and the events
        without time (for the per-parser counts). Both this and :meth:`events` give the same
        timeline (tests). ``INDEXED BY`` and the BLOB ``group_concat`` are SQLite's own.

        Raises:
            StoreError: the store predates schema version 4 (open it once read-write, e.g. by
                the daemon or ``ingest``, to upgrade it), or an event lacks its numbers.
        """
        import numpy as np  # not at module level: the CLI's other reads need no numpy

        if self._version < 4:
            raise StoreError(
                f"{self.path}: schema version {self._version}, from an older ckpt-advisor; "
                f"estimating needs version {SCHEMA_VERSION}: open it once read-write (start "
                "the daemon, or `ingest` into it) to upgrade it"
            )
        kinds = tuple(kinds)
        marks = ",".join("?" * len(kinds))
        with self._reading() as raw:
            count, packed = raw.execute(
                "SELECT count(*), CAST(group_concat(numbers, '') AS BLOB) FROM (SELECT numbers "
                "FROM events INDEXED BY ix_events_job_time_numbers "
                "WHERE job = ? AND time_s IS NOT NULL ORDER BY time_s, id)",
                (job,),
            ).fetchone()
            dtype = np.dtype([(n, "<f8") for n in NUMBER_FIELDS] + [("key", "<u8")])
            rows = np.frombuffer(packed or b"", dtype)
            if rows.size != count:
                raise StoreError(f"{self.path}: events of job {job!r} lack their numbers")
            keys = rows["key"]  # runs of equal keys are long: sort the runs' keys, not the rows'
            change = np.ones(keys.size, np.bool_)
            change[1:] = keys[1:] != keys[:-1]
            starts = np.flatnonzero(change)
            distinct, at = np.unique(keys[starts], return_index=True)
            first = starts[at]  # each group's first row
            groups = [
                self._group(raw, job, int(key), float(rows["time_s"][i]))
                for key, i in zip(distinct, first, strict=True)
            ]
            untimed = raw.execute(  # few rows: a range of the (job, time_s) index
                "SELECT parser, count(*), MIN(id) FROM events "
                f"WHERE job = ? AND time_s IS NULL AND kind IN ({marks}) AND from_timing_file = 0 "
                "GROUP BY parser",
                (job, *kinds),
            ).fetchall()
            failures = (
                []
                if "failure" not in kinds
                else raw.execute(  # its index: failures only
                    "SELECT failure_class, planned FROM events INDEXED BY ix_events_job_kind_time "
                    "WHERE job = ? AND kind = 'failure' AND time_s IS NOT NULL ORDER BY time_s, id",
                    (job,),
                ).fetchall()
            )
        group = np.searchsorted(distinct, keys)
        group_kind = np.array([kinds.index(g[3]) if g[3] in kinds else -1 for g in groups], np.intp)
        group_log = np.array([g[3] in kinds and not g[2] for g in groups], np.bool_)
        if (group_kind < 0).any():
            asked = group_kind[group] >= 0
            rows, group = rows[asked], group[asked]
            first = np.cumsum(asked)[first] - 1  # rows kept before each group's first, its index
        size = np.bincount(group, minlength=len(groups)).tolist()
        logs = [
            (g, n, i)
            for g, n, i, log in zip(groups, size, first.tolist(), group_log, strict=True)
            if log
        ]
        by_source: dict[str, int] = {}
        for g, _, i in logs:
            by_source[g[0]] = min(i, by_source.get(g[0], i))
        first_of_source = np.zeros(rows.size, np.bool_)
        first_of_source[list(by_source.values())] = True
        return EventColumns(
            kinds=kinds,
            time_s=rows["time_s"].copy(),
            kind=group_kind[group],
            step=_unknown_as_nan(rows["step"].copy()),
            duration_s=_unknown_as_nan(rows["duration_s"].copy()),
            persist_s=_unknown_as_nan(rows["persist_s"].copy()),
            from_timing_file=np.array([bool(g[2]) for g in groups], np.bool_)[group],
            first_of_source=first_of_source,
            failure_class=tuple(r[0] for r in failures),
            failure_planned=np.array([bool(r[1]) for r in failures], np.bool_),
            parser_counts=_parser_counts([(g[1], n, i) for g, n, i in logs], untimed),
        )

    def _group(
        self, raw: sqlite3.Connection, job: str, key: int, time_s: float
    ) -> tuple[str, str, int, str]:
        """Source, parser, timing flag and kind of the group ``key``, whose first event is at
        ``time_s``."""
        for row in raw.execute(
            "SELECT source, parser, from_timing_file, kind FROM events "
            "WHERE job = ? AND time_s = ?",
            (job, time_s),
        ):
            if group_key(*row) == key:
                return (row[0], row[1], int(row[2]), row[3])
        raise StoreError(f"{self.path}: events of job {job!r} have numbers that match no event")

    def check(self) -> str | None:
        """What ``PRAGMA quick_check`` finds wrong in the file (its first findings), with the
        way to recover (:data:`CORRUPT_ADVICE`), or None when it is sound."""
        try:
            with self._reading() as conn:
                rows = conn.execute("PRAGMA quick_check(5)").fetchall()
        except sqlite3.DatabaseError as exc:
            return explain(self.path, exc)
        except StoreError as exc:
            return str(exc)
        found = [line for row in rows for line in str(row[0]).splitlines() if "***" not in line]
        if found == ["ok"]:
            return None
        return f"{self.path}: damaged: {'; '.join(found)}; {CORRUPT_ADVICE.format(db=self.path)}"

    def jobs(self) -> list[str]:
        """Names of the jobs that have events or estimates, sorted."""
        rows = self._rows(
            "SELECT DISTINCT job FROM events UNION SELECT DISTINCT job FROM estimates"
        )
        return sorted(r[0] for r in rows)

    def count_events(self, job: str | None = None) -> int:
        """How many events are stored (for one job or all)."""
        if job is None:
            return int(self._rows("SELECT count(*) FROM events")[0][0])
        return int(self._rows("SELECT count(*) FROM events WHERE job = ?", (job,))[0][0])

    def estimate_history(
        self, *, job: str | None = None, since_s: float | None = None, latest_only: bool = False
    ) -> list[dict[str, Any]]:
        """Stored estimates (JSON objects), oldest first; ``latest_only``: newest per job."""
        where: list[str] = ["1"]
        params: list[Any] = []
        if job is not None:
            where.append("job = ?")
            params.append(job)
        if since_s is not None:
            where.append("computed_at_s >= ?")
            params.append(since_s)
        if latest_only:
            where.append("id IN (SELECT max(id) FROM estimates GROUP BY job)")
        sql = f"SELECT payload FROM estimates WHERE {' AND '.join(where)} ORDER BY job, id"
        return [json.loads(r["payload"]) for r in self._rows(sql, params)]

    def silences(self, now_s: float) -> dict[str, float]:
        """The silences still running at ``now_s``: job → when it ends (epoch seconds)."""
        if 0 < self._version < 2:  # schema 1 had no silences
            return {}
        rows = self._rows(
            "SELECT job, until_s FROM silences WHERE until_s > ? ORDER BY job", (now_s,)
        )
        return {r["job"]: float(r["until_s"]) for r in rows}

    def queued_messages(self) -> list[OutboxItem]:
        """Messages not yet delivered (``queued`` or ``unsure``), in the order they were queued."""
        rows = self._rows(
            "SELECT id, job, created_s, action, payload, attempts, state FROM outbox "
            "WHERE state IN ('queued', 'unsure') ORDER BY id"
        )
        return [
            OutboxItem(
                id=r["id"],
                job=r["job"],
                created_s=r["created_s"],
                action=r["action"],
                payload=json.loads(r["payload"]),
                attempts=r["attempts"],
                state=r["state"],
            )
            for r in rows
        ]


class SqliteReader(SqliteQueries):
    """A store opened read-only through sqlite3 alone (the CLI's fast path)."""

    def __init__(self, path: str | Path) -> None:
        """Open the database at ``path`` read-only (``immutable`` when its directory is not
        writable and no WAL holds changes: :func:`access.open_read_only`).

        Raises:
            StoreError: there is no file, it cannot be read (the message says why and what to
                do), it is damaged (with the recovery, :data:`CORRUPT_ADVICE`), not a
                ckpt-advisor database, or from a newer ckpt-advisor. The message names the path.
        """
        db = Path(path)
        if not db.exists():
            raise StoreError(f"{db}: no database here (has the daemon or ingest run?)")
        try:
            self._conn = open_read_only(db)
            version = schema_version(self._conn)
        except sqlite3.DatabaseError as exc:
            raise StoreError(explain(db, exc)) from None
        if version is None:
            raise StoreError(f"{db}: not a ckpt-advisor store (no schema version)")
        check_schema(db, version)
        super().__init__(db, version)

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        try:
            yield self._conn
        except sqlite3.DatabaseError as exc:  # a damaged page found by a query
            raise StoreError(explain(self.path, exc)) from None

    def close(self) -> None:
        """Release the connection (the file stays)."""
        self._conn.close()
