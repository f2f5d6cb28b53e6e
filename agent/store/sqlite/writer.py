"""The SQLite store's writes, through SQLAlchemy Core; the queries come from ``reader.py``.

SQLite in WAL mode (one file, no server). Events and the tailer's file offsets are committed in
one transaction (:meth:`SqliteStore.commit_read`), so a crash at any moment neither loses nor
repeats a line. The schema is created and upgraded on open (``tables.migrate``).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from operator import itemgetter
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, delete, event, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DatabaseError, OperationalError

from ckpt_advisor.agent.mounts import MOUNT_TABLE, filesystem_type, is_shared
from ckpt_advisor.agent.store.records import FileState, StoreError
from ckpt_advisor.agent.store.sqlite import tables as t
from ckpt_advisor.agent.store.sqlite.access import explain
from ckpt_advisor.agent.store.sqlite.outbox import OutboxTables, new_id
from ckpt_advisor.agent.store.sqlite.reader import SqliteQueries
from ckpt_advisor.agent.store.sqlite.schema import (
    SCHEMA_VERSION,
    check_schema,
    event_numbers,
    schema_version,
)
from ckpt_advisor.parsers.events import Event

PRUNE_BATCH_ROWS = 5000
"""Retention deletes this many events per transaction, so ingestion waits at most one batch."""


def _epoch(when: datetime | None) -> float | None:
    return None if when is None else when.timestamp()


class SqliteStore(SqliteQueries, OutboxTables):
    """A SQLite store of events, offsets, estimates, alert state and the Slack outbox.

    Thread-safe for use by the daemon's ingest loop and its scheduler thread: writes are
    serialised by a lock (SQLite allows one writer); readers in other processes (the CLI) use
    WAL snapshots and never block the daemon's writes. The alert state, outbox and silences
    are :class:`~agent.store.sqlite.outbox.OutboxTables`; the queries
    :class:`~agent.store.sqlite.reader.SqliteQueries`.
    """

    def __init__(
        self,
        path: str | Path,
        *,
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
        db = Path(path)
        super().__init__(db, 0)  # the version is read (and upgraded) below
        fstype = filesystem_type(self.path, mount_table)
        if fstype is not None and is_shared(fstype):
            raise StoreError(
                f"{self.path}: on a {fstype} network filesystem, where SQLite can lose or corrupt "
                f"data; put the store on a local disk ([store] path)"
            )
        self._lock = threading.RLock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot create directory: {exc.strerror}") from None
        uri = f"file:{self.path}?mode=rwc"
        self.engine: Engine = create_engine(
            "sqlite://",
            creator=lambda: sqlite3.connect(uri, uri=True, timeout=30, check_same_thread=False),
        )
        event.listen(self.engine, "connect", self._on_connect)
        compiled = insert(t.events).values({c.name: None for c in t.events.c if c.name != "id"})
        compiled_sql = compiled.compile(dialect=self.engine.dialect)
        self._event_insert = (str(compiled_sql), tuple(compiled_sql.positiontup or ()))
        """The events INSERT in the driver's own (positional) parameter style, and the column
        order of its parameters."""
        try:
            self._init_schema(on_upgrade)
        except (DatabaseError, OperationalError) as exc:
            raise StoreError(explain(self.path, exc.orig)) from None
        except sqlite3.Error as exc:
            raise StoreError(explain(self.path, exc)) from None

    def _on_connect(self, dbapi_conn: sqlite3.Connection, _record: object) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA busy_timeout = 30000")
        mode = cur.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"{self.path}: cannot use WAL mode (journal_mode={mode})")
        cur.execute("PRAGMA synchronous = NORMAL")
        cur.close()

    def _init_schema(self, on_upgrade: Callable[[int], None] | None) -> None:
        with self._reading() as conn:
            version = schema_version(conn)
        check_schema(self.path, version)
        if version != SCHEMA_VERSION:
            with self._lock, self.engine.begin() as tx:
                t.migrate(tx, self.path, on_upgrade)
        self._version = SCHEMA_VERSION

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self._lock:
            try:
                with self.engine.begin() as conn:
                    yield conn
            except DatabaseError as exc:  # full disk, read-only file, corrupt page, locked
                raise StoreError(explain(self.path, exc.orig, "write failed: ")) from None

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
                select(t.files)
                .where(t.files.c.job == job, t.files.c.dev == dev, t.files.c.ino == ino)
                .order_by(t.files.c.updated_s.desc())
            )
            return [FileState(**{k: r._mapping[k] for k in _FILE_KEYS}) for r in rows]

    def forget_file(self, file_id: int) -> None:
        """Drop what is remembered of a file that is gone (its events stay)."""
        with self._write() as conn:
            conn.execute(delete(t.files).where(t.files.c.id == file_id))

    def files(self, job: str | None = None) -> list[FileState]:
        """Every remembered file (optionally of one job), newest first."""
        q = select(t.files).order_by(t.files.c.updated_s.desc())
        if job is not None:
            q = q.where(t.files.c.job == job)
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
                file_id = new_id(
                    conn.execute(
                        insert(t.files).values(job=file.job, dev=file.dev, ino=file.ino, **values)
                    )
                )
            else:
                conn.execute(update(t.files).where(t.files.c.id == file_id).values(**values))
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
                ids = (
                    select(t.events.c.id).where(t.events.c.time_s < older_than_s).limit(batch_rows)
                )
                n = conn.execute(delete(t.events).where(t.events.c.id.in_(ids))).rowcount
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
                insert(t.estimates).values(
                    job=job,
                    computed_at_s=computed_at_s,
                    status=status,
                    payload=json.dumps(payload, sort_keys=True),
                )
            )


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
