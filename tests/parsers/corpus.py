"""Scoring the parsers against labelled real logs (tests/parsers/fixtures/public/README.md).

A labels file (JSON) says what a careful human reads in one log excerpt::

    {"source": "https://github.com/…/issues/24", "stack": "torchrun, torch 1.9", "parser": "auto",
     "tz": "UTC", "year": null, "what": "…", "interruptions": 1, "planned_interruptions": 0,
     "events": [
       {"kind": "failure", "line": 1, "class": "child_failed", "incident": "a", "lines": [1, 3]},
       {"kind": "restart", "line": 1, "parser": "torchrun"}]}

* ``parser`` is the ``Event.parser`` of the file's non-failure events unless an event names its
  own; ``tz`` and ``year`` are what the file is parsed with (``make_parser(tz=, year_hint=)``).
* ``lines`` is the record's line range (default ``[line, line]``): a found event of the same kind
  anywhere in it matches. Failures of one ``incident`` are one death however many records echo
  it (every rank's traceback, the launcher, Slurm): each echo gets its own range, the incident
  counts once, and a failure found in any of its ranges is neither a miss nor wrong.
* ``time`` (naive, UTC, ``YYYY-MM-DD HH:MM:SS[.ffffff]``), ``step``, ``duration_s`` and
  ``class`` are checked when given; ``class`` is the incident's root cause (the first class of
  its found failures outside the generic set, as ``rules/interruptions.py`` picks it).
* ``interruptions`` / ``planned_interruptions``: what the rules layer should make of the whole
  file — counted by :func:`count_interruptions` the way a backfill would.

Only the kinds in :data:`SCORED` are scored (``step``, ``run_start`` and ``run_end`` are not).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from ckpt_advisor.parsers import StreamParser, make_parser
from ckpt_advisor.parsers.events import Event
from ckpt_advisor.parsers.vocabulary import CONSEQUENCE_CLASSES, GENERIC_CLASSES
from ckpt_advisor.rules.interruptions import cluster_interruptions
from ckpt_advisor.rules.model import Observation
from ckpt_advisor.rules.timeline import Timeline
from tests.parsers._helpers import read_lines

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
PUBLIC = FIXTURES / "public"
LABELS = FIXTURES / "labels"
"""Labels of the older real fixtures (their ``log`` key names the file, from the repo root)."""

SCORED = ("checkpoint_start", "checkpoint_end", "resume", "restart", "failure")
FAILURE = "failure"
BACKFILL_BASE = datetime(2000, 1, 1, tzinfo=UTC)
"""Time of the events of a file that prints no time at all."""


@dataclass(frozen=True, slots=True)
class Expected:
    """One labelled event (see the module docstring)."""

    kind: str
    line: int
    lines: tuple[int, int]
    parser: str | None = None
    time: datetime | None = None
    step: int | None = None
    duration_s: float | None = None
    failure_class: str | None = None
    incident: str | None = None


@dataclass(frozen=True, slots=True)
class Labels:
    """One labelled log: where it is, how to parse it, what it holds."""

    log: Path
    group: str
    source: str
    stack: str
    what: str
    parser: str
    tz: str
    year: int | None
    interruptions: int
    planned_interruptions: int
    events: tuple[Expected, ...]

    @property
    def name(self) -> str:
        """The log's path from the repository root."""
        return str(self.log.relative_to(ROOT))


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text).replace(tzinfo=UTC)


def load_labels(path: Path) -> Labels:
    """Read one labels file; the log is ``path`` with ``.log`` unless it names one (``log``)."""
    data = json.loads(path.read_text("utf-8"))
    log = ROOT / data["log"] if "log" in data else path.with_suffix(".log")
    group = data.get("group") or path.parent.name
    events = tuple(
        Expected(
            kind=e["kind"],
            line=e["line"],
            lines=tuple(e.get("lines") or (e["line"], e["line"])),  # type: ignore[arg-type]
            parser=e.get("parser"),
            time=_time(e.get("time")),
            step=e.get("step"),
            duration_s=e.get("duration_s"),
            failure_class=e.get("class"),
            incident=e.get("incident"),
        )
        for e in data["events"]
    )
    return Labels(
        log=log,
        group=group,
        source=data["source"],
        stack=data["stack"],
        what=data["what"],
        parser=data["parser"],
        tz=data.get("tz", "UTC"),
        year=data.get("year"),
        interruptions=data["interruptions"],
        planned_interruptions=data.get("planned_interruptions", 0),
        events=events,
    )


def all_labels() -> list[Labels]:
    """Every labelled log: the public corpus, then the older real fixtures."""
    paths = sorted(PUBLIC.rglob("*.json")) + sorted(LABELS.glob("*.json"))
    return [load_labels(p) for p in paths]


def parse_file(labels: Labels) -> tuple[list[Event], StreamParser]:
    """Parse the labelled log as ``auto`` with its zone and year, feeding every line."""
    tz = UTC if labels.tz == "UTC" else ZoneInfo(labels.tz)
    parser = make_parser("auto", tz=tz, year_hint=labels.year)
    events: list[Event] = []
    for lineno, line in enumerate(read_lines(labels.log), start=1):
        events.extend(parser.feed(line, lineno))
    events.extend(parser.finish())
    return events, parser


def count_interruptions(events: Iterable[Event]) -> tuple[int, int]:
    """``(all, planned)`` interruptions the rules layer makes of one file's events.

    Events are dated as a backfill dates them (``agent/tail/dating.py``): their
    own time, else the latest printed time before them, else the file's mtime — here its
    latest printed time (the last lines of a log are written last), or :data:`BACKFILL_BASE`;
    then the timeline gets its unseen interruptions and is clustered with the defaults, as
    ``rules/job.py`` does; a failure after its run's clean end interrupts nothing
    (``Interruption.after_end``) and is not counted.
    """
    events = list(events)
    printed = [e.time for e in events if e.time is not None and not e.time_estimated]
    mtime = max(printed, default=BACKFILL_BASE)
    last: datetime | None = None
    observations: list[Observation] = []
    for event in events:
        if event.time is not None and not event.time_estimated:
            last = event.time
        when = event.time or last or mtime
        observations.append(
            Observation(
                kind=event.kind.value,
                time_s=when.timestamp(),
                step=event.step,
                duration_s=event.duration_s,
                failure_class=event.failure_class,
                planned=event.planned,
            )
        )
    timeline, _ = Timeline.of(observations).with_unseen_interruptions()
    interruptions = [i for i in cluster_interruptions(timeline) if not i.after_end]
    return len(interruptions), sum(i.planned for i in interruptions)


@dataclass(slots=True)
class FileScore:
    """How the parser did on one labelled log.

    Attributes:
        expected / found / wrong: per scored kind, labelled events (incidents for failures),
            those found, and found events that match no label.
        mismatches: human-readable notes on matched events whose time, step, duration, class
            or parser differ from the label.
        interruptions: ``(all, planned)`` from :func:`count_interruptions`.
    """

    labels: Labels
    expected: Counter[str] = field(default_factory=Counter)
    found: Counter[str] = field(default_factory=Counter)
    wrong: Counter[str] = field(default_factory=Counter)
    mismatches: list[str] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)
    extras: list[str] = field(default_factory=list)
    interruptions: tuple[int, int] = (0, 0)

    @property
    def interruptions_right(self) -> bool:
        """The rules layer counts the labelled interruptions, planned ones apart."""
        want = (self.labels.interruptions, self.labels.planned_interruptions)
        return self.interruptions == want


def _within(line: int, lines: tuple[int, int]) -> bool:
    return lines[0] <= line <= lines[1]


def _root_class(classes: Sequence[str | None]) -> str | None:
    known = [c or "unknown" for c in classes]
    caused = next((c for c in known if c not in CONSEQUENCE_CLASSES), known[0] if known else None)
    return next((c for c in known if c not in GENERIC_CLASSES), caused)


def score_file(labels: Labels, events: Sequence[Event]) -> FileScore:
    """Match ``events`` (one parse of ``labels.log``) against the labels (module docstring)."""
    score = FileScore(labels, interruptions=count_interruptions(events))
    scored = [e for e in events if e.kind.value in SCORED]
    for kind in SCORED:
        if kind == FAILURE:
            _score_failures(score, [e for e in scored if e.kind.value == kind])
        else:
            _score_kind(score, kind, [e for e in scored if e.kind.value == kind])
    return score


def _score_kind(score: FileScore, kind: str, found: list[Event]) -> None:
    expected = sorted((e for e in score.labels.events if e.kind == kind), key=lambda e: e.line)
    unmatched = sorted(found, key=lambda e: e.line)
    for want in expected:
        score.expected[kind] += 1
        hit = next((e for e in unmatched if _within(e.line, want.lines)), None)
        if hit is None:
            score.misses.append(f"{kind} line {want.line}")
            continue
        unmatched.remove(hit)
        score.found[kind] += 1
        _check(score, want, hit, parser=want.parser or score.labels.parser)
    score.wrong[kind] += len(unmatched)
    score.extras.extend(f"{e.kind.value} line {e.line} ({e.detail})" for e in unmatched)


def _score_failures(score: FileScore, found: list[Event]) -> None:
    incidents: dict[str, list[Expected]] = {}
    for want in score.labels.events:
        if want.kind == FAILURE:
            incidents.setdefault(want.incident or f"line {want.line}", []).append(want)
    hits: dict[str, list[Event]] = {name: [] for name in incidents}
    for event in found:
        name = next(
            (n for n, ws in incidents.items() if any(_within(event.line, w.lines) for w in ws)),
            None,
        )
        if name is None:
            score.wrong[FAILURE] += 1
            score.extras.append(f"failure line {event.line} {event.failure_class} ({event.detail})")
        else:
            hits[name].append(event)
    for name, wants in incidents.items():
        score.expected[FAILURE] += 1
        got = sorted(hits[name], key=lambda e: e.line)
        if not got:
            score.misses.append(f"failure {name} line {wants[0].line} {wants[0].failure_class}")
            continue
        score.found[FAILURE] += 1
        want = wants[0]
        root = _root_class([e.failure_class for e in got])
        if want.failure_class is not None and root != want.failure_class:
            score.mismatches.append(
                f"failure line {want.line}: class {root}, want {want.failure_class}"
            )
        timed = [e for e in got if e.time is not None]
        _check(score, want, timed[0] if timed else got[0], parser=want.parser)


def _check(score: FileScore, want: Expected, got: Event, *, parser: str | None) -> None:
    where = f"{want.kind} line {want.line}"
    if want.time is not None and (
        got.time is None or abs((got.time - want.time).total_seconds()) > 1e-3
    ):
        score.mismatches.append(f"{where}: time {got.time}, want {want.time}")
    if want.step is not None and got.step != want.step:
        score.mismatches.append(f"{where}: step {got.step}, want {want.step}")
    if want.duration_s is not None and (
        got.duration_s is None or not math.isclose(got.duration_s, want.duration_s, rel_tol=1e-6)
    ):
        score.mismatches.append(f"{where}: duration {got.duration_s}, want {want.duration_s}")
    if parser is not None and got.parser != parser:
        score.mismatches.append(f"{where}: parser {got.parser}, want {parser}")


@dataclass(frozen=True, slots=True)
class Totals:
    """Sums of :class:`FileScore` counts over some files."""

    expected: int
    found: int
    wrong: int

    @property
    def recall(self) -> float:
        """Found / expected (1.0 when nothing was expected)."""
        return self.found / self.expected if self.expected else 1.0

    @property
    def precision(self) -> float:
        """Found / (found + wrong) (1.0 when nothing was found)."""
        reported = self.found + self.wrong
        return self.found / reported if reported else 1.0


def totals(scores: Iterable[FileScore], kinds: Sequence[str] = SCORED) -> Totals:
    """Expected / found / wrong summed over ``scores`` for ``kinds``."""
    expected = found = wrong = 0
    for s in scores:
        expected += sum(s.expected[k] for k in kinds)
        found += sum(s.found[k] for k in kinds)
        wrong += sum(s.wrong[k] for k in kinds)
    return Totals(expected, found, wrong)


def report(scores: Sequence[FileScore]) -> str:
    """The per-kind and per-stack tables, the files whose interruptions are off, the misses."""
    rows = ["kind               expected  found  wrong  recall  precision"]
    for kind in SCORED:
        t = totals(scores, (kind,))
        rows.append(
            f"{kind:<18} {t.expected:>8} {t.found:>6} {t.wrong:>6}  {t.recall:6.3f}"
            f"  {t.precision:9.3f}"
        )
    t = totals(scores)
    rows.append(
        f"{'all':<18} {t.expected:>8} {t.found:>6} {t.wrong:>6}  {t.recall:6.3f}"
        f"  {t.precision:9.3f}"
    )
    rows.append("")
    rows.append("stack          files  expected  found  wrong  recall  precision  interruptions")
    groups = sorted({s.labels.group for s in scores})
    for group in groups:
        mine = [s for s in scores if s.labels.group == group]
        t = totals(mine)
        right = sum(s.interruptions_right for s in mine)
        rows.append(
            f"{group:<14} {len(mine):>5} {t.expected:>9} {t.found:>6} {t.wrong:>6}"
            f"  {t.recall:6.3f}  {t.precision:9.3f}  {right:>6}/{len(mine)}"
        )
    right = sum(s.interruptions_right for s in scores)
    rows.append(f"interruptions right in {right} of {len(scores)} files")
    for s in scores:
        notes = [f"missed {m}" for m in s.misses] + [f"wrong {x}" for x in s.extras]
        notes += s.mismatches
        if not s.interruptions_right:
            notes.append(
                f"interruptions {s.interruptions}, want "
                f"{(s.labels.interruptions, s.labels.planned_interruptions)}"
            )
        if notes:
            rows.append(f"{s.labels.name}:")
            rows.extend(f"    {n}" for n in notes)
    return "\n".join(rows)
