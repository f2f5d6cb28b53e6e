"""Shared helpers for the parser tests: feed lines the way the agent's tailer does."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, tzinfo
from pathlib import Path

from ckpt_advisor.parsers import StreamParser, make_parser
from ckpt_advisor.parsers.events import CLOCK_KINDS, Event

REAL_LOGS = Path(__file__).parents[2] / "agent" / "fixtures" / "real"


def read_lines(path: Path) -> list[str]:
    """Lines of ``path`` decoded as the tailer does: UTF-8 with replacement, split on ``\\n``."""
    lines = path.read_bytes().decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def parse(
    lines: Iterable[str], fmt: str = "auto", tz: tzinfo = UTC, *, clock: bool = False
) -> tuple[list[Event], StreamParser]:
    """Feed ``lines`` (numbered from 1) to a new parser, then finish it; the clock's findings
    (``parsers/clock.py``: ``no_timestamps`` in most snippets) only with ``clock``."""
    parser = make_parser(fmt, tz=tz)
    events: list[Event] = []
    for lineno, line in enumerate(lines, start=1):
        events.extend(parser.feed(line, lineno))
    events.extend(parser.finish())
    return (events if clock else without_clock(events)), parser


def without_clock(events: Iterable[Event]) -> list[Event]:
    """``events`` without the clock's findings (``parsers/clock.py``), which most snippets
    give (``no_timestamps``) and ``tests/parsers/test_clock.py`` pins."""
    return [e for e in events if e.kind not in CLOCK_KINDS]


def utc(text: str) -> datetime:
    """``"2026-11-29 22:11:38.483"`` as an aware UTC datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def summary(events: Iterable[Event]) -> list[tuple[object, ...]]:
    """(kind, line, time, step, duration_s, failure_class) of each event, in order."""
    return [(e.kind, e.line, e.time, e.step, e.duration_s, e.failure_class) for e in events]
