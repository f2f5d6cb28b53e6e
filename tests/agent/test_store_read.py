"""The sqlite3-only reader the read commands use: same answers as the store, clear errors, and
no SQLAlchemy or pydantic imported on the way."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ckpt_advisor.agent.store import FileState, Store, StoreError, open_reader, open_store
from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.rules.model import AlertState
from tests.agent.processes import cli_imports

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
ROOT = Path(__file__).parents[2]


def _filled(target: str | Path, password: str | None = None) -> Store:
    store = open_store(target, password=password)
    state = FileState(0, "j", "/logs/a.log", 1, 2, "h", 10, 0, 0, 0)
    events = [
        Event(EventKind.STEP, 1, "hf_trainer", time=T0, step=10, duration_s=1.5),
        Event(EventKind.FAILURE, 2, "hf_trainer", failure_class="cuda_error", detail="boom"),
        Event(EventKind.CHECKPOINT_END, 3, "hf_trainer", time=T0 + timedelta(seconds=9)),
    ]
    store.commit_read(state, offset=5, lineno=3, events=events, now_s=1.0)
    store.save_estimate("j", 1.0, "ok", {"job": "j", "n": 1})
    store.save_estimate("j", 2.0, "drift", {"job": "j", "n": 2})
    store.save_estimate("k", 3.0, "ok", {"job": "k", "n": 3})
    store.record_decision("j", AlertState(True, 2.0, 60.0), message={"t": 1}, action="a", now_s=2.0)
    return store


def test_reader_answers_as_the_store_does(
    store_target: str | Path, store_password: str | None
) -> None:
    """Events (every filter), estimate history, jobs, counts and the outbox read the same
    through the read-only opening as through the store, on both backends."""
    store = _filled(store_target, store_password)
    reader = open_reader(store_target, password=store_password)
    for kw in ({}, {"job": "j", "kinds": ["failure"]}, {"since_s": T0.timestamp() + 1}):
        assert reader.events(**kw) == store.events(**kw)  # type: ignore[arg-type]
    assert [e.event.kind for e in reader.events(newest=2)] == ["checkpoint_end", "failure"]
    assert [e.event.line for e in reader.events()] == [1, 3, 2]  # untimed last
    assert [r["n"] for r in reader.estimate_history(latest_only=True)] == [2, 3]
    assert [r["n"] for r in reader.estimate_history(job="j", since_s=1.5)] == [2]
    assert reader.jobs() == ["j", "k"] and reader.count_events("j") == 3
    [queued] = reader.queued_messages()
    assert (queued.job, queued.payload) == ("j", {"t": 1})
    assert queued == store.queued_messages()[0]


def test_reader_refuses_missing_foreign_and_newer_databases_naming_them(tmp_path: Path) -> None:
    """No file, a non-database, an unrelated SQLite file and a newer schema each give a
    StoreError naming the path."""
    with pytest.raises(StoreError, match="no database here"):
        open_reader(tmp_path / "missing.db")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match=str(junk)):
        open_reader(junk)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(StoreError, match=rf"{other}: not a ckpt-advisor store"):
        open_reader(other)
    newer = tmp_path / "newer.db"
    open_store(newer).close()
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE meta SET value='99' WHERE key='schema'")
    with pytest.raises(StoreError, match=rf"{newer}: schema version 99 is newer"):
        open_reader(newer)


def test_read_commands_import_neither_sqlalchemy_nor_pydantic(tmp_path: Path) -> None:
    """``estimates``, ``events`` and ``status`` with ``--db`` start without the write path's
    SQLAlchemy or the config's pydantic (most of their former start-up time)."""
    db = tmp_path / "s.db"
    _filled(db).close()
    for command in (["estimates", "--json"], ["events", "--json"], ["status"]):
        out, imported = cli_imports([*command, "--db", str(db)], ["sqlalchemy", "pydantic"], ROOT)
        assert imported == [], (command, out.stderr)
        assert '"job": "j"' in out.stdout or command == ["status"]
