"""The store on both backends (SQLite, PostgreSQL): atomic event+offset commits, estimates, the
outbox, schema versions and clear errors naming the database; SQLite's own WAL and upgrades."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ckpt_advisor.agent.contracts import stored_event_json
from ckpt_advisor.agent.store import FileState, Store, StoreError, open_store
from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.rules.model import AlertState
from tests.agent.helpers import downgrade_to_version_4

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def _new_file(job: str = "j") -> FileState:
    return FileState(
        0,
        job,
        "/logs/a.log",
        dev=1,
        ino=2,
        head_hash="h",
        head_len=10,
        offset=0,
        lineno=0,
        truncations=0,
    )


def _event(line: int, kind: EventKind = EventKind.CHECKPOINT_START, step: int = 1) -> Event:
    return Event(kind, line, "hf_trainer", time=T0, step=step)


def test_new_store_is_wal_with_schema_version(tmp_path: Path) -> None:
    """A new store file is created with its directory, in WAL mode, at schema version 6, and
    stamped at Alembic's newest revision."""
    db = tmp_path / "deep" / "dir" / "s.db"
    open_store(db).close()
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0] == "6"
    assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] == "r0006"


def _open(target: str | Path, password: str | None, agent: str = "a1") -> Store:
    return open_store(target, agent=agent, password=password)


def test_commit_read_stores_events_and_offset_together(
    store_target: str | Path, store_password: str | None
) -> None:
    """Events and the new offset land in one commit and are read back as typed values."""
    store = _open(store_target, store_password)
    state = store.commit_read(
        _new_file(), offset=120, lineno=3, events=[_event(2, step=25)], now_s=1.0
    )
    assert (state.id, state.offset, state.lineno) == (1, 120, 3)
    assert store.find_files("j", 1, 2) == [state]
    [stored] = store.events(job="j")
    assert stored.event == Event(EventKind.CHECKPOINT_START, 2, "hf_trainer", time=T0, step=25)
    assert stored_event_json(stored)["time"] == "2026-11-01T12:00:00+00:00"


def test_failed_commit_keeps_old_offset_and_no_events(
    store_target: str | Path, store_password: str | None
) -> None:
    """If the transaction fails, neither the events nor the offset are stored."""
    store = _open(store_target, store_password)
    state = store.commit_read(_new_file(), offset=10, lineno=1, events=[], now_s=1.0)
    bad = Event(EventKind.STEP, 5, "x", time=T0, step=2**70)  # overflows a 64-bit INTEGER
    with pytest.raises((OverflowError, StoreError)):
        store.commit_read(state, offset=99, lineno=9, events=[_event(4), bad], now_s=2.0)
    [again] = store.find_files("j", 1, 2)
    assert (again.offset, again.lineno) == (10, 1)
    assert store.count_events() == 0


def test_a_read_from_another_thread_mid_commit_sees_the_last_commit(
    store_target: str | Path, store_password: str | None
) -> None:
    """A thread that reads while another thread's commit is half done (its offset updated, its
    events not yet inserted) is not blocked and sees the last commit, never half of this one;
    the commit then lands whole (the daemon's scheduler thread reads while its tailer writes)."""
    store = _open(store_target, store_password)
    state = store.commit_read(_new_file(), offset=10, lineno=1, events=[_event(1)], now_s=1.0)
    seen: list[tuple[int, int]] = []

    def read() -> None:
        seen.append((store.count_events(), store.find_files("j", 1, 2)[0].offset))

    def timed(_event: Event) -> bool:  # called inside the commit's transaction, per event
        reader = threading.Thread(target=read)
        reader.start()
        reader.join(10)
        return False

    store.commit_read(
        state, offset=20, lineno=3, events=[_event(2), _event(3)], now_s=2.0, from_timing_file=timed
    )
    assert seen == [(1, 10), (1, 10)]
    assert (store.count_events(), store.find_files("j", 1, 2)[0].offset) == (3, 20)
    store.close()


def test_newer_schema_is_refused_naming_the_path(tmp_path: Path) -> None:
    """A store written by a newer ckpt-advisor is not touched; the error names the file."""
    db = tmp_path / "s.db"
    open_store(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value='99' WHERE key='schema'")
    with pytest.raises(StoreError, match=rf"{db}: schema version 99 is newer"):
        open_store(db)


def test_not_a_database_is_refused_naming_the_path(tmp_path: Path) -> None:
    """A file that is not SQLite gives a StoreError naming it, not a traceback."""
    db = tmp_path / "s.db"
    db.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match=str(db)):
        open_store(db)


def test_estimate_history_latest_per_job(
    store_target: str | Path, store_password: str | None
) -> None:
    """The latest estimate per job is the newest saved; history keeps them all in order."""
    store = _open(store_target, store_password)
    store.save_estimate("a", 1.0, "ok", {"job": "a", "n": 1})
    store.save_estimate("b", 2.0, "drift", {"job": "b", "n": 1})
    store.save_estimate("a", 3.0, "drift", {"job": "a", "n": 2})
    assert store.estimate_history(latest_only=True) == [{"job": "a", "n": 2}, {"job": "b", "n": 1}]
    assert [e["n"] for e in store.estimate_history(job="a")] == [1, 2]
    assert store.estimate_history(since_s=2.5) == [{"job": "a", "n": 2}]


def test_decision_and_message_are_recorded_together_then_delivered_in_order(
    store_target: str | Path, store_password: str | None
) -> None:
    """Alert state and the queued message are written in one step; the outbox keeps order."""
    store = _open(store_target, store_password)
    first = store.record_decision(
        "a", AlertState(True, 10.0, 3600.0), message={"text": "1"}, action="notify", now_s=10.0
    )
    second = store.record_decision(
        "b", AlertState(True, 11.0, 60.0), message={"text": "2"}, action="notify", now_s=11.0
    )
    assert store.alert_state("a") == AlertState(True, 10.0, 3600.0)
    assert [m.id for m in store.queued_messages()] == [first, second]
    assert first is not None
    store.mark_message(first, state="sent", now_s=12.0, ts="171.1")
    assert [m.payload for m in store.queued_messages()] == [{"text": "2"}]
    assert store.messages("a")[0]["state"] == "sent"


def test_version_2_store_gains_the_finished_flag(tmp_path: Path) -> None:
    """A store written by schema version 2 (no ``files.finished``) is upgraded in place to
    version 3, its files read as not finished."""
    db = tmp_path / "s.db"
    open_store(db).close()
    downgrade_to_version_4(db)
    conn = sqlite3.connect(db)
    conn.execute("ALTER TABLE files DROP COLUMN finished")
    conn.execute(
        "INSERT INTO files (job, path, dev, ino, head_hash, head_len, offset, lineno,"
        " truncations, updated_s) VALUES ('j', '/x', 1, 2, 'h', 1, 10, 1, 0, 0.0)"
    )
    conn.execute("UPDATE meta SET value='2' WHERE key='schema'")
    conn.commit()
    conn.close()
    store = open_store(db)
    assert [(f.offset, f.finished) for f in store.files("j")] == [(10, False)]
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0] == "6"


def test_events_merge_per_job_reads_in_one_order(
    store_target: str | Path, store_password: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``events`` gives every filter's events in one order across jobs (by time, then as
    stored; events without time last, as stored), whether it merges per-job index reads or
    sorts them all (over more than ``MERGED_JOBS`` jobs), and ``newest`` keeps the last of
    that order (``tail -n``), still in it; ``jobs`` lists each job once."""
    from ckpt_advisor.agent.store import queries

    store = _open(store_target, store_password)
    kinds = (EventKind.CHECKPOINT_START, EventKind.STEP, EventKind.FAILURE)
    stored: list[tuple[str, Event]] = []  # in the order of their ids
    for j, job in enumerate(("b", "a", "c")):
        events = [
            Event(
                kinds[(i + j) % 3],
                i + 1,
                "hf_trainer",
                time=None if (i + j) % 7 == 0 else T0 + timedelta(seconds=(i * 37 + j * 11) % 50),
                step=i,
            )
            for i in range(40)
        ]
        file = replace(_new_file(job), ino=10 + j)
        store.commit_read(file, offset=1, lineno=1, events=events, now_s=1.0)
        stored += [(job, e) for e in events]
    order = sorted(
        range(len(stored)),
        key=lambda k: (stored[k][1].time is None, stored[k][1].time or T0, k),
    )
    assert store.jobs() == ["a", "b", "c"]
    since = T0 + timedelta(seconds=20)
    for merged in (queries.MERGED_JOBS, 1):
        monkeypatch.setattr(queries, "MERGED_JOBS", merged)
        for job in (None, "a"):
            for kind in (None, ["failure", "step"]):
                for since_dt in (None, since):
                    want = [
                        stored[k]
                        for k in order
                        if job in (None, stored[k][0])
                        and (kind is None or stored[k][1].kind.value in kind)
                        and (since_dt is None or (stored[k][1].time or T0) >= since_dt)
                        and (since_dt is None or stored[k][1].time is not None)
                    ]
                    since_s = None if since_dt is None else since_dt.timestamp()
                    for newest in (None, 1, 7, 500):
                        got = store.events(job=job, kinds=kind, since_s=since_s, newest=newest)
                        tail = want if newest is None else want[-newest:]
                        assert [(g.job, g.event) for g in got] == tail, (merged, job)
