"""What every write of the store runs on: a DB-API connection in a transaction, and the few
things each database says its own way (the base of ``writes.py``, ``fleet.py``, ``outbox.py``).

The writes are SQL text with ``?`` placeholders that SQLite and PostgreSQL both speak (``INSERT
… ON CONFLICT (…) DO UPDATE SET col = excluded.col``, ``DO NOTHING``), written once and run
through :meth:`~agent.store.queries.SqlQueries._exec` on the connection :meth:`StoreBase._write`
lends: sqlite3's own on SQLite (no SQLAlchemy on the embedded store's path: start-up, issue 15),
the psycopg connection SQLAlchemy's pool lends on PostgreSQL. Where the two really differ (the
database's clock, an advisory lock, the new row's id, a row lock, the bulk insert of events) the
backend overrides one small method or attribute here.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from ckpt_advisor.agent.store.queries import SqlQueries


class StoreBase(SqlQueries):
    """The queries plus the write transaction and each database's own pieces."""

    agent: str
    one_agent = False
    """Whether the database lets one agent in (SQLite: its lock file), so that no other agent's
    row is ever alive (fleet mode's checks are skipped)."""
    _row_lock = ""
    """What makes a SELECT lock the rows it reads until the transaction ends (``FOR UPDATE``
    where the database has row locks; nothing where one writer holds the whole database)."""

    def _write(self) -> AbstractContextManager[Any]:
        """A DB-API connection in a write transaction, serialised with this process's other
        writes: committed when the block ends, rolled back when it raises. A database error
        becomes :class:`~agent.store.records.StoreError` (``write failed``, naming the
        database)."""
        raise NotImplementedError

    def _insert_id(self, conn: Any, sql: str, params: Sequence[Any]) -> int:
        """Run the one-row ``INSERT`` ``sql`` on ``conn``; the new row's ``id``."""
        raise NotImplementedError

    def _db_now_s(self, conn: Any) -> float:
        """The database's clock, epoch seconds (PostgreSQL's; SQLite's is this host's)."""
        raise NotImplementedError

    def _lock_key(self, conn: Any, key: str) -> None:
        """Hold a lock named ``key`` until the transaction of ``conn`` ends (a no-op where the
        database allows one writer at a time)."""


def upsert(table: str, columns: Sequence[str], keys: Sequence[str]) -> str:
    """``INSERT INTO table (columns) … ON CONFLICT (keys) DO UPDATE`` of the other columns, in
    ``?`` placeholders (one per column, in order): the same text on SQLite and PostgreSQL."""
    marks = ", ".join("?" * len(columns))
    update = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in keys)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) "
        f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {update}"
    )
