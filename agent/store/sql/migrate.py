"""Bring a store's schema to :data:`~agent.store.schema.SCHEMA_VERSION`, for both backends.

Alembic runs the migrations (scripts in ``agent/store/migrations/versions/``, one per schema
version since 4, the baseline). A new database is created from the tables and stamped at the
newest revision; a SQLite store older than version 4 (before Alembic) first takes the SQLite
upgrade it always had (``sqlite/legacy.py``), then is stamped at the baseline. All of it runs in
the caller's one transaction (PostgreSQL's DDL is transactional; SQLite's too), under a lock
that lets one agent of a fleet migrate while the others wait. The version is also kept in
``meta``, where the standard-library reader looks. Alembic is imported only when there is
something to migrate: a new database is stamped here, as Alembic would (:func:`_stamp_new`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import (
    Column,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    delete,
    func,
    insert,
    inspect,
    select,
)
from sqlalchemy.engine import Connection

from ckpt_advisor.agent.store.schema import HEAD_REVISION as HEAD
from ckpt_advisor.agent.store.schema import SCHEMA_VERSION, check_schema
from ckpt_advisor.agent.store.sql import tables as t

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parents[1] / "migrations"
"""Alembic's script directory."""
BASELINE = "r0004"
"""The revision of schema version 4, the last one before Alembic."""

Legacy = Callable[[Connection, int], None]
"""A backend's own upgrade of a store older than the baseline to version 4 (SQLite's)."""


def stored_version(conn: Connection) -> int | None:
    """The schema version in ``meta``, or None in a database without ckpt-advisor's tables."""
    if not inspect(conn).has_table("meta"):
        return None
    value = conn.execute(select(t.meta.c.value).where(t.meta.c.key == "schema")).scalar()
    return None if value is None else int(value)


def upgrade(
    conn: Connection,
    *,
    location: str,
    agent: str,
    on_upgrade: Callable[[int], None] | None = None,
    legacy: Legacy | None = None,
) -> tuple[int | None, int]:
    """Migrate the database of ``conn`` to :data:`SCHEMA_VERSION` in its transaction.

    ``agent``: the agent the files, estimates and messages stored before fleet mode become
    (version 4 -> 5); ``on_upgrade(n_events)`` is called before an existing store is changed
    (to log, and extend a service's start timeout); ``legacy``: the backend's upgrade of a store
    older than version 4. Returns the version found (None: a new database) and the one left.

    Raises:
        StoreError: the store is newer than this code, or older than 4 with no ``legacy``.
        sqlalchemy.exc.DBAPIError: the database refused (the caller names it).
    """
    version = stored_version(conn)
    check_schema(location, version)
    if version == SCHEMA_VERSION:
        return version, version
    if version is None:
        t.metadata.create_all(conn)
        _stamp_new(conn)
        _set_version(conn)
        return None, SCHEMA_VERSION
    n_events = int(conn.execute(select(func.count()).select_from(t.events)).scalar_one())
    log.warning(
        "%s: upgrading the store from schema %d to %d (%d event(s))",
        location,
        version,
        SCHEMA_VERSION,
        n_events,
    )
    if on_upgrade is not None:
        on_upgrade(n_events)
    if version < 4:
        if legacy is None:
            from ckpt_advisor.agent.store.records import StoreError

            raise StoreError(f"{location}: schema version {version} cannot be upgraded here")
        legacy(conn, n_events)
    if not inspect(conn).has_table("alembic_version"):
        _alembic(conn, agent, stamp=BASELINE)
    _alembic(conn, agent, upgrade=HEAD)
    _set_version(conn)
    return version, SCHEMA_VERSION


def _set_version(conn: Connection) -> None:
    conn.execute(delete(t.meta).where(t.meta.c.key == "schema"))
    conn.execute(insert(t.meta).values(key="schema", value=str(SCHEMA_VERSION)))


def _stamp_new(conn: Connection) -> None:
    """Stamp a new database at :data:`HEAD` as ``alembic stamp`` does, without importing
    Alembic (0.1 to 0.2 s of CPU at every new store's start-up): its version table as
    Alembic's ``DefaultImpl.version_table_impl`` makes it (alembic/ddl/impl.py, 1.20; neither
    of our dialects overrides it), with the one row. A test compares it with Alembic's own."""
    version = Table(
        "alembic_version",
        MetaData(),
        Column("version_num", String(32), nullable=False),
        PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
    )
    version.create(conn)
    conn.execute(insert(version).values(version_num=HEAD))


def _alembic(
    conn: Connection, agent: str, *, stamp: str | None = None, upgrade: str | None = None
) -> None:
    logging.getLogger("alembic").setLevel(logging.WARNING)  # our own lines say what runs
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = conn
    config.attributes["agent"] = agent
    if stamp is not None:
        command.stamp(config, stamp)
    if upgrade is not None:
        command.upgrade(config, upgrade)
