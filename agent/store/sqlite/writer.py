"""The SQLite store: one file in WAL mode, no server; the writes of ``sql/``, the queries of
``reader.py``.

The schema is created and upgraded on open (``sql/migrate.py``). SQLite allows one writer at a
time, so the leases and locks of fleet mode are trivially this one agent's; the database's
clock is this host's.
"""

from __future__ import annotations

import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import chain
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from ckpt_advisor.agent.mounts import MOUNT_TABLE, filesystem_type, is_shared
from ckpt_advisor.agent.store.records import StoreError
from ckpt_advisor.agent.store.schema import SCHEMA_VERSION
from ckpt_advisor.agent.store.sql.migrate import upgrade
from ckpt_advisor.agent.store.sql.rows import EVENT_COLUMNS, Row, insert_sql
from ckpt_advisor.agent.store.sql.writes import SqlStore
from ckpt_advisor.agent.store.sqlite.access import explain
from ckpt_advisor.agent.store.sqlite.legacy import upgrade_to_4
from ckpt_advisor.agent.store.sqlite.reader import SqliteSql, schema_version

ROWS_PER_INSERT = 256
"""Rows per INSERT statement of a commit's events: SQLite steps a statement once for them all,
instead of once a row (CPU per event of the inserts alone on the dense log, bench/store.py:
5.2 us by one-row statements, 4.1-4.5 us by 250 to 1,800 rows a statement)."""


def _as_is(value: bytes | None) -> bytes | None:
    return value


# CPython's sqlite3 binds int, float, str and bytearray at once but takes any other value (None,
# bytes) through its adapter protocol, which fails through ``__adapt__`` and ``__conform__``
# look-ups (an AttributeError formatted and dropped per value: Modules/_sqlite/microprotocols.c):
# ~1 us of an event's row, which holds about four NULLs and the ``numbers`` BLOB (bench/store.py).
# Registered, they hit the registry instead and are bound unchanged.
sqlite3.register_adapter(type(None), _as_is)
sqlite3.register_adapter(bytes, _as_is)


class SqliteStore(SqliteSql, SqlStore):
    """A SQLite store of events, offsets, estimates, alert state and the Slack outbox.

    Thread-safe for use by the daemon's ingest loop and its scheduler thread: writes are
    serialised by a lock (SQLite allows one writer); readers in other processes (the CLI) use
    WAL snapshots and never block the daemon's writes.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        agent: str | None = None,
        mount_table: str = MOUNT_TABLE,
        on_upgrade: Callable[[int], None] | None = None,
    ) -> None:
        """Open (and create or migrate) the database at ``path`` as ``agent`` (default: the host
        name).

        ``on_upgrade(n_events)`` is called before an upgrade changes an existing store (schema
        3 -> 4 rewrites the events: about 8 s per million), e.g. to extend a start timeout.

        Raises:
            StoreError: the directory cannot be created, is on a network filesystem (SQLite's
                locks and WAL shared memory are unsafe there), the file is not a database, is
                from a newer ckpt-advisor, or cannot be written. The message names the path.
        """
        self.path = Path(path)
        SqliteSql.__init__(self, str(self.path), 0)  # the version is read (and upgraded) below
        fstype = filesystem_type(self.path, mount_table)
        if fstype is not None and is_shared(fstype):
            raise StoreError(
                f"{self.path}: on a {fstype} network filesystem, where SQLite can lose or corrupt "
                f"data; put the store on a local disk ([store] path)"
            )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot create directory: {exc.strerror}") from None
        uri = f"file:{self.path}?mode=rwc"
        engine: Engine = create_engine(
            "sqlite://",
            creator=lambda: sqlite3.connect(uri, uri=True, timeout=30, check_same_thread=False),
        )
        event.listen(engine, "connect", self._on_connect)
        self._setup(engine, agent or socket.gethostname())
        try:
            self._init_schema(on_upgrade)
        except DBAPIError as exc:
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
        if version != SCHEMA_VERSION:
            with self._lock, self.engine.begin() as tx:
                upgrade(
                    tx,
                    location=str(self.path),
                    agent=self.agent,
                    on_upgrade=on_upgrade,
                    legacy=upgrade_to_4,
                )
        self._version = SCHEMA_VERSION

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        with self.engine.connect() as conn:
            raw = conn.connection.driver_connection
            assert isinstance(raw, sqlite3.Connection)
            try:
                yield raw
            except sqlite3.DatabaseError as exc:
                raise StoreError(explain(self.path, exc, "read failed: ")) from None

    def _error(self, exc: DBAPIError, what: str) -> StoreError:
        return StoreError(explain(self.path, exc.orig, f"{what}: "))

    def _db_now_s(self, conn: Connection) -> float:
        return time.time()

    def _insert_rows(self, conn: Connection, rows: list[Row]) -> None:
        """``rows`` in INSERTs of :data:`ROWS_PER_INSERT` rows each (fewer within SQLite's
        limit on placeholders), by one ``executemany``; the rest by one of the one-row INSERT."""
        raw = conn.connection.driver_connection
        assert isinstance(raw, sqlite3.Connection)
        limit = raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // len(EVENT_COLUMNS)
        per = max(1, min(ROWS_PER_INSERT, limit))
        whole = len(rows) - len(rows) % per
        if whole:
            flat = chain.from_iterable
            conn.exec_driver_sql(
                insert_sql(per), [tuple(flat(rows[i : i + per])) for i in range(0, whole, per)]
            )
        if whole < len(rows):
            conn.exec_driver_sql(insert_sql(1), rows[whole:])

    def _upsert(self, table: Any, values: dict[str, Any], keys: list[str]) -> Any:
        stmt = sqlite_insert(table).values(**values)
        update = {k: v for k, v in values.items() if k not in keys}
        return stmt.on_conflict_do_update(index_elements=keys, set_=update)

    def _insert_new(self, table: Any, values: dict[str, Any]) -> Any:
        return sqlite_insert(table).values(**values).on_conflict_do_nothing()
