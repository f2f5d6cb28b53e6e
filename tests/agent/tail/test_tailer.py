"""The tailer on real files: offsets, partial lines, restarts, rotation, truncation, long lines."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ckpt_advisor.agent.store import Store, open_store
from ckpt_advisor.agent.tail import Tailer, WatchSpec
from ckpt_advisor.agent.tail.reader import MAX_LINE_BYTES
from tests.agent.tail.helpers import FIXTURES, NOW, record


def _tailer(store: Store, pattern: str, *, backfill: bool = False) -> Tailer:
    return Tailer(
        store,
        [WatchSpec("j", (pattern,))],
        clock=lambda: NOW,
        tz=UTC,
        backfill=backfill,
    )


def _steps(store: Store) -> list[int | None]:
    return [e.event.step for e in store.events(job="j")]


def test_reads_new_file_from_start_then_only_appended_lines(tmp_path: Path) -> None:
    """A file seen first is read from byte 0; the next scan reads only what was appended."""
    store = open_store(tmp_path / "s.db")
    path = tmp_path / "ckpt_timings.jsonl"
    path.write_text(record(1) + record(2))
    tailer = _tailer(store, str(tmp_path / "*.jsonl"))
    assert tailer.scan().events == 2
    with path.open("a") as fh:
        fh.write(record(3))
    stats = tailer.scan()
    assert (stats.events, stats.lines) == (1, 1)
    assert _steps(store) == [1, 2, 3]
    assert all(e.from_timing_file and e.event.duration_s == 30.0 for e in store.events(job="j"))


def test_partial_last_line_waits_for_its_newline_across_restart(tmp_path: Path) -> None:
    """A line without its newline is not parsed, and is parsed once after a restart completes it."""
    store = open_store(tmp_path / "s.db")
    path = tmp_path / "t.jsonl"
    rec = record(2)
    path.write_text(record(1) + rec[:20])
    tailer = _tailer(store, str(path))
    tailer.scan()
    assert _steps(store) == [1]
    tailer.close()
    with path.open("a") as fh:
        fh.write(rec[20:])
    restarted = _tailer(store, str(path))
    restarted.scan()
    assert _steps(store) == [1, 2]
    assert restarted.scan().events == 0


def test_rename_rotation_drains_old_file_and_reads_new_from_zero(tmp_path: Path) -> None:
    """Lines written to a file just before it is renamed away are still read; the new file
    under the old name is read from its start."""
    store = open_store(tmp_path / "s.db")
    path = tmp_path / "t.jsonl"
    path.write_text(record(1))
    tailer = _tailer(store, str(path))
    tailer.scan()
    with path.open("a") as fh:
        fh.write(record(2))
    os.rename(path, tmp_path / "t.jsonl.1")
    path.write_text(record(3))
    tailer.scan()
    assert _steps(store) == [1, 2, 3]


def test_copytruncate_restarts_at_zero_and_is_counted(tmp_path: Path) -> None:
    """A file that became shorter than the offset is read again from 0 and counted."""
    store = open_store(tmp_path / "s.db")
    path = tmp_path / "t.jsonl"
    path.write_text(record(1) + record(2))
    tailer = _tailer(store, str(path))
    tailer.scan()
    with path.open("r+") as fh:
        fh.truncate(0)
    with path.open("a") as fh:
        fh.write(record(3))
    stats = tailer.scan()
    assert stats.truncations == 1
    assert _steps(store) == [1, 2, 3]
    assert store.files("j")[0].truncations == 1


def test_overlong_line_is_skipped_and_later_lines_parsed(tmp_path: Path) -> None:
    """A line longer than the limit is skipped and counted; the lines after it are read."""
    store = open_store(tmp_path / "s.db")
    path = tmp_path / "t.jsonl"
    with path.open("w") as fh:
        fh.write(record(1))
        fh.write("x" * (MAX_LINE_BYTES * 3) + "\n")
        fh.write(record(2))
    stats = _tailer(store, str(path)).scan()
    assert stats.skipped_lines == 1
    assert _steps(store) == [1, 2]


def test_backfill_dates_untimed_failure_from_the_log_not_the_read_time(tmp_path: Path) -> None:
    """In a backfill, a traceback (no timestamp) is dated from the log itself (the tqdm bar
    clock, else the latest earlier timestamp), marked estimated, never the time of reading."""
    store = open_store(tmp_path / "s.db")
    log = tmp_path / "train.log"
    log.write_bytes((FIXTURES / "hf_trainer_crash.log").read_bytes())
    _tailer(store, str(log), backfill=True).scan()
    [failure] = [e for e in store.events(job="j") if e.event.kind == "failure"]
    assert failure.event.time_estimated
    assert failure.event.time is not None
    assert datetime(2026, 11, 29, 22, 11, 42, tzinfo=UTC) <= failure.event.time
    assert failure.event.time < datetime(2026, 11, 29, 22, 11, 46, tzinfo=UTC)


def test_live_untimed_line_gets_the_read_time(tmp_path: Path) -> None:
    """A line with no timestamp appended while tailing gets the time it was read: that of the
    idle flush, in a file that has printed no time yet (its events are held for a first
    printed time until the file is quiet, parsers/logs.py)."""
    store = open_store(tmp_path / "s.db")
    log = tmp_path / "train.log"
    lightning = (FIXTURES / "lightning_crash.log").read_bytes()
    log.write_bytes(b"")
    now = [NOW]
    tailer = Tailer(store, [WatchSpec("j", (str(log),))], clock=lambda: now[0], tz=UTC)
    tailer.scan()
    log.write_bytes(lightning)
    tailer.scan()
    assert [e for e in store.events(job="j") if e.event.kind == "checkpoint_start"] == []
    now[0] = NOW + timedelta(seconds=3)  # quiet past the idle flush (2 s)
    tailer.scan()
    saves = [e for e in store.events(job="j") if e.event.kind == "checkpoint_start"]
    assert [e.event.step for e in saves] == [40, 80, 120]
    assert all(e.event.time == now[0] and e.event.time_estimated for e in saves)
