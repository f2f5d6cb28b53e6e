"""HF Trainer logs of a chosen shape, made of the captured real lines re-timed.

The blocks come verbatim from ``agent/fixtures/real/hf_trainer_*.log`` (through
``agent.synth.Templates``); only stamps, steps and checkpoint paths change, so every line has a
format transformers really prints.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from ckpt_advisor.agent.synth import Templates, bar_redraw, save_lines, stamp, traceback_lines

TEMPLATES = Templates.load()
TOTAL_STEPS = 12_000


def at(hour: int, minute: int = 0, second: float = 0.0, day: int = 2) -> datetime:
    """2026-11-<day> <hour>:<minute>:<second> UTC."""
    return datetime(2026, 11, day, hour, minute, tzinfo=UTC) + timedelta(seconds=second)


class HfLog:
    """A log built block by block; :attr:`lines` are physical lines without newlines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def header(self, start: datetime) -> HfLog:
        """The fresh run's header (``***** Running training *****`` …) stamped ``start``, with
        :data:`TOTAL_STEPS` as its ``Total optimization steps``."""
        total = f"Total optimization steps = {TOTAL_STEPS:,}"
        self.lines += [
            re.sub(r"Total optimization steps = [\d,]+", total, stamp(line, start))
            for line in TEMPLATES.fresh_header
        ]
        return self

    def metrics(self, count: int = 3) -> HfLog:
        """``count`` ``{'loss': …}`` dicts on their own lines (``disable_tqdm=True``)."""
        self.lines += [TEMPLATES.metrics] * count
        return self

    def save(self, start: datetime, step: int, logged_s: float = 40.0) -> HfLog:
        """A save of ``checkpoint-<step>`` at ``start``, its last "saved in" ``logged_s`` later."""
        self.lines += save_lines(TEMPLATES, start, start + timedelta(seconds=logged_s), step)
        return self

    def bars(
        self,
        steps: range,
        elapsed_s: Callable[[int], float],
        seconds_per_step: float = 6.0,
        remaining_s: float | None = None,
    ) -> HfLog:
        """One physical line of training-bar redraws (tqdm's ``\\r``, no newline) at ``steps``,
        showing ``elapsed_s(step)``, ended by a metrics dict as in the capture."""
        redraws = "".join(
            bar_redraw(step, TOTAL_STEPS, elapsed_s(step), seconds_per_step, remaining_s)
            for step in steps
        )
        self.lines.append(redraws + "\r" + TEMPLATES.metrics)
        return self

    def traceback(self, run: int = 0) -> HfLog:
        """The captured traceback, raising ``RuntimeError: CUDA error: an illegal memory
        access`` (even ``run``) or the Lightning capture's NCCL error (odd ``run``)."""
        self.lines += [line.rstrip("\n") for line in traceback_lines(TEMPLATES, run)]
        return self

    def text(self) -> str:
        """The file's content."""
        return "\n".join(self.lines) + "\n"

    def line_of(self, needle: str, start: int = 1) -> int:
        """1-based number of the first line at or after ``start`` holding ``needle``."""
        return next(i for i, line in enumerate(self.lines, 1) if i >= start and needle in line)
