"""The store: events, the tailer's offsets, estimates, alert state and the Slack outbox.

What callers use is here: the interface (:class:`Store`, :class:`StoreReader` in ``api.py``),
its records (``records.py``) and the two ways to open one. The SQLite backend lives in
``sqlite/`` (the only place that speaks SQL): ``sqlite/reader.py`` reads with the standard
library's sqlite3 alone (the read-only commands start without SQLAlchemy), ``sqlite/writer.py``
writes through SQLAlchemy Core, ``sqlite/schema.py`` and ``sqlite/tables.py`` hold the schema,
its version and its migrations. ``lock.py`` keeps one log reader per store.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ckpt_advisor.agent.store.api import Store, StoreReader
from ckpt_advisor.agent.store.records import (
    EventColumns,
    FileState,
    OutboxItem,
    StoredEvent,
    StoreError,
)

__all__ = [
    "EventColumns",
    "FileState",
    "OutboxItem",
    "Store",
    "StoreError",
    "StoreReader",
    "StoredEvent",
    "open_reader",
    "open_store",
]


def open_store(path: str | Path, *, on_upgrade: Callable[[int], None] | None = None) -> Store:
    """Open (creating or upgrading) the store at ``path`` for reading and writing.

    ``on_upgrade(n_events)`` is called before an upgrade that rewrites the events (e.g. to
    extend a service's start timeout).

    Raises:
        StoreError: it cannot be created, opened or upgraded (see
            :class:`agent.store.sqlite.writer.SqliteStore`); the message names the path.
    """
    from ckpt_advisor.agent.store.sqlite.writer import SqliteStore

    return SqliteStore(path, on_upgrade=on_upgrade)


def open_reader(path: str | Path) -> StoreReader:
    """Open the store at ``path`` read-only, with the standard library alone (fast start).

    Raises:
        StoreError: no store there, not a ckpt-advisor store, or one from a newer version.
    """
    from ckpt_advisor.agent.store.sqlite.reader import SqliteReader

    return SqliteReader(path)
