"""The rolling store: the only module that speaks SQL.

SQLite in WAL mode by default (one file, no server), through SQLAlchemy Core so that a shared
PostgreSQL backend is an addition later, not a rewrite. The schema is created and versioned here.
Events and the tailer's file offsets are committed in one transaction (:meth:`Store.commit_read`),
so a crash at any moment neither loses nor repeats a line.

Times are stored as Unix epoch seconds (UTC, REAL) and returned as aware UTC datetimes.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import (
    Column,
    Engine,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection, CursorResult
from sqlalchemy.exc import DatabaseError, OperationalError

from parsers.events import Event, EventKind
from rules.model import AlertState

SCHEMA_VERSION = 1

_md = MetaData()

_meta = Table(
    "meta", _md, Column("key", String, primary_key=True), Column("value", Text, nullable=False)
)

_files = Table(
    "files",
    _md,
    Column("id", Integer, primary_key=True),
    Column("job", String, nullable=False),
    Column("path", Text, nullable=False),
    Column("dev", Integer, nullable=False),
    Column("ino", Integer, nullable=False),
    Column("head_hash", String, nullable=False),
    Column("head_len", Integer, nullable=False),
    Column("offset", Integer, nullable=False),
    Column("lineno", Integer, nullable=False),
    Column("truncations", Integer, nullable=False, default=0),
    Column("updated_s", Float, nullable=False),
    Index("ix_files_identity", "job", "dev", "ino"),
)

_events = Table(
    "events",
    _md,
    Column("id", Integer, primary_key=True),
    Column("job", String, nullable=False),
    Column("file_id", Integer, nullable=True),
    Column("source", Text, nullable=False),
    Column("line", Integer, nullable=False),
    Column("kind", String, nullable=False),
    Column("time_s", Float, nullable=True),
    Column("time_estimated", Integer, nullable=False, default=0),
    Column("step", Integer, nullable=True),
    Column("duration_s", Float, nullable=True),
    Column("failure_class", String, nullable=True),
    Column("planned", Integer, nullable=False, default=0),
    Column("persist_s", Float, nullable=True),
    Column("detail", Text, nullable=True),
    Column("parser", String, nullable=False),
    Column("from_timing_file", Integer, nullable=False, default=0),
    Index("ix_events_job_time", "job", "time_s"),
    Index("ix_events_job_kind_time", "job", "kind", "time_s"),
)

_estimates = Table(
    "estimates",
    _md,
    Column("id", Integer, primary_key=True),
    Column("job", String, nullable=False),
    Column("computed_at_s", Float, nullable=False),
    Column("status", String, nullable=False),
    Column("payload", Text, nullable=False),
    Index("ix_estimates_job_time", "job", "computed_at_s"),
)

_alerts = Table(
    "alert_state",
    _md,
    Column("job", String, primary_key=True),
    Column("in_drift", Integer, nullable=False),
    Column("last_sent_s", Float, nullable=True),
    Column("last_recommended_s", Float, nullable=True),
)

_outbox = Table(
    "outbox",
    _md,
    Column("id", Integer, primary_key=True),
    Column("job", String, nullable=False),
    Column("created_s", Float, nullable=False),
    Column("action", String, nullable=False),
    Column("payload", Text, nullable=False),
    Column("state", String, nullable=False),  # queued | sent | failed
    Column("attempts", Integer, nullable=False, default=0),
    Column("sent_s", Float, nullable=True),
    Column("ts", String, nullable=True),
    Column("error", Text, nullable=True),
    Index("ix_outbox_state", "state", "id"),
)


class StoreError(Exception):
    """The store cannot be opened or written; the message names the database path."""


@dataclass(frozen=True, slots=True)
class FileState:
    """What the tailer remembers of one file: its identity and how far it has been read.

    ``offset`` is the byte offset just after the last complete line committed; ``lineno`` the
    number of lines before it. Identity is device + inode + a hash of the first ``head_len`` bytes.
    """

    id: int
    job: str
    path: str
    dev: int
    ino: int
    head_hash: str
    head_len: int
    offset: int
    lineno: int
    truncations: int


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


_COLUMNS_DTYPE = np.dtype(
    [("time_s", "f8"), ("code", "i8"), ("step", "f8"), ("duration_s", "f8"), ("persist_s", "f8")]
)


def _unknown_as_nan(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    values[values == np.inf] = np.nan  # NULL comes back as +inf (1e999): no NaN in SQLite
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


def _new_id(result: CursorResult[Any]) -> int:
    key = result.inserted_primary_key
    assert key is not None  # an INSERT of one row always has one
    return int(key[0])


def _epoch(t: datetime | None) -> float | None:
    return None if t is None else t.timestamp()


def _dt(s: float | None) -> datetime | None:
    return None if s is None else datetime.fromtimestamp(s, UTC)


class Store:
    """SQLite-backed store of events, offsets, estimates, alert state and the Slack outbox.

    Thread-safe for use by the daemon's ingest loop and its scheduler thread: writes are
    serialised by a lock (SQLite allows one writer); readers in other processes (the CLI) use
    WAL snapshots and never block the daemon's writes.
    """

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        """Open (and create or migrate) the database at ``path``.

        Raises:
            StoreError: the directory cannot be created, the file is not a database, is from a
                newer ckpt-advisor, or cannot be written. The message names the path.
        """
        self.path = Path(path)
        self._lock = threading.RLock()
        if not readonly:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"{self.path}: cannot create directory: {exc.strerror}") from None
        elif not self.path.exists():
            raise StoreError(f"{self.path}: no database here (has the daemon or ingest run?)")
        uri = f"file:{self.path}?mode={'ro' if readonly else 'rwc'}"
        self.engine: Engine = create_engine(
            "sqlite://",
            creator=lambda: sqlite3.connect(uri, uri=True, timeout=30, check_same_thread=False),
        )
        event.listen(self.engine, "connect", self._on_connect)
        self._readonly = readonly
        compiled = insert(_events).values({c.name: None for c in _events.c if c.name != "id"})
        compiled_sql = compiled.compile(dialect=self.engine.dialect)
        self._event_insert = (str(compiled_sql), tuple(compiled_sql.positiontup or ()))
        """The events INSERT in the driver's own (positional) parameter style, and the column
        order of its parameters."""
        try:
            self._init_schema()
        except (DatabaseError, OperationalError) as exc:
            raise StoreError(f"{self.path}: {exc.orig}") from None

    def _on_connect(self, dbapi_conn: sqlite3.Connection, _record: object) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA busy_timeout = 30000")
        if not self._readonly:
            mode = cur.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"{self.path}: cannot use WAL mode (journal_mode={mode})")
            cur.execute("PRAGMA synchronous = NORMAL")
        cur.close()

    def _init_schema(self) -> None:
        with self.engine.connect() as conn:
            has_meta = conn.exec_driver_sql(
                "SELECT name FROM sqlite_master WHERE type='table' AND name='meta'"
            ).first()
            version = None
            if has_meta:
                row = conn.execute(select(_meta.c.value).where(_meta.c.key == "schema")).first()
                version = int(row[0]) if row else None
        if version is not None and version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: schema version {version} is newer than this ckpt-advisor "
                f"understands ({SCHEMA_VERSION}); upgrade ckpt-advisor"
            )
        if version == SCHEMA_VERSION or self._readonly:
            return
        with self._lock, self.engine.begin() as conn:
            _md.create_all(conn)
            conn.execute(insert(_meta).values(key="schema", value=str(SCHEMA_VERSION)))

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        if self._readonly:
            raise StoreError(f"{self.path}: opened read-only")
        with self._lock:
            try:
                with self.engine.begin() as conn:
                    yield conn
            except OperationalError as exc:
                raise StoreError(f"{self.path}: write failed: {exc.orig}") from None

    def close(self) -> None:
        """Release connections (the file stays)."""
        self.engine.dispose()

    # -- tailer state ---------------------------------------------------------------------

    def find_files(self, job: str, dev: int, ino: int) -> list[FileState]:
        """Remembered files of ``job`` with this device and inode (the caller checks the head)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(_files)
                .where(_files.c.job == job, _files.c.dev == dev, _files.c.ino == ino)
                .order_by(_files.c.updated_s.desc())
            )
            return [FileState(**{k: r._mapping[k] for k in _FILE_KEYS}) for r in rows]

    def files(self, job: str | None = None) -> list[FileState]:
        """Every remembered file (optionally of one job), newest first."""
        q = select(_files).order_by(_files.c.updated_s.desc())
        if job is not None:
            q = q.where(_files.c.job == job)
        with self.engine.connect() as conn:
            return [FileState(**{k: r._mapping[k] for k in _FILE_KEYS}) for r in conn.execute(q)]

    def commit_read(
        self,
        file: FileState,
        *,
        offset: int,
        lineno: int,
        events: Sequence[Event],
        now_s: float,
        from_timing_file: bool = False,
        truncated: bool = False,
    ) -> FileState:
        """Store ``events`` read from ``file`` and its new offset in ONE transaction.

        ``file.id == 0`` means a file not seen before: it is inserted. Returns the stored state.
        """
        with self._write() as conn:
            values = {
                "offset": offset,
                "lineno": lineno,
                "updated_s": now_s,
                "path": file.path,
                "head_hash": file.head_hash,
                "head_len": file.head_len,
                "truncations": file.truncations + (1 if truncated else 0),
            }
            file_id = file.id
            if file_id == 0:
                file_id = _new_id(
                    conn.execute(
                        insert(_files).values(job=file.job, dev=file.dev, ino=file.ino, **values)
                    )
                )
            else:
                conn.execute(update(_files).where(_files.c.id == file_id).values(**values))
            if events:
                sql, names = self._event_insert
                rows = [
                    _event_row(file.job, file.path, file_id, ev, from_timing_file) for ev in events
                ]
                # One executemany on the driver: SQLAlchemy's per-row parameter processing
                # cost ~40 µs an event, most of a backfill's time once parsing got fast.
                conn.exec_driver_sql(sql, [tuple(row[n] for n in names) for row in rows])
        return replace(
            file,
            id=file_id,
            offset=offset,
            lineno=lineno,
            truncations=file.truncations + (1 if truncated else 0),
        )

    # -- events ---------------------------------------------------------------------------

    def events(
        self,
        *,
        job: str | None = None,
        kinds: Iterable[str] | None = None,
        since_s: float | None = None,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        """Stored events in time order (events without time last), filtered as asked."""
        q = select(_events)
        if job is not None:
            q = q.where(_events.c.job == job)
        if kinds is not None:
            q = q.where(_events.c.kind.in_(list(kinds)))
        if since_s is not None:
            q = q.where(_events.c.time_s >= since_s)
        q = q.order_by(_events.c.time_s.is_(None), _events.c.time_s, _events.c.id)
        if limit is not None:
            q = q.limit(limit)
        with self.engine.connect() as conn:
            return [_stored_event(r._mapping) for r in conn.execute(q)]

    def event_columns(self, job: str, kinds: Sequence[str]) -> EventColumns:
        """The job's events of ``kinds`` that have a time, as arrays (:class:`EventColumns`).

        The estimator's read path: one query fetches five numbers a row straight into numpy
        (a :class:`StoredEvent` per row costs ~70 µs through SQLAlchemy; this ~2 µs); the
        failures' classes and the per-source and per-parser facts come from small queries.
        """
        kinds = tuple(kinds)
        marks = ",".join("?" * len(kinds))
        where = f"job = ? AND kind IN ({marks})"
        params = (job, *kinds)
        timed = f"{where} AND time_s IS NOT NULL"
        order = "ORDER BY time_s, id"
        with self.engine.connect() as conn:
            raw = conn.connection.driver_connection
            assert isinstance(raw, sqlite3.Connection)
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
                _COLUMNS_DTYPE,
            )
            failures = raw.execute(
                f"SELECT failure_class, planned FROM events WHERE {timed} AND kind = 'failure' "
                + order,
                params,
            ).fetchall()
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
        with self.engine.connect() as conn:
            names = {r[0] for r in conn.execute(select(_events.c.job).distinct())}
            names |= {r[0] for r in conn.execute(select(_estimates.c.job).distinct())}
        return sorted(names)

    def count_events(self, job: str | None = None) -> int:
        """How many events are stored (for one job or all)."""
        q = select(func.count()).select_from(_events)
        if job is not None:
            q = q.where(_events.c.job == job)
        with self.engine.connect() as conn:
            return int(conn.execute(q).scalar_one())

    def prune_events(self, older_than_s: float) -> int:
        """Delete events older than ``older_than_s`` (epoch seconds); returns how many."""
        with self._write() as conn:
            return conn.execute(delete(_events).where(_events.c.time_s < older_than_s)).rowcount

    # -- estimates ------------------------------------------------------------------------

    def save_estimate(
        self, job: str, computed_at_s: float, status: str, payload: dict[str, Any]
    ) -> None:
        """Append one estimate (its ``estimates --json`` object) to the job's history."""
        with self._write() as conn:
            conn.execute(
                insert(_estimates).values(
                    job=job,
                    computed_at_s=computed_at_s,
                    status=status,
                    payload=json.dumps(payload, sort_keys=True),
                )
            )

    def estimate_history(
        self, *, job: str | None = None, since_s: float | None = None, latest_only: bool = False
    ) -> list[dict[str, Any]]:
        """Stored estimates (JSON objects), oldest first; ``latest_only``: newest per job."""
        q = select(_estimates.c.job, _estimates.c.computed_at_s, _estimates.c.payload)
        if job is not None:
            q = q.where(_estimates.c.job == job)
        if since_s is not None:
            q = q.where(_estimates.c.computed_at_s >= since_s)
        if latest_only:
            newest = (
                select(_estimates.c.job, func.max(_estimates.c.id).label("id"))
                .group_by(_estimates.c.job)
                .subquery()
            )
            q = q.where(_estimates.c.id.in_(select(newest.c.id)))
        q = q.order_by(_estimates.c.job, _estimates.c.id)
        with self.engine.connect() as conn:
            return [json.loads(r.payload) for r in conn.execute(q)]

    # -- alerts and outbox ----------------------------------------------------------------

    def alert_state(self, job: str) -> AlertState:
        """What was last told about ``job`` (the default state when nothing was)."""
        with self.engine.connect() as conn:
            row = conn.execute(select(_alerts).where(_alerts.c.job == job)).first()
        if row is None:
            return AlertState()
        return AlertState(bool(row.in_drift), row.last_sent_s, row.last_recommended_s)

    def record_decision(
        self,
        job: str,
        state: AlertState,
        *,
        message: dict[str, Any] | None,
        action: str,
        now_s: float,
    ) -> int | None:
        """Persist the new alert state and, in the same transaction, queue ``message``.

        Returns the outbox id of the queued message, or None when there is none. Writing the
        message before sending is what makes delivery exactly-once across crashes.
        """
        with self._write() as conn:
            conn.execute(delete(_alerts).where(_alerts.c.job == job))
            conn.execute(
                insert(_alerts).values(
                    job=job,
                    in_drift=int(state.in_drift),
                    last_sent_s=state.last_sent_s,
                    last_recommended_s=state.last_recommended_s,
                )
            )
            if message is None:
                return None
            return _new_id(
                conn.execute(
                    insert(_outbox).values(
                        job=job,
                        created_s=now_s,
                        action=action,
                        payload=json.dumps(message),
                        state="queued",
                        attempts=0,
                    )
                )
            )

    def queued_messages(self) -> list[OutboxItem]:
        """Messages not yet delivered, in the order they were queued."""
        q = select(_outbox).where(_outbox.c.state == "queued").order_by(_outbox.c.id)
        with self.engine.connect() as conn:
            return [
                OutboxItem(
                    id=r.id,
                    job=r.job,
                    created_s=r.created_s,
                    action=r.action,
                    payload=json.loads(r.payload),
                    attempts=r.attempts,
                )
                for r in conn.execute(q)
            ]

    def mark_message(
        self,
        item_id: int,
        *,
        state: str,
        now_s: float,
        ts: str | None = None,
        error: str | None = None,
    ) -> None:
        """Record the outcome of one delivery attempt (``sent``, ``failed`` or still ``queued``)."""
        with self._write() as conn:
            conn.execute(
                update(_outbox)
                .where(_outbox.c.id == item_id)
                .values(
                    state=state,
                    attempts=_outbox.c.attempts + 1,
                    sent_s=now_s if state == "sent" else None,
                    ts=ts,
                    error=error,
                )
            )

    def messages(self, job: str | None = None) -> list[dict[str, Any]]:
        """Every outbox record (for the CLI and tests), oldest first."""
        q = select(_outbox).order_by(_outbox.c.id)
        if job is not None:
            q = q.where(_outbox.c.job == job)
        with self.engine.connect() as conn:
            return [{**dict(r._mapping), "payload": json.loads(r.payload)} for r in conn.execute(q)]


_FILE_KEYS = (
    "id",
    "job",
    "path",
    "dev",
    "ino",
    "head_hash",
    "head_len",
    "offset",
    "lineno",
    "truncations",
)


def _event_row(
    job: str, source: str, file_id: int, ev: Event, from_timing_file: bool
) -> dict[str, Any]:
    return {
        "job": job,
        "file_id": file_id,
        "source": source,
        "line": ev.line,
        "kind": str(ev.kind),
        "time_s": _epoch(ev.time),
        "time_estimated": int(ev.time_estimated),
        "step": ev.step,
        "duration_s": ev.duration_s,
        "failure_class": ev.failure_class,
        "planned": int(ev.planned),
        "persist_s": ev.persist_s,
        "detail": ev.detail,
        "parser": ev.parser,
        "from_timing_file": int(from_timing_file),
    }


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
