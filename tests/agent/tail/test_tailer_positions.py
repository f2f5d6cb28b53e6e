"""What the tailer reports for metrics and status (lag, last read, parse misses) and how it
follows a new set of globs after a config reload. Real files, real SQLite."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from ckpt_advisor.agent.store import Store, open_store
from ckpt_advisor.agent.tail import FilePosition, Tailer, WatchSpec

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
RECORD = json.dumps({"step": 1, "end": "2026-11-01T00:00:30+00:00", "duration_s": 30}) + "\n"


def _tailer(store: Store, specs: list[WatchSpec]) -> Tailer:
    return Tailer(store, specs, clock=lambda: NOW, tz=UTC)


def test_positions_tell_an_unfinished_line_from_lag_and_last_read(tmp_path: Path) -> None:
    """After a scan a file's incomplete last line is ``unended_bytes``, no lag (a live job's
    progress bar is such a line all the time, redrawn until a record ends it: ``status`` showed
    every live HF job "lagging"); bytes written after the scan are lag until read; last read
    is the clock's time of the read."""
    path = tmp_path / "ckpt_timings.jsonl"
    bar = "\r" + "x" * 99
    path.write_text(RECORD + bar * 1_000)
    tailer = _tailer(open_store(tmp_path / "s.db"), [WatchSpec("j", (str(path),))])
    tailer.scan()
    [pos] = tailer.positions()
    size = len(RECORD) + 100_000
    assert pos == FilePosition("j", str(path), len(RECORD), size, NOW.timestamp(), None, 100_000)
    assert pos.lag_bytes == 0
    with path.open("a") as fh:
        fh.write(bar)
    [pos] = tailer.positions()
    assert (pos.unended_bytes, pos.lag_bytes) == (100_000, 100)
    tailer.scan()
    [pos] = tailer.positions()
    assert (pos.unended_bytes, pos.lag_bytes) == (100_100, 0)
    with path.open("a") as fh:
        fh.write("\n")
    tailer.scan()
    [pos] = tailer.positions()
    assert (pos.offset_bytes, pos.unended_bytes, pos.lag_bytes) == (size + 101, 0, 0)


def test_bad_timing_records_are_counted_as_parse_misses(tmp_path: Path) -> None:
    """A timing record that cannot be read is one parse miss in the scan's stats."""
    path = tmp_path / "ckpt_timings.jsonl"
    path.write_text(RECORD + "{not json}\n" + RECORD.replace('"step": 1', '"step": 2'))
    tailer = _tailer(open_store(tmp_path / "s.db"), [WatchSpec("j", (str(path),))])
    stats = tailer.scan()
    assert (stats.lines, stats.parse_misses) == (3, 1)


def test_set_specs_drops_removed_jobs_and_finds_new_ones(tmp_path: Path) -> None:
    """After set_specs, files of a removed spec are no longer followed and a new spec's files
    are read on the next scan."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(RECORD)
    b.write_text(RECORD)
    store = open_store(tmp_path / "s.db")
    spec_a = WatchSpec("a", (str(a),))
    spec_b = WatchSpec("b", (str(b),))
    tailer = _tailer(store, [spec_a])
    tailer.scan()
    tailer.set_specs([spec_b])
    a.write_text(RECORD * 2)
    tailer.scan()
    assert [p.job for p in tailer.positions()] == ["b"]
    assert (store.count_events("a"), store.count_events("b")) == (1, 1)
