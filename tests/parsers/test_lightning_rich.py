"""Lightning's default output where rich is importable (``RichProgressBar``, ``RichModelSummary``),
on the real capture ``fixtures/lightning_rich/`` (lightning 2.6.6, rich 15.0.0, the runs of
``fixtures/lightning_default/``): written to a file, the rich bar draws nothing while training,
only one final state when Lightning stops it (at the exception, after ``Trainer.fit`` stopped).
What the runs print is read at its steps; the run killed at step 45 prints nothing after its
start (no step, no failure), so it is not seen to have trained and counts as no interruption
(a start followed by another start with nothing between is one launch: torchrun's banner and
Lightning's ``GPU available``) — the job's estimate has 1 of its 2 interruptions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ckpt_advisor.parsers.events import EventKind
from tests.parsers._helpers import parse, read_lines

CAPTURE = Path(__file__).parent / "fixtures" / "lightning_rich"
TRUTH = json.loads((CAPTURE / "truth.json").read_text())


@pytest.mark.parametrize("run", TRUTH["runs"], ids=lambda run: run["log"])
def test_each_run_is_read_at_the_steps_its_final_bar_and_lines_give(run: dict[str, Any]) -> None:
    """Per run: its start at ``GPU available`` (line 1), its resume at the checkpoint's step,
    the OOM at the step of the bar drawn as it stopped (epoch 1, batch 14 of 50: step 64), the
    clean end at ``max_steps``; the bar's rate its seconds per batch (a 0.2 s sleep each)."""
    events, parser = parse(read_lines(CAPTURE / run["log"]))
    assert parser.name == "lightning"
    assert (events[0].kind, events[0].line) == (EventKind.RUN_START, 1)
    resumes = [e.step for e in events if e.kind is EventKind.RESUME and e.step is not None]
    assert resumes == ([run["resumed_step"]] if run["resumed_from"] else [])
    steps = [e for e in events if e.kind is EventKind.STEP]
    failures = [(e.failure_class, e.step) for e in events if e.kind is EventKind.FAILURE]
    ended = [e.step for e in events if e.kind is EventKind.RUN_END]
    if run["ended_by"] == "exception":
        assert [e.step for e in steps] == [run["bar_last_step"]] == [run["died_at_step"]]
        assert steps[0].duration_s == pytest.approx(TRUTH["step_sleep_s"], rel=0.1)
        assert failures == [("cuda_oom", run["died_at_step"])]
    else:
        assert steps == [] and failures == []
    assert ended == ([TRUTH["max_steps"]] if run["ended_by"] == "completed" else [])
