"""`ingest` then `estimates --json` on logs whose timeline is hard: never silently wrong.

Each log is made of the captured real lines, re-timed (tests/parsers/_hf_logs.py), or is a
captured log itself.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.agent.synth import simulate
from ckpt_advisor.agent.units import format_duration
from tests.parsers._hf_logs import HfLog, at

FIXTURES = Path(__file__).parents[2] / "agent" / "fixtures" / "real"
HF = Path(__file__).parents[1] / "parsers" / "fixtures" / "hf_trainer"


def _estimate(tmp_path: Path, *logs: Path, tz: str = "UTC") -> dict[str, Any]:
    tmp_path.mkdir(exist_ok=True)
    db = str(tmp_path / "s.db")
    ingest = ["ingest", *map(str, logs), "--job", "j", "--db", db, "--tz", tz]
    result = CliRunner().invoke(main, ingest)
    assert result.exit_code == 0, result.stderr
    result = CliRunner().invoke(main, ["estimates", "--db", db, "--json"])
    [estimate] = json.loads(result.stdout)
    return dict(estimate)


def _write(tmp_path: Path, log: HfLog, name: str = "train.log") -> Path:
    path = tmp_path / name
    path.write_text(log.text(), encoding="utf-8")
    return path


def test_a_traceback_after_two_saves_does_not_cut_the_running_time(tmp_path: Path) -> None:
    """Run start 08:00, saves at 09:00 and 10:00, loss dicts, an untimed traceback: the run
    ran at least until its last save's lines (10:00:40), 7,240 s (main gave 3,640 s: the
    traceback was dated 08:00)."""
    log = HfLog().header(at(8)).metrics().save(at(9), 600).metrics().save(at(10), 1200)
    est = _estimate(tmp_path, _write(tmp_path, log.metrics().traceback()))
    assert est["n_failures"] == 1
    assert est["exposure_s"] == 7240.0


def test_a_clock_that_steps_back_does_not_shrink_the_running_time(tmp_path: Path) -> None:
    """08:00 to 16:00 with a save every 30 min, the node's clock set back 3 h at 12:30: the
    running time is summed per stretch of the steady clock (all of it but the 30 min between
    the two saves around the step, which no line measures), and a note names the file and the
    line of the step (main gave 16,240 s, and no note)."""
    log = HfLog().header(at(8))
    for k in range(1, 17):
        printed = at(8) + timedelta(minutes=30 * k) - timedelta(hours=3 if k > 8 else 0)
        log.metrics().save(printed, 300 * k)
    path = _write(tmp_path, log.traceback())
    est = _estimate(tmp_path, path)
    true_s = 8 * 3600.0 + 40.0  # to the last save's last line, 16:00:40
    assert true_s - 1800.0 <= est["exposure_s"] <= true_s + 600.0
    line = log.line_of("checkpoint-2700")
    [note] = [n for n in est["notes"] if "stepped back" in n]
    assert note.startswith(f"the clock of {path} stepped back 2h 30m at line {line}")


def test_lightning_logs_name_the_missing_timestamps(tmp_path: Path) -> None:
    """Backfilling the Lightning captures (no stamp on any line): the notes put the unknown C
    down to the missing timestamps, naming both files, instead of "no run with two saves"
    (the crash log has three); the current interval is the saves' 40 steps times the step
    time the bar printed, and a note says why."""
    crash, resume = FIXTURES / "lightning_crash.log", FIXTURES / "lightning_resume.log"
    est = _estimate(tmp_path, crash, resume)
    notes = est["notes"]
    assert not any("no run with two saves" in note for note in notes)
    assert any(n.startswith("no checkpoint duration seen: 2 log file(s)") for n in notes)
    assert est["current_interval_steps"] == 40
    assert est["current_interval_s"] == pytest.approx(40 * est["step_time_s"])
    step = format_duration(est["step_time_s"])
    assert (
        f"the current interval is 40 steps between saves × {step} a step: no save is timed "
        "(2 log file(s) print no timestamps)"
    ) in notes
    [named] = [n for n in notes if n.startswith("no timestamps in")]
    assert f"{crash} (first event at line 1)" in named
    assert f"{resume} (first event at line 1)" in named


def test_a_cost_read_from_log_lines_is_shown_as_a_bound(tmp_path: Path) -> None:
    """Three days of HF lines without a timing file, saves of 120 s logged as 48 s: the JSON
    says C is a lower bound, its plausible range holds 120 s, and the recommended range is
    Daly's interval over it."""
    job = simulate(mtbf_s=6 * 3600.0, cost_s=120.0, interval_steps=200, duration_s=3 * 86400.0)
    path = tmp_path / "train.log"
    path.write_text("".join(text for _, text in job.log), encoding="utf-8")
    est = _estimate(tmp_path, path)
    assert est["checkpoint_cost_s"] == 48.0
    assert est["checkpoint_cost_is_lower_bound"] is True
    low_c, high_c = est["checkpoint_cost_range_s"]
    assert low_c == 48.0 and 120.0 <= high_c <= 122.0
    low_t, high_t = est["recommended_interval_range_s"]
    assert low_t <= est["recommended_interval_s"] < high_t


def test_parse_shows_each_failure_line_s_interruption(tmp_path: Path) -> None:
    """A crash, then a restart that dies before any progress: ``parse --json`` gives both
    failure lines interruption 1 and lists both as merged into it (the estimate counts one);
    a failure without a time (Lightning) has none."""
    log = HfLog().header(at(8)).metrics().save(at(9), 600).metrics().traceback()
    log.header(at(9, 30)).traceback(run=1)
    path = _write(tmp_path, log)
    lightning = FIXTURES / "lightning_crash.log"
    result = CliRunner().invoke(main, ["parse", str(path), str(lightning), "--json"])
    assert result.exit_code == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    failures = [r for r in rows if r["kind"] == "failure"]
    merged = [f"{path}:{r['line']}" for r in failures if r["source"] == str(path)]
    assert len(merged) == 2
    assert [(r["interruption"], r["interruption_lines"]) for r in failures] == [
        (1, merged),
        (1, merged),
        (None, []),
    ]
    table = CliRunner().invoke(main, ["parse", str(path)]).stdout
    assert table.count("#1 +1") == 2


def test_a_log_read_in_the_wrong_zone_beside_its_timing_file_is_moved_onto_it(
    tmp_path: Path,
) -> None:
    """The HF capture and its timing file (both written in UTC), the log read as New York
    time: its saves are stamped 5h later than the timing records of the same steps (10, 20,
    30, 40); the log's times are moved onto the timing file's clock, so every figure is the
    one read in UTC, and a note says what was done with the fix; read in UTC, no such note."""
    log, timings = HF / "hf_trainer_446.log", HF / "ckpt_timings.jsonl"
    wrong = _estimate(tmp_path, log, timings, tz="America/New_York")
    assert (
        "the log's saves are stamped 5h 00m after the timing file's at the same steps (4 saves): "
        "the log's times, printed without a zone, were read in the wrong one (or the timing "
        "file's, written without one, were local times); the log's were moved by that onto the "
        "timing file's clock, so what is measured between the two holds, but the log's times as "
        "stored and shown are off: set --tz (ingest), or the job's timezone or [parse] "
        "timezone (the daemon), to the nodes' zone"
    ) in wrong["notes"]
    right = _estimate(tmp_path / "utc", log, timings)
    assert not any("timing file's at the same steps" in note for note in right["notes"])
    figures = (
        "exposure_s", "current_interval_s", "current_interval_steps", "checkpoint_cost_s",
        "n_checkpoints", "step_time_s", "restart_cost_s", "n_failures", "newest_event",
    )  # fmt: skip
    assert {k: wrong[k] for k in figures} == {k: right[k] for k in figures}
    # two runs, 23:06:56.5 to the clean end at 23:07:10.7 and 23:07:11.7 to 23:07:19.3 (left
    # on two clocks, the hours between the sources made it 37 s)
    assert wrong["exposure_s"] == pytest.approx(21.77, abs=0.01)
