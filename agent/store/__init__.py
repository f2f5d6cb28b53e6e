"""The store: events, the tailer's offsets, estimates, alert state and the Slack outbox.

What callers use is here: the interface (:class:`Store`, :class:`StoreReader` in ``api.py``),
its records (``records.py``) and the two ways to open one, by path (SQLite, the embedded
default) or by URL (PostgreSQL, one database for a fleet of agents: ``url.py``). Only this
folder speaks SQL: the queries once for both (``queries.py``) and the writes once for both
(``sql/``), as SQL text over DB-API, so the SQLite store runs on sqlite3 alone and starts
without SQLAlchemy; the tables (SQLAlchemy Core) and Alembic migrations once for both (``sql/``;
scripts in ``migrations/``), which a new SQLite store needs as text only (``sqlite/ddl.py``);
and each backend's own (``sqlite/``, ``postgres/``). ``schema.py`` is the version and an
event's packed numbers; ``lock.py`` keeps one log reader per store on a host.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

from ckpt_advisor.agent.store.api import Store, StoreReader
from ckpt_advisor.agent.store.records import (
    AgentInfo,
    EventColumns,
    FileState,
    NoStoreHere,
    OutboxItem,
    RegisteredJob,
    StoredEvent,
    StoreError,
)
from ckpt_advisor.agent.store.url import is_url, redact

__all__ = [
    "AgentInfo",
    "EventColumns",
    "FileState",
    "NoStoreHere",
    "OutboxItem",
    "RegisteredJob",
    "Store",
    "StoreError",
    "StoreReader",
    "StoredEvent",
    "is_url",
    "open_reader",
    "open_store",
    "redact",
]


def open_store(
    target: str | Path,
    *,
    agent: str | None = None,
    password: str | None = None,
    on_upgrade: Callable[[int], None] | None = None,
    migrate: bool = True,
) -> Store:
    """Open (creating or upgrading) the store at ``target`` for reading and writing, as the
    agent named ``agent`` (default: the host name).

    ``target``: a SQLite file, or a ``postgresql://`` URL (``password`` added for the driver;
    a server that is away now is retried on every call). ``on_upgrade(n_events)`` is called
    before an upgrade changes an existing store (e.g. to extend a service's start timeout).
    ``migrate=False``: a PostgreSQL store of an older schema is refused instead.

    Raises:
        StoreError: it cannot be created, opened or upgraded; the message names the path or
            the URL (never the password). For PostgreSQL, a
            :class:`~agent.store.postgres.access.StoreAccessError` when the server refuses
            for good (a wrong password, a missing grant).
    """
    name = agent or socket.gethostname()
    if is_url(target):
        from ckpt_advisor.agent.store.postgres.store import PostgresStore

        return PostgresStore(
            str(target), agent=name, password=password, on_upgrade=on_upgrade, migrate=migrate
        )
    from ckpt_advisor.agent.store.sqlite.writer import SqliteStore

    return SqliteStore(target, agent=name, on_upgrade=on_upgrade)


def open_reader(target: str | Path, *, password: str | None = None) -> StoreReader:
    """Open the store at ``target`` read-only: a SQLite file with the standard library alone
    (fast start), or a ``postgresql://`` URL.

    Raises:
        StoreError: no store there, not a ckpt-advisor store, one from a newer version, or a
            server that cannot be reached or refuses.
    """
    if is_url(target):
        from ckpt_advisor.agent.store.postgres.store import PostgresReader

        return PostgresReader(str(target), password=password)
    from ckpt_advisor.agent.store.sqlite.reader import SqliteReader

    return SqliteReader(target)
