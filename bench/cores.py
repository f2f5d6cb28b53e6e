"""Backfill on the machine's cores (issue 15): the default ``ingest`` beside ``--workers 1``
and ``--workers N`` (one per core).

The default ``ingest`` parses in one worker process per core of its CPU affinity once 64 MB or
more of an event-dense log are to be read, else in one process (``agent/tail/parallel.py``,
``dense_enough``); on one worker and on one per core it must store the same events (every
column but the row ids) and the same offsets.
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
    name: str,
    size_bytes: int,
    default: Measured,
    db: Path,
    run: Callable[[Path, int], Measured],
) -> list[tuple[str, str, str, bool]]:
    """The rows of one log: ``default`` is its ingest into ``db`` with the default workers;
    ``run(db, n)`` ingests it with ``--workers n`` into another store and returns what it took
    (not run below 64 MB, where the default is one process). Run on one worker and on one per
    core, all three must store the same events and offsets. "Cores used" is met when the
    ingest on one worker per core spends more CPU seconds than wall seconds (more than one core
    busy on average); the default (which takes the workers only for an event-dense log) is met
    when its wall time is within 10% of the faster of the two."""
    cores = len(os.sched_getaffinity(0))
    if size_bytes < 64 << 20 or cores == 1:  # the default is one process: nothing to compare
        return [(f"{name}: cores used", f"1 of {cores} (below 64 MB)", "all from 64 MB", True)]
    measured: dict[int, tuple[Measured, Path]] = {}
    for workers in (1, cores):
        other = db.with_name(f"{db.stem}-{workers}worker{'s' if workers > 1 else ''}.db")
        for suffix in ("", "-wal", "-shm"):
            Path(f"{other}{suffix}").unlink(missing_ok=True)
        try:
            measured[workers] = (run(other, workers), other)
        except RuntimeError as exc:  # an install without --workers (``--python``)
            return [(f"{name}: 1 vs {cores} workers", str(exc)[:60], "faster wall", False)]
    (single, single_db), (many, many_db) = measured[1], measured[cores]
    digest = tables_digest(db)
    same = digest == tables_digest(single_db) == tables_digest(many_db)
    best_s = min(single.wall_s, many.wall_s)
    return [
        (
            f"{name}: cores used by --workers {cores}",
            f"{cores} of {cores} (CPU/wall {many.cpu_s / many.wall_s:.2f})",
            "all from 64 MB",
            many.cpu_s > many.wall_s,
        ),
        (
            f"{name}: 1 vs {cores} workers",
            f"wall {single.wall_s:.2f} / {many.wall_s:.2f} s,"
            f" CPU {single.cpu_s:.2f} / {many.cpu_s:.2f} s",
            "-",
            True,
        ),
        (
            f"{name}: default workers",
            f"wall {default.wall_s:.2f} s, CPU {default.cpu_s:.2f} s (best {best_s:.2f} s)",
            "best +10%",
            default.wall_s <= 1.1 * best_s,
        ),
        (
            f"{name}: same events at default, 1 and {cores} workers",
            f"{'identical' if same else 'DIFFERENT'} ({digest[1]:,} events)",
            "identical",
            same,
        ),
    ]
