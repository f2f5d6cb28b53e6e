"""``python -m bench --only store`` on a small dense log (slow: the log is generated and read
by the real tailer): the recorded commits replay into a fresh store with every event, and the
figure per backend is printed."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pytest

from bench import fleet
from bench.store import bench_store, recorded_commits


@pytest.mark.slow
def test_the_store_bench_replays_every_recorded_event(tmp_path: Path) -> None:
    """The dense log's commits are recorded once (the second call reads the pickle, equal to
    the first), hold checkpoint and step events, and the SQLite figure is a per-event CPU time."""
    commits = recorded_commits(tmp_path, 1)
    again = recorded_commits(tmp_path, 1)
    assert [c.events for c in again] == [c.events for c in commits]
    kinds = {str(ev.kind) for c in commits for ev in c.events}
    assert {"checkpoint_start", "checkpoint_end", "step", "failure"} <= kinds
    assert [c.offset for c in commits] == sorted(c.offset for c in commits)
    ap = argparse.ArgumentParser()
    fleet.add_arguments(ap)
    args = ap.parse_args([])
    args.work, args.python, args.dense_mb, args.store_runs = tmp_path, sys.executable, 1, 1
    rows = {figure: measured for figure, measured, _, _ in bench_store(args, {})}
    n = sum(len(c.events) for c in commits)
    measured = rows[f"store: commit {n:,} dense events, SQLite"]
    assert float(re.match(r"([\d.]+) us/event CPU", measured)[1]) > 0  # type: ignore[index]
