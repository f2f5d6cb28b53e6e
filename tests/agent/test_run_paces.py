"""Runs of one job at different paces (``tests/agent/fixtures/loaded_runs/``: four real HF
Trainer runs on a loaded machine, three crashes): each failure is re-dated by its own run's
pace (``rules/progress.py`` ``run_step_times_s``). Re-dated by the job's one step time, taken
from a slower run, the second and third crashes were moved past the next runs' starts: R
0.46 s where the runs took ~8 s to train again, and the time counted as lost work."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from ckpt_advisor.agent.cli import main

RUNS = Path(__file__).parent / "fixtures" / "loaded_runs"


def _truth() -> tuple[list[float], float]:
    """Per crash, the seconds from it to the next run's training start (the restart: the
    first step began then), and the seconds of work it lost (from the end of the save the next
    run resumed from)."""
    events = [json.loads(line) for line in (RUNS / "truth.jsonl").open()]
    restarts_s, lost_s = [], 0.0
    for i, crash in enumerate(events):
        if crash["ev"] != "crash":
            continue
        later = events[i + 1 :]
        begin = next(e for e in later if e["ev"] == "train_begin")
        saved = [e for e in events[:i] if e["ev"] == "save_end" and e["step"] == begin["step"]]
        restarts_s.append(begin["t"] - crash["t"])
        lost_s += crash["t"] - saved[-1]["t"]
    return restarts_s, lost_s


def _run(*args: str) -> Any:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_each_failure_is_redated_by_its_own_runs_pace(tmp_path: Path) -> None:
    """The four runs and the timing file, backfilled: R within a second of the runs' median
    restart (crash to the next run's training start, 7.9 s; it was 0.46 s), and goodput's
    restart and lost buckets within 3 s of the truth's (24.0 s and 15.5 s; they were 8.7 s and
    31.5 s)."""
    restarts_s, lost_s = _truth()
    assert len(restarts_s) == 3 and 7.5 < statistics.median(restarts_s) < 8.5
    db = str(tmp_path / "s.db")
    logs = [str(RUNS / f"run-{i}.log") for i in range(4)]
    _run("ingest", *logs, str(RUNS / "ckpt_timings.jsonl"), "--job", "j", "--db", db)
    [row] = json.loads(_run("estimates", "--db", db, "--json"))
    assert row["n_failures"] == 3
    assert abs(row["restart_cost_s"] - statistics.median(restarts_s)) < 1.0
    goodput = json.loads(_run("goodput", "--job", "j", "--db", db, "--json"))
    assert abs(goodput["restart_s"] - sum(restarts_s)) < 3.0
    assert abs(goodput["lost_s"] - lost_s) < 3.0


def test_the_save_as_training_ends_is_no_interval(tmp_path: Path) -> None:
    """``save_steps=25`` and 160 steps: HF saves at 150 and again at 160 as training ends.
    The current interval is 25 steps (it read 18, the median of 25 and 10: the only two pairs
    of saves in one run were 100->125 and 150->160), and in seconds the spacing of 25 steps."""
    kills = RUNS / "kills"
    plan = json.loads((kills / "plan.json").read_text())
    db = str(tmp_path / "s.db")
    logs = [str(kills / f"run-{i}.log") for i in range(5)]
    _run("ingest", *logs, str(kills / "ckpt_timings.jsonl"), "--job", "j", "--db", db)
    [row] = json.loads(_run("estimates", "--db", db, "--json"))
    assert row["current_interval_steps"] == plan["env"]["SAVE_STEPS"] == 25
    records = [json.loads(line) for line in (kills / "ckpt_timings.jsonl").open()]
    assert [r["step"] for r in records][-2:] == [150, 160]
    assert row["current_interval_s"] > 20 * row["step_time_s"]
