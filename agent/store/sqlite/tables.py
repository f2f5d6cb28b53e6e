"""The SQLite store's tables (SQLAlchemy Core) and its migrations to :data:`SCHEMA_VERSION`.

Kept to SQL that PostgreSQL speaks too, but for the migration helpers marked SQLite (``PRAGMA``,
a Python function registered with the connection).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    delete,
    insert,
)
from sqlalchemy.engine import Connection

from ckpt_advisor.agent.store.sqlite.schema import (
    SCHEMA_VERSION,
    UPGRADE_S_PER_MILLION_EVENTS,
    event_numbers,
)

log = logging.getLogger(__name__)

metadata = MetaData()

meta = Table(
    "meta", metadata, Column("key", String, primary_key=True), Column("value", Text, nullable=False)
)

files = Table(
    "files",
    metadata,
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

events = Table(
    "events",
    metadata,
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
    Column("numbers", LargeBinary, nullable=True),  # schema.event_numbers of the row
    # covers the estimator's read: the index alone, in time order, is read (version 4)
    Index("ix_events_job_time_numbers", "job", "time_s", "id", "numbers"),
    Index("ix_events_job_kind_time", "job", "kind", "time_s"),
)

estimates = Table(
    "estimates",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("job", String, nullable=False),
    Column("computed_at_s", Float, nullable=False),
    Column("status", String, nullable=False),
    Column("payload", Text, nullable=False),
    Index("ix_estimates_job_time", "job", "computed_at_s"),
)

alerts = Table(
    "alert_state",
    metadata,
    Column("job", String, primary_key=True),
    Column("in_drift", Integer, nullable=False),
    Column("last_sent_s", Float, nullable=True),
    Column("last_recommended_s", Float, nullable=True),
)

outbox = Table(
    "outbox",
    metadata,
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


silences = Table(
    "silences",
    metadata,
    Column("job", String, primary_key=True),
    Column("until_s", Float, nullable=False),
)


def migrate(conn: Connection, path: Path, on_upgrade: Callable[[int], None] | None) -> None:
    """Bring the schema of the store at ``path`` (empty, or any older version) to
    :data:`SCHEMA_VERSION`, in the caller's transaction. ``on_upgrade(n_events)`` is called
    before the events are rewritten (schema 3 -> 4)."""
    metadata.create_all(conn)  # new tables only: version 1 -> 2 adds ``silences``
    columns = {r[1] for r in conn.exec_driver_sql("PRAGMA table_info(files)")}
    if "finished" not in columns:  # version 2 -> 3
        conn.exec_driver_sql("ALTER TABLE files ADD COLUMN finished BOOLEAN NOT NULL DEFAULT 0")
    if "numbers" not in {r[1] for r in conn.exec_driver_sql("PRAGMA table_info(events)")}:
        n_events = int(conn.exec_driver_sql("SELECT count(*) FROM events").scalar_one())
        log.warning(
            "%s: upgrading the store to schema %d: packing %d event(s), up to %.0f s per million",
            path,
            SCHEMA_VERSION,
            n_events,
            UPGRADE_S_PER_MILLION_EVENTS,
        )
        if on_upgrade is not None:
            on_upgrade(n_events)
        _add_numbers(conn)  # version 3 -> 4
    conn.execute(delete(meta).where(meta.c.key == "schema"))
    conn.execute(insert(meta).values(key="schema", value=str(SCHEMA_VERSION)))


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
    for index in events.indexes:
        index.create(conn, checkfirst=True)
