"""Python tracebacks and bare exception lines to classified failure events, whatever the stack.

A traceback (FORMATS.md §16) is ``Traceback (most recent call last):``, indented frame lines,
then ``<ExcType>: <message>`` unindented. Under ``torch.distributed`` every line carries the
excepthook prefix ``[rankN]: `` (``distributed_c10d.py``), and torchrun ``--tee`` adds
``[default0]:`` (FORMATS.md §0.5); tracebacks are tracked per prefix, so ranks that print at the
same time do not mix, and each traceback gives ONE event at the line of its ``Traceback`` header
(the rules layer clusters a burst of them into one interruption). Chained exceptions
(``During handling of the above exception…``, ``The above exception was the direct cause…``)
belong to the same event.

An exception line with no traceback before it (``RuntimeError: CUDA error: …``) is a failure too,
but only when its message names a known failure class; a bare ``ValueError: …`` is not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from parsers.events import Event, EventKind

PARSER_NAME = "traceback"
"""``Event.parser`` of the failures found here."""

FALLBACK_CLASS = "python_exception"
"""Class of a traceback whose message matches none of :data:`FAILURE_CLASSES`."""

HEADER = "Traceback (most recent call last):"

KEYWORDS = (HEADER, "Error: ", "Exception: ")
"""Literals one of which is in every line that can start a failure (prefilter)."""

MESSAGE_TAIL_LINES = 8
"""Lines after an exception line that may continue its message (``CUDA kernel errors might be
asynchronously reported…``, ``ncclSystemError: System call…``) and so never count as a new
bare exception line."""

MAX_GAP_LINES = 500
"""Lines after which an open traceback that printed none of its own lines since is taken as cut
short (the process died mid-print) and reported, classified by what it printed."""

_DETAIL_CHARS = 200


@dataclass(frozen=True, slots=True)
class FailureClass:
    """One failure class: the name given to messages that ``pattern`` finds.

    Attributes:
        name: ``Event.failure_class``.
        pattern: searched in ``"<ExcType>: <message>"``.
        sample: a real exception line of this class.
        source: where the text comes from (file and version, FORMATS.md section).
        planned: the interruption was asked for (censors exposure; not an MTBF failure).
    """

    name: str
    pattern: re.Pattern[str]
    sample: str
    source: str
    planned: bool = False


FAILURE_CLASSES: tuple[FailureClass, ...] = (
    FailureClass(
        "cuda_oom",
        re.compile(r"CUDA out of memory|OutOfMemoryError"),
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 58.00 MiB. GPU 0 has "
        "a total capacty of 23.69 GiB of which 38.75 MiB is free.",
        "c10/cuda/CUDACachingAllocator.cpp, torch 1.x-2.x (FORMATS.md §12)",
    ),
    FailureClass(
        "cuda_illegal_memory_access",
        re.compile(r"illegal memory access"),
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "c10/cuda/CUDAException.cpp (FORMATS.md §12); fixtures/real/hf_trainer_crash.log line 65",
    ),
    FailureClass(
        "nccl_timeout",
        re.compile(r"collective operation timeout|milliseconds before timing out"),
        "RuntimeError: [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=808, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600020 milliseconds "
        "before timing out.",
        "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (FORMATS.md §11)",
    ),
    FailureClass(
        "nccl_error",
        re.compile(r"NCCL error|nccl\w*Error|DistBackendError"),
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error "
        "(run with NCCL_DEBUG=INFO for details)",
        "torch/csrc/distributed/c10d C10D_NCCL_CHECK (FORMATS.md §11); "
        "fixtures/real/lightning_crash.log line 98",
    ),
    FailureClass(
        "cuda_error",
        re.compile(r"CUDA error"),
        "RuntimeError: CUDA error: device-side assert triggered",
        "c10/cuda/CUDAException.cpp (FORMATS.md §12)",
    ),
    FailureClass(
        "keyboard_interrupt",
        re.compile(r"^KeyboardInterrupt\b"),
        "KeyboardInterrupt",
        "CPython: SIGINT (Ctrl-C, or a launcher forwarding it) in the main thread",
        planned=True,
    ),
)
"""Failure classes, most specific first; the first whose pattern is found wins."""

_RANK_PREFIX = re.compile(r"(?:\[[A-Za-z_]*\d+\]: ?)+")
"""``[rank0]: `` (torch.distributed excepthook), ``[default0]:`` (torchrun --tee), stacked."""

_EXCEPTION_LINE = re.compile(r"[A-Za-z_][\w.]*(?::(?: .*)?)?")
"""``<ExcType>: <message>`` or a bare ``<ExcType>``, as the last line of a traceback."""

_BARE_EXCEPTION_LINE = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception): .+")
"""An exception line outside any traceback: the type must end in ``Error`` or ``Exception``."""

_CHAIN_MARKERS = frozenset(
    (
        "During handling of the above exception, another exception occurred:",
        "The above exception was the direct cause of the following exception:",
    )
)


def classify_failure(exception_line: str) -> FailureClass | None:
    """Return the first of :data:`FAILURE_CLASSES` found in ``exception_line``, else ``None``.

    ``exception_line`` is ``"<ExcType>: <message>"``, e.g.
    ``"RuntimeError: CUDA error: an illegal memory access was encountered"`` →
    the ``cuda_illegal_memory_access`` class.
    """
    for failure_class in FAILURE_CLASSES:
        if failure_class.pattern.search(exception_line):
            return failure_class
    return None


@dataclass(slots=True)
class _OpenTraceback:
    line: int
    step: int | None
    exception_lines: list[str] = field(default_factory=list)
    ended: bool = False
    """An exception line was seen; a chain marker may still continue the traceback."""
    chained: bool = False
    """A chain marker was seen after the exception line: the next header continues it."""
    last_line: int = 0
    """Last line that was part of this traceback."""


class TracebackTracker:
    """State machine over log records that yields one failure event per Python traceback.

    Feed it every record piece of every line while :attr:`active`, and at least the pieces that
    contain one of :data:`KEYWORDS` otherwise. A traceback's event is returned when the first
    line after its exception line that does not continue it arrives, or by :meth:`finish`.
    """

    def __init__(self) -> None:
        self._open: dict[str, _OpenTraceback] = {}
        self._tail_until: dict[str, int] = {}

    @property
    def active(self) -> bool:
        """True while a traceback is open: every line must then be fed."""
        return bool(self._open)

    def feed(self, text: str, lineno: int, step: int | None) -> tuple[bool, list[Event]]:
        """Take one record piece of line ``lineno``.

        Args:
            text: a record piece (see ``parsers.text.records``), ANSI escapes removed.
            lineno: 1-based line number.
            step: the last training step the log has confirmed, given to a failure that starts
                here.

        Returns:
            ``(consumed, events)``: ``consumed`` is True when the piece belongs to a traceback
            or is a failure itself, so no stack pattern should look at it.
        """
        prefix = _RANK_PREFIX.match(text)
        key = prefix.group() if prefix else ""
        body = (text[prefix.end() :] if prefix else text).rstrip()
        events = self._close_stale(lineno)
        tb = self._open.get(key)
        if tb is not None and tb.ended and not _continues_after_exception(tb, body):
            events.append(self._close(key))
            tb = None
        if tb is None:
            if body.endswith(HEADER):
                self._open[key] = _OpenTraceback(lineno, step, last_line=lineno)
                return True, events
            bare = self._bare_failure(key, body, lineno, step)
            events.extend(bare)
            return bool(bare), events
        if body.endswith(HEADER):
            if tb.chained:
                tb.ended = tb.chained = False
            else:  # a new traceback while this one never printed its exception line
                events.append(self._close(key))
                self._open[key] = tb = _OpenTraceback(lineno, step)
        elif tb.ended:  # a blank line or a chain marker (see _continues_after_exception)
            tb.chained = tb.chained or body in _CHAIN_MARKERS
        elif body and body[0] not in " \t":
            if not _EXCEPTION_LINE.fullmatch(body):
                return False, events
            tb.exception_lines.append(body)
            tb.ended = True
            self._tail_until[key] = lineno + MESSAGE_TAIL_LINES
        tb.last_line = lineno
        return True, events

    def finish(self) -> list[Event]:
        """Close every open traceback (end of file, or the file went idle) and return them."""
        return [self._close(key) for key in list(self._open)]

    def _close_stale(self, lineno: int) -> list[Event]:
        stale = [k for k, tb in self._open.items() if lineno - tb.last_line > MAX_GAP_LINES]
        return [self._close(key) for key in stale]

    def _bare_failure(self, key: str, body: str, lineno: int, step: int | None) -> list[Event]:
        if lineno <= self._tail_until.get(key, 0) or not _BARE_EXCEPTION_LINE.fullmatch(body):
            return []
        failure_class = classify_failure(body)
        if failure_class is None:
            return []
        self._tail_until[key] = lineno + MESSAGE_TAIL_LINES
        return [_failure_event(lineno, step, failure_class, body)]

    def _close(self, key: str) -> Event:
        tb = self._open.pop(key)
        for exception_line in reversed(tb.exception_lines):
            failure_class = classify_failure(exception_line)
            if failure_class is not None:
                return _failure_event(tb.line, tb.step, failure_class, tb.exception_lines[-1])
        detail = tb.exception_lines[-1] if tb.exception_lines else "traceback cut short"
        return _failure_event(tb.line, tb.step, None, detail)


def _continues_after_exception(tb: _OpenTraceback, body: str) -> bool:
    """True for the lines that may follow an exception line inside the same traceback."""
    return not body or body in _CHAIN_MARKERS or (tb.chained and body.endswith(HEADER))


def _failure_event(
    line: int, step: int | None, failure_class: FailureClass | None, detail: str
) -> Event:
    return Event(
        EventKind.FAILURE,
        line,
        PARSER_NAME,
        step=step,
        failure_class=failure_class.name if failure_class else FALLBACK_CLASS,
        planned=failure_class.planned if failure_class else False,
        detail=detail[:_DETAIL_CHARS],
    )
