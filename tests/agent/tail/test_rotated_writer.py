"""Scenario 29 of docs/RELIABILITY.md end to end: a writer process that keeps its descriptor
while its file is renamed out of the globs and then deleted loses no line, with the daemon as a
subprocess, a real writer process and a real SQLite store; and what it wrote is read to the end
at shutdown."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.agent.processes import start_daemon, until

WRITER = """
import json, sys
out = open(sys.argv[1], "a", buffering=1)  # opened once: renames and deletes do not move it
for command in sys.stdin:
    first, stop = map(int, command.split())
    for step in range(first, stop):
        out.write(json.dumps({"step": step, "end": "2026-11-01T00:00:30+00:00", "duration_s": 30}))
        out.write("\\n")
    print("written", flush=True)
"""
"""Appends timing records ``first..stop-1`` for each ``first stop`` line read from stdin."""


class Writer:
    """A trainer: a separate process holding its log open across renames and deletes."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def write(self, first: int, stop: int) -> None:
        """Append steps ``first..stop-1`` and wait until they are written."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{first} {stop}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline() == "written\n"

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(10)


def _daemon(
    tmp: Path, procs: list[subprocess.Popen[str]], **schedule: str | bool
) -> subprocess.Popen[str]:
    """The daemon following ``tmp/runs/*.jsonl``, started (signal handlers installed)."""
    settings = "".join(f"{key} = {json.dumps(value)}\n" for key, value in schedule.items())
    config = tmp / "c.toml"
    config.write_text(
        f'[store]\npath = "{tmp / "s.db"}"\n[schedule]\nestimate_every = "1h"\n{settings}'
        f'[[jobs]]\nname = "j"\ntimings = ["{tmp}/runs/*.jsonl"]\n'
    )
    proc = start_daemon(config)
    procs.append(proc)
    return proc


def _steps(db: Path) -> list[int]:
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        return sorted(r[0] for r in conn.execute("SELECT step FROM events"))


def test_writer_keeping_its_descriptor_across_rename_and_delete_loses_nothing(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    """300 lines: 100 before the log is renamed out of the glob, 100 after, 100 after the
    renamed file is deleted; the running daemon stores all 300, each once, no restart."""
    (tmp_path / "runs").mkdir()
    log, db = tmp_path / "runs" / "train.jsonl", tmp_path / "s.db"
    log.write_text("")
    daemon = _daemon(tmp_path, procs, poll_every="0.1s")
    writer = Writer(log)
    try:
        writer.write(1, 101)
        assert until(lambda: len(_steps(db)) == 100)
        log.rename(tmp_path / "runs" / "train.jsonl.1")
        writer.write(101, 201)
        assert until(lambda: len(_steps(db)) >= 200), f"{300 - len(_steps(db))} of 300 lost"
        (tmp_path / "runs" / "train.jsonl.1").unlink()
        writer.write(201, 301)
        assert until(lambda: len(_steps(db)) >= 300), f"{300 - len(_steps(db))} of 300 lost"
    finally:
        writer.close()
    time.sleep(0.5)
    assert _steps(db) == list(range(1, 301))
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(20) == 0


def test_lines_written_after_a_delete_are_read_at_shutdown(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    """A daemon that polls once an hour, with file events off, is stopped right after the log
    was renamed, deleted and written to: on SIGTERM it reads the deleted file to its end
    through its descriptor, so all 200 lines are stored."""
    (tmp_path / "runs").mkdir()
    log, db = tmp_path / "runs" / "train.jsonl", tmp_path / "s.db"
    writer = Writer(log)
    try:
        writer.write(1, 101)
        daemon = _daemon(tmp_path, procs, poll_every="1h", file_events=False)
        assert until(lambda: len(_steps(db)) == 100)
        log.rename(tmp_path / "runs" / "train.jsonl.1")
        (tmp_path / "runs" / "train.jsonl.1").unlink()
        writer.write(101, 201)
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(20) == 0
    finally:
        writer.close()
    assert _steps(db) == list(range(1, 201))
