"""The PostgreSQL store: many agents, one database (fleet mode), through SQLAlchemy's engine
(its pool) and psycopg 3, with Alembic's migrations.

:class:`PostgresReader` runs the queries of ``agent/store/queries.py`` over psycopg (the CLI's
read commands, with any role that may SELECT); :class:`PostgresStore` adds the writes of
``agent/store/sql/`` (the same SQL text as SQLite's, run on the psycopg connection the pool
lends, in a transaction of SQLAlchemy's) and migrates the schema when it first reaches the
server, under an advisory lock (one agent of a fleet migrates, the others wait).

A server that is away at start is no error: the store opens, every call raises
:class:`StoreError` until the server answers (the daemon retries with backoff, its offsets
unchanged: docs/RELIABILITY.md, scenario 31), and the schema is checked and migrated then. A
server that refuses (a wrong password, a missing database or grant) raises
:class:`~agent.store.postgres.access.StoreAccessError` at once, naming the URL without its
password and the right that is missing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import DBAPIError

from ckpt_advisor.agent.store.postgres.access import (
    GRANT_HINT,
    StoreAccessError,
    describe,
    missing_rights,
    refused,
)
from ckpt_advisor.agent.store.queries import SqlQueries
from ckpt_advisor.agent.store.records import StoreError
from ckpt_advisor.agent.store.schema import SCHEMA_VERSION, check_schema
from ckpt_advisor.agent.store.sql.migrate import stored_version, upgrade
from ckpt_advisor.agent.store.sql.rows import COPY_SQL, EVENT_COLUMNS, Row
from ckpt_advisor.agent.store.sql.writes import SqlStore
from ckpt_advisor.agent.store.url import driver_url, redact

CONNECT_TIMEOUT_S = 5
"""libpq's ``connect_timeout``: how long one attempt to reach the server may take."""
MIGRATE_LOCK = "ckpt-advisor migrate"


def make_engine(url: str, password: str | None, application: str) -> Engine:
    """An engine for ``url`` (checked, password from the environment) that tests connections
    before use (a restarted server leaves dead ones in the pool)."""
    return create_engine(
        driver_url(url, password),
        pool_pre_ping=True,
        pool_size=4,
        connect_args={"connect_timeout": CONNECT_TIMEOUT_S, "application_name": application},
    )


class PgSql(SqlQueries):
    """The queries with PostgreSQL's placeholders, rows and aggregate."""

    engine: Engine

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s")

    def _cursor(self, conn: Any) -> Any:
        from psycopg.rows import dict_row

        return conn.cursor(row_factory=dict_row)

    _CHUNK_SQL = (
        "SELECT count(*), string_agg(numbers, ''::bytea ORDER BY time_s, id) FROM (SELECT "
        "numbers, time_s, id FROM events WHERE job = ? AND time_s >= ? ORDER BY time_s, id "
        "LIMIT ? OFFSET ?) AS chunk"
    )  # a range of ix_events_job_time_numbers; the aggregate sorts only its own chunk
    chunk_rows = 1 << 14  # its sort stays within the default work_mem (4 MB)

    @contextmanager
    def _snapshot(self, conn: Any) -> Iterator[None]:
        from psycopg import pq

        if conn.info.transaction_status != pq.TransactionStatus.IDLE:
            yield  # a transaction already under way: its own isolation
            return
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        try:
            yield  # every chunk, and the failures, from the first query's snapshot
        finally:
            conn.rollback()

    def _ready(self) -> None:
        """Check (or migrate) the schema once the server first answers."""

    def close(self) -> None:
        """Release the connections (the data stays)."""
        self.engine.dispose()

    @contextmanager
    def _reading(self) -> Iterator[Any]:
        self._ready()
        with self._driver_errors("read failed"), self.engine.connect() as conn:
            yield conn.connection.driver_connection

    @contextmanager
    def _driver_errors(self, what: str) -> Iterator[None]:
        """The errors of the database inside as :class:`StoreError` (``what``: ``read
        failed``…): SQLAlchemy's, and psycopg's own on the driver connection."""
        try:
            yield
        except DBAPIError as exc:
            raise self._failure(exc, what) from None
        except StoreError:
            raise
        except Exception as exc:
            from psycopg import Error

            if isinstance(exc, Error):
                raise self._failure(exc, what) from None
            raise

    def check(self) -> str | None:
        """Why the server cannot be read now (away, refusing), or None. The server keeps its
        own pages sound (checksums, WAL): there is no file here to check."""
        try:
            with self._reading() as conn:
                conn.execute("SELECT 1")
        except StoreError as exc:
            return str(exc)
        return None

    def _failure(self, exc: BaseException, what: str) -> StoreError:
        kind = StoreAccessError if refused(exc) else StoreError
        return kind(f"{self.location}: {what}: {describe(exc)}")


class PostgresReader(PgSql):
    """A PostgreSQL store opened to read (the CLI's ``estimates``, ``events``, ``status``)."""

    def __init__(self, url: str, *, password: str | None) -> None:
        """Connect to ``url`` and check the schema.

        Raises:
            StoreError: the server cannot be reached, refuses the role, holds no ckpt-advisor
                store, or a store of another version. The message names the URL (no password).
        """
        super().__init__(redact(url), 0)
        self.engine = make_engine(url, password, "ckpt-advisor reader")
        try:
            with self.engine.connect() as conn:
                version = stored_version(conn)
        except DBAPIError as exc:
            raise self._failure(exc, "cannot connect") from None
        if version is None:
            raise StoreError(
                f"{self.location}: not a ckpt-advisor store (run `ckpt-advisor migrate`)"
            )
        check_schema(self.location, version)
        if version < SCHEMA_VERSION:
            raise StoreError(
                f"{self.location}: schema version {version}; run `ckpt-advisor migrate` "
                f"(as the owner role) to bring it to {SCHEMA_VERSION}"
            )
        self._version = version


class PostgresStore(PgSql, SqlStore):
    """A PostgreSQL store, read and written by one agent of a fleet (thread-safe)."""

    def __init__(
        self,
        url: str,
        *,
        agent: str,
        password: str | None,
        on_upgrade: Callable[[int], None] | None = None,
        migrate: bool = True,
    ) -> None:
        """Open the store at ``url`` as ``agent``; with ``migrate``, create or upgrade its
        schema when the server first answers (now, or later if it is away now).

        Raises:
            StoreAccessError: the server refuses: a wrong password, no such database or role,
                a missing grant (named, with the GRANT that fixes it), a schema this role may
                not migrate. The message names the URL without its password.
            StoreError: the store is from a newer ckpt-advisor.
        """
        PgSql.__init__(self, redact(url), 0)
        self.engine = make_engine(url, password, f"ckpt-advisor {agent}")
        self._setup(agent)
        self._on_upgrade = on_upgrade
        self._migrate = migrate
        self._schema_lock = threading.Lock()
        self._event_types: list[int] | None = None  # see _copy_types
        try:
            self._ready()
        except StoreAccessError:
            self.engine.dispose()
            raise
        except StoreError as exc:
            if "newer than this ckpt-advisor" in str(exc):
                raise
            # away: every call raises StoreError until it answers, then the schema is checked

    def _ready(self) -> None:
        if self._version == SCHEMA_VERSION:
            return
        with self._schema_lock:
            if self._version == SCHEMA_VERSION:
                return
            try:
                self._init_schema()
            except DBAPIError as exc:
                raise self._failure(exc, "cannot open the store") from None

    def _init_schema(self) -> None:
        with self.engine.begin() as conn:
            version = stored_version(conn)
            check_schema(self.location, version)
            if version != SCHEMA_VERSION:
                if not self._migrate:
                    raise StoreAccessError(
                        f"{self.location}: schema version {version}; run `ckpt-advisor "
                        f"migrate` (as the owner role) to bring it to {SCHEMA_VERSION}"
                    )
                conn.execute(
                    text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"),
                    {"k": MIGRATE_LOCK},
                )
                try:
                    upgrade(
                        conn, location=self.location, agent=self.agent, on_upgrade=self._on_upgrade
                    )
                except DBAPIError as exc:
                    if not refused(exc):
                        raise
                    raise StoreAccessError(
                        f"{self.location}: cannot create or upgrade the store's tables: "
                        f"{describe(exc)}; run `ckpt-advisor migrate` as the database's owner "
                        "role, or grant this role CREATE on the schema (docs/INSTALL.md)"
                    ) from None
        with self.engine.connect() as conn:
            missing = missing_rights(conn)
            role = conn.exec_driver_sql("SELECT current_user").scalar()
        if missing:
            raise StoreAccessError(
                f"{self.location}: role {role} lacks {', '.join(missing)}; "
                + GRANT_HINT.format(role=role)
            )
        self._version = SCHEMA_VERSION

    _row_lock = " FOR UPDATE"

    @contextmanager
    def _write(self) -> Iterator[Any]:
        self._ready()
        with self._lock, self._driver_errors("write failed"), self.engine.begin() as conn:
            yield conn.connection.driver_connection

    def _db_now_s(self, conn: Any) -> float:
        return float(conn.execute("SELECT EXTRACT(EPOCH FROM clock_timestamp())").fetchone()[0])

    def _insert_id(self, conn: Any, sql: str, params: Sequence[Any]) -> int:
        return int(self._exec(conn, f"{sql} RETURNING id", params).fetchone()["id"])

    def _insert_rows(self, conn: Any, fixed: Row, rows: list[Row]) -> None:
        """The rows through binary ``COPY ... FROM STDIN`` on the transaction's own connection:
        no SQL per row and no number turned into text (0.7 us an event of client CPU, against
        1.6 for text COPY and ~12 for ``executemany``: bench/store.py). The columns' types are
        the server's own (:meth:`_copy_types`). ``numbers`` is dumped by psycopg's C dumper of
        bytes: the one psycopg picks for a bytea column (``dbapi20.BinaryBinaryDumper``, for its
        ``Binary`` wrapper) runs Python for every row."""
        from psycopg.types.string import BytesBinaryDumper

        types = self._copy_types(conn)
        conn.adapters.register_dumper(bytes, BytesBinaryDumper)  # this connection's only
        with conn.cursor() as cur, cur.copy(COPY_SQL + " (FORMAT BINARY)") as copy:
            copy.set_types(types)
            write = copy.write_row
            for row in rows:
                write(fixed + row)

    def _copy_types(self, raw: Any) -> list[int]:
        """The type OIDs of :data:`EVENT_COLUMNS` in the server's ``events`` table (asked once:
        a binary COPY must name them)."""
        if self._event_types is None:
            found = dict(
                raw.execute(
                    "SELECT attname, atttypid FROM pg_attribute WHERE attrelid = "
                    "'events'::regclass AND attnum > 0 AND NOT attisdropped"
                ).fetchall()
            )
            self._event_types = [int(found[c]) for c in EVENT_COLUMNS]
        return self._event_types

    def _lock_key(self, conn: Any, key: str) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
