"""Schema migrations with Alembic on both backends: a real schema-4 SQLite store (written by the
release before fleet mode: tests/agent/fixtures/make_store_v4.sh) upgrades in place with nothing
lost, a PostgreSQL store goes down to version 4 and back up, a store of either backend goes down
to version 5 (no tiers) and back up to 6 in place, a new store is created as Alembic would stamp
it, and `ckpt-advisor migrate` runs them by hand."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config as AlembicConfig
from sqlalchemy import Connection, Engine, create_engine, inspect, text

from ckpt_advisor.agent.estimate import ESTIMATE_KINDS
from ckpt_advisor.agent.store import FileState, open_reader, open_store
from ckpt_advisor.agent.store.schema import event_numbers
from ckpt_advisor.agent.store.sql import tables
from ckpt_advisor.agent.store.sql.migrate import MIGRATIONS
from ckpt_advisor.agent.store.url import driver_url
from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.rules.timeline import TIER_CODES
from tests import pg

V4_STORE = Path(__file__).parent / "fixtures" / "store-v4.db"


def _counts(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(db)
    tables = ("events", "files", "estimates", "outbox", "alert_state", "silences")
    return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}


def test_a_schema_4_store_upgrades_in_place_losing_nothing(tmp_path: Path) -> None:
    """The v4 store's events, files (offsets), estimates, outbox, alert state and silence all
    survive the upgrade to 6; its files become the upgrading agent's, so that agent reads on
    from their offsets; the upgrade is announced with its number of events."""
    db = tmp_path / "s.db"
    shutil.copy(V4_STORE, db)
    before = _counts(db)
    conn = sqlite3.connect(db)
    offsets = sorted(conn.execute("SELECT job, dev, ino, offset, lineno FROM files").fetchall())
    events = conn.execute(
        "SELECT job, kind, time_s, step, numbers FROM events ORDER BY id"
    ).fetchall()
    conn.close()
    assert before["events"] == 213 and before["files"] == 2
    upgrades: list[int] = []
    store = open_store(db, agent="head-1", on_upgrade=upgrades.append)
    assert upgrades == [213]
    assert _counts(db) == before
    for job, dev, ino, offset, lineno in offsets:
        [state] = store.find_files(job, dev, ino)
        assert (state.offset, state.lineno) == (offset, lineno)
    conn = sqlite3.connect(db)
    assert (
        conn.execute("SELECT job, kind, time_s, step, numbers FROM events ORDER BY id").fetchall()
        == events
    )
    assert conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0] == "6"
    assert conn.execute("SELECT DISTINCT agent FROM files").fetchall() == [("head-1",)]
    conn.close()
    reader = open_reader(db)
    [latest] = reader.estimate_history(latest_only=True)
    assert latest["job"] == "demo-llama-8b"
    assert reader.events(job="demo-llama-8b") == store.events(job="demo-llama-8b")
    assert store.silenced_until("demo-llama-8b", 0.0) is not None
    assert store.alert_state("demo-llama-8b").in_drift


def _alembic(conn: Connection) -> AlembicConfig:
    """Alembic's configuration for the store's migrations on ``conn``, as agent ``a``."""
    config = AlembicConfig()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = conn
    config.attributes["agent"] = "a"
    return config


def _downgrade(conn: Connection, version: int) -> None:
    """Alembic's downgrade of the store on ``conn`` to schema ``version``, and its ``meta``."""
    command.downgrade(_alembic(conn), f"r{version:04d}")
    conn.execute(text(f"UPDATE meta SET value = '{version}' WHERE key = 'schema'"))


def _saves(n: int) -> list[Event]:
    """``n`` timing-file saves 100 s apart: 1 s to memory, every 5th 30 s to storage."""
    return [
        Event(
            EventKind.CHECKPOINT_END,
            i + 1,
            "timing_jsonl",
            time=datetime(2026, 11, 1, tzinfo=UTC) + timedelta(seconds=100 * i),
            step=50 * (i + 1),
            duration_s=30.0 if i % 5 == 4 else 1.0,
            tier="persistent" if i % 5 == 4 else "memory",
        )
        for i in range(n)
    ]


def test_a_schema_5_store_goes_down_and_upgrades_to_6_in_place(
    store_target: str | Path, store_password: str | None
) -> None:
    """Down to version 5 (Alembic's downgrade) a store loses ``events.tier``, and its tiered
    saves get version 5's packed numbers, so version 5's columnar read still places them (read
    here on SQLite); the
    next open upgrades it to 6 in place, announced with its number of events, every row and
    packed number unchanged, and saves stored after it keep their tier."""
    store = open_store(store_target, agent="a", password=store_password)
    file = FileState(0, "j", "/runs/t.jsonl", 1, 2, "h" * 32, 1024, 0, 0, 0)
    file = store.commit_read(
        file, offset=10, lineno=10, events=_saves(10), now_s=1.0, from_timing_file=True
    )
    assert (
        store.event_columns("j", ESTIMATE_KINDS).tier.tolist()
        == ([TIER_CODES["memory"]] * 4 + [TIER_CODES["persistent"]]) * 2
    )
    store.close()
    sqlite = isinstance(store_target, Path)
    url = f"sqlite:///{store_target}" if sqlite else driver_url(str(store_target), store_password)
    engine = create_engine(url)
    with engine.begin() as conn:
        _downgrade(conn, 5)
        assert "tier" not in {c["name"] for c in inspect(conn).get_columns("events")}
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT * FROM events ORDER BY id")).all()
    fields = ("time_s", "step", "duration_s", "persist_s", "source", "parser", "from_timing_file")
    for r in rows:
        m = r._mapping
        assert bytes(m["numbers"]) == event_numbers(*(m[f] for f in fields), m["kind"])
    if sqlite:  # version 5's estimator read (the standard-library reader); PostgreSQL's
        old = open_reader(store_target)  # reader asks for `migrate` first
        columns = old.event_columns("j", ESTIMATE_KINDS)
        assert columns.tier.tolist() == [-1] * 10 and columns.duration_s[4] == 30.0
        assert {e.event.tier for e in old.events(job="j")} == {None}
    upgrades: list[int] = []
    store = open_store(store_target, agent="a", password=store_password, on_upgrade=upgrades.append)
    assert upgrades == [10]
    with engine.connect() as conn:
        after = conn.execute(text("SELECT * FROM events ORDER BY id")).all()
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "r0006"
        assert conn.execute(text("SELECT value FROM meta WHERE key = 'schema'")).scalar() == "6"
    assert [tuple(r)[:-1] for r in after] == [tuple(r) for r in rows]  # tier: the new last
    assert {r[-1] for r in after} == {None}
    store.commit_read(file, offset=20, lineno=15, events=_saves(15)[10:], now_s=2.0,
                      from_timing_file=True)  # fmt: skip
    tiers = store.event_columns("j", ESTIMATE_KINDS).tier.tolist()
    assert tiers == [-1] * 10 + [TIER_CODES["memory"]] * 4 + [TIER_CODES["persistent"]]
    assert [e.event.tier for e in store.events(job="j")][9:] == [None] + ["memory"] * 4 + [
        "persistent"
    ]
    store.close()


def _schema(engine: Engine) -> dict[str, object]:
    """Every table's columns (name, type, nullability, default), primary key, indexes and
    unique constraints, and SQLite's own text of each table and index."""
    with engine.connect() as conn:
        found = inspect(conn)
        schema: dict[str, object] = {}
        for name in found.get_table_names():
            columns = found.get_columns(name)
            schema[name] = (
                [(c["name"], str(c["type"]), c["nullable"], c["default"]) for c in columns],
                found.get_pk_constraint(name),
                sorted(found.get_indexes(name), key=lambda i: str(i["name"])),
                found.get_unique_constraints(name),
            )
        if engine.dialect.name == "sqlite":
            schema["sqlite_master"] = conn.execute(
                text("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name")
            ).all()
        schema["alembic_version"] = (
            schema["alembic_version"],
            conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all(),
        )
    return schema


def test_a_new_store_is_created_as_alembic_stamps_it(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A new store (stamped without Alembic, for start-up) has the same tables, indexes,
    version table and version row as the tables created and stamped at head by Alembic itself,
    on both backends."""
    if backend == "sqlite":
        new, made = tmp_path / "new.db", tmp_path / "alembic.db"
        new_url, made_url = f"sqlite:///{new}", f"sqlite:///{made}"
        open_store(new, agent="a").close()
    else:
        server = request.getfixturevalue("pg_server")
        new_pg, made_pg = server.database(), server.database()
        new_url = driver_url(new_pg, pg.ROLE_PASSWORD)
        made_url = driver_url(made_pg, pg.ROLE_PASSWORD)
        open_store(new_pg, agent="a", password=pg.ROLE_PASSWORD).close()
    reference = create_engine(made_url)
    with reference.begin() as conn:
        tables.metadata.create_all(conn)
        command.stamp(_alembic(conn), "head")
    expected = _schema(reference)
    assert expected["alembic_version"][1] == ["r0006"]  # type: ignore[index]
    assert _schema(create_engine(new_url)) == expected


def test_postgres_store_goes_down_to_4_and_back_up(pg_url: str) -> None:
    """Alembic takes a PostgreSQL store to version 4 (its downgrade) and the next open brings
    it back to 6 with its rows, their files now the opening agent's."""
    store = open_store(pg_url, agent="a", password=pg.ROLE_PASSWORD)
    store.save_estimate("j", 1.0, "ok", {"job": "j"})
    store.close()
    engine = create_engine(driver_url(pg_url, pg.ROLE_PASSWORD))
    with engine.begin() as conn:
        _downgrade(conn, 4)
        columns = conn.execute(
            text("SELECT column_name FROM information_schema.columns WHERE table_name='files'")
        ).scalars()
        assert "agent" not in set(columns)
    again = open_store(pg_url, agent="b", password=pg.ROLE_PASSWORD)
    assert again.estimate_history() == [{"job": "j"}]
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "r0006"
        assert conn.execute(text("SELECT agent FROM estimates")).scalar() == "b"


def test_migrate_command_creates_and_reports_the_schema(pg_url: str, tmp_path: Path) -> None:
    """`ckpt-advisor migrate --config` with a [store] url creates the store's tables and says
    which schema it is at; the password comes from the environment, not the file."""
    config = tmp_path / "c.toml"
    config.write_text(f'[store]\nurl = "{pg_url}"\npath = "{tmp_path / "state.db"}"\n')
    env = {**os.environ, pg.PASSWORD_ENV: pg.ROLE_PASSWORD}
    out = subprocess.run(
        [sys.executable, "-m", "ckpt_advisor.agent", "migrate", "--config", str(config)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"{pg_url}: schema version 6"
