"""The stateful per-source parser interface the agent drives, and its miss accounting."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ckpt_advisor.parsers.events import Event

MAX_ERRORS = 100
"""How many of the most recent bad lines :attr:`StreamParser.errors` keeps."""


MAX_UNMATCHED = 1000
"""How many of the most recent unrecognised error-looking lines are kept."""


class Diagnostics:
    """Bad input seen by a parser: a running count and the most recent reasons.

    Attributes:
        misses: number of lines (or records) that looked like data but could not be read.
        errors: the last :data:`MAX_ERRORS` of them as ``(lineno, reason)``; ``lineno`` is 0
            for a problem found by ``finish()``.
        n_unmatched: lines that look like errors (``Error``, ``FATAL``, ``Killed``, …) but that
            no failure rule, traceback or stack pattern recognised.
        unmatched: the last :data:`MAX_UNMATCHED` of them as ``(lineno, text)``.
    """

    def __init__(self) -> None:
        self.misses = 0
        self.errors: deque[tuple[int, str]] = deque(maxlen=MAX_ERRORS)
        self.n_unmatched = 0
        self.unmatched: deque[tuple[int, str]] = deque(maxlen=MAX_UNMATCHED)

    def report(self, lineno: int, reason: str) -> None:
        """Count one miss at 1-based ``lineno`` and remember why."""
        self.misses += 1
        self.errors.append((lineno, reason))

    def report_unmatched(self, lineno: int, text: str) -> None:
        """Remember a line that looks like an error but that no pattern recognised."""
        self.n_unmatched += 1
        self.unmatched.append((lineno, text))


@dataclass(frozen=True, slots=True)
class LineFilter:
    """Which physical lines a parser must see, so that a reader can skip the rest unread.

    Most of a training log is progress-bar redraws that no event can come from; a reader that
    finds the literals below in large buffers (a multi-literal search) and feeds only the lines
    that hold them saves the per-line work of everything else.

    Contract, for a reader that asks :attr:`StreamParser.line_filter` again after every line it
    feeds, feeds every line while it is ``None``, and otherwise feeds at least:

    * every line holding one of :attr:`keywords`;
    * of the lines holding one of :attr:`progress` (and no keyword), at least the last one before
      each keyword line, and after any event other than a step the next ones up to the first
      that gives a ``step`` event;

    the parser returns the same events as when fed every line, except that ``step`` events come
    only from the progress lines fed (a sample of the bar), a save that the bar closes (HF
    Trainer) is closed at the next progress line fed, and a bar clock found frozen or going back
    (``bar_clock_ignored``) is found at a redraw fed. Line numbers must be the real ones.
    :func:`parsers.selection.select_lines` is such a reader's selection.

    Attributes:
        keywords: UTF-8 literals; a line holding any of them must be fed. ``b"\x1b"`` is among
            them, since an ANSI escape can split a keyword that the parser sees whole.
        progress: UTF-8 literals that mark a progress line (a tqdm rate); empty when the parser
            reads nothing from progress lines.
        whole_line: UTF-8 literals of the keyword lines that must go to
            :meth:`StreamParser.feed`; a keyword line holding none of them and no ``\\r``,
            ``\\x1b``, ``%|`` or :attr:`progress` literal may go to
            :meth:`StreamParser.feed_record` instead. ``None``: every line to ``feed``.

    A line the reader selects as a progress line (it holds no keyword) may go to
    :meth:`StreamParser.feed_progress`.
    """

    keywords: tuple[bytes, ...]
    progress: tuple[bytes, ...] = ()
    whole_line: tuple[bytes, ...] | None = None


class StreamParser(ABC):
    """One parser per source file; feed it the file's lines in order.

    ``feed`` and ``finish`` never raise on any input: a record that cannot be read (a bad
    timing row, an impossible timestamp) is skipped and counted in :attr:`misses`, with the
    reason in :attr:`errors`.

    Events come back in the order they become certain, which is not always line order: a
    traceback's failure (dated at its ``Traceback`` line) is returned once the line after its
    exception line arrives; an HF Trainer save's ``checkpoint_end`` once the save is over.
    """

    def __init__(self, name: str, diagnostics: Diagnostics | None = None) -> None:
        self._name = name
        self._diagnostics = diagnostics if diagnostics is not None else Diagnostics()

    @property
    def name(self) -> str:
        """The parser (training stack or file format) in use; ``"auto"`` until detected."""
        return self._name

    @property
    def misses(self) -> int:
        """Lines or records that looked like data but could not be read, since creation."""
        return self._diagnostics.misses

    @property
    def errors(self) -> deque[tuple[int, str]]:
        """The most recent misses as ``(lineno, reason)``, oldest first (at most 100)."""
        return self._diagnostics.errors

    @property
    def unmatched(self) -> deque[tuple[int, str]]:
        """Error-looking lines no pattern recognised, as ``(lineno, text)`` (at most 1000)."""
        return self._diagnostics.unmatched

    @property
    def target(self) -> StreamParser:
        """The parser that reads this one's lines from here on: itself, or the one it hands
        every line to unchanged (:class:`parsers.auto.AutoParser` once it has chosen).
        Feeding the target gives the same events and state as feeding this parser, with
        fewer calls a line; it may change as lines are fed (ask again for the next lines)."""
        return self

    @property
    def line_filter(self) -> LineFilter | None:
        """The lines this parser needs from here on (see :class:`LineFilter`), or ``None`` when
        it needs every line (the default; a log parser inside a traceback). It changes as lines
        are fed: ask again after each line fed."""
        return None

    def feed(self, line: str, lineno: int) -> list[Event]:
        """Parse one physical line and return the events it completes.

        Args:
            line: the line as decoded from the file, without its trailing ``\\n``; it may hold
                ``\\r``, ANSI escapes, U+FFFD and NUL.
            lineno: its 1-based line number in the file.
        """
        return self._guarded(self._feed, line, lineno)

    def _guarded(
        self, parse: Callable[[str, int], list[Event]], line: str, lineno: int
    ) -> list[Event]:
        """``parse(line, lineno)`` under the contract of every ``feed_*``: never raise; an
        internal error is reported as a miss at ``lineno`` and gives no events."""
        try:
            return parse(line, lineno)
        except Exception as exc:  # the contract is "never raise": report instead
            self._diagnostics.report(lineno, f"internal error: {type(exc).__name__}: {exc}")
            return []

    def feed_record(self, line: str, lineno: int) -> list[Event]:
        """:meth:`feed` for a keyword line holding none of :attr:`LineFilter.whole_line` (see
        there); a parser may answer it faster. The default is :meth:`feed`."""
        return self.feed(line, lineno)

    def feed_progress(self, line: str, lineno: int) -> list[Event]:
        """:meth:`feed` for a progress line holding no keyword of :attr:`line_filter`; a
        parser may answer it faster. The default is :meth:`feed`."""
        return self.feed(line, lineno)

    def finish(self) -> list[Event]:
        """Flush what a quiet file ends (at the end of a file read, or when a followed file
        goes idle) and return its events: a failure that waited for its next line (a
        traceback's). Nothing whose end a later line may still show is closed (an open save
        stays open), so feeding may go on afterwards (a file that grows again) with the
        same events as if no flush had happened, but for a traceback continued after a
        pause.
        """
        try:
            return self._finish()
        except Exception as exc:  # the contract is "never raise": report instead
            self._diagnostics.report(0, f"internal error: {type(exc).__name__}: {exc}")
            return []

    @abstractmethod
    def _feed(self, line: str, lineno: int) -> list[Event]: ...

    @abstractmethod
    def _finish(self) -> list[Event]: ...
