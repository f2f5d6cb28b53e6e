"""``goodput`` on a job whose timing file covers some of its saves: every save counts where it
happened, from whichever source has it, once.

The job is real HF Trainer output: the 446 capture (tests/parsers/fixtures/hf_trainer, two runs
and their timing file), then the captured crash at step 59 and its resume from checkpoint-50
(agent/fixtures/real) three times, an hour apart (stamps moved by whole hours). The timing
records of a crash-and-resume pair are those the project's HF callback writes: from the
``Saving model checkpoint`` line to 25 ms after ``Model weights saved`` (the optimizer state
the log does not show; the 446 capture's records end 18-58 ms after that line). The resumed
run's last record so ends at the stamp of its ``Training completed`` line, and sorts after it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from tests.agent.helpers import STAMP, STAMP_FORMAT, capture_lines, stamps_later

REAL = Path(__file__).parents[2] / "agent" / "fixtures" / "real"
HF = Path(__file__).parents[1] / "parsers" / "fixtures" / "hf_trainer"
_SAVING = re.compile(rf"({STAMP.pattern}) >> Saving model checkpoint to \S*checkpoint-(\d+)")
_SAVED = re.compile(rf"({STAMP.pattern}) >> Model weights saved in \S*checkpoint-(\d+)/")
UNSHOWN_S = 0.025
"""What a pair's timing record adds after the ``Model weights saved`` line (seconds)."""
STEP_S = 1 / 6.10
"""The job's step time (the estimate's ``step_time_s``: the median of the bar rates of the runs
not resumed, 6.10 it/s; a resumed run's bar gives none, parsers/hf_trainer.py): each crash is
dated 9 steps after the step-50 save it resumed from, so loses 9/6.10 s."""


def _stamp(text: str) -> datetime:
    return datetime.strptime(text, STAMP_FORMAT).replace(tzinfo=UTC)


def _saves_s(lines: Sequence[str]) -> list[tuple[int, datetime, datetime]]:
    """Per save of the lines: its step, its ``Saving`` stamp and its ``Model weights saved``
    stamp."""
    text = "\n".join(lines)
    began = {int(m[2]): _stamp(m[1]) for m in _SAVING.finditer(text)}
    return [(int(m[2]), began[int(m[2])], _stamp(m[1])) for m in _SAVED.finditer(text)]


def _records(lines: Sequence[str]) -> list[dict[str, Any]]:
    """The timing records of the lines' saves (module docstring)."""
    unshown = timedelta(seconds=UNSHOWN_S)
    return [
        {"step": step, "start": a.isoformat(), "end": (b + unshown).isoformat()}
        for step, a, b in _saves_s(lines)
    ]


def _job(tmp: Path, timed_pairs: int) -> tuple[dict[str, Any], float, float]:
    """Ingest the job with timing records for the 446 capture and the first ``timed_pairs``
    crash-and-resume pairs; ``goodput --by-day --json``, and the checkpoint seconds by hand:
    each timed save's record span, each other save's first line to its last."""
    pair = capture_lines(REAL / "hf_trainer_crash.log")
    pair += capture_lines(REAL / "hf_trainer_resume.log")
    log = capture_lines(HF / "hf_trainer_446.log")
    records = [json.loads(line) for line in (HF / "ckpt_timings.jsonl").read_text().splitlines()]
    log_only_s = 0.0
    for k in (1, 2, 3):
        moved = stamps_later(pair, k * 3600.0)
        log += moved
        if k <= timed_pairs:
            records += _records(moved)
        else:
            log_only_s += sum((b - a).total_seconds() for _, a, b in _saves_s(moved))
    timed_s = sum(
        (datetime.fromisoformat(r["end"]) - datetime.fromisoformat(r["start"])).total_seconds()
        for r in records
    )
    (tmp / "train.log").write_text("\n".join(log) + "\n")
    (tmp / "ckpt_timings.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    db = str(tmp / "s.db")
    for name in ("train.log", "ckpt_timings.jsonl"):
        result = CliRunner().invoke(main, ["ingest", str(tmp / name), "--job", "j", "--db", db])
        assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["goodput", "--job", "j", "--db", db, "--by-day", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), timed_s, log_only_s


def test_saves_only_in_the_log_count_beside_the_timing_files(tmp_path: Path) -> None:
    """The third pair's saves are in the log only. Each crash resumed from the step-50 save
    of its own run and loses the 9 steps since it: 3 × 9/6.10 s = 4.426 s lost (1.475 s on
    29 Nov, 2.951 s on 30 Nov). The third pair's 5 saves count too, each by its log lines (a
    lower bound: HF Trainer logs no end of the optimizer state). Before: 15 saves, checkpoint
    1.096 s, lost 21.253 s (the third crash charged from the second pair's last save, an hour
    before: the rest of that run and the crashed run's 9 s up to the crash)."""
    out, timed_s, log_only_s = _job(tmp_path, timed_pairs=2)
    assert out["n_saves"] == 20
    assert out["lost_s"] == pytest.approx(27 * STEP_S, abs=1e-3) == pytest.approx(4.426, abs=1e-3)
    assert [d["lost_s"] for d in out["by_day"]] == [
        pytest.approx(9 * STEP_S, abs=1e-3),
        pytest.approx(18 * STEP_S, abs=1e-3),
    ]
    assert out["checkpoint_s"] == pytest.approx(timed_s + log_only_s, abs=1e-3)
    assert (timed_s, log_only_s) == (pytest.approx(1.096, abs=1e-3), pytest.approx(0.185))
    checkpoint = out["measured_by"]["checkpoint"]
    assert (checkpoint["source"], checkpoint["bound"]) == ("timing_file_and_log_lines", "lower")
    low, high = checkpoint["range_s"]
    assert low == out["checkpoint_s"] < high
    assert "5 only in the log" in checkpoint["how"]


def test_saves_in_both_sources_count_once_by_their_timing_records(tmp_path: Path) -> None:
    """Every save timed: the same 20 saves, not the log's 20 beside them (each resumed run's
    last record, sorted after its run's end line, is still the save that began in it), costed by
    their records alone (measured, no range); lost the same 3 × 9/6.10 s."""
    out, timed_s, log_only_s = _job(tmp_path, timed_pairs=3)
    assert (out["n_saves"], log_only_s) == (20, 0.0)
    assert out["lost_s"] == pytest.approx(27 * STEP_S, abs=1e-3)
    assert out["checkpoint_s"] == pytest.approx(timed_s, abs=1e-3)
    checkpoint = out["measured_by"]["checkpoint"]
    assert (checkpoint["source"], checkpoint["bound"]) == ("timing_file", None)
