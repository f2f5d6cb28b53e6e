"""A simulated week of real HF Trainer lines parses to exactly the failures that were written."""

from __future__ import annotations

from datetime import UTC

from ckpt_advisor import parsers
from ckpt_advisor.agent.synth import simulate
from ckpt_advisor.parsers.events import EventKind


def test_every_traceback_of_a_simulated_week_is_one_failure() -> None:
    """Each of the week's tracebacks gives one failure event, including one that ends the file
    (emitted by finish()) after a same-class failure a few dozen lines earlier with progress
    in between (seed 2 has exactly that)."""
    job = simulate(mtbf_s=6 * 3600.0, cost_s=240.0, interval_steps=1200, step_time_s=6.0, seed=2)
    parser = parsers.make_parser("auto", tz=UTC)
    events = []
    for lineno, line in enumerate("".join(text for _, text in job.log).split("\n"), start=1):
        events.extend(parser.feed(line, lineno))
    events.extend(parser.finish())
    failures = [e for e in events if e.kind is EventKind.FAILURE]
    assert len(failures) == job.n_failures == 31
    assert failures[-1].step is not None
