"""A new SQLite store is created from SQL text (``agent/store/sqlite/ddl.py``) without
SQLAlchemy; these tests hold that text equal to what SQLAlchemy makes of the one definition of
the tables (``agent/store/sql/tables.py``) and the stamp, so the two cannot drift apart."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import Connection, create_engine, text

from ckpt_advisor.agent.store import open_store
from ckpt_advisor.agent.store.schema import HEAD_REVISION, SCHEMA_VERSION
from ckpt_advisor.agent.store.sql import tables
from ckpt_advisor.agent.store.sql.migrate import upgrade
from ckpt_advisor.agent.store.sqlite.ddl import CREATE_SQL


def _made_by_sqlalchemy(db: Path) -> None:
    """A new store at ``db`` as ``sql/migrate.py`` makes one: ``metadata.create_all``, the
    stamp of Alembic's version table and ``meta``'s version."""
    engine = create_engine(f"sqlite:///{db}")
    conn: Connection
    with engine.begin() as conn:
        assert upgrade(conn, location=str(db), agent="a") == (None, SCHEMA_VERSION)
    engine.dispose()


def _catalog(db: Path) -> dict[str, object]:
    """Every table's and index's text, columns (``PRAGMA table_xinfo``), indexes and their
    columns, and the rows of ``meta`` and ``alembic_version``."""
    conn = sqlite3.connect(db)
    master = conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"
    ).fetchall()
    found: dict[str, object] = {"sqlite_master": master}
    for table in [r[1] for r in master if r[0] == "table"]:
        found[f"{table}: columns"] = conn.execute(f"PRAGMA table_xinfo({table})").fetchall()
        indexes = sorted(i[1:] for i in conn.execute(f"PRAGMA index_list({table})"))
        found[f"{table}: indexes"] = [  # name, unique, origin, partial (not the order made)
            (i, conn.execute(f"PRAGMA index_xinfo({i[0]})").fetchall()) for i in indexes
        ]
    found["rows"] = (
        conn.execute("SELECT * FROM meta").fetchall(),
        conn.execute("SELECT * FROM alembic_version").fetchall(),
    )
    conn.close()
    return found


def test_a_new_store_has_the_catalog_sqlalchemy_makes(tmp_path: Path) -> None:
    """A store created from the DDL text has, table by table, the same SQL text, columns
    (types, defaults, keys), indexes (their columns) and version rows as one created by
    ``metadata.create_all`` and the stamp."""
    new, made = tmp_path / "new.db", tmp_path / "made.db"
    open_store(new, agent="a").close()
    _made_by_sqlalchemy(made)
    expected = _catalog(made)
    assert expected["rows"] == ([("schema", str(SCHEMA_VERSION))], [(HEAD_REVISION,)])
    assert _catalog(new) == expected


def test_the_ddl_text_is_what_sqlalchemy_emits() -> None:
    """Each statement of ``CREATE_SQL`` is SQLAlchemy's ``CREATE`` of a table or index of
    ``tables.py`` (or of Alembic's version table): when a table changes, this fails with the
    text to put in ``agent/store/sqlite/ddl.py``."""
    engine = create_engine("sqlite://")
    with engine.begin() as conn:
        upgrade(conn, location=":memory:", agent="a")
        emitted = conn.execute(
            text("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid")
        ).scalars()
        made = sorted(emitted)
    assert len(tables.metadata.tables) + 1 == sum(s.startswith("CREATE TABLE") for s in made)
    assert sorted(CREATE_SQL) == made, "CREATE_SQL should be:\n" + "\n".join(map(repr, made))
