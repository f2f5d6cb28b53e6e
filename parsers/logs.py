"""The log-file parser: text clean-up, prefilter, tracebacks and one training stack.

Per physical line:

1. ANSI escapes are stripped (only if the line has an ESC).
2. If the stack reads its progress bar and the line holds a rate (``it/s``/``s/it``), the LAST
   bar state on the line (:meth:`~parsers.stack.Stack.last_bar`) is handed to the stack (at
   most one ``step`` event per line); a training bar also keeps the file's clock.
3. Unless a traceback is open or the stack waits for a continuation line, a line that holds
   none of the keywords (literals of every header, pattern and failure start) stops here: most
   of a big log is bar redraws, and they cost a few substring scans.
0. Custom patterns from the config (``parsers/custom.py``), if any, are searched first in
   every line; a line one of them finds gives their events and nothing else.
4. Otherwise the line is cut into record pieces (``\\r``, bars dropped); a piece holding
   ckpt-advisor's own interval-change line gives its event (``parsers/adoption.py``); any
   other goes to the failure recogniser first (``parsers/failures.py``: launcher banners,
   tracebacks, the torchrun/NCCL/Slurm/kernel rules), then, if it did not take it, to the stack; an
   error-looking piece nobody took is reported as unmatched (``StreamParser.unmatched``).

With several candidate stacks (``auto``: :class:`~parsers.registry.StackCandidate`, a stack
imported when a piece could be its own), the pieces of each keyword line are first offered to
every stack until one :meth:`~parsers.stack.Stack.detects` its own line (before step 2, since a
bar precedes the record glued to it; a stack's own record prefix wins over another stack's
wording); from then on that stack alone is used. Until then, pieces no stack reads go to the
fallback stack (``parsers/generic.py``), if any. Tracebacks are recognised before and after
detection.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace

from ahocorasick_rs import AhoCorasick

from ckpt_advisor.parsers import adoption, launcher
from ckpt_advisor.parsers.clock import FileClock
from ckpt_advisor.parsers.custom import CustomPatterns
from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.failures import KEYWORDS as FAILURE_KEYWORDS
from ckpt_advisor.parsers.failures import FailureLines
from ckpt_advisor.parsers.line_stamps import split_runtime
from ckpt_advisor.parsers.registry import AUTO, StackCandidate
from ckpt_advisor.parsers.stack import Stack
from ckpt_advisor.parsers.stream import Diagnostics, LineFilter, StreamParser
from ckpt_advisor.parsers.text import RATE_MARKERS, records, strip_ansi

YEARLESS_HOLD_LINES = 200
"""Lines a log parser holds events for after a stamp without a year, waiting for a full date
to take the year from (torchrun's ChildFailedError banner follows its launcher line within
~40 lines): a live log whose stamps have no year must not withhold its events for good; past
this they go out without a time (the reader dates them, flagged as ``no_timestamps``)."""


PRE_STAMP_HOLD_LINES = 200
"""Lines a log parser holds the events of a file that has printed no time yet for, waiting for
its first printed time to date them (a Megatron-LM run prints ``loading checkpoint ... at
iteration N`` two lines before its first stamp; Lightning, which prints none, before a torchrun
block that does): past this, or when the file idles or ends (:meth:`LogParser.finish`), they
go out without a time (the reader dates them, flagged as ``no_timestamps``)."""


@functools.lru_cache(maxsize=64)
def _keywords_of(stack_keywords: tuple[tuple[str, ...], ...]) -> tuple[str, ...]:
    """The prefilter literals of some stacks and of the failure rules, one tuple per set."""
    keywords = [keyword for keywords in stack_keywords for keyword in keywords]
    return tuple(dict.fromkeys([*keywords, *FAILURE_KEYWORDS, adoption.KEYWORD]))


WHOLE_LINE_KEYWORDS = (*FAILURE_KEYWORDS, adoption.KEYWORD)
"""The literals of the lines a detected stack's parser must see whole (:meth:`LogParser.feed`):
what the failure recogniser, the unmatched report and the adoption check act on."""


@functools.lru_cache(maxsize=64)
def _line_filter(keywords: tuple[str, ...], reads_bars: bool, detected: bool) -> LineFilter:
    """The :class:`LineFilter` of a keyword set, one per set: every parser of a stack shares it
    (a daemon watching 1,000 files would otherwise hold 1,000 copies of the same 60 literals).
    Until a stack is detected every keyword line is fed whole (detection runs in :meth:`feed`)."""
    return LineFilter(
        keywords=(*(k.encode() for k in keywords), b"\x1b"),
        progress=tuple(m.encode() for m in RATE_MARKERS) if reads_bars else (),
        whole_line=tuple(k.encode() for k in WHOLE_LINE_KEYWORDS) if detected else None,
    )


@functools.lru_cache(maxsize=64)
def _keyword_search(keywords: tuple[str, ...]) -> AhoCorasick:
    """One searcher per keyword set, shared by every parser of that set: the automaton (a DFA,
    the fastest) takes ~0.5 MB, which a daemon watching 1,000 files would otherwise hold
    1,000 times."""
    return AhoCorasick(list(keywords))


MAX_INERT_LINES = 256
"""Distinct lines :meth:`LogParser._remember_inert` keeps (they repeat: a few per log)."""


class LogParser(StreamParser):
    """A :class:`~parsers.stream.StreamParser` for training logs of one or more candidate stacks.

    ``Event.step`` of a failure is the last step the log confirmed before the traceback began
    (a training bar, a checkpoint or a resume), ``None`` if none.

    Time: events keep the file's order (``parsers/clock.py``): printed times are moved forward
    after the file's clock steps back; for a stack that reads tqdm bars, an event whose line
    printed no time (a traceback, a bare bar) gets the latest moment the file has shown before
    it — its newest stamp, or the training bar's clock if later and trusted (the bar's start,
    from a record glued after it or the ``run_start``/``resume`` before it, plus its elapsed
    time) — marked ``time_estimated``. What the clock finds (a step back, a bar clock ignored,
    no stamps at all) comes out as ``clock_step``, ``bar_clock_ignored`` and ``no_timestamps``
    events at their lines, before the line's other events.
    """

    def __init__(
        self,
        stacks: Sequence[Stack | StackCandidate],
        diagnostics: Diagnostics | None = None,
        custom: CustomPatterns | None = None,
        fallback: Stack | None = None,
    ) -> None:
        if not stacks:
            raise ValueError("LogParser needs at least one stack")
        self._custom = custom
        self._candidates = tuple(stacks)
        only = stacks[0] if len(stacks) == 1 else None
        self._stack: Stack | None = only.stack() if isinstance(only, StackCandidate) else only
        super().__init__(self._stack.name if self._stack else AUTO, diagnostics)
        self._failures = FailureLines(stacks[0].context, self._diagnostics.report_unmatched)
        self._last_step: int | None = None
        self._fallback = fallback
        fallback_keywords = fallback.keywords if fallback is not None else ()
        self._keywords = _keywords_of(
            (*(stack.keywords for stack in self._candidates), fallback_keywords)
        )
        self._keyword_search = _keyword_search(self._keywords)
        self._filter = _line_filter(
            self._keywords,
            self._stack is not None and self._stack.reads_bars,
            self._stack is not None and self._fallback is None,
        )
        self._unconfirmed = self._stack is not None
        """A stack given (``--format``) has not yet read a line of its own, or one detected
        read only a line another may overrule (:attr:`Stack.provisional`): each line wanted
        goes through detection (:meth:`Stack.detected_by` sets the keywords) until one does."""
        self._absorbers: tuple[Stack | StackCandidate, ...] = ()
        """Candidates that read the detected stack's lines as their own (:attr:`Stack.absorbs`):
        the file becomes the first one's at its first line that it identifies."""
        self._clock = stacks[0].context.clock or FileClock()
        self._inert: dict[str, None] = {}
        self._held: list[Event] = []
        """Events held from a stamp without a year on, in file order, until the file's first
        full date dates it (:meth:`FailureLines.with_years`), at most
        :data:`YEARLESS_HOLD_LINES` lines."""
        self._held_lines = 0
        self._unstamped: list[Event] = []
        """Events (and clock findings) of a file that has shown no time yet, in file order,
        held until its first printed time, at most :data:`PRE_STAMP_HOLD_LINES` lines
        (:meth:`_hold_unstamped`)."""
        self._unstamped_lines = 0
        self._launched = False
        """Whether the file printed a launch's time (:func:`launcher.is_launch`): untimed
        failures held after it lie between two printed times (:meth:`_hold_unstamped`)."""

    def _feed(self, raw: str, lineno: int) -> list[Event]:
        if raw in self._inert and self._quiet():
            return []
        line = strip_ansi(raw)
        if self._custom:
            found = self._custom.feed(line, lineno)
            if found:
                custom_events: list[Event] = []
                self._note(custom_events, found)
                return self._dated(custom_events)
        line = self._runtime_cut(line)
        events: list[Event] = []
        wanted = self._wanted(line)
        detecting = self._stack is None or self._absorbers or self._unconfirmed
        if detecting and wanted:  # before the bar, which
            for piece in records(line):  # precedes the record glued to it
                if self._detect(piece):
                    break
        inert_bar = self._bar(events, line, lineno)
        stack = self._stack
        if wanted or self._failures.active or (stack is not None and stack.pending):
            for piece in records(line):
                self._feed_piece(events, piece, lineno)
        elif inert_bar and self._quiet():
            self._remember_inert(raw)
        return self._dated(events)

    def _runtime_cut(self, line: str) -> str:
        """``line`` without a container runtime's stamp (``kubectl logs --timestamps``,
        ``parsers/line_stamps.py``), which the file's clock holds for the line's records
        (:attr:`FileClock.runtime_stamp`)."""
        self._clock.runtime_stamp, line = split_runtime(line)
        return line

    def _holding(self) -> bool:
        """Whether every line must be fed whole now: custom patterns, or a traceback, banner or
        continuation open (:attr:`line_filter` is then ``None``)."""
        stack = self._stack
        return bool(self._custom) or self._failures.active or (stack is not None and stack.pending)

    def _quiet(self) -> bool:
        """Whether a line holding no keyword can only act through its bar: a stack is
        detected and nothing holds every line (:meth:`_holding`)."""
        return self._stack is not None and not self._holding()

    def _remember_inert(self, raw: str) -> None:
        """``raw`` holds no keyword and no bar state the stack reads (a ``Writing model
        shards`` bar and its cursor move, redrawn at every HF save): while :meth:`_quiet`, it
        changes nothing, whatever the state, and is answered from this memo next time."""
        if len(self._inert) >= MAX_INERT_LINES:
            self._inert.clear()
        self._inert[raw] = None

    def feed_record(self, line: str, lineno: int) -> list[Event]:
        """:meth:`feed` for a keyword line that :attr:`line_filter` vouches for: it holds
        none of the filter's ``whole_line`` literals, no ``\\r``, ANSI escape, ``%|`` or rate
        marker, and the stack is detected. Such a line is one record piece that the adoption
        check, the failure recogniser and the unmatched report take nothing from (each acts
        only on those literals), so it goes straight to the stack (same events and state as
        :meth:`feed`, without the line's keyword search, split and failure scans)."""
        return self._guarded(self._feed_record, line, lineno)

    def _feed_record(self, line: str, lineno: int) -> list[Event]:
        events: list[Event] = []
        stack = self._stack
        line = self._runtime_cut(line)
        if stack is None or not stack.took_record(line, lineno):
            self._stack_piece(events, line, lineno)
        return self._dated(events)

    def feed_progress(self, line: str, lineno: int) -> list[Event]:
        """:meth:`feed` for a line that holds none of :attr:`line_filter`'s keywords (no
        ANSI escape among them) while the filter is not ``None``: only its last bar state
        can give events (step 2 of the class docstring); same events and state as
        :meth:`feed`."""
        if line in self._inert and self._quiet():
            return []
        return self._guarded(self._feed_progress, line, lineno)

    def _feed_progress(self, line: str, lineno: int) -> list[Event]:
        events: list[Event] = []
        raw, line = line, self._runtime_cut(line)
        if self._bar(events, line, lineno) and self._quiet():
            self._remember_inert(raw)
        return self._dated(events)

    def _bar(self, events: list[Event], line: str, lineno: int) -> bool:
        """Step 2: the last bar state on ``line``, if the stack reads bars and it shows one;
        whether nothing could come of it (no bar the stack reads: :meth:`Stack.inert_bar`)."""
        stack = self._stack
        if stack is None or not stack.reads_bars or ("it/s" not in line and "s/it" not in line):
            return True
        bar = stack.last_bar(line)
        if bar is None:
            return True
        if stack.inert_bar(bar):
            return True
        glued_time = reading = None
        if stack.is_training_bar(bar):  # a bar that keeps the file's clock
            glued_time = stack.header_time(line[bar.end :], lineno)
            glued = None if glued_time is None else self._clock.corrected(glued_time, lineno)
            reading = self._clock.bar(bar.n, bar.elapsed_s, bar.seconds_per_it, glued, lineno)
        found = stack.on_bar(bar, lineno, glued_time)
        if reading is not None:  # the record came after the bar stopped: its reading dates it
            found = [e.estimated_at(reading) if e.kind is EventKind.STEP else e for e in found]
        self._note(events, found)
        return False

    @property
    def line_filter(self) -> LineFilter | None:
        """Keyword lines (step 3 above) and, for a stack that reads bars, progress lines; ``None``
        while a traceback is open or the stack waits for a continuation line, and always with
        custom patterns (arbitrary regexes: no literal tells which lines they need)."""
        return None if self._holding() else self._filter

    def _dated(self, events: list[Event]) -> list[Event]:
        """Put events on the file's clock: printed times corrected for steps back, untimed
        events of a bar-reading stack dated by :meth:`FileClock.inferred`, a new bar clock at
        a run's start; the clock's findings go first."""
        if self._held or self._failures.awaits_year:
            self._held.extend(events)
            self._held_lines += 1
            for event in events:  # a failure's full date (a launcher banner's) gives the year
                if event.time is not None and not event.time_estimated:
                    self._failures.note_time(event.time)
            if self._failures.awaits_year and self._held_lines <= YEARLESS_HOLD_LINES:
                return []  # the clock keeps its findings until the held events go
            events = self._failures.with_years(self._held, final=True)
            self._held, self._held_lines = [], 0
        if (events or self._unstamped_lines) and self._holds_unstamped(events):
            return self._hold_unstamped(events)
        return self._on_clock(events)

    def _holds_unstamped(self, events: list[Event]) -> bool:
        """Whether ``events`` are held for the file's first printed time: some are held
        already, or the file has shown no time and one of them has none (stamps without a year
        that no full date came to date, :attr:`FailureLines.saw_yearless`, were held already:
        not twice)."""
        return bool(self._unstamped_lines) or (
            bool(events)
            and self._clock.stampless
            and not self._failures.saw_yearless
            and any(event.time is None for event in events)
        )

    def _hold_unstamped(self, events: list[Event], *, final: bool = False) -> list[Event]:
        """Hold the events of a file that has shown no time yet, up to the first event with a
        printed time (at most :data:`PRE_STAMP_HOLD_LINES` lines), then date the held untimed
        ones at it (``time_estimated``: an upper bound) after a ``no_timestamps`` report at the
        first held line, which the store reads as "dated by the host" (``agent/store/
        host_dated.py``), so no span is measured from them; with no printed time in the hold,
        they go on as they came (:meth:`_on_clock`: no time, reported). ``final``: no line
        follows (:meth:`_finish`), nothing is held. Nor once the stamps without a year held
        for a full date went without one (:attr:`FailureLines.saw_yearless`: a torchrun
        traceback closed before the launcher's glog lines): no printed time is coming.

        A launch's printed time (:func:`launcher.is_launch`) dates only the launch: held events
        before the first untimed one go out as they are. Untimed failures alone between a
        launch and the first printed time after them (a crash's tracebacks, then the launcher's
        stamped report of it) lie between two printed times: dated at the later one, with no
        report, they are measured like any estimated time."""
        self._unstamped.extend(self._clock.take_findings())
        self._unstamped.extend(events)
        self._unstamped_lines += 1
        printed = [e.time is not None and not e.time_estimated for e in self._unstamped]
        first = printed.index(False) if False in printed else len(printed)
        at = printed.index(True, first) if True in printed[first:] else None
        gave_up = self._failures.saw_yearless  # its stamps have no year, and none came
        if at is None and not (final or gave_up) and self._unstamped_lines <= PRE_STAMP_HOLD_LINES:
            return []
        held, self._unstamped, self._unstamped_lines = self._unstamped, [], 0
        if at is None:
            return self._on_clock(held)
        stamp = held[at].time
        assert stamp is not None
        lead = self._on_clock(held[:first])  # a launch, printed before them
        crash = all(e.kind is EventKind.FAILURE for e in held[first:at] if e.time is None)
        if not (self._launched and crash):
            self._clock.untimed(held[first].line, dated_at=stamp)
        before = [e if e.time is not None else e.estimated_at(stamp) for e in held[first:at]]
        return [*lead, *self._clock.take_findings(), *before, *self._on_clock(held[at:])]

    def _on_clock(self, events: list[Event]) -> list[Event]:
        """:meth:`_dated` once no event is held: the file's clock dates ``events``."""
        clock = self._clock
        if not events:  # most lines fed give none
            return clock.take_findings()
        infers = self._stack is not None and self._stack.reads_bars
        for i, event in enumerate(events):
            if event.time is None:
                when = clock.inferred() if infers else None
                if when is None:
                    clock.untimed(event.line, yearless=self._failures.saw_yearless)
                else:
                    events[i] = event.estimated_at(when)
                continue
            time = event.time
            if not event.time_estimated:
                shift = clock.shift_at(event.line)
                if shift:
                    time += shift
                    events[i] = replace(event, time=time)
            if launcher.is_launch(event):  # it dates the launch only: no stamp here, no bar start
                self._launched = True
                continue
            if not event.time_estimated:
                clock.has_stamp()
            if event.kind in (EventKind.RUN_START, EventKind.RESUME):
                clock.anchor(time)
        found = clock.take_findings()
        return found + events if found else events

    def _wanted(self, line: str) -> bool:
        # One multi-literal pass: ~7 µs on a 1.3 kB bar line, where 56 `in` scans took ~36 µs.
        return bool(self._keyword_search.find_matches_as_indexes(line))

    def _finish(self) -> list[Event]:
        """What a quiet file ends: an open traceback or banner. Its failure ends what it
        interrupted, as when a line closes it (:meth:`_feed_piece`); nothing else is closed:
        an open save waits for a line that ends it. Events held for a year
        (:meth:`FailureLines.with_years`) go out, without a time if no full date came."""
        events: list[Event] = []
        failures = self._failures.finish()
        if failures and self._stack is not None:
            self._note(events, self._stack.interrupted())
        events.extend(failures)
        events = self._failures.with_years([*self._held, *events], final=True)
        self._held, self._held_lines = [], 0
        if self._holds_unstamped(events):
            return self._hold_unstamped(events, final=True)
        return self._dated(events)

    def _feed_piece(self, events: list[Event], piece: str, lineno: int) -> None:
        if adoption.KEYWORD in piece:
            change = adoption.interval_change(piece, lineno)
            if change is not None:
                self._note(events, [change])
                return
        consumed, failures = self._failures.feed(piece, lineno, self._last_step)
        if failures and self._stack is not None:
            self._note(events, self._stack.interrupted())
        events.extend(failures)
        if consumed:
            return
        if not self._stack_piece(events, piece, lineno):
            self._failures.unmatched(piece, lineno)

    def _stack_piece(self, events: list[Event], piece: str, lineno: int) -> bool:
        """Offer ``piece`` to the stack, then the fallback; whether either found events."""
        found = self._stack.feed(piece, lineno) if self._stack is not None else []
        if not found and self._fallback is not None:
            found = self._fallback.feed(piece, lineno)
        self._note(events, found)
        return bool(found)

    def _detect(self, piece: str) -> bool:
        # a stack's own record prefix wins over another stack's wording in the message (a
        # NeMo record quoting a Lightning warning path is NeMo's)
        candidates = self._absorbers or self._candidates
        by_header = [stack for stack in candidates if stack.detects_by_header(piece)]
        for candidate in by_header or candidates:
            if candidate.detects(piece):
                stack = candidate.stack() if isinstance(candidate, StackCandidate) else candidate
                absorbers = tuple(c for c in self._candidates if stack.name in c.absorbs)
                self._stack, self._absorbers = stack, absorbers
                self._candidates = (stack,)
                self._name = stack.name
                self._fallback = None  # the file's own stack reads it from here on
                # while another stack may take the file over, its lines are selected and
                # every keyword line is fed whole, to be offered to it (:meth:`_feed`)
                keywords = (stack.detected_by(piece), *(c.keywords for c in absorbers))
                self._unconfirmed = stack.provisional
                self._keywords = _keywords_of(keywords)
                self._keyword_search = _keyword_search(self._keywords)
                self._filter = _line_filter(self._keywords, stack.reads_bars, not absorbers)
                return True
        return False

    def _note(self, events: list[Event], new: list[Event]) -> None:
        for event in new:
            self._failures.note_progress(event)
            if event.step is not None:
                self._last_step = event.step
            if event.time is not None and not event.time_estimated:
                self._failures.note_time(event.time)
        events.extend(new)
