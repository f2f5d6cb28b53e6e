"""Backfill on the machine's cores (issue 15): the default ``ingest`` beside ``--workers 1``.

The default ``ingest`` parses in one worker process per core of its CPU affinity once 64 MB or
more are to be read (``agent/tail/parallel.py``); run again with ``--workers 1`` on the same
log, it must store the same events (every column but the row ids) and the same offsets.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Protocol


class Measured(Protocol):
    """What the bench's timed child gives (``bench.children.Child``)."""

    wall_s: float
    cpu_s: float


def tables_digest(db: Path) -> tuple[str, int]:
    """A digest of the events (every column but ``id``; ``file_id`` as the file's path, in row
    order) and files (every column but ``id`` and ``updated_s``) tables, and the event count."""
    digest = hashlib.blake2b(digest_size=16)
    with sqlite3.connect(db) as conn:

        def columns(table: str, leave: set[str]) -> str:
            names = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            return ", ".join(f'{table}."{n}"' for n in names if n not in leave)

        n = 0
        for row in conn.execute(
            f"SELECT files.path, {columns('events', {'id', 'file_id'})} FROM events "
            "JOIN files ON files.id = events.file_id ORDER BY events.id"
        ):
            digest.update(repr(row).encode())
            n += 1
        files = f"SELECT {columns('files', {'id', 'updated_s'})} FROM files ORDER BY path"
        for row in conn.execute(files):
            digest.update(repr(row).encode())
    return digest.hexdigest(), n


def rows(
    name: str, size_bytes: int, default: Measured, db: Path, one: Callable[[Path], Measured]
) -> list[tuple[str, str, str, bool]]:
    """The rows of one log: ``default`` is its ingest into ``db`` with the default workers;
    ``one(db)`` ingests it with ``--workers 1`` into another store and returns what it took
    (not run below 64 MB, where the default is one process). "Cores used" is met when the
    ingest's CPU seconds exceed its wall seconds (more than one core busy on average)."""
    cores = len(os.sched_getaffinity(0))
    if size_bytes < 64 << 20 or cores == 1:  # the default is one process: nothing to compare
        return [(f"{name}: cores used", f"1 of {cores} (below 64 MB)", "all from 64 MB", True)]
    workers = cores
    single_db = db.with_name(db.stem + "-1worker.db")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{single_db}{suffix}").unlink(missing_ok=True)
    try:
        single = one(single_db)
    except RuntimeError as exc:  # an install without --workers (``--python``)
        return [(f"{name}: 1 vs {workers} workers", str(exc)[:60], "faster wall", False)]
    digest, n_events = tables_digest(db)
    same = (digest, n_events) == tables_digest(single_db)
    busy = default.cpu_s / default.wall_s
    return [
        (
            f"{name}: cores used",
            f"{workers} of {cores} (CPU/wall {busy:.2f}; 1 worker"
            f" {single.cpu_s / single.wall_s:.2f})",
            "all from 64 MB",
            busy > 1.0,
        ),
        (
            f"{name}: 1 vs {workers} workers",
            f"wall {single.wall_s:.2f} / {default.wall_s:.2f} s,"
            f" CPU {single.cpu_s:.2f} / {default.cpu_s:.2f} s",
            "faster wall",
            default.wall_s < single.wall_s,
        ),
        (
            f"{name}: same events at 1 and {workers} workers",
            f"{'identical' if same else 'DIFFERENT'} ({n_events:,} events)",
            "identical",
            same,
        ),
    ]
