"""Everything in a log that says a job was interrupted, and why — whatever the training stack.

:class:`FailureLines` is fed every record piece the log parser looks at, before the stack. It
runs, in order:

1. an open ``ChildFailedError`` banner (``parsers/launcher.py``) takes its own lines;
2. the Python traceback tracker (``parsers/traceback.py``);
3. the rule tables of ``parsers/launcher.py``, ``nccl.py``, ``slurm.py`` and ``kernel.py``.

Class names are the vocabulary of ``parsers/vocabulary.py``.

**Time.** A rule's own ``time`` group (Slurm's ``CANCELLED AT``), else the line's prefix:
c10/glog ``[E1206 18:44:12.715298746 file:line]`` and torch ≥2.4 launcher ``W0801
13:23:17.366000 pid file:line]`` (month and day only: the year comes from the last full date
seen in the file, or when none came before, the first one after: the log parser holds such
events, and the ones after them, until one is seen; else ``year_hint``; else the time is left
out, and the reader dates them, flagged; the c10 fraction is
CLOCK_MONOTONIC, so only whole seconds are kept), torch 2.2–2.3 launcher ``[2024-05-08
08:47:31,261]``, ``dmesg -T`` ``[Sun Feb 20 06:16:58 2022]``, journalctl ``Feb 14 05:03:41 host
kernel:``. ``dmesg``'s ``[ 1843.308145]`` is seconds since boot: no time.

**One interruption, few events.** Every rank prints its own watchdog lines, Slurm prints
``*** JOB`` and ``*** STEP`` for one kill, the launcher re-reports the death. A failure whose
*family* (its class; all ``nccl_*`` classes are one family, all ``gpu_*`` another) was already
reported within :data:`DEDUP_LINES` lines (counted from the last line of that family), at the
same step, with no training progress in between and less than :data:`DEDUP_SECONDS` apart, is
recognised but gives no event — unless it carries a time and the one reported had none. A
failure of a :data:`~parsers.vocabulary.CONSEQUENCE_CLASSES` class (a peer's collective failing
as a rank dies) is such a repeat of a failure of any family reported so.
Progress is explicit: the log parser reports each ``step``, ``checkpoint_*``, ``run_start``,
``restart`` and ``resume`` event of the stack (:meth:`FailureLines.note_progress`), and one on
a line after the family's last line makes the next failure a new interruption (a crash that
repeats at the step it crashed at after a resume from an earlier save is two: the step number
alone is the same). The rules layer still clusters what remains.

**Launches.** A launcher's launch line (``parsers/launcher.py``: torchrun's banner, its launch
configs) gives a ``run_start``, which is progress as above (a failure after it is a new
launch's); the other start lines of the same launch, with no event between, give none.

**Unrecognised lines.** A piece that looks like an error (:data:`ERROR_LOOKING`) but that no
rule, traceback or stack pattern consumed is handed to ``report_unmatched`` so that
``ckpt-advisor parse --misses`` can list it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from ahocorasick_rs import AhoCorasick

from ckpt_advisor.parsers import (
    error_records,
    kernel,
    launcher,
    line_stamps,
    nccl,
    ray,
    shell,
    slurm,
)
from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.failure_rule import FailureRule
from ckpt_advisor.parsers.stack import ParseContext
from ckpt_advisor.parsers.text import KeywordTable
from ckpt_advisor.parsers.timestamps import (
    parse_ctime,
    parse_mmdd_hms,
    parse_syslog_time,
    parse_ymd_hms,
)
from ckpt_advisor.parsers.traceback import HEADER as TRACEBACK_HEADER
from ckpt_advisor.parsers.traceback import KEYWORDS as TRACEBACK_KEYWORDS
from ckpt_advisor.parsers.traceback import TracebackTracker
from ckpt_advisor.parsers.vocabulary import CONSEQUENCE_CLASSES, PLANNED_CLASSES

_MODULES = (launcher, nccl, slurm, kernel, shell, ray, error_records)
"""Rule tables in matching order: the vocabulary-driven ERROR record rule comes last."""

RULES: tuple[FailureRule, ...] = tuple(rule for module in _MODULES for rule in module.RULES)
"""Every failure rule, in matching order (first match wins)."""

_RULE_TABLE = KeywordTable(RULES, lambda rule: rule.keyword)

_PARSER_OF = {rule.name: module.PARSER_NAME for module in _MODULES for rule in module.RULES}
"""``Event.parser`` of each rule's events: its module's name for the source (``torchrun``, …)."""

DEDUP_LINES = 200
"""Lines within which a failure of an already reported family is the same interruption."""

ERROR_LOOKING = re.compile(
    r"(?:Error|Exception)\b|\b(?:ERROR|FATAL|Fatal|Killed|killed|Aborted|CANCELLED|FAILED"
    r"|failed|Terminated|Segmentation fault|oom)\b"
)
r"""Words that make an unconsumed piece worth showing as unrecognised (``…Error`` ends any
word: no leading ``\w*``, which made each search retry every word of a long piece)."""

MISS_KEYWORDS = (
    "rror",
    "ERROR",
    "xception",
    "FATAL",
    "Fatal",
    "illed",
    "Abort",
    "fault",
    "CANCELLED",
    "FAILED",
    "failed",
    "Terminated",
    "oom",
)
"""Literals, one of which is in every :data:`ERROR_LOOKING` match (prefilter)."""

_MISS_TABLE = KeywordTable(MISS_KEYWORDS, lambda keyword: keyword)

KEYWORDS: tuple[str, ...] = tuple(
    dict.fromkeys(
        [*TRACEBACK_KEYWORDS, launcher.BANNER_START, *(r.keyword for r in RULES), *MISS_KEYWORDS]
    )
)
"""Literals one of which is in every line that this module must see (prefilter)."""

_FEED_SEARCH = AhoCorasick(
    list(dict.fromkeys([*TRACEBACK_KEYWORDS, launcher.BANNER_START, *(r.keyword for r in RULES)]))
)
"""The literals :meth:`FailureLines.feed` acts on with nothing open: a traceback header, a bare
exception line (``Error: ``/``Exception: ``), a launcher banner's start, a rule's keyword."""

_GLOG = re.compile(
    r"(?<![\w.])[FEWIV](?P<mmdd>\d{3,4}) (?P<hms>\d\d:\d\d:\d\d)\.\d{6,9}(?: +\d+)? [^\s\]]+:\d+\]"
)
_BRACKET_YMD = re.compile(r"\[(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d{3})?)\]")
_DMESG_T = re.compile(r"\[(?P<time>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\] ")
_SYSLOG = re.compile(r"^(?P<time>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) \S+ kernel: ")
_FAMILIES = (("nccl_", "nccl"), ("gpu_", "gpu"))


def family(failure_class: str) -> str:
    """The dedup family of a class: ``nccl`` for ``nccl_*``, ``gpu`` for ``gpu_*``, else itself."""
    for prefix, name in _FAMILIES:
        if failure_class.startswith(prefix):
            return name
    return failure_class


DEDUP_SECONDS = 600
"""Two timed failures of one family further apart than this are two interruptions."""


PROGRESS_KINDS = frozenset(
    {
        EventKind.STEP,
        EventKind.CHECKPOINT_START,
        EventKind.CHECKPOINT_END,
        EventKind.RUN_START,
        EventKind.RESTART,
        EventKind.RESUME,
    }
)
"""Stack events after which a failure of an already reported family is a new interruption:
training advanced, saved or started again (README, "Failed restart attempts")."""


def _same_interruption(
    seen: tuple[int, int | None, datetime | None],
    event: Event,
    step: int | None,
    progress_line: int,
) -> bool:
    last_line, reported_step, reported_time = seen
    if (
        event.line - last_line > DEDUP_LINES
        or progress_line > last_line
        or (step is not None and reported_step != step)
    ):
        return False
    if event.time is None:
        return True
    if reported_time is None:
        return False  # this one adds the time the first report lacked
    return abs((event.time - reported_time).total_seconds()) <= DEDUP_SECONDS


class FailureLines:
    """Failure recogniser over record pieces (see the module docstring)."""

    def __init__(
        self, context: ParseContext, report_unmatched: Callable[[int, str], None] | None = None
    ) -> None:
        self._context = context
        self._report_unmatched = report_unmatched
        self._tracebacks = TracebackTracker()
        self._banner: launcher.ChildFailedBanner | None = None
        self._reference: datetime | None = None
        self._seen: dict[str, tuple[int, int | None, datetime | None]] = {}
        """family[:incident] → (last line of that family, step when reported, its time)."""
        self._last_failure: tuple[int, int | None] | None = None
        """(line, step) of the last unplanned failure, reported or merged."""
        self._progress_line = 0
        """The latest line of a progress event (:meth:`note_progress`), 0 before any."""
        self._in_launch = False
        """Whether the last event given is a launch's start (:func:`launcher.is_launch`): the
        same launch's other start lines, with no event between, give none."""
        self._yearless: dict[int, tuple[str, str | None]] = {}
        """line → its stamp without a year (glog ``MMDD``/``HH:MM:SS``, or syslog's time and
        None), read before any full date: dated once one is seen (:meth:`with_years`)."""
        self.saw_yearless = False
        """Whether the file printed a stamp without a year that no full date placed."""
        self._traceback_stamps: dict[int, str] = {}
        """line → container-runtime stamp of an open traceback's header
        (:meth:`_runtime_dated`)."""

    @property
    def active(self) -> bool:
        """True while a traceback or banner is open: every line must then be fed."""
        return self._banner is not None or self._tracebacks.active

    def note_progress(self, event: Event) -> None:
        """Take a stack event: one of :data:`PROGRESS_KINDS` after a failure's line ends that
        failure's interruption (module docstring). A save a failure closes
        (:meth:`Stack.interrupted`) ended on a line before it, so it changes nothing."""
        self._in_launch = False
        if event.kind in PROGRESS_KINDS and event.line > self._progress_line:
            self._progress_line = event.line

    def note_time(self, time: datetime) -> None:
        """Remember a full date seen in the file (year of later month/day-only stamps)."""
        self._reference = time

    @property
    def awaits_year(self) -> bool:
        """Whether events of stamps without a year wait for the file's first full date: the
        caller holds them, and every event after them (file order), until :meth:`with_years`
        can date them."""
        return bool(self._yearless) and self._reference is None

    def with_years(self, events: list[Event], *, final: bool = False) -> list[Event]:
        """``events`` with their stamps without a year dated by the file's first full date
        after them (none came before them: :func:`parsers.timestamps.resolve_year` takes the
        year that puts the stamp within half a year of it). At the end of the file, or when
        the caller stops holding (``final``), with no full date yet they stay without a time
        (the reader dates them, flagged as the file's ``no_timestamps``) and
        :attr:`saw_yearless` says why (later stamps without a year are then not held)."""
        if not self._yearless or (self._reference is None and not final):
            return events
        reference, tz = self._reference, self._context.tz
        out = []
        for event in events:
            stamp = self._yearless.get(event.line) if event.time is None else None
            if stamp is not None and reference is not None:
                first, hms = stamp
                try:
                    if hms is None:
                        time = parse_syslog_time(first, tz, reference, None)
                    else:
                        time = parse_mmdd_hms(first, hms, tz, reference, None)
                    event = replace(event, time=time)
                except ValueError as exc:
                    self._context.report(event.line, f"bad timestamp: {exc}")
            out.append(event)
        self.saw_yearless = reference is None
        self._yearless.clear()
        return out

    def feed(self, piece: str, lineno: int, step: int | None) -> tuple[bool, list[Event]]:
        """Take one record piece; return ``(consumed, events)`` as the traceback tracker does.

        With no banner or traceback open, a piece holding none of the literals that could start
        one or match a rule (most record lines of a log) is not this module's: one
        multi-literal search answers ``(False, [])`` without the tracker's and rules' scans."""
        if (
            self._banner is None
            and not self._tracebacks.active
            and not _FEED_SEARCH.find_matches_as_indexes(piece)
        ):
            return False, []
        if self._banner is not None:
            done = self._banner.feed(piece, lineno)
            if not done:
                return True, []
            banner, self._banner = self._banner, None
            return True, self._kept([banner.event(self._context.tz)], step)
        if piece.rstrip().endswith(launcher.BANNER_START + ":"):
            self._banner = launcher.ChildFailedBanner(lineno, step)
        clock = self._context.clock
        runtime = None if clock is None else clock.runtime_stamp
        if runtime is not None and TRACEBACK_HEADER[:-1] in piece:
            self._traceback_stamps[lineno] = runtime
        consumed, events = self._tracebacks.feed(piece, lineno, step)
        if self._traceback_stamps or (events and runtime is not None):
            events = self._runtime_dated(events, lineno)
        incident = ""
        if not consumed:
            consumed, events, incident = self._rules(piece, lineno, step, events)
        return consumed, self._kept(events, step, incident)

    def finish(self) -> list[Event]:
        """Close an open banner and every open traceback."""
        events = self._runtime_dated(self._tracebacks.finish(), None)
        if self._banner is not None:
            events.append(self._banner.event(self._context.tz))
            self._banner = None
        return self._kept(events, None)

    def unmatched(self, piece: str, lineno: int) -> None:
        """Report ``piece`` if it looks like an error (it was consumed by nothing)."""
        if (
            self._report_unmatched is not None
            and _MISS_TABLE.candidates(piece)
            and ERROR_LOOKING.search(piece)
        ):
            self._report_unmatched(lineno, piece.strip()[:300])

    def _rules(
        self, piece: str, lineno: int, step: int | None, events: list[Event]
    ) -> tuple[bool, list[Event], str]:
        """The first rule that matches ``piece``: ``(consumed, events, incident key)``."""
        for rule in _RULE_TABLE.candidates(piece):
            m = rule.regex.search(piece)
            if m is None:
                continue
            failure_class = rule.classify(m)
            if failure_class is None:
                continue
            if (
                rule.kind is None
                or self._echoes_a_failure(rule, m, lineno, step)
                or (rule.kind is EventKind.RUN_START and self._in_launch)
            ):
                return True, events, ""
            time = self._time(rule, m, piece, lineno)
            is_failure = rule.kind is EventKind.FAILURE
            detail = piece.strip()[:200]
            event = Event(
                rule.kind,
                lineno,
                _PARSER_OF[rule.name],
                time=time,
                step=step if is_failure else None,  # a start's step is its stack's to say
                failure_class=failure_class if is_failure else None,
                planned=is_failure and failure_class in PLANNED_CLASSES,
                detail=detail,
            )
            found = [*events, event]
            if rule.restarts:
                restart = Event(EventKind.RESTART, lineno, event.parser, time=time, detail=detail)
                found.append(restart)
            return True, found, rule.incident(m) if rule.incident is not None else ""
        return False, events, ""

    def _echoes_a_failure(
        self, rule: FailureRule, m: re.Match[str], lineno: int, step: int | None
    ) -> bool:
        """A consequence line right after an unplanned failure (``echo_after_failure``)."""
        if rule.echo_after_failure is None or self._last_failure is None:
            return False
        last_line, last_step = self._last_failure
        recent = (
            lineno - last_line <= DEDUP_LINES
            and self._progress_line <= last_line
            and (step is None or step == last_step)
        )
        return recent and rule.echo_after_failure(m)

    def _time(
        self, rule: FailureRule, m: re.Match[str], piece: str, lineno: int
    ) -> datetime | None:
        tz = self._context.tz
        try:
            if rule.parse_time is not None and m.groupdict().get("time"):
                return self._full(rule.parse_time(m["time"], tz))
            prefix = piece[: m.start()]
            glog = _GLOG.search(prefix)
            if glog is not None:
                if not self._has_year(lineno):
                    if not self.saw_yearless:  # else no full date came: no more holding
                        self._yearless[lineno] = (glog["mmdd"], glog["hms"])
                    return None
                return parse_mmdd_hms(
                    glog["mmdd"], glog["hms"], tz, self._reference, self._context.year_hint
                )
            for regex, parse in ((_BRACKET_YMD, parse_ymd_hms), (_DMESG_T, parse_ctime)):
                found = regex.search(prefix)
                if found is not None:
                    return self._full(parse(found["time"], tz))
            syslog = _SYSLOG.search(prefix)
            if syslog is not None:
                if not self._has_year(lineno):
                    if not self.saw_yearless:
                        self._yearless[lineno] = (syslog["time"], None)
                    return None
                return parse_syslog_time(
                    syslog["time"], tz, self._reference, self._context.year_hint
                )
            stamp = line_stamps.leading_stamp(prefix)
            if stamp is not None:
                return self._full(line_stamps.parse_line_stamp(stamp["time"], tz))
            return self._runtime_time(lineno)
        except ValueError as exc:
            if "no year" not in str(exc):
                self._context.report(lineno, f"bad timestamp: {exc}")
        return None

    def _full(self, time: datetime) -> datetime:
        self._reference = time
        return time

    def _has_year(self, lineno: int) -> bool:
        """Whether a stamp without a year on line ``lineno`` can be placed: a full date came
        before it, or the year hint, or the line's container-runtime stamp (a full date of the
        same line, which then is the file's last full date)."""
        if self._reference is None and self._context.year_hint is None:
            self._runtime_time(lineno)
        return self._reference is not None or self._context.year_hint is not None

    def _runtime_time(self, lineno: int, stamp: str | None = None) -> datetime | None:
        """The time of line ``lineno``'s container-runtime stamp (``stamp``, else the current
        line's, :attr:`FileClock.runtime_stamp`), None without one; a bad one is reported."""
        clock = self._context.clock
        if stamp is None and clock is not None:
            stamp = clock.runtime_stamp
        if stamp is None:
            return None
        try:
            return self._full(line_stamps.parse_line_stamp(stamp, self._context.tz))
        except ValueError as exc:
            self._context.report(lineno, f"bad timestamp: {exc}")
            return None

    def _runtime_dated(self, events: list[Event], lineno: int | None) -> list[Event]:
        """The tracker's failures without a time dated by the container-runtime stamp of their
        first line: a traceback's header's (kept while it is open), a bare exception line's
        own (the current line ``lineno``; None at the end of the file)."""
        dated = []
        for event in events:
            stamp = self._traceback_stamps.get(event.line)
            if event.time is None and (stamp is not None or event.line == lineno):
                event = replace(event, time=self._runtime_time(event.line, stamp))
            dated.append(event)
        if not self._tracebacks.active:
            self._traceback_stamps.clear()
        return dated

    def _kept(self, events: list[Event], step: int | None, incident: str = "") -> list[Event]:
        """Drop failures of a family already reported in this interruption (module docstring);
        ``incident`` tells apart incidents of one family (an Xid's pid)."""
        kept: list[Event] = []
        for event in events:
            self._in_launch = launcher.is_launch(event)
            if self._in_launch:  # progress: a failure after it is the new launch's
                self._progress_line = max(self._progress_line, event.line)
            if event.kind is not EventKind.FAILURE or event.failure_class is None:
                kept.append(event)
                continue
            name = f"{family(event.failure_class)}:{incident}"
            seen = self._seen.get(name)
            # the failure's own step (the last one confirmed before it began) is the progress
            # marker; at finish() the caller has none to give
            at_step = event.step if event.step is not None else step
            if not event.planned:
                self._last_failure = (event.line, at_step)
            if event.failure_class in CONSEQUENCE_CLASSES and any(
                _same_interruption(other, event, at_step, self._progress_line)
                for other in self._seen.values()
            ):
                continue  # a peer's view of a death just reported, whatever its family
            repeat = seen is not None and _same_interruption(
                seen, event, at_step, self._progress_line
            )
            if repeat and seen is not None:
                self._seen[name] = (max(event.line, seen[0]), seen[1], seen[2])
                continue
            self._seen[name] = (event.line, at_step, event.time)
            kept.append(event)
        return kept
