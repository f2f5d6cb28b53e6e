"""``auto``: choose between a timing file and a training log from the first non-blank line."""

from __future__ import annotations

from collections.abc import Callable

from ckpt_advisor.parsers.custom import CustomPatterns
from ckpt_advisor.parsers.events import Event
from ckpt_advisor.parsers.generic import Generic
from ckpt_advisor.parsers.logs import LogParser
from ckpt_advisor.parsers.registry import AUTO, CSV, JSONL, StackCandidate, StackEntry
from ckpt_advisor.parsers.stack import ParseContext
from ckpt_advisor.parsers.stream import Diagnostics, LineFilter, StreamParser
from ckpt_advisor.parsers.timing import (
    TimingCsvParser,
    TimingJsonlParser,
    looks_like_timing_header,
)


class AutoParser(StreamParser):
    """Delegates to a timing parser or a :class:`~parsers.logs.LogParser` over every stack
    (each a :class:`~parsers.registry.StackCandidate`: its module imported when detection needs
    it).

    The first non-blank line decides: a JSON object with ``step`` and ``end`` means
    ``timing_jsonl``, a CSV header naming ``step`` and ``end`` means ``timing_csv``, anything
    else a log, whose stack is then detected line by line; record pieces that no detected stack
    matches go to the generic fallback (``parsers/generic.py``, events ``parser="generic"``).
    :attr:`name` is ``"auto"`` until a stack or format is known. With ``log``, a log is read by
    the parser it makes (a stack the user named, ``--format hf_trainer``, ``name`` until the
    first line), and a timing file is still a timing file (it was read as that stack's log: no
    save found).
    """

    def __init__(
        self,
        context: ParseContext,
        stacks: tuple[StackEntry, ...],
        diagnostics: Diagnostics,
        custom: CustomPatterns | None = None,
        log: Callable[[], StreamParser] | None = None,
        name: str = AUTO,
    ) -> None:
        super().__init__(name, diagnostics)
        self._custom = custom
        self._context = context
        self._stacks = stacks
        self._log = log
        self._delegate: StreamParser | None = None

    @property
    def name(self) -> str:
        """The detected stack or timing format; until then ``"auto"``, or the stack named."""
        return self._delegate.name if self._delegate is not None else self._name

    @property
    def target(self) -> StreamParser:
        """The chosen parser's target once the first line has decided, else this parser."""
        return self._delegate.target if self._delegate is not None else self

    @property
    def line_filter(self) -> LineFilter | None:
        """The chosen parser's filter; ``None`` (every line) until the first line decides."""
        return self._delegate.line_filter if self._delegate is not None else None

    def _feed(self, line: str, lineno: int) -> list[Event]:
        if self._delegate is None:
            if not line.strip():
                return []
            self._delegate = self._choose(line)
        return self._delegate.feed(line, lineno)

    def feed_record(self, line: str, lineno: int) -> list[Event]:
        """The chosen parser's :meth:`StreamParser.feed_record` (a filter is its filter)."""
        if self._delegate is None:
            return self.feed(line, lineno)
        return self._delegate.feed_record(line, lineno)

    def feed_progress(self, line: str, lineno: int) -> list[Event]:
        """The chosen parser's :meth:`StreamParser.feed_progress`."""
        if self._delegate is None:
            return self.feed(line, lineno)
        return self._delegate.feed_progress(line, lineno)

    def _finish(self) -> list[Event]:
        return self._delegate.finish() if self._delegate is not None else []

    def _choose(self, first_line: str) -> StreamParser:
        diagnostics = self._diagnostics
        timing = looks_like_timing_header(first_line)
        if timing == JSONL:
            return TimingJsonlParser(diagnostics)
        if timing == CSV:
            return TimingCsvParser(diagnostics)
        if self._log is not None:
            return self._log()
        stacks = [StackCandidate(entry, self._context) for entry in self._stacks]
        return LogParser(stacks, diagnostics, self._custom, fallback=Generic(self._context))
