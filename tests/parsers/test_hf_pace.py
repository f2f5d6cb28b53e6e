"""A job whose step time changed between runs, on the real capture ``fixtures/hf_pace/``
(transformers 5.24.0): run 1 ran ~0.7 s a step and crashed at step 46, run 2 resumed from
checkpoint-40 at ~0.28 s a step (a job moved to faster nodes). The interval is advised in steps
of the pace the job has now (``rules/progress.py`` ``step_time_s``): the timing file's saves are
the truth of each run's pace."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from click.testing import CliRunner

from ckpt_advisor.agent.cli import main

CAPTURE = Path(__file__).parent / "fixtures" / "hf_pace"


def _pace_s(first_step: int, last_step: int) -> float:
    """Seconds per step between the saves at ``first_step`` and ``last_step`` (one run): the
    time from the first's end to the last's start, less the saves between, over the steps."""
    records = [json.loads(line) for line in (CAPTURE / "ckpt_timings.jsonl").open()]
    saves = [r for r in records if first_step <= r["step"] <= last_step]

    def at(record: dict[str, str], key: str) -> datetime:
        return datetime.fromisoformat(record[key])

    between_s = sum((at(r, "end") - at(r, "start")).total_seconds() for r in saves[1:-1])
    span_s = (at(saves[-1], "start") - at(saves[0], "end")).total_seconds()
    return (span_s - between_s) / (last_step - first_step)


def test_the_interval_is_advised_in_steps_of_the_newest_runs_pace(tmp_path: Path) -> None:
    """Both runs and the timing file, backfilled: the step time is run 2's (within 10% of its
    saves' pace), not run 1's tqdm rate, 2.5× slower, that the window's median took (0.699 s:
    ``save_steps=2`` where the job now runs 4 steps in the recommended interval)."""
    run1_s, run2_s = _pace_s(10, 40), _pace_s(60, 120)
    assert 0.6 < run1_s < 0.8 and 0.2 < run2_s < 0.35
    db = str(tmp_path / "s.db")
    files = [str(CAPTURE / n) for n in ("run-1.log", "run-2.log", "ckpt_timings.jsonl")]
    runner = CliRunner()
    assert runner.invoke(main, ["ingest", *files, "--job", "j", "--db", db]).exit_code == 0
    [row] = json.loads(runner.invoke(main, ["estimates", "--db", db, "--json"]).stdout)
    assert abs(row["step_time_s"] / run2_s - 1) < 0.1
    steps = round(row["recommended_interval_s"] / row["step_time_s"])
    assert row["recommended_setting"] == f"save_steps={steps}"
    assert abs(steps - row["recommended_interval_s"] / run2_s) <= 1
    assert steps > 1.5 * row["recommended_interval_s"] / run1_s
