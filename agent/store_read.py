"""Reading the store with the standard library's sqlite3 only: the CLI's fast path.

``ckpt-advisor estimates``, ``events`` and ``status`` only read, and used to spend most of
their start-up importing SQLAlchemy (~0.25 s). :class:`StoreReader` opens the database
read-only (a WAL snapshot: it never blocks the daemon's writes) and runs the read queries in
plain SQL; :class:`agent.store.Store` inherits them, so each query exists once. The estimator's
read (:meth:`StoreReader.event_columns`) goes straight into numpy arrays.

Times are stored as Unix epoch seconds (UTC, REAL) and returned as aware UTC datetimes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import sqlite3
import struct
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckpt_advisor.parsers.events import Event, EventKind

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

SCHEMA_VERSION = 4
"""1: the first release; 2: adds ``silences``; 3: adds ``files.finished``; 4: adds
``events.numbers`` (:func:`event_numbers`) and the index that covers it."""

_NUMBERS = struct.Struct("<4dQ")
"""``events.numbers``: time_s, step, duration_s, persist_s (NaN when unknown), group key."""


@functools.lru_cache(maxsize=4096)
def group_key(source: str, parser: str, from_timing_file: int, kind: str) -> int:
    """A 64-bit key (BLAKE2b) naming an event's source, parser, timing flag and kind."""
    text = f"{source}\0{parser}\0{int(from_timing_file)}\0{kind}".encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def event_numbers(
    time_s: float | None,
    step: float | None,
    duration_s: float | None,
    persist_s: float | None,
    source: str,
    parser: str,
    from_timing_file: int,
    kind: str,
) -> bytes:
    """The ``events.numbers`` blob of one event (40 bytes, little-endian, NULL as NaN).

    The estimator's read (:meth:`StoreReader.event_columns`) concatenates these blobs in SQL
    and hands them to numpy whole: a million events cost one row, not a million Python tuples.
    """
    return _NUMBERS.pack(
        *(math.nan if v is None else v for v in (time_s, step, duration_s, persist_s)),
        group_key(source, parser, from_timing_file, kind),
    )


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


def _parser_counts(timed: list[tuple[str, int, int]], untimed: list[Any]) -> dict[str, int]:
    """Log events per parser, most first, ties by the first seen in time order (events
    without time after those with, by id): the order of ``Counter.most_common`` over
    :meth:`StoreReader.events`. ``timed``: (parser, count, index of the first) of each group
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
        self._version = version

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

        The estimator's read path: one query concatenates the job's ``events.numbers`` blobs
        (:func:`event_numbers`) in time order from an index that holds them, so SQLite hands
        over one buffer that numpy reads whole; the blobs' group keys name each event's source,
        parser, timing flag and kind, resolved with one indexed look-up per distinct key. Small
        queries add the failures' classes and the events without time (for the per-parser
        counts). Both this and the object path give the same timeline (tests).

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
            dtype = np.dtype(
                [(n, "<f8") for n in ("time_s", "step", "duration_s", "persist_s")]
                + [("key", "<u8")]
            )
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
