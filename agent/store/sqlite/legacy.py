"""The SQLite store's upgrade from schema versions 1-3 to 4, from before Alembic.

Kept as it was (SQLite's own ``PRAGMA`` and a Python function registered with the connection);
``agent/store/sql/migrate.py`` runs it, then Alembic takes the store from version 4 on.
"""

from __future__ import annotations

import logging
import sqlite3

from sqlalchemy.engine import Connection

from ckpt_advisor.agent.store.schema import UPGRADE_S_PER_MILLION_EVENTS, event_numbers
from ckpt_advisor.agent.store.sql import tables as t

log = logging.getLogger(__name__)

IDENTITY_INDEX = "CREATE INDEX IF NOT EXISTS ix_files_identity ON files (job, dev, ino)"
"""The files index of versions 1-4 (version 5 makes it per agent)."""


def upgrade_to_4(conn: Connection, n_events: int) -> None:
    """Bring a SQLite store of version 1, 2 or 3 to version 4 in the caller's transaction."""
    t.silences.create(conn, checkfirst=True)  # version 1 -> 2
    conn.exec_driver_sql(IDENTITY_INDEX)
    columns = {r[1] for r in conn.exec_driver_sql("PRAGMA table_info(files)")}
    if "finished" not in columns:  # version 2 -> 3
        conn.exec_driver_sql("ALTER TABLE files ADD COLUMN finished BOOLEAN NOT NULL DEFAULT 0")
    if "numbers" not in {r[1] for r in conn.exec_driver_sql("PRAGMA table_info(events)")}:
        log.warning(
            "packing %d event(s) for schema 4, up to %.0f s per million",
            n_events,
            UPGRADE_S_PER_MILLION_EVENTS,
        )
        _add_numbers(conn)  # version 3 -> 4


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
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_events_job_time_numbers ON events (job, time_s, id, numbers)"
    )
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_events_job_kind_time ON events (job, kind, time_s)"
    )
