"""Shared helpers for the tailer tests: timing records, a settable clock, a live tailer."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ckpt_advisor.agent.store import Store
from ckpt_advisor.agent.tail import Tailer, WatchSpec

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
FIXTURES = Path(__file__).parents[3] / "agent" / "fixtures" / "real"
"""The captured real training logs (HF Trainer, Lightning) that the demo ships."""


def record(step: int) -> str:
    """One checkpoint timing record (JSON line): step ``step`` saved in 30 s, ``step`` hours
    after 2026-11-01."""
    start = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(hours=step)
    end = start + timedelta(seconds=30)
    return json.dumps({"step": step, "start": start.isoformat(), "end": end.isoformat()}) + "\n"


def records(steps: Iterable[int]) -> str:
    """The timing records of ``steps``, one line each."""
    return "".join(record(s) for s in steps)


def sorted_steps(store: Store, job: str = "j") -> list[int]:
    """The steps of every stored event of ``job``, sorted (0 for an event without one)."""
    return sorted(e.event.step or 0 for e in store.events(job=job))


def failures(store: Store, job: str = "j") -> int:
    """How many failure events ``job`` has stored."""
    return sum(e.event.kind == "failure" for e in store.events(job=job))


class Clock:
    """A clock the test moves by hand (``clock.now += ...``), starting at :data:`NOW`."""

    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def live_tailer(store: Store, pattern: str, clock: Clock, *, backfill: bool = False) -> Tailer:
    """A tailer of job ``j`` over ``pattern`` (format detected), flushing after 2 s idle."""
    spec = WatchSpec("j", (pattern,))
    return Tailer(store, [spec], clock=clock, tz=UTC, backfill=backfill, idle_flush_s=2.0)
