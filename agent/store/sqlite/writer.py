"""The SQLite store: one file in WAL mode, no server; the writes of ``sql/``, the queries of
``reader.py``, over the standard library's sqlite3 alone.

A new store is created from ``ddl.py``'s text and an up-to-date one just opened, neither
importing SQLAlchemy (about 0.4 s of ``ingest``'s start-up, issue 15); only an older store's
upgrade imports it, and Alembic (``sql/migrate.py``, on a connection of its own). SQLite allows
one writer at a time, so the leases and locks of fleet mode are trivially this one agent's; the
database's clock is this host's.
"""

from __future__ import annotations

import math
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from itertools import chain
from pathlib import Path
from typing import Any, Literal

from ckpt_advisor.agent.mounts import MOUNT_TABLE, filesystem_type, is_shared
from ckpt_advisor.agent.store.records import StoreError
from ckpt_advisor.agent.store.schema import SCHEMA_VERSION, check_schema
from ckpt_advisor.agent.store.sql.rows import ROW_COLUMNS, Row, insert_sql
from ckpt_advisor.agent.store.sql.writes import SqlStore
from ckpt_advisor.agent.store.sqlite.access import explain
from ckpt_advisor.agent.store.sqlite.ddl import create_store
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
# registered, they hit the registry instead and are bound unchanged (~1.3k instructions a value
# still: an event's row holds neither, sql/rows.py).
sqlite3.register_adapter(type(None), _as_is)
sqlite3.register_adapter(bytes, _as_is)


class SqliteStore(SqliteSql, SqlStore):
    """A SQLite store of events, offsets, estimates, alert state and the Slack outbox.

    Thread-safe for use by the daemon's ingest loop and its scheduler thread: writes go through
    one connection, serialised by a lock (SQLite allows one writer), each in a ``BEGIN
    IMMEDIATE`` transaction; reads take a connection of their own from a small pool (a thread
    that reads while another writes sees the last commit, never a write half done). Readers in
    other processes (the CLI) use WAL snapshots and never block the daemon's writes.
    """

    one_agent = True  # its lock file (agent/store/lock.py) lets one reader of logs in
    _null = math.nan  # sqlite3 binds NaN as NULL and a bytearray as a BLOB at once, where
    _blob = bytearray  # None and bytes take its adapter protocol (sql/rows.py)

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
        self._uri = f"file:{self.path}?mode=rwc"
        self._setup(agent or socket.gethostname())
        self._idle: list[sqlite3.Connection] = []  # read connections not in use
        try:
            self._conn = self._connect()
            try:
                self._init_schema(on_upgrade)
            except BaseException:
                self._conn.close()
                raise
        except sqlite3.Error as exc:
            raise StoreError(explain(self.path, exc)) from None

    def _connect(self, isolation_level: Literal["DEFERRED"] | None = None) -> sqlite3.Connection:
        """A new connection to the store, in WAL mode, usable from any thread (its user
        serialises). ``isolation_level=None``: sqlite3 begins no transaction of its own (ours
        are ``BEGIN IMMEDIATE``, said by :meth:`_transaction`); ``"DEFERRED"``: it begins one
        before a change, as SQLAlchemy's pysqlite dialect expects.

        Raises:
            StoreError: the file cannot use WAL mode.
            sqlite3.Error: it cannot be opened.
        """
        conn = sqlite3.connect(
            self._uri,
            uri=True,
            timeout=30,
            isolation_level=isolation_level,
            check_same_thread=False,
        )
        try:
            conn.execute("PRAGMA busy_timeout = 30000")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"{self.path}: cannot use WAL mode (journal_mode={mode})")
            conn.execute("PRAGMA synchronous = NORMAL")
        except BaseException:
            conn.close()
            raise
        return conn

    def _init_schema(self, on_upgrade: Callable[[int], None] | None) -> None:
        version = schema_version(self._conn)
        check_schema(self.path, version)
        if version is None:
            with self._lock, self._transaction() as conn:
                version = schema_version(conn)  # another process may have made it meanwhile
                if version is None:
                    create_store(conn)
                    version = SCHEMA_VERSION
        if version != SCHEMA_VERSION:
            self._upgrade(on_upgrade)
        self._version = SCHEMA_VERSION

    def _upgrade(self, on_upgrade: Callable[[int], None] | None) -> None:
        """Bring an older store to :data:`SCHEMA_VERSION` by ``sql/migrate.py`` (SQLAlchemy
        and Alembic, imported only here) on a connection of its own, as sqlite3 makes it by
        default (the one SQLAlchemy's pysqlite dialect expects).

        Raises:
            StoreError: the store cannot be upgraded (the message names the file).
        """
        from sqlalchemy import create_engine
        from sqlalchemy.exc import DBAPIError
        from sqlalchemy.pool import NullPool

        from ckpt_advisor.agent.store.sql.migrate import upgrade
        from ckpt_advisor.agent.store.sqlite.legacy import upgrade_to_4

        engine = create_engine(
            "sqlite://", creator=lambda: self._connect("DEFERRED"), poolclass=NullPool
        )
        try:
            with self._lock, engine.begin() as tx:
                upgrade(
                    tx,
                    location=str(self.path),
                    agent=self.agent,
                    on_upgrade=on_upgrade,
                    legacy=upgrade_to_4,
                )
        except DBAPIError as exc:
            raise StoreError(explain(self.path, exc.orig)) from None
        finally:
            engine.dispose()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """The write connection in a ``BEGIN IMMEDIATE`` transaction (the write lock taken at
        once, waiting up to the busy timeout for another process's): committed when the block
        ends, rolled back when it raises (or the commit fails: a full disk). The caller holds
        the lock."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                with suppress(sqlite3.Error):  # the error that got here is the one to tell
                    conn.execute("ROLLBACK")
            raise

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                with self._transaction() as conn:
                    yield conn
            except sqlite3.Error as exc:  # full disk, read-only file, damaged page
                raise StoreError(explain(self.path, exc, "write failed: ")) from None

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        try:
            conn = self._idle.pop()  # list.pop and append are atomic: no lock needed
        except IndexError:
            conn = None
        try:
            if conn is None:
                conn = self._connect()
            yield conn
        except sqlite3.DatabaseError as exc:
            raise StoreError(explain(self.path, exc, "read failed: ")) from None
        finally:
            if conn is not None:
                if conn.in_transaction:
                    with suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                self._idle.append(conn)

    def close(self) -> None:
        """Release the connections (the data stays)."""
        while self._idle:
            self._idle.pop().close()
        self._conn.close()

    def _db_now_s(self, conn: Any) -> float:
        return time.time()

    def _insert_id(self, conn: Any, sql: str, params: Sequence[Any]) -> int:
        # sqlite3's lastrowid rather than RETURNING: SQLite 3.24 (RHEL 8's) has no RETURNING
        return int(self._exec(conn, sql, params).lastrowid)

    def _insert_rows(self, conn: sqlite3.Connection, fixed: Row, rows: list[Row]) -> None:
        """``rows`` in INSERTs of :data:`ROWS_PER_INSERT` rows each (fewer within SQLite's
        limit on placeholders), by one ``executemany``; the rest by one of the one-row INSERT.
        Each INSERT binds ``fixed`` once for all its rows (``insert_sql``'s numbered
        placeholders)."""
        limit = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) - len(fixed)
        per = max(1, min(ROWS_PER_INSERT, limit // len(ROW_COLUMNS)))
        whole = len(rows) - len(rows) % per
        if whole:
            flat = chain.from_iterable
            conn.executemany(
                insert_sql(per),
                [fixed + tuple(flat(rows[i : i + per])) for i in range(0, whole, per)],
            )
        if whole < len(rows):
            conn.executemany(insert_sql(1), [fixed + row for row in rows[whole:]])
