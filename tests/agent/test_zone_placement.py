"""Logs whose stamps cannot be placed as read: a zone east of UTC read as UTC (stamps after
their files' last writes), files inside the hour repeated when clocks fall back (placed by the
timing file or the runs' order, else flagged). The trial's real HF Trainer runs, re-timed by
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
    # 92.878 s of running time / 3; the truth's 94.462 s / 3 = 31.487 s (88.464 s / 3 before
    # the killed runs' last redraws, which no newline ends, were read)
    assert est["mtbf_s"] == pytest.approx(30.959, abs=1e-3)
    truth = _truth("tokyo")
    running_s = sum(
        end["t"] - begin["t"]
        for begin, end in zip(
            [t for t in truth if t["kind"] == "train_begin"],
            [t for t in truth if t["kind"] in ("die", "train_end")],
            strict=True,
        )
    )
    assert abs(est["mtbf_s"] - running_s / 3) < 0.6
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


DST_COPIED = datetime(2026, 12, 2, 18, 1, 33, tzinfo=UTC)
"""When the trial wrote the re-timed DST logs (their mtime there): no evidence of the hour."""
PLACED = "the stamps of {} lie in the hour repeated when clocks fell back"


def test_logs_inside_the_repeated_hour_are_placed_by_the_timing_file(tmp_path: Path) -> None:
    """The runs re-timed to 01:59 EDT -> 01:01 EST on 2026-11-01, with their timing file: run-3
    and run-4, wholly inside the repeated hour, are read as its first pass (05:00 UTC, before
    run-1 at 05:59), but their 7 saves lie exactly 1 h before the timing file's records of the
    same steps: they are moved onto the second pass, and the estimate is the one of the same
    runs on 2026-12-02 (no DST change: the trial's hf2 logs and timing file, read the same way):
    M 30.96 s (not 50 s; the truth's 31.49 s), C 0.0828 s, goodput 49.6% of the 2m 43s the
    runs took (not 3.3% of 1h 01m); run-1 and run-2, whose saves pair at 0, are not named."""
    logs = _copies(tmp_path, "dst", DST_COPIED, (*RUNS, "ckpt_timings.jsonl"))
    db = str(tmp_path / "s.db")
    est = _estimate(db, *logs, "--tz", "America/New_York")
    [note] = [n for n in est["notes"] if n.startswith("the stamps of ")]
    assert note.startswith(PLACED.format(f"{logs[2]} (from line 15), {logs[3]} (from line 15)"))
    assert (
        "they are in the second (the timing file's records of 7 of their saves lie there)" in note
    )
    assert (est["mtbf_s"], est["exposure_s"]) == pytest.approx((30.9593, 92.8780), abs=1e-4)
    assert est["checkpoint_cost_s"] == pytest.approx(0.08276, abs=1e-5)
    assert est["recommended_interval_s"] == pytest.approx(2.2089, abs=1e-4)
    truth = _truth("dst")
    last_step = max(t["t"] for t in truth if t["kind"] == "step")
    newest_s = datetime.fromisoformat(est["newest_event"]).timestamp()
    assert newest_s == pytest.approx(last_step, abs=1.0)  # 06:01:43 UTC
    goodput = json.loads(_run("goodput", "--db", db, "--job", "j", "--json"))
    assert goodput["wall_s"] == pytest.approx(163.314, abs=1e-3)  # the truth's: 163.48 s
    assert goodput["goodput"] == pytest.approx(0.49588, abs=1e-5)


def test_logs_inside_the_repeated_hour_are_placed_by_the_order_of_the_runs(
    tmp_path: Path,
) -> None:
    """Without the timing file: run-3 resumes from step 160, which run-2 saved at 01:59 EDT;
    read in the first pass (05:00 UTC) it would load the checkpoint an hour before it was
    written, so it is in the second; then run-4, resuming from run-3's save of step 240, is
    too. run-2 crossed the change itself (01:59 then 01:00), and run-1 is the one run-2
    resumed from: both stand. The estimate is the one of the same logs read in December."""
    logs = _copies(tmp_path, "dst", DST_COPIED, RUNS)
    db = str(tmp_path / "s.db")
    est = _estimate(db, *logs, "--tz", "America/New_York")
    [note] = [n for n in est["notes"] if n.startswith("the stamps of ")]
    assert note.startswith(PLACED.format(f"{logs[2]} (from line 15), {logs[3]} (from line 15)"))
    assert "read in the first, 2 resume(s) would load a checkpoint before any file saved" in note
    assert (est["mtbf_s"], est["exposure_s"]) == pytest.approx((30.959, 92.878), abs=1e-3)
    goodput = json.loads(_run("goodput", "--db", db, "--job", "j", "--json"))
    assert goodput["wall_s"] == pytest.approx(163.314, abs=1e-3)


def test_logs_inside_the_repeated_hour_without_evidence_are_flagged(tmp_path: Path) -> None:
    """run-3 and run-4 alone: run-3 resumes from a step no file saves, run-4 from run-3's, which
    fits either pass as long as both are in the same one: nothing places them. Both are named,
    read in the first pass, with what the other reading would change, and the goodput's split
    carries the note."""
    logs = _copies(tmp_path, "dst", DST_COPIED, RUNS[2:])
    db = str(tmp_path / "s.db")
    est = _estimate(db, *logs, "--tz", "America/New_York")
    [note] = [n for n in est["notes"] if n.startswith("the stamps of ")]
    assert note.startswith(PLACED.format(f"{logs[0]} (from line 15), {logs[1]} (from line 15)"))
    assert "they were read as the first; if they are the second, those times are 1h 00m" in note
    assert est["newest_event"] == "2026-11-01T05:01:43.953000+00:00"  # as read: EDT
    goodput = json.loads(_run("goodput", "--db", db, "--job", "j", "--json"))
    assert note in goodput["notes"]
