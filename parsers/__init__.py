"""Training-log and timing-file parsers: text in, typed events out (pure: no I/O, no clock).

Use::

    parser = make_parser("auto", tz=ZoneInfo("Europe/Paris"))
    for lineno, line in enumerate(lines, start=1):   # lines without their "\\n"
        events.extend(parser.feed(line, lineno))
    events.extend(parser.finish())                   # at end of file or when the file idles

``finish()`` ends only what a quiet file ends (a pending traceback's failure), never a save:
a followed file flushed whenever it goes quiet gives the events of the whole file read at once.

Formats (:func:`available_formats`):

* ``auto`` — timing file or log, decided by the first non-blank line; a log's stack is then
  detected line by line;
* one per training stack (``hf_trainer``, ``accelerate``, ``lightning``, ``nemo``,
  ``deepspeed``, ``megatron``, ``torchtitan``, ``composer``) plus ``megatron_progress``
  (Megatron's ``progress.txt``): a module ``parsers/<stack>.py`` with its pattern table,
  registered in ``parsers/registry.py`` (:data:`STACKS`) and imported when a log needs it
  (named, or detected by ``auto``);
* ``timing_jsonl``, ``timing_csv`` — checkpoint timing files (DESIGN.md schema).

Python tracebacks and bare CUDA/NCCL exception lines are recognised in every log, whatever the
stack (``parsers/traceback.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, tzinfo
from typing import TYPE_CHECKING, Any

from ckpt_advisor.parsers.registry import AUTO, CSV, ENTRIES, JSONL, StackEntry

if TYPE_CHECKING:
    from ckpt_advisor.parsers.custom import CustomPattern, compile_pattern
    from ckpt_advisor.parsers.events import Event, EventKind
    from ckpt_advisor.parsers.stack import Stack
    from ckpt_advisor.parsers.stream import StreamParser

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

_LAZY = {
    "CustomPattern": "custom",
    "compile_pattern": "custom",
    "Event": "events",
    "EventKind": "events",
    "StreamParser": "stream",
}
"""The names this package re-exports, by the module that defines them: imported when first
asked for (:func:`__getattr__`), so that importing the package for a format's name, or
``parsers.events`` alone (the read-only commands), compiles no parser's patterns."""


def __getattr__(name: str) -> Any:
    """A name of :data:`_LAZY`, from its module (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


class _Stacks(Mapping[str, "type[Stack]"]):  # Stack: imported with its first stack
    """Training stacks by name, in auto-detection order (``parsers/registry.py``): names
    without an import, a stack's class importing its module when it is looked up."""

    def __init__(self, entries: Sequence[StackEntry]) -> None:
        self._entries = {entry.name: entry for entry in entries}

    def __getitem__(self, name: str) -> type[Stack]:
        return self._entries[name].load()

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


STACKS: Mapping[str, type[Stack]] = _Stacks(ENTRIES)
"""Training stacks by name, in auto-detection order. A new stack is one module plus one entry
in ``parsers/registry.py``."""

TIMING_FORMATS = frozenset((JSONL, CSV, "megatron_progress"))
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
    from ckpt_advisor.parsers.auto import AutoParser
    from ckpt_advisor.parsers.clock import FileClock
    from ckpt_advisor.parsers.custom import CustomPatterns
    from ckpt_advisor.parsers.logs import LogParser
    from ckpt_advisor.parsers.stack import ParseContext
    from ckpt_advisor.parsers.stream import Diagnostics
    from ckpt_advisor.parsers.timestamps import LocalZone
    from ckpt_advisor.parsers.timing import TimingCsvParser, TimingJsonlParser

    diagnostics = Diagnostics()
    zone = tz if tz is UTC else LocalZone(tz)  # this file's own DST context
    context = ParseContext(
        tz=zone,
        year_hint=year_hint,
        report=diagnostics.report,
        clock=FileClock(zone if isinstance(zone, LocalZone) else None),
    )
    custom = CustomPatterns(patterns, zone, diagnostics.report) if patterns else None
    if fmt == AUTO:
        return AutoParser(context, ENTRIES, diagnostics, custom)
    if fmt in STACKS:  # a timing file among the files is still read as one
        stack = STACKS[fmt]
        return AutoParser(
            context,
            ENTRIES,
            diagnostics,
            custom,
            log=lambda: LogParser([stack(context)], diagnostics, custom),
            name=fmt,
        )
    if fmt == JSONL:
        return TimingJsonlParser(diagnostics)
    if fmt == CSV:
        return TimingCsvParser(diagnostics)
    raise ValueError(f"unknown format {fmt!r}; known formats: {', '.join(available_formats())}")
