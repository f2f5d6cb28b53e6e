"""The line a training job logs when it adopts an advised checkpoint interval.

Written by ``ckpt_advisor.agent.training_advice.AdvisedInterval`` (the HF Trainer and Lightning
callbacks and hand-written loops that follow their advice file) on the ``ckpt_advisor.training``
logger, whatever the training stack, so it is recognised in every log (``parsers/logs.py``),
with or without a logging prefix: the line carries its own time (``now …``, ISO 8601 with
offset). It gives one ``interval_change`` event: ``step`` = the step from which the new interval
counts, ``duration_s`` = the new interval in seconds (steps × the step time the job measured),
``detail`` = ``old -> new steps``, parser ``ckpt_advisor``.
"""

from __future__ import annotations

import re

from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.stack import parse_step
from ckpt_advisor.parsers.timestamps import parse_iso_or_epoch

PARSER = "ckpt_advisor"
KEYWORD = "ckpt-advisor: checkpoint interval changed at step "
REGEX = re.compile(
    r"ckpt-advisor: checkpoint interval changed at step (?P<step>\d+): (?P<old>\d+) -> "
    r"(?P<new>\d+) steps \((?P<old_s>\d+(?:\.\d*)?) s -> (?P<new_s>\d+(?:\.\d*)?) s\); "
    r"advice for job (?P<job>.*?) computed (?P<computed>\S+); now (?P<now>\S+)"
)
SAMPLE = (
    "12/01/2026 10:16:37 - WARNING - ckpt_advisor.training - ckpt-advisor: checkpoint interval "
    "changed at step 61: 50 -> 25 steps (7.3 s -> 3.6 s); advice for job demo computed "
    "2026-12-01T10:16:36.586+00:00; now 2026-12-01T10:16:37.041+00:00"
)
"""From ``tests/parsers/fixtures/adoption/hf_adoption.log`` (a real HF Trainer run, line 37,
logged through transformers' examples ``basicConfig`` format)."""
SOURCE = "ckpt_advisor/agent/training_advice.py AdvisedInterval._decide (this project)"


def interval_change(piece: str, lineno: int) -> Event | None:
    """The ``interval_change`` event of a change line, or None when ``piece`` is not one.

    A line whose ``now`` time does not parse still gives its event, with ``time=None``.
    """
    m = REGEX.search(piece)
    if m is None:
        return None
    try:
        time = parse_iso_or_epoch(m["now"])
    except ValueError:
        time = None
    return Event(
        EventKind.INTERVAL_CHANGE,
        lineno,
        PARSER,
        time=time,
        step=parse_step(m["step"]),
        duration_s=float(m["new_s"]),
        detail=f"{m['old']} -> {m['new']} steps",
    )
