"""Reading the store with the standard library's sqlite3 only: the CLI's fast path.

``ckpt-advisor estimates``, ``events`` and ``status`` only read, and used to spend most of
their start-up importing SQLAlchemy (~0.25 s). :class:`StoreReader` opens the database
read-only (a WAL snapshot: it never blocks the daemon's writes) and runs the read queries in
plain SQL; :class:`agent.store.Store` inherits them, so each query exists once. The estimator's
read (:meth:`StoreReader.event_columns`) goes straight into numpy arrays.

Times are stored as Unix epoch seconds (UTC, REAL) and returned as aware UTC datetimes.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from parsers.events import Event, EventKind

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

SCHEMA_VERSION = 3
"""1: the first release; 2: adds ``silences``; 3: adds ``files.finished``."""


class StoreError(Exception):
    """The store cannot be opened or written; the message names the database path."""


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as stored: the parser's event plus the job, its source file and its kind."""

    job: str
    source: str
    event: Event
    from_timing_file: bool = False

    def to_json(self) -> dict[str, Any]:
        """The ``events --json`` contract: the ``parse --json`` keys plus ``job``."""
        ev = self.event
        return {
            "job": self.job,
            "kind": str(ev.kind),
            "time": ev.time.isoformat() if ev.time else None,
            "time_estimated": ev.time_estimated,
            "step": ev.step,
            "duration_s": ev.duration_s,
            "failure_class": ev.failure_class,
            "planned": ev.planned,
            "persist_s": ev.persist_s,
            "detail": ev.detail,
            "line": ev.line,
            "source": self.source,
            "parser": ev.parser,
        }


@dataclass(frozen=True, slots=True)
class EventColumns:
    """A job's timed events of some kinds as parallel arrays in time order (ties: stored order).

    Attributes:
        kinds: the kind strings asked for; ``kind`` indexes into them.
        time_s: shape (n,), Unix epoch seconds, ascending.
        kind: shape (n,), index into ``kinds``.
        step, duration_s, persist_s: shape (n,), NaN when unknown (a stored +inf reads as NaN).
        from_timing_file: shape (n,).
        first_of_source: shape (n,), True at each log source's first event (timing files: never).
        failure_class, failure_planned: length f, for the ``failure`` rows in order.
        parser_counts: log events (time or not) per parser, most first, ties by first seen.
    """

    kinds: tuple[str, ...]
    time_s: npt.NDArray[np.float64]
    kind: npt.NDArray[np.intp]
    step: npt.NDArray[np.float64]
    duration_s: npt.NDArray[np.float64]
    persist_s: npt.NDArray[np.float64]
    from_timing_file: npt.NDArray[np.bool_]
    first_of_source: npt.NDArray[np.bool_]
    failure_class: tuple[str | None, ...]
    failure_planned: npt.NDArray[np.bool_]
    parser_counts: dict[str, int]


def _unknown_as_nan(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    values[values == float("inf")] = float(
        "nan"
    )  # NULL comes back as +inf (1e999): no NaN in SQLite
    return values


@dataclass(frozen=True, slots=True)
class OutboxItem:
    """A Slack message written before sending, so it is delivered once even across crashes."""

    id: int
    job: str
    created_s: float
    action: str
    payload: dict[str, Any]
    attempts: int
    state: str = "queued"  # or "unsure": an earlier send may have landed; look before resending


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


def schema_version(conn: sqlite3.Connection) -> int | None:
    """The store's schema version, or None in a database without ckpt-advisor's tables."""
    has_meta = conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name='meta'"
    ).fetchone()
    if not has_meta:
        return None
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    return int(row[0]) if row else None


def check_schema(path: Path, version: int | None) -> None:
    """Raise :class:`StoreError` naming ``path`` when its schema is newer than this code."""
    if version is not None and version > SCHEMA_VERSION:
        raise StoreError(
            f"{path}: schema version {version} is newer than this ckpt-advisor "
            f"understands ({SCHEMA_VERSION}); upgrade ckpt-advisor"
        )


class StoreReader:
    """Read-only access to a store (events, estimates, the outbox) through sqlite3 alone."""

    def __init__(self, path: str | Path) -> None:
        """Open the database at ``path`` read-only.

        Raises:
            StoreError: there is no file, it is not a ckpt-advisor database, or it is from a
                newer ckpt-advisor. The message names the path.
        """
        self.path = Path(path)
        if not self.path.exists():
            raise StoreError(f"{self.path}: no database here (has the daemon or ingest run?)")
        try:
            self._conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30)
            self._conn.execute("PRAGMA busy_timeout = 30000")
            version = schema_version(self._conn)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: {exc}") from None
        if version is None:
            raise StoreError(f"{self.path}: not a ckpt-advisor store (no schema version)")
        check_schema(self.path, version)

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A sqlite3 connection to read with (:class:`agent.store.Store` lends a pooled one)."""
        yield self._conn

    def close(self) -> None:
        """Release the connection (the file stays)."""
        self._conn.close()

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

        The estimator's read path: one query fetches five numbers a row straight into numpy
        (a :class:`StoredEvent` per row costs ~70 µs through SQLAlchemy, this ~2 µs); one
        grouped scan gives each source's first event and the per-parser counts; the failures'
        classes come from a small query. Both paths give the same timeline (tests).
        """
        kinds = tuple(kinds)
        marks = ",".join("?" * len(kinds))
        where = f"job = ? AND kind IN ({marks})"
        params = (job, *kinds)
        timed = f"{where} AND time_s IS NOT NULL"
        order = "ORDER BY time_s, id"
        import numpy as np  # not at module level: the CLI's other reads need no numpy

        numbers = ("time_s", "code", "step", "duration_s", "persist_s")
        dtype = np.dtype([(name, "i8" if name == "code" else "f8") for name in numbers])
        with self._reading() as raw:
            groups = raw.execute(
                "SELECT source, parser, from_timing_file, count(*), MIN(time_s), MIN(id) "
                f"FROM events WHERE {where} GROUP BY source, parser, from_timing_file",
                params,
            ).fetchall()
            firsts: dict[str, float] = {}
            for source, _, timing, _, first_s, _ in groups:
                if not timing and first_s is not None:
                    firsts[source] = min(first_s, firsts.get(source, first_s))
            first_ids = [
                raw.execute(
                    f"SELECT MIN(id) FROM events WHERE {timed} AND from_timing_file = 0 "
                    "AND source = ? AND time_s = ?",
                    (*params, source, first_s),
                ).fetchone()[0]
                for source, first_s in firsts.items()
            ]
            code = " ".join(f"WHEN ? THEN {i}" for i in range(len(kinds)))
            rows = np.fromiter(
                raw.execute(
                    f"SELECT time_s, (CASE kind {code} END) * 4 + 2 * (id IN "
                    f"({','.join('?' * len(first_ids))})) + from_timing_file, "
                    "IFNULL(step, 1e999), IFNULL(duration_s, 1e999), IFNULL(persist_s, 1e999) "
                    f"FROM events WHERE {timed} {order}",
                    (*kinds, *first_ids, *params),
                ),
                dtype,
            )
            failures = (
                []
                if "failure" not in kinds
                else raw.execute(  # its index: failures only
                    "SELECT failure_class, planned FROM events INDEXED BY ix_events_job_kind_time "
                    f"WHERE job = ? AND kind = 'failure' AND time_s IS NOT NULL {order}",
                    (job,),
                ).fetchall()
            )
        counts: dict[str, list[Any]] = {}
        for _, parser, timing, n, first_s, first_id in groups:
            if not timing:
                seen = counts.setdefault(parser, [0, (first_s is None, first_s or 0.0, first_id)])
                seen[0] += n
                seen[1] = min(seen[1], (first_s is None, first_s or 0.0, first_id))
        ranked = sorted(counts.items(), key=lambda item: (-item[1][0], item[1][1]))
        codes = rows["code"]
        return EventColumns(
            kinds=kinds,
            time_s=rows["time_s"].copy(),
            kind=(codes >> 2).astype(np.intp),
            step=_unknown_as_nan(rows["step"].copy()),
            duration_s=_unknown_as_nan(rows["duration_s"].copy()),
            persist_s=_unknown_as_nan(rows["persist_s"].copy()),
            from_timing_file=(codes & 1).astype(np.bool_),
            first_of_source=(codes & 2).astype(np.bool_),
            failure_class=tuple(r[0] for r in failures),
            failure_planned=np.array([bool(r[1]) for r in failures], np.bool_),
            parser_counts={parser: n for parser, (n, _) in ranked},
        )

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
