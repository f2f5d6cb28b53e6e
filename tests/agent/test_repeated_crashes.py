"""A crash that comes back after the job resumed and trained is a new interruption, however
soon and at whatever step (README "Failed restart attempts"; docs/DESIGN.md "M from data").

The logs are the captured real runs (agent/fixtures/real: an HF Trainer crash at step 59 and
its resume from checkpoint-50; a Lightning crash at step 130 and its resume) put one after
another as a restarting job writes them, stamps moved by a whole number of seconds where a
cycle is repeated, and ingested through the real CLI into a real SQLite store.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from tests.agent.helpers import capture_lines, stamps_later

FIXTURES = Path(__file__).parents[2] / "agent" / "fixtures" / "real"


def _lines(name: str) -> list[str]:
    """The physical lines of the capture ``name``."""
    return capture_lines(FIXTURES / name)


def _ingest(tmp_path: Path, lines: Sequence[str]) -> dict[str, Any]:
    log = tmp_path / "train.log"
    log.write_bytes(("\n".join(lines) + "\n").encode("utf-8"))
    db = str(tmp_path / "s.db")
    result = CliRunner().invoke(main, ["ingest", str(log), "--job", "j", "--db", db])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["estimates", "--db", db, "--json"])
    [estimate] = json.loads(result.stdout)
    return dict(estimate)


def test_a_crash_at_the_same_step_after_a_resume_is_a_second_interruption(
    tmp_path: Path,
) -> None:
    """The HF crash at step 59, its resume from checkpoint-50 two minutes later up to step 59
    (the resume capture's first 28 lines), and the same traceback again (without the crashed
    bar's final redraw, which is the first process's): 2 CUDA interruptions (the parser kept
    one before, the step number being the same), M the running time over 2 (each run to its
    failure; the second failure re-dated by the step time, as every failure is: 0.153 s a
    step, the crash run's bar rates' median, the resumed run's bar giving none)."""
    crash = _lines("hf_trainer_crash.log")
    traceback = [crash[45][crash[45].index("Traceback") :], *crash[46:-1]]
    estimate = _ingest(
        tmp_path, [*crash, *stamps_later(_lines("hf_trainer_resume.log")[:28], 120), *traceback]
    )
    assert (estimate["n_failures"], estimate["n_checkpoints"]) == (2, 2)
    assert estimate["failure_classes"] == {"cuda_illegal_memory_access": 2}
    assert estimate["exposure_s"] == pytest.approx(12.059, abs=0.001)
    assert estimate["mtbf_s"] == pytest.approx(12.059 / 2, abs=0.001)


def test_lightning_crashing_twice_without_stamps_is_two_interruptions(tmp_path: Path) -> None:
    """The Lightning crash (NCCL at step 130) and its resume, twice, no timestamps anywhere:
    2 NCCL interruptions (one before: with no time to tell them apart, the parser took the
    second traceback as the first one's echo) and the 10 saves of both cycles."""
    cycle = [*_lines("lightning_crash.log"), *_lines("lightning_resume.log")]
    estimate = _ingest(tmp_path, [*cycle, *cycle])
    assert (estimate["n_failures"], estimate["n_checkpoints"]) == (2, 10)
    assert estimate["failure_classes"] == {"nccl_error": 2}


def test_restarts_seconds_apart_that_train_are_separate_interruptions(tmp_path: Path) -> None:
    """The HF crash, its resume at the captured pace (13 s after the crash's start, finishing at
    step 120), then the same crash-and-resume cycle 40 s later: 2 interruptions, 10 saves, R
    5.85 s (each crash to the resumed bar's first step) and goodput 70%. Before: 1 interruption
    (the 60 s burst gap joined the crashes across the resume, its saves and the clean end), 15
    saves (the interruption spanned the second cycle's 5 saves, each save's start and end line
    then fell in runs of their own and counted as two saves), R 46 s, goodput 28%."""
    cycle = [*_lines("hf_trainer_crash.log"), *_lines("hf_trainer_resume.log")]
    estimate = _ingest(tmp_path, [*cycle, *stamps_later(cycle, 40)])
    assert (estimate["n_failures"], estimate["n_checkpoints"]) == (2, 10)
    assert estimate["failure_classes"] == {"cuda_illegal_memory_access": 2}
    assert estimate["restart_cost_s"] == pytest.approx(5.847, abs=0.001)
    assert estimate["goodput_current"] == pytest.approx(0.700, abs=0.001)
