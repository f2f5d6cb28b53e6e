"""Schema migrations with Alembic on both backends: a real schema-4 SQLite store (written by the
release before fleet mode: tests/agent/fixtures/make_store_v4.sh) upgrades in place with nothing
lost, a PostgreSQL store goes down to version 4 and back up, and `ckpt-advisor migrate` runs
them by hand."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from alembic import command
from alembic.config import Config as AlembicConfig
from sqlalchemy import create_engine, text

from ckpt_advisor.agent.store import open_reader, open_store
from ckpt_advisor.agent.store.sql.migrate import MIGRATIONS
from ckpt_advisor.agent.store.url import driver_url
from tests import pg

V4_STORE = Path(__file__).parent / "fixtures" / "store-v4.db"


def _counts(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(db)
    tables = ("events", "files", "estimates", "outbox", "alert_state", "silences")
    return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}


def test_a_schema_4_store_upgrades_in_place_losing_nothing(tmp_path: Path) -> None:
    """The v4 store's events, files (offsets), estimates, outbox, alert state and silence all
    survive the upgrade to 5; its files become the upgrading agent's, so that agent reads on
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
    assert conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0] == "5"
    assert conn.execute("SELECT DISTINCT agent FROM files").fetchall() == [("head-1",)]
    conn.close()
    reader = open_reader(db)
    [latest] = reader.estimate_history(latest_only=True)
    assert latest["job"] == "demo-llama-8b"
    assert reader.events(job="demo-llama-8b") == store.events(job="demo-llama-8b")
    assert store.silenced_until("demo-llama-8b", 0.0) is not None
    assert store.alert_state("demo-llama-8b").in_drift


def test_postgres_store_goes_down_to_4_and_back_up(pg_url: str) -> None:
    """Alembic takes a PostgreSQL store to version 4 (its downgrade) and the next open brings
    it back to 5 with its rows, their files now the opening agent's."""
    store = open_store(pg_url, agent="a", password=pg.ROLE_PASSWORD)
    store.save_estimate("j", 1.0, "ok", {"job": "j"})
    store.close()
    engine = create_engine(driver_url(pg_url, pg.ROLE_PASSWORD))
    with engine.begin() as conn:
        config = AlembicConfig()
        config.set_main_option("script_location", str(MIGRATIONS))
        config.attributes["connection"] = conn
        config.attributes["agent"] = "a"
        command.downgrade(config, "r0004")
        conn.execute(text("UPDATE meta SET value = '4' WHERE key = 'schema'"))
        columns = conn.execute(
            text("SELECT column_name FROM information_schema.columns WHERE table_name='files'")
        ).scalars()
        assert "agent" not in set(columns)
    again = open_store(pg_url, agent="b", password=pg.ROLE_PASSWORD)
    assert again.estimate_history() == [{"job": "j"}]
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "r0005"
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
    assert out.stdout.strip() == f"{pg_url}: schema version 5"
