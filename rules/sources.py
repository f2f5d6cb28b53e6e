"""Notes about the log files' clocks: what the parsers found, named by file and line.

The parsers keep every file's events in its own order and report what they had to do for it
(``parsers/clock.py``); the estimate says so, since each finding bounds what the numbers can
mean: a file without stamps gives no durations, a bar clock that does not keep time dates
nothing, a clock that stepped back was corrected by a guess of the time between two lines.
"""

from __future__ import annotations

from collections.abc import Sequence

from ckpt_advisor.rules.model import ClockFinding

CLOCK_STEP = "clock_step"
BAR_CLOCK_IGNORED = "bar_clock_ignored"
NO_TIMESTAMPS = "no_timestamps"
FINDING_KINDS = (CLOCK_STEP, BAR_CLOCK_IGNORED, NO_TIMESTAMPS)
"""The event kinds :class:`rules.model.ClockFinding` is read from."""


def untimed_sources(findings: Sequence[ClockFinding]) -> list[str]:
    """The files that printed no timestamp before their first event, in first-seen order."""
    return list(dict.fromkeys(f.source for f in findings if f.kind == NO_TIMESTAMPS))


def clock_notes(findings: Sequence[ClockFinding]) -> tuple[str, ...]:
    """One note per file and kind of finding, naming the file and the (first) line.

    Shapes: ``findings`` in any order; returns notes ordered: steps back, bar clocks ignored,
    files without stamps.
    """
    notes: list[str] = []
    steps: dict[str, list[ClockFinding]] = {}
    for finding in findings:
        if finding.kind == CLOCK_STEP:
            steps.setdefault(finding.source, []).append(finding)
    for source, found in steps.items():
        first = min(found, key=lambda f: f.line)
        more = f" (and {len(found) - 1} more step(s) back)" if len(found) > 1 else ""
        notes.append(
            f"the clock of {source} stepped back {_span(first.seconds)} at line {first.line}"
            f"{more}: its later times were moved forward to keep the file's order, so running "
            "time is summed per stretch of a steady clock, not shrunk by the step"
        )
    for finding in _first_per_source(findings, BAR_CLOCK_IGNORED):
        notes.append(
            f"the progress bar of {finding.source} does not keep time (from line "
            f"{finding.line}): its untimed lines were dated by the file's own stamps, and its "
            "failures by the steps the run had reached"
        )
    untimed = untimed_sources(findings)
    if untimed:
        lines = {f.source: f.line for f in _first_per_source(findings, NO_TIMESTAMPS)}
        named = ", ".join(f"{s} (first event at line {lines[s]})" for s in untimed)
        notes.append(
            f"no timestamps in {named}: events are dated when read (a backfill dates them all "
            "at the file's modification time), so save durations, save spacing and running "
            "time cannot be measured; a logging format with times, or a checkpoint timing "
            "file, gives them"
        )
    return tuple(notes)


def _first_per_source(findings: Sequence[ClockFinding], kind: str) -> list[ClockFinding]:
    first: dict[str, ClockFinding] = {}
    for finding in sorted((f for f in findings if f.kind == kind), key=lambda f: f.line):
        first.setdefault(finding.source, finding)
    return list(first.values())


def _span(seconds: float | None) -> str:
    if seconds is None:
        return "an unknown time"
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    return f"{hours}h {rest // 60:02d}m" if hours else f"{rest // 60}m {rest % 60:02d}s"
