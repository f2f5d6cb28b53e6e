"""Training-log and timing-file parsers: text in, typed events out (pure: no I/O, no clock).

Use::

    parser = make_parser("auto", tz=ZoneInfo("Europe/Paris"))
    for lineno, line in enumerate(lines, start=1):   # lines without their "\\n"
        events.extend(parser.feed(line, lineno))
    events.extend(parser.finish())                   # at end of file or when the file idles

Formats (:func:`available_formats`):

* ``auto`` — timing file or log, decided by the first non-blank line; a log's stack is then
  detected line by line;
* one per training stack (``hf_trainer``, ``accelerate``, ``lightning``, ``nemo``,
  ``deepspeed``, ``megatron``, ``torchtitan``, ``composer``) plus ``megatron_progress``
  (Megatron's ``progress.txt``): a module ``parsers/<stack>.py`` with its pattern table,
  registered in :data:`STACKS`;
* ``timing_jsonl``, ``timing_csv`` — checkpoint timing files (DESIGN.md schema).

Python tracebacks and bare CUDA/NCCL exception lines are recognised in every log, whatever the
stack (``parsers/traceback.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, tzinfo

from ckpt_advisor.parsers.accelerate import Accelerate
from ckpt_advisor.parsers.auto import AutoParser, StackFactory
from ckpt_advisor.parsers.clock import FileClock
from ckpt_advisor.parsers.composer import Composer
from ckpt_advisor.parsers.custom import CustomPattern, CustomPatterns, compile_pattern
from ckpt_advisor.parsers.deepspeed import DeepSpeed
from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.hf_trainer import HfTrainer
from ckpt_advisor.parsers.lightning import Lightning
from ckpt_advisor.parsers.logs import AUTO, LogParser
from ckpt_advisor.parsers.megatron import Megatron, MegatronProgress
from ckpt_advisor.parsers.nemo import NeMo
from ckpt_advisor.parsers.stack import ParseContext
from ckpt_advisor.parsers.stream import Diagnostics, StreamParser
from ckpt_advisor.parsers.timestamps import LocalZone
from ckpt_advisor.parsers.timing import CSV, JSONL, TimingCsvParser, TimingJsonlParser
from ckpt_advisor.parsers.torchtitan import Torchtitan

__all__ = [
    "STACKS",
    "TIMING_FORMATS",
    "CustomPattern",
    "Event",
    "EventKind",
    "StreamParser",
    "available_formats",
    "compile_pattern",
    "make_parser",
]

STACKS: dict[str, StackFactory] = {
    HfTrainer.name: HfTrainer,
    Accelerate.name: Accelerate,
    Lightning.name: Lightning,
    NeMo.name: NeMo,
    DeepSpeed.name: DeepSpeed,
    Megatron.name: Megatron,
    MegatronProgress.name: MegatronProgress,
    Torchtitan.name: Torchtitan,
    Composer.name: Composer,
}
"""Training stacks by name, in auto-detection order. A new stack is one module plus one entry."""

TIMING_FORMATS = frozenset((JSONL, CSV, MegatronProgress.name))
"""Parsers (``Event.parser``) that read checkpoint timing files: their saves are exact records
written by the training code, not inferred from log lines. Decided per event, so a timing file
recognised by its content (``auto``) counts as one whatever its name."""


def available_formats() -> list[str]:
    """Names accepted by :func:`make_parser`: ``"auto"``, each stack, then the timing formats."""
    return [AUTO, *STACKS, JSONL, CSV]


def make_parser(
    fmt: str = AUTO,
    *,
    tz: tzinfo = UTC,
    year_hint: int | None = None,
    patterns: Sequence[CustomPattern] = (),
) -> StreamParser:
    """Return a new stateful parser for one source file.

    Args:
        fmt: one of :func:`available_formats`.
        tz: zone of naive wall-clock stamps in logs (the training nodes' local zone); events
            carry aware UTC times. Stamps in a DST transition are resolved from the file's
            previous stamps (:class:`parsers.timestamps.LocalZone`). Timing files ignore it:
            their naive times are UTC.
        year_hint: year for stamps printed without one (no training stack's own prefix
            lacks the year; kept for failure-side formats).
        patterns: custom patterns (:func:`compile_pattern`, from the config) searched in
            every log line before the stack; ignored by the timing formats.

    Raises:
        ValueError: ``fmt`` is not a known format; the message lists the known ones.
    """
    diagnostics = Diagnostics()
    zone = tz if tz is UTC else LocalZone(tz)  # this file's own DST context
    context = ParseContext(
        tz=zone, year_hint=year_hint, report=diagnostics.report, clock=FileClock()
    )
    custom = CustomPatterns(patterns, zone, diagnostics.report) if patterns else None
    if fmt == AUTO:
        return AutoParser(context, tuple(STACKS.values()), diagnostics, custom)
    if fmt in STACKS:
        return LogParser([STACKS[fmt](context)], diagnostics, custom)
    if fmt == JSONL:
        return TimingJsonlParser(diagnostics)
    if fmt == CSV:
        return TimingCsvParser(diagnostics)
    raise ValueError(f"unknown format {fmt!r}; known formats: {', '.join(available_formats())}")
