"""User-defined log patterns from the config: a regex per event kind, no Python needed.

A job's config may add patterns for lines its stack module does not know::

    [[jobs.patterns]]
    kind = "checkpoint_end"
    regex = 'ckpt step=(?P<step>\\d+) took (?P<duration_s>[\\d.]+)s'

Named groups, all optional: ``step`` (digits), ``time`` (``YYYY-MM-DD HH:MM:SS[.fff]``,
``MM/DD/YYYY HH:MM:SS``, ISO 8601 or epoch seconds; naive stamps in the parser's ``tz``) and
``duration_s`` (seconds). :func:`compile_pattern` validates one; :class:`CustomPatterns`
applies them to a line (the log parser does it before the stack; a line a custom pattern
matches is not given to the stack, so the user's pattern wins over a built-in one).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo

from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.timestamps import parse_iso_or_epoch, parse_mdy_hms, parse_ymd_hms

PARSER_NAME = "custom"
"""``Event.parser`` of events from custom patterns."""

GROUPS = frozenset(("step", "time", "duration_s"))
"""The named groups a custom pattern may use."""


@dataclass(frozen=True, slots=True)
class CustomPattern:
    """A compiled custom pattern: lines it finds give an event of ``kind``."""

    kind: EventKind
    regex: re.Pattern[str]


def compile_pattern(kind: str, regex: str) -> CustomPattern:
    """Validate and compile one custom pattern.

    Raises:
        ValueError: ``kind`` is not an :class:`~parsers.events.EventKind` value, ``regex`` does
            not compile or matches the empty string, or it has a named group outside
            :data:`GROUPS`; the message says which.
    """
    try:
        event_kind = EventKind(kind)
    except ValueError:
        known = ", ".join(k.value for k in EventKind)
        raise ValueError(f"unknown kind {kind!r}; known kinds: {known}") from None
    try:
        compiled = re.compile(regex)
    except re.error as exc:
        raise ValueError(f"bad regex {regex!r}: {exc}") from None
    unknown = set(compiled.groupindex) - GROUPS
    if unknown:
        raise ValueError(
            f"unknown group(s) {', '.join(sorted(unknown))} in {regex!r}; "
            f"allowed: {', '.join(sorted(GROUPS))}"
        )
    if compiled.search("") is not None:
        raise ValueError(f"regex {regex!r} matches an empty line")
    return CustomPattern(event_kind, compiled)


def parse_any_time(text: str, tz: tzinfo) -> datetime:
    """Parse a ``time`` group: logging asctime, ``MM/DD/YYYY HH:MM:SS``, ISO 8601 or epoch.

    Raises:
        ValueError: none of those forms.
    """
    for parse in (parse_ymd_hms, parse_mdy_hms):
        try:
            return parse(text, tz)
        except ValueError:
            pass
    return parse_iso_or_epoch(text, tz)


class CustomPatterns:
    """Applies custom patterns to lines; reports unreadable groups with ``report``."""

    def __init__(
        self,
        patterns: Sequence[CustomPattern],
        tz: tzinfo,
        report: Callable[[int, str], None],
    ) -> None:
        self._patterns = tuple(patterns)
        self._tz = tz
        self._report = report

    def __bool__(self) -> bool:
        return bool(self._patterns)

    def feed(self, line: str, lineno: int) -> list[Event]:
        """Events of every pattern found in ``line`` (ANSI already stripped)."""
        events: list[Event] = []
        for pattern in self._patterns:
            m = pattern.regex.search(line)
            if m is not None:
                events.append(self._event(pattern.kind, m, lineno))
        return events

    def _event(self, kind: EventKind, m: re.Match[str], lineno: int) -> Event:
        groups = m.groupdict()
        time = step = duration_s = None
        try:
            if groups.get("time"):
                time = parse_any_time(groups["time"] or "", self._tz)
            if groups.get("step"):
                step = int(groups["step"] or "")
            if groups.get("duration_s"):
                duration_s = float(groups["duration_s"] or "")
        except ValueError as exc:
            self._report(lineno, f"custom pattern {m.re.pattern!r}: {exc}")
        return Event(
            kind,
            lineno,
            PARSER_NAME,
            time=time,
            step=step,
            duration_s=duration_s,
            detail=m.group()[:200],
        )
