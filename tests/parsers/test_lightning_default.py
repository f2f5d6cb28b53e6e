"""A Lightning job with Lightning's default console output, on the real capture
``fixtures/lightning_default/`` (lightning 2.6.6, ``make_capture.py``): no stamps, no line at a
save, the TQDM bar counting batches per epoch; three runs (SIGKILL at step 45, a RuntimeError
at 64 after a resume from step 40, a resume from 60 to the end), one file per run and the same
runs appended in ``train.log``. Each launch's ``GPU available`` starts a run, so the killed run
counts as an interruption, and epoch 1's batch 14 is step 64: 2 interruptions, as
``truth.json`` says (1 before, the OOM at the resumed step 40, M unknown)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.parsers.events import EventKind
from tests.parsers._helpers import parse, read_lines

CAPTURE = Path(__file__).parent / "fixtures" / "lightning_default"
TRUTH = json.loads((CAPTURE / "truth.json").read_text())
RUNS = TRUTH["runs"]
LAYOUTS = {"appended": ["train.log"], "a file per run": [r["log"] for r in RUNS]}


def test_train_log_is_the_run_files_one_after_the_other() -> None:
    joined = b"".join((CAPTURE / r["log"]).read_bytes() for r in RUNS)
    assert (CAPTURE / "train.log").read_bytes() == joined


def test_each_launch_starts_a_run_and_the_failure_is_at_the_step_the_bar_reached() -> None:
    """Per run file: a ``run_start`` at its ``GPU available`` (line 1), its resume at the
    checkpoint's step, its last step the one it died at (epoch 1's batch 14 of 50 is step 64:
    no save line anchors it), the traceback at that step, the clean end at ``max_steps``."""
    for run in RUNS:
        events, parser = parse(read_lines(CAPTURE / run["log"]))
        assert parser.name == "lightning"
        assert [(e.kind, e.line) for e in events[:1]] == [(EventKind.RUN_START, 1)]
        resumes = [e.step for e in events if e.kind is EventKind.RESUME and e.step is not None]
        assert resumes == ([run["resumed_step"]] if run["resumed_from"] else [])
        last = max(e.step for e in events if e.kind is EventKind.STEP)  # type: ignore[type-var]
        assert last == (run["died_at_step"] or TRUTH["max_steps"])
        failures = [(e.failure_class, e.step) for e in events if e.kind is EventKind.FAILURE]
        ended = [e.step for e in events if e.kind is EventKind.RUN_END]
        if run["ended_by"] == "exception":
            assert failures == [("cuda_oom", run["died_at_step"])]
        else:
            assert failures == []
        assert ended == ([TRUTH["max_steps"]] if run["ended_by"] == "completed" else [])


def _estimate(tmp_path: Path, files: list[str]) -> dict[str, Any]:
    db = str(tmp_path / "s.db")
    runner = CliRunner()
    paths = [str(CAPTURE / name) for name in files]
    assert runner.invoke(main, ["ingest", *paths, "--job", "j", "--db", db]).exit_code == 0
    [row] = json.loads(runner.invoke(main, ["estimates", "--db", db, "--json"]).stdout)
    return row  # type: ignore[no-any-return]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_two_interruptions_and_m_a_lower_bound_below_the_truth(tmp_path: Path, layout: str) -> None:
    """Backfilled either way: 2 interruptions (the OOM, the run killed without a word), M a
    lower bound (no time printed: steps × the bar's seconds per batch over the resumed runs,
    114 × ~0.209 s, each run at its own) below the capture's 28.0 s of run time per interruption."""
    row = _estimate(tmp_path, LAYOUTS[layout])
    assert row["n_failures"] == TRUTH["interruptions"] == 2
    assert row["failure_classes"] == {"cuda_oom": 1, "unknown": 1}
    assert row["mtbf_is_lower_bound"] is True
    assert row["exposure_s"] == pytest.approx(114 * row["step_time_s"], rel=0.01)
    assert 0 < row["mtbf_s"] <= TRUTH["mtbf_s"]
    assert row["step_time_s"] == pytest.approx(TRUTH["step_sleep_s"], rel=0.1)
