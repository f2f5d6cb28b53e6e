"""The rows a commit writes, every column, on both backends: pinned for events of every kind
and shape (a bar's estimated step, saves with detail, tier and persist time, failures planned
and not, events without step or time, text that needs escaping), so a faster write path
(agent/store/sql/rows.py) is shown to store exactly what the path before it stored."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ckpt_advisor.agent.store import FileState, open_store
from ckpt_advisor.parsers.events import Event
from ckpt_advisor.parsers.events import EventKind as K

T0 = datetime(2026, 11, 1, 12, 0, 0, 250000, tzinfo=UTC)
ODD_TEXT = "tab\there, 'quote' \"dq\" back\\slash\nnewline é"
EVENTS = [
    Event(K.STEP, 7, "hf_trainer", time=T0, step=40, duration_s=1.25, time_estimated=True),
    Event(K.CHECKPOINT_START, 8, "hf_trainer", time=T0, step=40, detail="/data/run/checkpoint-40"),
    Event(K.CHECKPOINT_END, 9, "ckpt_timing_jsonl", time=T0, step=40, duration_s=4.5,
          persist_s=31.0, tier="persistent", detail=ODD_TEXT),
    Event(K.FAILURE, 10, "torchrun", time=T0, step=41, failure_class="cuda_illegal_memory_access",
          detail="RuntimeError: CUDA error"),
    Event(K.FAILURE, 11, "slurm", time=T0, failure_class="time_limit", planned=True),
    Event(K.RESUME, 12, "hf_trainer", time=T0, step=None),
    Event(K.RUN_START, 13, "hf_trainer", detail="***** Running training *****"),
    Event(K.CLOCK_STEP, 14, "hf_trainer", time=T0, duration_s=-3600.0,
          detail="clock went back 1 h"),
    Event(K.STEP, 15, "megatron", time=T0, step=2**40),
]  # fmt: skip
COLUMNS = (
    "id, job, file_id, source, line, kind, time_s, time_estimated, step, duration_s, "
    "failure_class, planned, persist_s, detail, parser, from_timing_file, numbers, agent, tier"
)
T = 1793534400.25
SRC = "/logs/a b.log"
ROWS = [
    (1, "j", 1, SRC, 7, "step", T, 1, 40, 1.25, None, 0, None, None, "hf_trainer", 0,
     "00001070cab9da410000000000004440000000000000f43f000000000000f87f7217a08d4b4b01c1", "a1",
     None),
    (2, "j", 1, SRC, 8, "checkpoint_start", T, 0, 40, None, None, 0, None,
     "/data/run/checkpoint-40", "hf_trainer", 0,
     "00001070cab9da410000000000004440000000000000f87f000000000000f87f32ccb5f5b52c0d66", "a1",
     None),
    (3, "j", 1, SRC, 9, "checkpoint_end", T, 0, 40, 4.5, None, 0, 31.0, ODD_TEXT,
     "ckpt_timing_jsonl", 1,
     "00001070cab9da41000000000000444000000000000012400000000000003f409e405c12adfc07a0", "a1",
     "persistent"),
    (4, "j", 1, SRC, 10, "failure", T, 0, 41, None, "cuda_illegal_memory_access", 0, None,
     "RuntimeError: CUDA error", "torchrun", 0,
     "00001070cab9da410000000000804440000000000000f87f000000000000f87f1e8722f08275f2a1", "a1",
     None),
    (5, "j", 1, SRC, 11, "failure", T, 0, None, None, "time_limit", 1, None, None, "slurm", 0,
     "00001070cab9da41000000000000f87f000000000000f87f000000000000f87f0dbba6adb9d9318e", "a1",
     None),
    (6, "j", 1, SRC, 12, "resume", T, 0, None, None, None, 0, None, None, "hf_trainer", 0,
     "00001070cab9da41000000000000f87f000000000000f87f000000000000f87f49db1c448ffcc09a", "a1",
     None),
    (7, "j", 1, SRC, 13, "run_start", None, 0, None, None, None, 0, None,
     "***** Running training *****", "hf_trainer", 0,
     "000000000000f87f000000000000f87f000000000000f87f000000000000f87f435822ee41ea1558", "a1",
     None),
    (8, "j", 1, SRC, 14, "clock_step", T, 0, None, -3600.0, None, 0, None, "clock went back 1 h",
     "hf_trainer", 0,
     "00001070cab9da41000000000000f87f000000000020acc0000000000000f87fd815d9e4853f7361", "a1",
     None),
    (9, "j", 1, SRC, 15, "step", T, 0, 2**40, None, None, 0, None, None, "megatron", 0,
     "00001070cab9da410000000000007042000000000000f87f000000000000f87f9745522592940553", "a1",
     None),
]  # fmt: skip
"""What the store wrote for :data:`EVENTS` before its write path was made fast (issue 15),
``numbers`` as hex: the packed blob (``schema.event_numbers``) with its group key."""
STORAGE = [
    "itititriirninntibtn",
    "itititriinninttibtn",
    "itititriirnirttibtt",
    "itititriintinttibtn",
    "itititrinntinntibtn",
    "itititrinnninntibtn",
    "itititninnninttibtn",
    "itititrinrninttibtn",
    "itititriinninntibtn",
]
"""SQLite's storage class of each column of :data:`ROWS` (``typeof``: integer, real, text,
blob, null), as the store wrote them before its write path was made fast: 40 and 40.0 are
equal in Python, not on disk."""


def _stored_rows(target: str | Path, password: str | None) -> list[tuple[Any, ...]]:
    sql = f"SELECT {COLUMNS} FROM events ORDER BY id"
    if isinstance(target, Path):
        with sqlite3.connect(target) as conn:
            rows = conn.execute(sql).fetchall()
    else:
        import psycopg

        with psycopg.connect(target, password=password) as conn:
            rows = conn.execute(sql).fetchall()
    return [(*r[:16], bytes(r[16]).hex(), *r[17:]) for r in rows]


def test_commit_writes_the_pinned_row_of_each_event(
    store_target: str | Path, store_password: str | None
) -> None:
    """Every column of every row a commit writes equals the pinned row, on both backends, and
    has its pinned storage class on SQLite (``from_timing_file`` given as a function of the
    event), in the commit's order: 60 copies
    of the events, more than SQLite's multi-row INSERTs take (two of 256 rows, then 28)."""
    store = open_store(store_target, agent="a1", password=store_password)
    state = store.commit_read(
        FileState(0, "j", SRC, 1, 2, "h", 10, 0, 0, 0),
        offset=100,
        lineno=15,
        events=EVENTS * 60,
        now_s=1.0,
        from_timing_file=lambda ev: ev.parser == "ckpt_timing_jsonl",
    )
    store.close()
    assert state.id == 1
    got = _stored_rows(store_target, store_password)
    assert got[: len(ROWS)] == ROWS
    assert got == [(i + 1, *ROWS[i % len(ROWS)][1:]) for i in range(60 * len(ROWS))]
    if isinstance(store_target, Path):
        assert _storage(store_target) == STORAGE * 60


def _storage(db: Path) -> list[str]:
    """Each row's storage classes, a letter a column (:data:`STORAGE`)."""
    classes = ", ".join(f"typeof({c.strip()})" for c in COLUMNS.split(","))
    with sqlite3.connect(db) as conn:
        rows = conn.execute(f"SELECT {classes} FROM events ORDER BY id").fetchall()
    return ["".join(t[0] for t in row) for row in rows]


def test_events_read_back_equal_the_events_committed(
    store_target: str | Path, store_password: str | None
) -> None:
    """The events query gives back each committed event field for field, with its source and
    timing flag, in two commits of one file (a second batch appends after the first)."""
    store = open_store(store_target, agent="a1", password=store_password)
    state = store.commit_read(
        FileState(0, "j", SRC, 1, 2, "h", 10, 0, 0, 0),
        offset=50,
        lineno=9,
        events=EVENTS[:3],
        now_s=1.0,
        from_timing_file=False,
    )
    store.commit_read(
        state, offset=100, lineno=15, events=EVENTS[3:], now_s=2.0, from_timing_file=True
    )
    got = store.events(job="j")
    store.close()
    untimed = [ev for ev in EVENTS if ev.time is None]
    assert [s.event for s in got] == [ev for ev in EVENTS if ev.time is not None] + untimed
    assert {s.source for s in got} == {SRC}
    assert [s.from_timing_file for s in got] == [False] * 3 + [True] * 6
