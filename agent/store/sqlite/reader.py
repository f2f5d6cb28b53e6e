"""The SQLite side of the queries, and the read-only store of the CLI (standard library only).

:class:`SqliteSql` is :class:`~agent.store.queries.SqlQueries` with what only SQLite says: the
BLOB ``group_concat`` of the estimator's read (a chunk at a time, in one read transaction),
the ``INDEXED BY`` hints, rows by name through
``sqlite3.Row``. :class:`SqliteReader` opens a store read-only (a WAL snapshot: it never blocks
the daemon's writes) with sqlite3 alone, so ``estimates``, ``events`` and ``status`` start
without SQLAlchemy.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ckpt_advisor.agent.store.queries import SqlQueries
from ckpt_advisor.agent.store.records import NoStoreHere, StoreError
from ckpt_advisor.agent.store.schema import check_schema
from ckpt_advisor.agent.store.sqlite.access import CORRUPT_ADVICE, explain, open_read_only


def schema_version(conn: sqlite3.Connection) -> int | None:
    """The store's schema version, or None in a database without ckpt-advisor's tables."""
    has_meta = conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name='meta'"
    ).fetchone()
    if not has_meta:
        return None
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    return int(row[0]) if row else None


class SqliteSql(SqlQueries):
    """The queries with SQLite's own SQL where it is faster (see the module docstring)."""

    path: Path

    def _cursor(self, conn: sqlite3.Connection) -> sqlite3.Cursor:
        cur = conn.cursor()
        cur.row_factory = sqlite3.Row
        return cur

    @contextmanager
    def _snapshot(self, conn: sqlite3.Connection) -> Iterator[None]:
        if conn.in_transaction:
            yield
            return
        conn.execute("BEGIN")  # a read transaction: every query sees one WAL snapshot
        try:
            yield
        finally:
            conn.execute("COMMIT")

    _CHUNK_SQL = (
        "SELECT count(*), CAST(group_concat(numbers, '') AS BLOB) FROM (SELECT numbers "
        "FROM events INDEXED BY ix_events_job_time_numbers "
        "WHERE job = ? AND time_s >= ? ORDER BY time_s, id LIMIT ? OFFSET ?)"
    )  # a range of the covering index, concatenated in its order

    def check(self) -> str | None:
        """What ``PRAGMA quick_check`` finds wrong in the file (its first findings), with the
        way to recover (:data:`CORRUPT_ADVICE`), or None when it is sound."""
        try:
            with self._reading() as conn:
                rows = conn.execute("PRAGMA quick_check(5)").fetchall()
        except sqlite3.DatabaseError as exc:
            return explain(self.path, exc)
        except StoreError as exc:
            return str(exc)
        found = [line for row in rows for line in str(row[0]).splitlines() if "***" not in line]
        if found == ["ok"]:
            return None
        return f"{self.path}: damaged: {'; '.join(found)}; {CORRUPT_ADVICE.format(db=self.path)}"

    def _failures(self, conn: sqlite3.Connection, job: str) -> list[Any]:
        return conn.execute(  # its index: failures only
            "SELECT failure_class, planned FROM events INDEXED BY ix_events_job_kind_time "
            "WHERE job = ? AND kind = 'failure' AND time_s IS NOT NULL ORDER BY time_s, id",
            (job,),
        ).fetchall()


class SqliteReader(SqliteSql):
    """A store opened read-only through sqlite3 alone (the CLI's fast path)."""

    def __init__(self, path: str | Path) -> None:
        """Open the database at ``path`` read-only (``immutable`` when its directory is not
        writable and no WAL holds changes: :func:`access.open_read_only`).

        Raises:
            StoreError: there is no file (:class:`NoStoreHere`), it cannot be read (the
                message says why and what to do), it is damaged (with the recovery,
                :data:`CORRUPT_ADVICE`), not a ckpt-advisor database, or from a newer
                ckpt-advisor. The message names the path.
        """
        db = Path(path)
        if not db.exists():
            raise NoStoreHere(db)
        try:
            self._conn = open_read_only(db)
            version = schema_version(self._conn)
        except sqlite3.DatabaseError as exc:
            raise StoreError(explain(db, exc)) from None
        if version is None:
            raise StoreError(f"{db}: not a ckpt-advisor store (no schema version)")
        check_schema(db, version)
        self.path = db
        super().__init__(str(db), version)

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        try:
            yield self._conn
        except sqlite3.DatabaseError as exc:  # a damaged page found by a query
            raise StoreError(explain(self.path, exc)) from None

    def close(self) -> None:
        """Release the connection (the file stays)."""
        self._conn.close()
