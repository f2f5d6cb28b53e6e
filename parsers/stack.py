"""What a training-stack module provides: record headers, a message pattern table, state hooks.

A stack module (``parsers/hf_trainer.py``, ``parsers/lightning.py``, …) subclasses :class:`Stack`
and fills in three class attributes:

* ``headers`` — the logging prefixes its records carry, each giving the record's time;
* ``patterns`` — the messages it prints, as compiled regexes with named groups (``step``,
  ``path``), each with a real sample line and the source file and version it comes from;
* ``step_in_path`` — how to read a step out of a checkpoint path.

Table lookups are enough for a stateless stack; a stack with state (the HF Trainer pairs a save
start with its last "saved in" line) overrides :meth:`Stack.on_record`, :meth:`Stack.on_bar` and
:meth:`Stack.interrupted`. A stack has no end-of-file hook: what it holds (an open save) ends on
a line, never because the file went quiet (``StreamParser.finish``), so the daemon, which
flushes a quiet file, and a backfill give the same events. Messages are matched whatever the
prefix, so the same table reads a stack's bare messages (no logging formatter) with
``time=None``.

(A little over 400 lines, on purpose: the record types and the :class:`Stack` base with its
hooks are the one contract every stack module implements, and the buffer path's shortcuts
(``took_record``, ``inert_bar``, ``header_time``) must keep the same state as its per-line
methods beside them.)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, tzinfo
from typing import ClassVar, NamedTuple

from ckpt_advisor.parsers import line_stamps
from ckpt_advisor.parsers.clock import FileClock
from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.text import Bar, KeywordTable, last_bar
from ckpt_advisor.parsers.timestamps import parse_epoch, parse_ymd_hms

DETAIL_CHARS = 200
"""Longest ``Event.detail`` a stack writes."""

ZONE_STEP_S = 900.0
"""Time-zone offsets are whole multiples of 15 minutes (IANA tzdata since 1972): a stamp and a
Unix time on one line further apart than half of this are a zone apart, not a delay."""


@dataclass(frozen=True, slots=True)
class ParseContext:
    """What a stack needs from its caller.

    Attributes:
        tz: zone of naive wall-clock stamps in the log (the node's local zone).
        year_hint: year for stamps printed without one (none of the current stacks has them).
        report: counts a miss: ``report(lineno, reason)``.
        clock: the file's clock (``parsers/clock.py``), told of every stamp a stack reads.
    """

    tz: tzinfo
    year_hint: int | None
    report: Callable[[int, str], None]
    clock: FileClock | None = None


@dataclass(frozen=True, slots=True)
class Header:
    """A record prefix written by a logging format, carrying the record's time.

    Attributes:
        keyword: a literal present in every line this header matches (prefilter).
        regex: searched in a record piece; groups ``time`` and ``msg`` (the message).
        parse_time: ``parse_time(time_text, tz)`` → aware UTC datetime, raising ValueError.
        sample: a real line with this prefix.
        source: the format string's file and version.
        identifies_stack: True when only this stack writes this prefix (auto-detection).
        in_prefilter: False when the keyword is too common to select lines by itself (the
            stack then reads only lines holding one of its pattern keywords).
    """

    keyword: str
    regex: re.Pattern[str]
    parse_time: Callable[[str, tzinfo], datetime]
    sample: str
    source: str
    identifies_stack: bool
    in_prefilter: bool = True


LINE_STAMP = Header(
    keyword="",
    regex=line_stamps.LEADING_STAMP,
    parse_time=line_stamps.parse_line_stamp,
    sample="2026-12-02 12:39:19,923 INFO transformers.trainer: Saving model checkpoint to "
    "/x/checkpoint-100",
    source='Python logging basicConfig(format="%(asctime)s %(levelname)s %(name)s: '
    "%(message)s\"), loguru's default format, ISO 8601 (docs/FORMATS.md §21)",
    identifies_stack=False,
    in_prefilter=False,
)
"""A logger's stamp at the start of a record of no header of the stack's (every stack's
fallback, :meth:`Stack.feed`; ``parsers/line_stamps.py``)."""

RUNTIME_STAMP = Header(
    keyword="",
    regex=line_stamps.RUNTIME_PREFIX,
    parse_time=line_stamps.parse_line_stamp,
    sample="2026-12-02T17:39:19.923456789Z Saving model checkpoint to /x/checkpoint-100",
    source="kubectl logs --timestamps, docker logs -t: RFC3339NanoFixed (docs/FORMATS.md §21)",
    identifies_stack=False,
    in_prefilter=False,
)
"""The container runtime's stamp of the line (:attr:`FileClock.runtime_stamp`): the time of
its records that print none of their own."""


@dataclass(frozen=True, slots=True)
class Pattern:
    """One message a stack prints.

    Attributes:
        name: short identifier, unique in its stack (``"checkpoint_start"``, ``"saved_in"``).
        kind: the event this message is, or ``None`` when it only feeds the stack's state or
            identifies the stack.
        keyword: a literal present in every message the regex matches (prefilter).
        regex: searched in the message; optional groups ``step`` (int), ``path`` (goes to
            ``Event.detail``; the step is read from it with ``step_in_path`` if no ``step``),
            ``time`` (``YYYY-MM-DD HH:MM:SS[.ffffff]`` in the message, read in ``tz``),
            ``epoch_s`` (Unix seconds in the message, e.g. NeMo's ``time.time()``; wins over the
            header's time), ``duration_s`` / ``duration_ms`` (the save's printed duration).
        sample: a real line with this message.
        source: the framework file and version that prints it.
        identifies_stack: False for wording other stacks print too (auto-detection skips it).
    """

    name: str
    kind: EventKind | None
    keyword: str
    regex: re.Pattern[str]
    sample: str
    source: str
    identifies_stack: bool = True


@dataclass(frozen=True, slots=True)
class Record:
    """One log record as far as a single line shows it.

    Attributes:
        line: line where the record starts (its header's line for a continuation line).
        msg: the message text (after the header, if any).
        time_text: the header's time text, ``None`` without a header.
        header: the header that matched, ``None`` without one.
        continued: True when ``msg`` is the first line after a header with an empty message
            (``logger.info("\\n\\nTraining completed. …")``) or a bare warning location.
    """

    line: int
    msg: str
    time_text: str | None = None
    header: Header | None = None
    continued: bool = False


def _duration_s(groups: dict[str, str | None]) -> float | None:
    """Seconds from a ``duration_s`` or ``duration_ms`` group (``1,234.5`` allowed)."""
    for name, scale in (("duration_s", 1.0), ("duration_ms", 1e-3)):
        text = groups.get(name)
        if text:
            try:
                return float(text.replace(",", "")) * scale
            except ValueError:
                return None
    return None


_WARNING_LOCATION = re.compile(r"\S+\.py:\d+:\s*")
"""A Python warning's ``<file>:<line>: `` whose message starts on the next line (NeMo routes
warnings through its logger: ``[NeMo W 2024-10-08 11:49:10 nemo_logging:349] …/loops/
training_epoch_loop.py:161: `` then a blank line and the text; public/nemo/nemo_10797_*)."""


def _has_text(msg: str) -> bool:
    """False for a header's empty message or bare warning location: the record goes on."""
    return bool(msg.strip()) and _WARNING_LOCATION.fullmatch(msg) is None


def parse_step(digits: str) -> int | None:
    """``int(digits)`` for a plausible step count (at most 15 digits), else ``None``."""
    return int(digits) if len(digits) <= 15 else None


class _ClassTables(NamedTuple):
    keywords: tuple[str, ...]
    patterns: KeywordTable[Pattern]


_CLASS_TABLES: dict[type[Stack], _ClassTables] = {}


def _class_tables(stack: type[Stack]) -> _ClassTables:
    """A stack class's prefilter literals and patterns by keyword, built once per class and
    shared by its instances (one per watched file)."""
    tables = _CLASS_TABLES.get(stack)
    if tables is None:
        keywords = tuple(
            dict.fromkeys(
                [h.keyword for h in stack.headers if h.in_prefilter]
                + [p.keyword for p in stack.patterns]
            )
        )
        table = KeywordTable(stack.patterns, lambda p: p.keyword)
        tables = _CLASS_TABLES[stack] = _ClassTables(keywords, table)
    return tables


class Stack:
    """Base of one training stack's parser: header and pattern tables plus state hooks."""

    name: ClassVar[str]
    headers: ClassVar[tuple[Header, ...]] = ()
    patterns: ClassVar[tuple[Pattern, ...]]
    step_in_path: ClassVar[re.Pattern[str] | None] = None
    absorbs: ClassVar[tuple[str, ...]] = ()
    """Stacks whose lines this one reads as its own where both print into one file (HF
    Trainer's DeepSpeed engine): a file detected as one of them is this stack's from its first
    line this stack identifies (:class:`parsers.logs.LogParser`)."""
    reads_bars: ClassVar[bool] = False
    """True when the stack reads its progress bar: :meth:`on_bar` is called with the last bar
    state (:meth:`last_bar`) of each line that shows a rate; a bar :meth:`is_training_bar`
    calls true also keeps the file's clock (it counts global steps, and its elapsed time runs
    on through the run)."""

    def __init__(self, context: ParseContext) -> None:
        self.context = context
        tables = _class_tables(type(self))
        self.keywords: tuple[str, ...] = tables.keywords
        self._pattern_table = tables.patterns
        self._headed_blank: Record | None = None
        self._glued: tuple[str, Record] | None = None
        """The text and record :meth:`header_time` read last (a record glued after a bar)."""
        self._last_time: tuple[tuple[Header, str], datetime | None] | None = None
        self._zone_offset_s = 0.0
        """Stamp minus printed Unix time, in whole zone offsets, last found (:meth:`epoch_time`)."""
        self._open_save: Event | None = None
        """The ``checkpoint_start`` of the save in progress (default pairing)."""
        self._closed_step: int | None = None
        """Step of the last save whose end was reported (repeated end lines are dropped)."""
        self.last_step: int | None = None
        """Last step this stack's own events confirmed (a step line, a save, a resume)."""
        self._resumed: tuple[int | None] | None = None
        """(step,) of the resume just reported, until training moves on."""

    @property
    def pending(self) -> bool:
        """True while the next non-blank line may continue a record (feed it unfiltered)."""
        return self._headed_blank is not None

    def detects(self, text: str) -> bool:
        """True when ``text`` (a record piece) can only come from this stack."""
        if self.detects_by_header(text):
            return True
        hit = self.match(text)
        return hit is not None and hit[0].identifies_stack

    @property
    def provisional(self) -> bool:
        """Whether the line that detected the stack (:meth:`detected_by`) may be overruled by
        a later one (its logging prefix): by default never."""
        return False

    def detected_by(self, text: str) -> tuple[str, ...]:
        """Note that ``text`` (a record piece :meth:`detects` is true of) detected the stack;
        the prefilter literals of the lines to read from then on: by default :attr:`keywords`."""
        return self.keywords

    def detects_by_header(self, text: str) -> bool:
        """True when ``text`` carries a record prefix that only this stack writes."""
        return any(
            header.identifies_stack and header.keyword in text and header.regex.search(text)
            for header in self.headers
        )

    def feed(self, text: str, lineno: int) -> list[Event]:
        """Read one record piece (ANSI stripped, bars removed) of line ``lineno``."""
        return self.on_record(self._record(text, lineno))

    def took_record(self, line: str, lineno: int) -> bool:
        """Take ``line`` (one record piece, as :meth:`feed` would be given it, while no
        record continues) if it is a record this stack answers without events faster than
        :meth:`feed`, with the same state after; whether it did. By default it takes none."""
        return False

    def match(self, msg: str) -> tuple[Pattern, re.Match[str]] | None:
        """Return the first pattern found in ``msg`` and its match, or ``None``."""
        for pattern in self._pattern_table.candidates(msg):
            m = pattern.regex.search(msg)
            if m is not None:
                return pattern, m
        return None

    def on_record(self, record: Record) -> list[Event]:
        """Turn one record into events: a lookup in :attr:`patterns`, then :meth:`pair`."""
        hit = self.match(record.msg)
        if hit is None or hit[0].kind is None:
            return []
        return self.pair(self.event(hit[0].kind, record, hit[1]))

    def pair(self, event: Event) -> list[Event]:
        """Pair checkpoint starts with ends; return the events to report.

        * ``checkpoint_start`` opens a save. A second start line of the save already open
          (same step, e.g. DeepSpeed's ``is about to be saved!`` then ``Saving model
          checkpoint:`` from ranks 0 and 1) gives nothing.
        * ``checkpoint_end`` closes it: ``step`` defaults to the open save's step, then to
          :attr:`last_step`; ``duration_s`` (unless the line printed one) is the end's time
          minus the start's, when both are known. A repeated end line of a save already
          closed (DeepSpeed prints ``is ready now!`` on every rank) gives nothing.
        * a ``step``, ``resume`` or ``run_start`` abandons an open save that never ended.
        * a ``resume`` right after a resume at the same step (DeepSpeed prints a load line per
          file and rank; Megatron, torchtitan and Accelerate print two) gives nothing.
        """
        kind = event.kind
        if kind is EventKind.CHECKPOINT_START:
            step = event.step if event.step is not None else self.last_step
            if self._open_save is not None and self._open_save.step == step:
                return []
            self._open_save = replace(event, step=step)
            self._closed_step = None
            event = self._open_save
        elif kind is EventKind.CHECKPOINT_END:
            start, self._open_save = self._open_save, None
            step = event.step
            if step is None:
                step = start.step if start is not None else self.last_step
            if start is None and step is not None and step == self._closed_step:
                return []
            duration_s = event.duration_s
            if (
                duration_s is None
                and start is not None
                and start.time is not None
                and event.time is not None
            ):
                duration_s = (event.time - start.time).total_seconds()
                if duration_s < 0:
                    self.context.report(event.line, "checkpoint ends before it starts")
                    duration_s = None
            self._closed_step = step
            event = replace(event, step=step, duration_s=duration_s)
        elif kind is EventKind.RESUME:
            if self._resumed == (event.step,):
                return []  # the same resume, printed again (another rank, file, or wording)
            self._open_save = None
            self._resumed = (event.step,)
        if kind in (EventKind.STEP, EventKind.RUN_START):
            self._open_save = None
        if kind is not EventKind.RESUME:
            self._resumed = None
        if event.step is not None:
            self.last_step = event.step
        return [event]

    def last_bar(self, line: str) -> Bar | None:
        """The last progress-bar state drawn on ``line`` (only if :attr:`reads_bars`): by
        default tqdm's (:func:`parsers.text.last_bar`)."""
        return last_bar(line)

    def on_bar(self, bar: Bar, lineno: int, time: datetime | None) -> list[Event]:
        """React to the last bar state on line ``lineno`` (only if :attr:`reads_bars`).

        ``time`` is the time of a record glued after a training bar on the same line, if any.
        """
        return []

    def inert_bar(self, bar: Bar) -> bool:
        """True for a bar state that neither :meth:`on_bar` nor the file's clock ever acts on,
        whatever the stack's state (only if :attr:`reads_bars`); by default none."""
        return False

    def interrupted(self) -> list[Event]:
        """Flush what a failure line ends (the log parser calls it before the failure's events,
        so they follow in the output what they interrupted); by default nothing."""
        return []

    def is_training_bar(self, bar: Bar) -> bool:
        """True for a redraw of the bar that counts training steps (its clock dates untimed
        lines; only if :attr:`reads_bars`): by default one without a description."""
        return bar.desc is None

    def header_time(self, text: str, lineno: int) -> datetime | None:
        """Time of the record whose header starts ``text``, or ``None``. The record is
        remembered: :meth:`feed` is given the same text next (the line's glued piece)."""
        record = self._headed(text, lineno) or self._runtime_record(text, lineno)
        if record is None:
            return None  # no header (the metrics dict after most bar redraws): no record time
        self._glued = (text, record)
        return self.time_of(record)

    def time_of(self, record: Record) -> datetime | None:
        """Parse the record's time in ``context.tz``; a bad stamp is reported and gives None.

        The last stamp read is remembered, so records printed in the same millisecond (and a
        bar's glued record, read twice) cost one parse and one report. Each stamp read is
        handed to ``context.clock`` (in line order: the order records are fed).
        """
        return self.stamp_time(record.header, record.time_text, record.line)

    def stamp_time(
        self, header: Header | None, time_text: str | None, lineno: int
    ) -> datetime | None:
        """:meth:`time_of` the record of line ``lineno`` with ``header`` and its time text,
        without building the :class:`Record` (a stack's shortcut, :meth:`took_record`)."""
        if header is None or time_text is None:
            return None
        key = (header, time_text)
        if self._last_time is not None and self._last_time[0] == key:
            return self._last_time[1]
        time: datetime | None = None
        try:
            time = header.parse_time(time_text, self.context.tz)
        except ValueError as exc:
            self.context.report(lineno, f"bad timestamp: {exc}")
        if time is not None and self.context.clock is not None:
            self.context.clock.printed(time, lineno)
        self._last_time = (key, time)
        return time

    def step_from(self, m: re.Match[str]) -> int | None:
        """The ``step`` group of ``m``, else a step read from its ``path`` group, else None."""
        groups = m.groupdict()
        if groups.get("step"):
            return parse_step(groups["step"])
        path = groups.get("path")
        if path and self.step_in_path is not None:
            found = self.step_in_path.search(path)
            if found is not None:
                return parse_step(found.group(1))
        return None

    def event(
        self, kind: EventKind, record: Record, m: re.Match[str], step: int | None = None
    ) -> Event:
        """Build the event ``kind`` for a pattern match; ``step`` overrides :meth:`step_from`.

        The time is the ``epoch_s`` or ``time`` group if the message prints one, else the
        header's; ``duration_s`` comes from a ``duration_s`` or ``duration_ms`` group.
        """
        groups = m.groupdict()
        path = groups.get("path")
        return Event(
            kind,
            record.line,
            self.name,
            time=self._message_time(record, groups),
            step=step if step is not None else self.step_from(m),
            duration_s=_duration_s(groups),
            detail=(path or m.group())[:DETAIL_CHARS],
        )

    def epoch_time(
        self, record: Record, epoch_text: str | None, after_s: float = 0.0
    ) -> datetime | None:
        """The Unix time ``epoch_text`` (seconds, as printed) of ``record``, on the clock of
        the file's stamps: moved by the whole time-zone offset between the two when the
        record's own stamp, read in ``context.tz``, lies one away (the stamp is local time
        printed without a zone, read in the wrong one: a NeMo log of a UTC−7 node read as
        UTC). Then every time of the file is read one way, and a save's start (its Unix time)
        and its end (a later line's stamp) measure its cost, not the offset. Each offset is
        reported once (``stamp_zone_offset``, :meth:`FileClock.zone_offset`); a record
        without a stamp takes the last offset found. ``after_s``: how long after that Unix
        time the line was printed, at the least (NeMo's ``Global Checkpoint Save`` prints a
        save's start once it took its ``Save duration``), so that a long save is not taken
        for a zone. None for an unreadable number (reported).
        """
        if not epoch_text:
            return None
        try:
            epoch = parse_epoch(float(epoch_text))
        except ValueError as exc:
            self.context.report(record.line, f"bad timestamp: {exc}")
            return None
        stamp = self.time_of(record)
        if stamp is not None:
            apart_s = (stamp - epoch).total_seconds() - after_s
            self._zone_offset_s = ZONE_STEP_S * round(apart_s / ZONE_STEP_S)
        if not self._zone_offset_s:
            return epoch
        moved = epoch + timedelta(0, self._zone_offset_s)
        if stamp is not None and self.context.clock is not None:
            self.context.clock.zone_offset(record.line, self._zone_offset_s, moved)
        return moved

    def _message_time(self, record: Record, groups: dict[str, str | None]) -> datetime | None:
        if groups.get("epoch_s"):
            return self.epoch_time(record, groups["epoch_s"])
        try:
            if groups.get("time"):
                return parse_ymd_hms(groups["time"] or "", self.context.tz)
        except ValueError as exc:
            self.context.report(record.line, f"bad timestamp: {exc}")
        return self.time_of(record)

    def _record(self, text: str, lineno: int) -> Record:
        glued = self._glued
        if glued is not None and glued[1].line == lineno and glued[0] == text:
            record: Record | None = glued[1]  # read by header_time: a header is read once
        else:
            record = self._headed(text, lineno)
        if record is not None:
            self._headed_blank = None if _has_text(record.msg) else record
            return record
        if self._headed_blank is not None:
            headed, self._headed_blank = self._headed_blank, None
            return Record(headed.line, text, headed.time_text, headed.header, continued=True)
        return self._runtime_record(text, lineno) or Record(lineno, text)

    def _headed(self, text: str, lineno: int) -> Record | None:
        """The record of ``text`` if one of :attr:`headers` is found in it, else if it starts
        with a logger's stamp (:data:`LINE_STAMP`), else None."""
        for header in self.headers:  # a loop, not any() of a generator: once per bar line
            if header.keyword in text:
                m = header.regex.search(text)
                if m is not None:
                    return Record(lineno, m["msg"], m["time"], header)
        m = line_stamps.leading_stamp(text)
        return None if m is None else Record(lineno, m["msg"], m["time"], LINE_STAMP)

    def _runtime_record(self, text: str, lineno: int) -> Record | None:
        """``text`` as a record dated by its line's container-runtime stamp, if it has one."""
        clock = self.context.clock
        if clock is None or clock.runtime_stamp is None:
            return None
        return Record(lineno, text, clock.runtime_stamp, RUNTIME_STAMP)
