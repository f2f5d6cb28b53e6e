"""Logs whose stamps cannot be placed as read: a zone east of UTC read as UTC (stamps after
their files' last writes). The trial's real HF Trainer runs, re-timed by
``tests/agent/fixtures/zones/retime.py``, copied with the trial's mtimes, ingested through
the CLI into real SQLite stores; the truth is the runs' own ``truth.jsonl``."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main

ZONES = Path(__file__).parent / "fixtures" / "zones"
KIND = "stamp_after_write"
RUNS = ("run-1.log", "run-2.log", "run-3.log", "run-4.log")
TOKYO_COPIED = datetime(2026, 12, 2, 17, 58, 35, tzinfo=UTC)
"""When the trial copied the Tokyo logs (their mtime there): 17 min after the last run ended."""


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), env={"COLUMNS": "220"})
    assert result.exit_code == 0, result.output
    return result.stdout


def _copies(tmp_path: Path, folder: str, mtime: datetime, names: tuple[str, ...]) -> list[str]:
    """``names`` of a fixture folder copied under ``tmp_path``, each with ``mtime``."""
    out = tmp_path / folder
    out.mkdir()
    for name in names:
        shutil.copyfile(ZONES / folder / name, out / name)
        os.utime(out / name, (mtime.timestamp(), mtime.timestamp()))
    return [str(out / name) for name in names]


def _estimate(db: str, *ingest: str) -> dict[str, Any]:
    _run("ingest", *ingest, "--job", "j", "--db", db)
    [est] = json.loads(_run("estimates", "--db", db, "--json"))
    return est


def _truth(folder: str) -> list[dict[str, Any]]:
    lines = (ZONES / folder / "truth.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_tokyo_logs_read_as_utc_are_flagged_in_the_future(tmp_path: Path) -> None:
    """Asia/Tokyo stamps read as UTC lie 8h 39m to 8h 42m after the files' mtimes (9 h less
    the 17 min between the runs and the copy): each file is named with its first stamped
    line, the estimate keeps its numbers (every time is off by the same 9 h, so the spans hold:
    the same M, C and goodput as read in Asia/Tokyo, whose times are the truth's), and says
    what is off and the setting that fixes it."""
    logs = _copies(tmp_path, "tokyo", TOKYO_COPIED, RUNS)
    est = _estimate(str(tmp_path / "utc.db"), *logs)
    [note] = [n for n in est["notes"] if n.startswith("the stamps of ")]
    lines = (13, 15, 15, 15)  # each file's "***** Running training *****"
    named = ", ".join(f"{p} (from line {n})" for p, n in zip(logs, lines, strict=True))
    assert note.startswith(f"the stamps of {named} lie up to 8h 42m after their file's last write")
    assert "set --tz (ingest), or the job's timezone or [parse] timezone" in note
    listed = _run("events", "--db", str(tmp_path / "utc.db"), "--json", "--kind", KIND)
    found = [json.loads(line) for line in listed.splitlines()]
    # each file's first stamp, 02:38:31.639 .. 02:40:59.076 read as UTC, less 17:58:35
    assert [round(e["duration_s"], 3) for e in found] == [31196.639, 31240.136, 31290.84, 31344.076]

    tokyo = _estimate(str(tmp_path / "tokyo.db"), *logs, "--tz", "Asia/Tokyo")
    assert not [n for n in tokyo["notes"] if n.startswith("the stamps of ")]
    for key in ("mtbf_s", "exposure_s", "checkpoint_cost_s", "goodput_current", "n_failures"):
        assert est[key] == tokyo[key]
    assert est["mtbf_s"] == pytest.approx(29.488, abs=1e-3)  # 88.464 s of running time / 3
    last_step = max(t["t"] for t in _truth("tokyo") if t["kind"] == "step")
    newest_s = datetime.fromisoformat(tokyo["newest_event"]).timestamp()
    assert newest_s == pytest.approx(last_step, abs=1.0)  # 17:41:14 UTC, the truth's
    assert datetime.fromisoformat(est["newest_event"]).timestamp() - newest_s == 9 * 3600


def test_stamps_before_the_last_write_are_not_flagged(tmp_path: Path) -> None:
    """The same logs read in their own zone, or copied 9 h later (an mtime after every stamp
    read as UTC), give no such note: only a time that had not come yet is impossible."""
    later = datetime(2026, 12, 3, 2, 58, tzinfo=UTC)
    logs = _copies(tmp_path, "tokyo", later, RUNS)
    est = _estimate(str(tmp_path / "s.db"), *logs)
    assert not [n for n in est["notes"] if n.startswith("the stamps of ")]
