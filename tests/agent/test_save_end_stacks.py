"""Whether C from log lines is a lower bound, and what its note says it misses, follow the stack
that wrote the saves (rules/cost.py SAVE_END_STACKS; agent/notes.py MISSED_BY_STACK)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.agent.notes import render_note
from ckpt_advisor.rules.model import Note, NoteCode

FIXTURES = Path(__file__).parents[1] / "parsers" / "fixtures"
REAL = Path(__file__).parents[2] / "agent" / "fixtures" / "real"


def _estimate(tmp_path: Path, *logs: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    db = str(tmp_path / "s.db")
    runner = CliRunner()
    ingest = runner.invoke(main, ["ingest", *map(str, logs), "--job", "j", "--db", db])
    assert ingest.exit_code == 0, ingest.stderr
    [est] = json.loads(runner.invoke(main, ["estimates", "--db", db, "--json"]).stdout)
    shown = runner.invoke(main, ["goodput", "--job", "j", "--db", db, "--json"])
    goodput = json.loads(shown.stdout)
    return est, goodput


def test_megatron_save_cost_is_measured_not_a_lower_bound(tmp_path: Path) -> None:
    """megatron_2026.log: the save at iteration 300 has its timer block (max 4311.50 ms), the
    one at 320 its start and end lines (14:06:00.000 to 14:06:02.500: 2.5 s); Megatron prints a
    save's end, so C = median(4.3115, 2.5) = 3.40575 s exactly, no bound, no lower-bound note,
    and goodput's checkpoint time is the measured 6.8115 s."""
    est, goodput = _estimate(tmp_path, FIXTURES / "megatron" / "megatron_2026.log")
    assert est["checkpoint_cost_s"] == pytest.approx(3.40575)
    assert est["checkpoint_cost_is_lower_bound"] is False
    assert est["checkpoint_cost_range_s"] == pytest.approx([3.40575, 3.40575])
    assert not [n for n in est["notes"] if "lower bound" in n]
    assert goodput["checkpoint_is_lower_bound"] is False
    assert goodput["checkpoint_s"] == pytest.approx(6.8115)


def test_hf_save_cost_stays_a_lower_bound_in_hf_words(tmp_path: Path) -> None:
    """The captured HF runs: C from the 'saved in' lines is a lower bound, and the note names
    what the HF Trainer does not log (the optimizer-state write's end)."""
    runs = (REAL / "hf_trainer_crash.log", REAL / "hf_trainer_resume.log")
    est, goodput = _estimate(tmp_path, *runs)
    assert est["checkpoint_cost_is_lower_bound"] is True
    [note] = [n for n in est["notes"] if "lower bound" in n]
    assert "HF Trainer logs no end of the optimizer-state write" in note
    assert goodput["checkpoint_is_lower_bound"] is True


def test_the_lower_bound_note_names_the_stack_it_comes_from() -> None:
    """A Lightning C says Lightning logs a start only; a stack without its own words, or none,
    gets the general reason; never the HF Trainer's."""
    lightning = Note(NoteCode.COST_LOWER_BOUND, {"cost_s": 3.0}, {"lightning": 4})
    assert "Lightning logs a save's start only" in render_note(lightning)
    for by_name in ({"accelerate": 4}, {}):
        text = render_note(Note(NoteCode.COST_LOWER_BOUND, {"cost_s": 3.0}, by_name))
        assert "HF Trainer" not in text and "may not mark the end of every part" in text
