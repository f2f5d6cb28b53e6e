"""The store's share of a backfill (issue 15): ``python -m bench --only store``.

The event-dense log of ``--dense-mb`` MB (:data:`bench.inputs.DENSE`) is read once by the real
tailer (as ``ingest`` reads it) into a throwaway store, recording every
:meth:`Store.commit_read` it makes (one per 16 MB read, the reader's ``COMMIT_EVERY_BYTES``),
and the recorded commits are pickled under ``--work``. Then the same commits are replayed into
a fresh store of each backend, SQLite always and PostgreSQL where a server can be had
(``--pg-url``, else a throwaway one as ``tests/pg.py`` starts it): the figure is CPU
microseconds of this process per event, from the Event objects to committed rows (the
database server's own CPU is not in it; its wall time is printed beside it).
"""

from __future__ import annotations

import argparse
import os
import pickle
import time
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any

from bench import fleet
from bench.inputs import DENSE, remove_store, training_log
from ckpt_advisor.agent.store import FileState, Store, open_store
from ckpt_advisor.parsers.events import Event

Row = tuple[str, str, str, bool]
TARGET_US = 1.5
"""The store's budget per event (µs of CPU) once the parse is ten times faster (issue 15)."""


@dataclass
class Commit:
    """One recorded :meth:`Store.commit_read`: its offset, line count and events, and the
    ``from_timing_file`` it was given (a bool, or a picklable function of the event)."""

    offset: int
    lineno: int
    events: list[Event]
    from_timing_file: Any
    finished: bool


@dataclass
class _Recording:
    """A store that records the commits made through it and passes everything on."""

    store: Store
    commits: list[Commit] = field(default_factory=list)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def commit_read(self, file: FileState, **kw: Any) -> FileState:
        events = list(kw["events"])
        self.commits.append(
            Commit(kw["offset"], kw["lineno"], events, kw["from_timing_file"], kw["finished"])
        )
        return self.store.commit_read(file, **kw)


def recorded_commits(work: Path, size_mb: int) -> list[Commit]:
    """The commits the tailer makes reading the dense log of ``size_mb`` MB (made once and
    pickled under ``work``)."""
    log = work / "train-dense" / f"{size_mb}mb.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    training_log(log, size_mb << 20, DENSE)
    cache = log.with_suffix(".commits.pickle")
    if cache.exists() and cache.stat().st_mtime >= log.stat().st_mtime:
        with cache.open("rb") as fh:
            commits: list[Commit] = pickle.load(fh)
            return commits
    from ckpt_advisor.agent.app import backfill_specs, utc_now
    from ckpt_advisor.agent.tail import Tailer

    db = work / "store-record.db"
    remove_store(db)
    recording = _Recording(open_store(db))
    specs = backfill_specs("dense", [str(log)], fmt="auto", config=None)
    tailer = Tailer(recording, specs, clock=utc_now, tz=UTC, backfill=True)  # type: ignore[arg-type]
    tailer.scan()
    tailer.close()
    recording.store.close()
    remove_store(db)
    with cache.open("wb") as fh:
        pickle.dump(recording.commits, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return recording.commits


def replay(store: Store, commits: list[Commit], path: str) -> tuple[float, float]:
    """Commit ``commits`` into ``store`` as the tailer did (a new file, then its offsets);
    (CPU seconds of this process, wall seconds)."""
    state = FileState(0, "dense", path, 1, 1, "0" * 32, 1024, 0, 0, 0)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for c in commits:
        state = store.commit_read(
            state,
            offset=c.offset,
            lineno=c.lineno,
            events=c.events,
            now_s=1.9e9,
            from_timing_file=c.from_timing_file,
            finished=c.finished,
        )
    return time.process_time() - cpu0, time.perf_counter() - wall0


def _row(backend: str, n: int, cpu_s: float, wall_s: float, batches: int) -> Row:
    us = cpu_s / n * 1e6
    return (
        f"store: commit {n:,} dense events, {backend}",
        f"{us:.2f} us/event CPU (wall {wall_s / n * 1e6:.2f}; {batches} commits)",
        f"<= {TARGET_US:g} us",
        us <= TARGET_US,
    )


def bench_store(args: argparse.Namespace, env: dict[str, str]) -> list[Row]:
    """µs per event of the dense log's commits, per backend (the best of ``--store-runs``)."""
    commits = recorded_commits(args.work, args.dense_mb)
    n = sum(len(c.events) for c in commits)
    print(f"  {n:,} events in {len(commits)} commits; load {os.getloadavg()[0]:.1f}")
    path = str(args.work / "train-dense" / f"{args.dense_mb}mb.log")
    best = (float("inf"), float("inf"))
    for _ in range(args.store_runs):
        db = args.work / "store-bench.db"
        remove_store(db)
        store = open_store(db)
        best = min(best, replay(store, commits, path))
        assert store.count_events() == n
        store.close()
        remove_store(db)
    rows = [_row("SQLite", n, *best, len(commits))]
    try:
        with fleet.pg_server(args) as (make, password, name):
            best = (float("inf"), float("inf"))
            for i in range(args.store_runs):
                store = open_store(make(f"store_bench_{i}"), password=password)
                store.prune_events(float("inf"))
                best = min(best, replay(store, commits, path))
                assert store.count_events() == n
                store.close()
            rows.append(_row(name, n, *best, len(commits)))
    except RuntimeError as exc:
        print(f"  PostgreSQL skipped: {exc}")
    return rows
