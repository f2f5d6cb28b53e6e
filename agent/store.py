"""The rolling store: with :mod:`agent.store_read`, the only modules that speak SQL.

Writes (and the schema) go through SQLAlchemy here; the read queries live in
:class:`agent.store_read.StoreReader`, which :class:`Store` extends, so that read-only commands
start without importing SQLAlchemy. SQLite in WAL mode by default (one file, no server),
through SQLAlchemy Core so that a shared PostgreSQL backend is an addition later, not a
rewrite. The schema is created and versioned here. Events and the tailer's file offsets are
committed in one transaction (:meth:`Store.commit_read`), so a crash at any moment neither loses
nor repeats a line.

Times are stored as Unix epoch seconds (UTC, REAL) and returned as aware UTC datetimes.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from operator import itemgetter
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    Engine,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    delete,
    event,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection, CursorResult
from sqlalchemy.exc import DatabaseError, OperationalError

from ckpt_advisor.agent.mounts import MOUNT_TABLE, filesystem_type, is_shared
from ckpt_advisor.agent.store_read import (
    SCHEMA_VERSION,
    EventColumns,
    OutboxItem,
    StoredEvent,
    StoreError,
    StoreReader,
    check_schema,
    event_numbers,
    schema_version,
)
from ckpt_advisor.parsers.events import Event
from ckpt_advisor.rules.model import AlertState

__all__ = [
    "SCHEMA_VERSION",
    "EventColumns",
    "FileState",
    "OutboxItem",
    "Store",
    "StoreError",
    "StoredEvent",
]

PRUNE_BATCH_ROWS = 5000
"""Retention deletes this many events per transaction, so ingestion waits at most one batch."""
UPGRADE_S_PER_MILLION_EVENTS = 30.0
"""A generous bound on the schema 3 -> 4 upgrade's time (8 s per million events measured on a
local SSD), for callers that must say how long a start may take."""

log = logging.getLogger(__name__)

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
    Column("finished", Boolean, nullable=False, default=False, server_default="0"),
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
    Column("numbers", LargeBinary, nullable=True),  # store_read.event_numbers of the row
    # covers the estimator's read: the index alone, in time order, is read (version 4)
    Index("ix_events_job_time_numbers", "job", "time_s", "id", "numbers"),
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
    Column("state", String, nullable=False),  # queued | unsure | sent | failed
    Column("attempts", Integer, nullable=False, default=0),
    Column("sent_s", Float, nullable=True),
    Column("ts", String, nullable=True),
    Column("error", Text, nullable=True),
    Index("ix_outbox_state", "state", "id"),
)


_silences = Table(
    "silences",
    _md,
    Column("job", String, primary_key=True),
    Column("until_s", Float, nullable=False),
)


@dataclass(frozen=True, slots=True)
class FileState:
    """What the tailer remembers of one file: its identity and how far it has been read.

    ``offset`` is the byte offset just after the last complete line committed; ``lineno`` the
    number of lines before it. Identity is device + inode + a hash of the first ``head_len`` bytes.
    ``finished``: the parser's pending state (a traceback waiting for its next line) was flushed
    at ``offset``, so a parser rebuilt by replaying the file must be flushed there too.
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
    finished: bool = False


def _new_id(result: CursorResult[Any]) -> int:
    key = result.inserted_primary_key
    assert key is not None  # an INSERT of one row always has one
    return int(key[0])


def _epoch(t: datetime | None) -> float | None:
    return None if t is None else t.timestamp()


class Store(StoreReader):
    """SQLite-backed store of events, offsets, estimates, alert state and the Slack outbox.

    Thread-safe for use by the daemon's ingest loop and its scheduler thread: writes are
    serialised by a lock (SQLite allows one writer); readers in other processes (the CLI) use
    WAL snapshots and never block the daemon's writes.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        readonly: bool = False,
        mount_table: str = MOUNT_TABLE,
        on_upgrade: Callable[[int], None] | None = None,
    ) -> None:
        """Open (and create or migrate) the database at ``path``.

        ``on_upgrade(n_events)`` is called before an upgrade that rewrites the events table
        (schema 3 -> 4: about 8 s per million events), e.g. to extend a start-up timeout.

        Raises:
            StoreError: the directory cannot be created, is on a network filesystem (SQLite's
                locks and WAL shared memory are unsafe there), the file is not a database, is
                from a newer ckpt-advisor, or cannot be written. The message names the path.
        """
        self.path = Path(path)
        fstype = filesystem_type(self.path, mount_table)
        if fstype is not None and is_shared(fstype):
            raise StoreError(
                f"{self.path}: on a {fstype} network filesystem, where SQLite can lose or corrupt "
                f"data; put the store on a local disk ([store] path)"
            )
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
            self._init_schema(on_upgrade)
        except (DatabaseError, OperationalError) as exc:
            raise StoreError(f"{self.path}: {exc.orig}") from None
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: {exc}") from None

    def _on_connect(self, dbapi_conn: sqlite3.Connection, _record: object) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA busy_timeout = 30000")
        if not self._readonly:
            mode = cur.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"{self.path}: cannot use WAL mode (journal_mode={mode})")
            cur.execute("PRAGMA synchronous = NORMAL")
        cur.close()

    def _init_schema(self, on_upgrade: Callable[[int], None] | None) -> None:
        with self._reading() as conn:
            version = schema_version(conn)
        check_schema(self.path, version)
        self._version = version or 0
        if version == SCHEMA_VERSION or self._readonly:
            return
        with self._lock, self.engine.begin() as conn:
            _md.create_all(conn)  # new tables only: version 1 -> 2 adds ``silences``
            columns = {r[1] for r in conn.exec_driver_sql("PRAGMA table_info(files)")}
            if "finished" not in columns:  # version 2 -> 3
                conn.exec_driver_sql(
                    "ALTER TABLE files ADD COLUMN finished BOOLEAN NOT NULL DEFAULT 0"
                )
            if "numbers" not in {r[1] for r in conn.exec_driver_sql("PRAGMA table_info(events)")}:
                n_events = int(conn.exec_driver_sql("SELECT count(*) FROM events").scalar_one())
                log.warning(
                    "%s: upgrading the store to schema %d: packing %d event(s), "
                    "up to %.0f s per million",
                    self.path,
                    SCHEMA_VERSION,
                    n_events,
                    UPGRADE_S_PER_MILLION_EVENTS,
                )
                if on_upgrade is not None:
                    on_upgrade(n_events)
                _add_numbers(conn)  # version 3 -> 4
            conn.execute(delete(_meta).where(_meta.c.key == "schema"))
            conn.execute(insert(_meta).values(key="schema", value=str(SCHEMA_VERSION)))
        self._version = SCHEMA_VERSION

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        if self._readonly:
            raise StoreError(f"{self.path}: opened read-only")
        with self._lock:
            try:
                with self.engine.begin() as conn:
                    yield conn
            except DatabaseError as exc:  # full disk, read-only file, corrupt page, locked
                raise StoreError(f"{self.path}: write failed: {exc.orig}") from None

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        with self.engine.connect() as conn:
            raw = conn.connection.driver_connection
            assert isinstance(raw, sqlite3.Connection)
            yield raw

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

    def forget_file(self, file_id: int) -> None:
        """Drop what is remembered of a file that is gone (its events stay)."""
        with self._write() as conn:
            conn.execute(delete(_files).where(_files.c.id == file_id))

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
        from_timing_file: bool | Callable[[Event], bool] = False,
        truncated: bool = False,
        finished: bool = False,
    ) -> FileState:
        """Store ``events`` read from ``file`` and its new offset in ONE transaction.

        ``file.id == 0`` means a file not seen before: it is inserted. ``from_timing_file``:
        the same for every event, or a function of the event. ``finished``: the parser was
        flushed at ``offset`` (see :class:`FileState`). Returns the stored state.
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
                "finished": finished,
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
                timed = from_timing_file
                in_order = itemgetter(*names)
                # One executemany on the driver: SQLAlchemy's per-row parameter processing
                # cost ~40 µs an event, most of a backfill's time once parsing got fast.
                conn.exec_driver_sql(
                    sql,
                    [
                        in_order(
                            _event_row(
                                file.job,
                                file.path,
                                file_id,
                                ev,
                                timed if isinstance(timed, bool) else timed(ev),
                            )
                        )
                        for ev in events
                    ],
                )
        return replace(
            file,
            id=file_id,
            offset=offset,
            lineno=lineno,
            truncations=file.truncations + (1 if truncated else 0),
            finished=finished,
        )

    # -- events ---------------------------------------------------------------------------

    def prune_events(self, older_than_s: float, *, batch_rows: int = PRUNE_BATCH_ROWS) -> int:
        """Delete events older than ``older_than_s`` (epoch seconds); returns how many.

        Deletes ``batch_rows`` at a time, each batch its own transaction, so the tailer's
        commits wait at most one batch (SQLite has one writer).
        """
        total = 0
        while True:
            with self._write() as conn:
                ids = select(_events.c.id).where(_events.c.time_s < older_than_s).limit(batch_rows)
                n = conn.execute(delete(_events).where(_events.c.id.in_(ids))).rowcount
            total += n
            if n < batch_rows:
                return total

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

    def silence(self, job: str, until_s: float) -> None:
        """Send nothing about ``job`` until ``until_s`` (epoch seconds); decisions go on."""
        with self._write() as conn:
            conn.execute(delete(_silences).where(_silences.c.job == job))
            conn.execute(insert(_silences).values(job=job, until_s=until_s))

    def silenced_until(self, job: str, now_s: float) -> float | None:
        """When the silence of ``job`` ends, or None if it is not silenced at ``now_s``."""
        with self.engine.connect() as conn:
            until = conn.execute(
                select(_silences.c.until_s).where(_silences.c.job == job)
            ).scalar_one_or_none()
        return until if until is not None and until > now_s else None

    def mark_message(
        self,
        item_id: int,
        *,
        state: str,
        now_s: float,
        ts: str | None = None,
        error: str | None = None,
    ) -> None:
        """Record the outcome of one delivery attempt (``sent``, ``failed``, ``unsure`` or still
        ``queued``)."""
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
    "finished",
)


def _add_numbers(conn: Connection) -> None:
    """Schema 3 -> 4: fill ``events.numbers`` and swap the (job, time_s) index for the one
    that covers it (about 8 s per million events, once)."""
    raw = conn.connection.driver_connection
    assert isinstance(raw, sqlite3.Connection)
    raw.create_function("ckpt_event_numbers", 8, event_numbers, deterministic=True)
    conn.exec_driver_sql("ALTER TABLE events ADD COLUMN numbers BLOB")
    conn.exec_driver_sql(
        "UPDATE events SET numbers = ckpt_event_numbers(time_s, step, duration_s, persist_s, "
        "source, parser, from_timing_file, kind)"
    )
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_events_job_time")
    for index in _events.indexes:
        index.create(conn, checkfirst=True)


def _event_row(
    job: str, source: str, file_id: int, ev: Event, from_timing_file: bool
) -> dict[str, Any]:
    time_s = _epoch(ev.time)
    kind = str(ev.kind)
    timing = int(from_timing_file)
    return {
        "job": job,
        "file_id": file_id,
        "source": source,
        "line": ev.line,
        "kind": kind,
        "time_s": time_s,
        "time_estimated": int(ev.time_estimated),
        "step": ev.step,
        "duration_s": ev.duration_s,
        "failure_class": ev.failure_class,
        "planned": int(ev.planned),
        "persist_s": ev.persist_s,
        "detail": ev.detail,
        "parser": ev.parser,
        "from_timing_file": timing,
        "numbers": event_numbers(
            time_s, ev.step, ev.duration_s, ev.persist_s, source, ev.parser, timing, kind
        ),
    }
