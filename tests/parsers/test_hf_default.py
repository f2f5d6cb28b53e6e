"""An HF Trainer job with transformers' default logging, on the real capture
``fixtures/hf_default/`` (transformers 5.24.0, ``make_capture.py``): no logging prefix, no
stamps, no ``Saving model checkpoint`` line, no ``***** Running training *****``; four runs
appended to one ``train.log``, ended by SIGKILL, an exception, SIGKILL and the clean end. The
file is the HF stack's from its first metrics line, each run starts where its bar starts again,
and the two runs killed without a word count as interruptions: 3, as ``truth.json`` says (1
before, and M unknown; with ``--format hf_trainer``, ``M ≥ 50s`` above the true 41.6 s)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.parsers.events import EventKind
from tests.parsers._helpers import parse, read_lines

CAPTURE = Path(__file__).parent / "fixtures" / "hf_default"
LOG = CAPTURE / "train.log"
TRUTH = json.loads((CAPTURE / "truth.json").read_text())
RUNS = TRUTH["runs"]


def _line_of(offset: int) -> int:
    """The number (from 1) of the line holding byte ``offset`` of the log."""
    return LOG.read_bytes()[:offset].count(b"\n") + 1


@pytest.mark.parametrize("fmt", ["auto", "hf_trainer"])
def test_each_run_starts_where_its_bar_starts_again(fmt: str) -> None:
    """A ``run_start`` in each run's lines (from its first byte, ``log_offset``, to the next
    run's), its last step the one the bar showed as it died (the redraw the next run's first
    record is glued to, on the line where that run begins), the exception's traceback at that
    step, and the summary dict of the clean end the ``run_end``."""
    events, parser = parse(read_lines(LOG), fmt)
    assert parser.name == "hf_trainer"
    starts = [e.line for e in events if e.kind is EventKind.RUN_START]
    bounds = [_line_of(run["log_offset"]) for run in RUNS] + [len(read_lines(LOG)) + 1]
    assert len(starts) == len(RUNS) == 4
    assert all(
        lo <= line < hi for line, lo, hi in zip(starts, bounds[:-1], bounds[1:], strict=True)
    )
    last_steps = [
        max(e.step for e in events if e.kind is EventKind.STEP and lo <= e.line <= hi)  # type: ignore[type-var]
        for lo, hi in itertools.pairwise(bounds)
    ]
    assert last_steps == [run["died_at_step"] or TRUTH["max_steps"] for run in RUNS]
    [failure] = [e for e in events if e.kind is EventKind.FAILURE]
    assert (failure.failure_class, failure.step) == ("cuda_oom", RUNS[1]["died_at_step"])
    [end] = [e for e in events if e.kind is EventKind.RUN_END]
    assert end.line > bounds[3] and end.detail is not None and "train_runtime" in end.detail


def test_a_bar_started_runs_pace_is_its_bar_time_over_its_steps() -> None:
    """Such a run may have resumed (no line says so) and a resumed bar's smoothed rate counts
    the steps it jumped: run 4's first redraw after its resume shows 150.65 it/s where it ran
    ~2.5 it/s. Its steps' seconds per step are the bar's elapsed time since its first state
    past 0 over the steps since, once that spans 10 s: within 25% of the Trainer's own
    ``train_steps_per_second`` in its summary (saves fall in the first spans), the last,
    over 100 steps, within 5%."""
    events, _ = parse(read_lines(LOG))
    start = _line_of(RUNS[3]["log_offset"])
    paces = [
        e.duration_s
        for e in events
        if e.kind is EventKind.STEP and e.line >= start and e.duration_s
    ]
    [summary] = re.findall(r"'train_steps_per_second': '([\d.]+)'", LOG.read_text())
    trainer_s = 1 / float(summary)
    assert len(paces) == 5
    assert all(abs(p / trainer_s - 1) < 0.25 for p in paces), (paces, trainer_s)
    assert abs(paces[-1] / trainer_s - 1) < 0.05


def _estimate(tmp_path: Path, fmt: str) -> dict[str, Any]:
    db = str(tmp_path / f"{fmt}.db")
    runner = CliRunner()
    args = ["ingest", str(LOG), "--job", "j", "--db", db, "--format", fmt]
    assert runner.invoke(main, args).exit_code == 0
    [row] = json.loads(runner.invoke(main, ["estimates", "--db", db, "--json"]).stdout)
    return row  # type: ignore[no-any-return]


@pytest.mark.parametrize("fmt", ["auto", "hf_trainer"])
def test_the_three_interruptions_count_and_m_is_a_lower_bound_below_the_truth(
    tmp_path: Path, fmt: str
) -> None:
    """Backfilled: 3 interruptions (the traceback's cuda_oom, two runs that died silently), M a
    lower bound (no time printed: the running time is steps × the step time) at or below the
    capture's 41.6 s of run time per interruption; C unknown (no save line at WARNING)."""
    row = _estimate(tmp_path, fmt)
    assert row["n_failures"] == TRUTH["interruptions"] == 3
    assert row["failure_classes"] == {"cuda_oom": 1, "unknown": 2}
    assert row["mtbf_is_lower_bound"] is True
    assert 0 < row["mtbf_s"] <= TRUTH["mtbf_s"]
    assert row["checkpoint_cost_s"] is None


def test_the_summary_after_training_completed_is_no_second_end() -> None:
    """At INFO the Trainer prints ``Training completed.`` and then the summary dict: one
    ``run_end``, at the first (the real capture ``agent/fixtures/real/hf_trainer_resume.log``)."""
    real = Path(__file__).parents[2] / "agent" / "fixtures" / "real" / "hf_trainer_resume.log"
    lines = read_lines(real)
    [summary_line] = [n for n, line in enumerate(lines, 1) if "{'train_runtime': " in line]
    events, _ = parse(lines)
    [end] = [e for e in events if e.kind is EventKind.RUN_END]
    assert end.line < summary_line and "Training completed" in (end.detail or "")
