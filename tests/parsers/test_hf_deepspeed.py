"""HF Trainer under DeepSpeed: one file, two stacks' lines (the real captures in
``fixtures/hf_deepspeed/``, deepspeed 0.16.9 with transformers 4.46.3, 0.19.8 with 5.24.0).

The engine writes the model and optimizer states after the Trainer's own save lines, inside the
same save: its lines are the save's sub-steps, and a save ends at the last of them. A log whose
DeepSpeed lines come first (its engine starts before ``***** Running training *****``) is the
Trainer's from its first line of its own: read as DeepSpeed's, it missed the Trainer's saves and
its clean ends (``Training completed.``), and counted a stop where a run had ended.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.parsers.events import EventKind
from tests.parsers._helpers import parse, read_lines

CAPTURES = Path(__file__).parent / "fixtures" / "hf_deepspeed"

# (step, end line, duration_s) of each save, by hand from the stamps: 0.16.9 with bare HF lines
# (no time of their own: each save from DeepSpeed's "is about to be saved!" to its "is ready
# now!"), and with the examples' format (from HF's "Saving model checkpoint to" to "is ready
# now!").
SAVES = {
    "hf_deepspeed016_bare.log": [
        (10, 207, 0.343), (20, 221, 0.145), (30, 235, 0.181),
        (40, 455, 0.136), (50, 469, 0.121), (60, 689, 0.153),
    ],
    "hf_deepspeed016_examples.log": [
        (10, 205, 0.163), (20, 219, 0.164), (30, 233, 0.207),
        (40, 460, 0.194), (50, 474, 0.186), (60, 701, 0.208),
    ],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SAVES))
def test_deepspeed_save_lines_end_the_trainers_saves(name: str) -> None:
    """Each save ends at DeepSpeed's "is ready now!", read by the Trainer's parser, whichever
    stack printed first; both clean ends are read, and the crash is one failure."""
    events, parser = parse(read_lines(CAPTURES / name))
    assert parser.name == "hf_trainer"
    ends = [e for e in events if e.kind is EventKind.CHECKPOINT_END]
    got = [(e.step, e.line, e.duration_s) for e in ends]
    assert got == [(s, line, pytest.approx(d, abs=1e-6)) for s, line, d in SAVES[name]]
    assert {e.parser for e in ends} == {"hf_trainer"}
    assert [e.kind for e in events if e.kind in (EventKind.RUN_END, EventKind.RESUME)] == [
        EventKind.RUN_END, EventKind.RESUME, EventKind.RUN_END, EventKind.RESUME,
    ]  # fmt: skip
    assert sum(e.kind is EventKind.FAILURE for e in events) == 1


def test_a_trainer_under_deepspeed_gives_c_as_a_lower_bound_and_one_interruption(
    tmp_path: Path,
) -> None:
    """Read as DeepSpeed's (main before this), the bare capture gave C 0.149 s as measured (its
    engine's part only, 42% under the timing file's 0.254 s) and two failures (the clean end
    before a resume taken for a stop). Now C is the Trainer's: a lower bound, at 0.149 s (the
    median of the six saves above), and one failure."""
    db = str(tmp_path / "s.db")
    log = CAPTURES / "hf_deepspeed016_bare.log"
    assert CliRunner().invoke(main, ["ingest", str(log), "--job", "j", "--db", db]).exit_code == 0
    [est] = json.loads(CliRunner().invoke(main, ["estimates", "--db", db, "--json"]).stdout)
    assert est["checkpoint_cost_s"] == pytest.approx(0.149, abs=1e-6)
    assert est["checkpoint_cost_is_lower_bound"] is True
    assert (est["n_failures"], est["n_checkpoints"]) == (1, 6)
