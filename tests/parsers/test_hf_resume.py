"""A resumed HF Trainer run's bar gives steps but no seconds per step (parsers/hf_trainer.py),
on the real capture ``fixtures/hf_resume/`` (transformers 5.24.0): tqdm's rate counts the
steps the resume skipped. Checked against the step time the timing file's saves give."""

from __future__ import annotations

import json
import re
import statistics
from datetime import datetime
from pathlib import Path

from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.parsers.events import EventKind
from tests.parsers._helpers import parse, read_lines

CAPTURE = Path(__file__).parent / "fixtures" / "hf_resume"
BAR = re.compile(r"(\d+)/200 \[[\d:]+<[\d:?]+, +([\d.]+)it/s")


def _rates(lines: list[str]) -> dict[int, float]:
    """tqdm's rate (steps a second) at each step's first state in ``lines``."""
    rates: dict[int, float] = {}
    for n, rate in BAR.findall("".join(lines).replace("\r", "\n")):
        rates.setdefault(int(n), float(rate))
    return rates


def _step_time_s(first_step: int, last_step: int) -> float:
    """Seconds per step between the saves at ``first_step`` and ``last_step`` (one run): the
    time between the first's end and the last's start, less the saves between, over the steps
    between; from the timing file, the ground truth the log's figures are checked against."""
    records = [json.loads(line) for line in (CAPTURE / "ckpt_timings.jsonl").open()]
    saves = [r for r in records if first_step <= r["step"] <= last_step]
    first, last = saves[0], saves[-1]
    span_s = (
        datetime.fromisoformat(last["start"]) - datetime.fromisoformat(first["end"])
    ).total_seconds()
    between_s = sum(
        (datetime.fromisoformat(r["end"]) - datetime.fromisoformat(r["start"])).total_seconds()
        for r in saves[1:-1]
    )
    return (span_s - between_s) / (last_step - first_step)


def test_a_resumed_bar_gives_steps_without_tqdms_rate() -> None:
    """Run 2 resumes at step 60: its bar's first state after the jump is step 61, and tqdm's
    rate is far too fast for tens of steps (84/200 at 5.95 it/s: 0.17 s a step, where the
    saves from 80 to 200 give ~0.33 s) and still 14% too fast at the end: none of its steps
    carries a duration. Run 1, not resumed, gives tqdm's rate at each step."""
    run2 = read_lines(CAPTURE / "run-2.log")
    rates = _rates(run2)
    truth_s = _step_time_s(80, 200)
    assert 0.3 < truth_s < 0.37
    assert 1 / rates[84] < 0.6 * truth_s and 1 / rates[200] < 0.9 * truth_s
    events, _ = parse(run2)
    [resume] = [e for e in events if e.kind is EventKind.RESUME]
    assert resume.step == 60
    steps = [e for e in events if e.kind is EventKind.STEP]
    assert [e.step for e in steps][:2] == [61, 80] and steps[-1].step == 200
    assert [e.duration_s for e in steps] == [None] * len(steps)
    run1 = read_lines(CAPTURE / "run-1.log")
    rates = _rates(run1)
    steps, _ = parse(run1)
    steps = [e for e in steps if e.kind is EventKind.STEP]
    assert len(steps) >= 5
    assert all(e.step is not None and e.duration_s == 1 / rates[e.step] for e in steps)


def test_a_crashed_and_resumed_jobs_step_time_is_its_first_runs(tmp_path: Path) -> None:
    """Both runs and the timing file, backfilled: the job's step time is the median of the
    stored steps' durations, run 1's tqdm rates alone (run 2's bar gives none), and the
    recommended save_steps that interval over it; with run 2's rates counted (0.17-0.25 s a
    step) it was 0.286 s, a setting of 8 where run 1's 0.41 s gives 6. (Run 1 ran slower than
    run 2 on a loaded machine, ~0.45 s a step by its saves against ~0.33 s: a step time that
    changes between runs is taken from the runs whose bar gives one.)"""
    db = str(tmp_path / "s.db")
    files = [str(CAPTURE / name) for name in ("run-1.log", "run-2.log", "ckpt_timings.jsonl")]
    runner = CliRunner()
    assert runner.invoke(main, ["ingest", *files, "--job", "j", "--db", db]).exit_code == 0
    [row] = json.loads(runner.invoke(main, ["estimates", "--db", db, "--json"]).stdout)
    stored = runner.invoke(main, ["events", "--db", db, "--kind", "step", "--json"]).stdout
    steps_by_file = [json.loads(line) for line in stored.splitlines()]
    rates = [e["duration_s"] for e in steps_by_file if e["duration_s"] is not None]
    assert {e["source"].rsplit("/", 1)[1] for e in steps_by_file if e["duration_s"]} == {
        "run-1.log"
    }
    assert row["step_time_s"] == statistics.median(rates)
    assert abs(row["step_time_s"] / _step_time_s(20, 60) - 1) < 0.15
    steps = round(row["recommended_interval_s"] / row["step_time_s"])
    assert row["recommended_setting"] == f"save_steps={steps}"


def test_a_named_stack_still_reads_the_timing_file_as_one(tmp_path: Path) -> None:
    """``ingest --format hf_trainer`` with the timing file among the files: the timing file is
    read as a timing file by its content, as with ``auto`` (it was read as HF text: no
    checkpoint from it, C from the log lines alone), and the estimate is ``auto``'s."""
    files = [str(CAPTURE / name) for name in ("run-1.log", "run-2.log", "ckpt_timings.jsonl")]
    runner = CliRunner()
    rows = []
    for fmt in ("auto", "hf_trainer"):
        db = str(tmp_path / f"{fmt}.db")
        args = ["ingest", *files, "--job", "j", "--db", db, "--format", fmt]
        assert runner.invoke(main, args).exit_code == 0
        [row] = json.loads(runner.invoke(main, ["estimates", "--db", db, "--json"]).stdout)
        rows.append(row)
    assert rows[1]["checkpoint_cost_source"] == "timing_file"
    keys = ("checkpoint_cost_s", "mtbf_s", "step_time_s", "recommended_setting")
    assert [rows[1][k] for k in keys] == [rows[0][k] for k in keys]
