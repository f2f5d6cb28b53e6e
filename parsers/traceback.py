"""Python tracebacks and bare exception lines to classified failure events, whatever the stack.

A traceback (docs/FORMATS.md §16) is ``Traceback (most recent call last):``, indented frame lines,
then ``<ExcType>: <message>`` unindented. Under ``torch.distributed`` every line carries the
excepthook prefix ``[rankN]: `` (``distributed_c10d.py``), and torchrun ``--tee`` adds
``[default0]:`` (docs/FORMATS.md §0.5); tracebacks are tracked per prefix, so ranks that print
at the same time do not mix, and each traceback gives ONE event at the line of its
``Traceback`` header (the rules layer clusters a burst of them into one interruption). Chained
exceptions (``During handling of the above exception…``, ``The above exception was the direct
cause…``) belong to the same event.

An exception line with no traceback before it (``RuntimeError: CUDA error: …``) is a failure too,
but only when its message names a known failure class; a bare ``ValueError: …`` is not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.vocabulary import GENERIC_CLASSES

PARSER_NAME = "traceback"
"""``Event.parser`` of the failures found here."""

FALLBACK_CLASS = "python_exception"
"""Class of a traceback whose message matches none of :data:`FAILURE_CLASSES`."""

HEADER = "Traceback (most recent call last):"

KEYWORDS = (HEADER[:-1], "Error: ", "Exception: ")
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
        source: where the text comes from (file and version, docs/FORMATS.md section).
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
        "c10/cuda/CUDACachingAllocator.cpp, torch 1.x-2.x (docs/FORMATS.md §12)",
    ),
    FailureClass(
        "cuda_illegal_memory_access",
        # a terminal copy can hard-wrap it: "an illegal me" / "mory access" (docs/FORMATS.md §0.8)
        re.compile(r"illegal memory access|illegal m(?:e(?:m(?:o(?:ry?)?)?)?)?$"),
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "c10/cuda/CUDAException.cpp (docs/FORMATS.md §12); fixtures/real/hf_trainer_crash.log "
        "line 65",
    ),
    FailureClass(
        "cuda_ecc",
        re.compile(r"uncorrectable ECC error|ECC error encountered", re.IGNORECASE),
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
        "cudaGetErrorString(cudaErrorECCUncorrectable) via c10/cuda/CUDAException.cpp",
    ),
    FailureClass(
        "nccl_hang",
        re.compile(r"watchdog hang"),
        "[Rank 0] Terminating the process after attempting to dump debug info, due to "
        "ProcessGroupNCCL watchdog hang.",
        "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp heartbeat monitor (docs/FORMATS.md §11)",
    ),
    FailureClass(
        "nccl_timeout",
        re.compile(r"collective operation timeout|milliseconds before timing out"),
        "RuntimeError: [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=808, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600020 milliseconds "
        "before timing out.",
        "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (docs/FORMATS.md §11)",
    ),
    FailureClass(
        "nccl_error",
        re.compile(r"NCCL error|nccl\w*Error|DistBackendError"),
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error "
        "(run with NCCL_DEBUG=INFO for details)",
        "torch/csrc/distributed/c10d C10D_NCCL_CHECK (docs/FORMATS.md §11); "
        "fixtures/real/lightning_crash.log line 98",
    ),
    FailureClass(
        "dist_init_timeout",
        re.compile(r"Timed out initializing process group"),
        "RuntimeError: Timed out initializing process group in store based barrier on rank: 0, "
        "for key: store_based_barrier_key:1 (world_size=4, worker_count=16, timeout=0:30:00)",
        "torch/distributed/distributed_c10d.py _store_based_barrier, torch 1.9-2.0 "
        "(tests/parsers/fixtures/public/torchrun/pseco_15_worker_group_failed.log)",
    ),
    FailureClass(
        "peer_lost",
        re.compile(r"gloo/transport/.*(?:Connection reset by peer|Connection closed by peer)"),
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] "
        "Read error [127.0.0.1]:11189: Connection reset by peer. This is typically caused by a "
        "remote worker hanging or bugs in the application.",
        "gloo transport/tcp/pair.cc (torch 2.13's third_party/gloo): the socket to a peer "
        "closed, the peer gone (tests/parsers/fixtures/torch/torchrun_sigkill.log line 20, "
        "torchrun_abort.log, torchrun_segfault.log: rank 1 killed by a signal)",
    ),
    FailureClass(
        "cuda_error",
        re.compile(r"CUDA error"),
        "RuntimeError: CUDA error: device-side assert triggered",
        "c10/cuda/CUDAException.cpp (docs/FORMATS.md §12)",
    ),
    FailureClass(
        "killed",
        re.compile(r"killed by signal: Killed|terminated with signal SIGKILL"),
        "RuntimeError: DataLoader worker (pid 18009) is killed by signal: Killed. ",
        "torch/utils/data/_utils/signal_handling.py via torch/csrc/DataLoader.cpp, torch 2.13 "
        "(tests/parsers/fixtures/torch/dataloader.log); torch/multiprocessing/spawn.py",
    ),
    FailureClass(
        "segfault",
        re.compile(r"killed by signal: Segmentation fault|terminated with signal SIGSEGV"),
        "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal "
        "SIGSEGV",
        "torch/multiprocessing/spawn.py ProcessExitedException; torch/csrc/DataLoader.cpp",
    ),
    FailureClass(
        "bus_error",
        re.compile(r"killed by signal: Bus error|terminated with signal SIGBUS"),
        "RuntimeError: DataLoader worker (pid 325) is killed by signal: Bus error.",
        "torch/utils/data/_utils/signal_handling.py via torch/csrc/DataLoader.cpp "
        "(tests/parsers/fixtures/public/shell/pipedream_28_bus_error.log)",
    ),
    FailureClass(
        "ray_worker_died",
        re.compile(r"ActorDiedError|RayActorError|The actor died unexpectedly"),
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
        "ray python/ray/exceptions.py ActorDiedError (tests/parsers/fixtures/public/ray/)",
    ),
    FailureClass(
        "abort",
        re.compile(r"killed by signal: Aborted|terminated with signal SIGABRT"),
        "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal "
        "SIGABRT",
        "torch/multiprocessing/spawn.py ProcessExitedException; torch/csrc/DataLoader.cpp",
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

_RANK_PREFIX = re.compile(r"(?:\[[A-Za-z_]*\d+\]: ?| {0,4}\d{1,5}: )+")
"""``[rank0]: `` (torch.distributed excepthook), ``[default0]:`` (torchrun --tee), `` 3: ``
(srun ``--label``, ``write_labelled_message.c``), stacked (docs/FORMATS.md §0.5)."""

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

_SPAWN_CHILD = re.compile(r"-- Process \d+ terminated with the following error:")
"""``torch.multiprocessing.spawn``: the child's traceback follows its parent's exception line
(``ProcessRaisedException``, tests/parsers/fixtures/torch/spawn.log): one failure."""

_RICH_HEADER = "╭"
_RICH_FRAME = ("│", "╰")
"""``rich.traceback`` boxes (``╭──── Traceback (most recent call last) ────╮``, ``│ … │``)."""

REPORTED_ELSEWHERE = "ChildFailedError"
"""A traceback ending in this exception gives no event: ``parsers/launcher.py`` reads the
banner that follows it (its root cause has the time and the class)."""


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
        is_header = body.endswith(HEADER) or (body.startswith(_RICH_HEADER) and HEADER[:-1] in body)
        events = self._close_stale(lineno)
        if key == "" and body and not is_header:
            events.extend(self._close_ended_prefixed())
        tb = self._open.get(key)
        if tb is not None and tb.ended and not _continues_after_exception(tb, body, is_header):
            events.extend(self._close(key, body))
            tb = None
        if tb is None:
            if is_header:
                self._open[key] = _OpenTraceback(lineno, step, last_line=lineno)
                return True, events
            bare = self._bare_failure(key, body, lineno, step)
            events.extend(bare)
            return bool(bare), events
        if is_header:
            if tb.chained:
                tb.ended = tb.chained = False
            else:  # a new traceback while this one never printed its exception line
                events.extend(self._close(key))
                self._open[key] = tb = _OpenTraceback(lineno, step)
        elif tb.ended:  # a blank line or a chain marker (see _continues_after_exception)
            tb.chained = tb.chained or bool(body)
        elif body and body[0] not in " \t" and not body.startswith(_RICH_FRAME):
            if not _EXCEPTION_LINE.fullmatch(body):
                return False, events
            tb.exception_lines.append(body)
            tb.ended = True
            self._tail_until[key] = lineno + MESSAGE_TAIL_LINES
        tb.last_line = lineno
        return True, events

    def finish(self) -> list[Event]:
        """Close every open traceback (end of file, or the file went idle) and return them."""
        return [event for key in list(self._open) for event in self._close(key)]

    def _close_stale(self, lineno: int) -> list[Event]:
        if not self._open:
            return []
        stale = [k for k, tb in self._open.items() if lineno - tb.last_line > MAX_GAP_LINES]
        return [event for key in stale for event in self._close(key)]

    def _close_ended_prefixed(self) -> list[Event]:
        """Close the rank-prefixed tracebacks that printed their exception line (and no chain
        marker since): an unprefixed line that is no traceback's (the launcher's ``Sending
        process … closing signal``, the job's next output) follows a rank's output, which does
        not go on after it. Left open, they closed only at the end of the file or its next idle
        pause, after every later line's events (out of line order)."""
        ended = [k for k, tb in self._open.items() if k and tb.ended and not tb.chained]
        return [event for key in ended for event in self._close(key)]

    def _bare_failure(self, key: str, body: str, lineno: int, step: int | None) -> list[Event]:
        if lineno <= self._tail_until.get(key, 0) or not _BARE_EXCEPTION_LINE.fullmatch(body):
            return []
        failure_class = classify_failure(body)
        if failure_class is None:
            return []
        self._tail_until[key] = lineno + MESSAGE_TAIL_LINES
        return [_failure_event(lineno, step, failure_class, body)]

    def _close(self, key: str, next_body: str = "") -> list[Event]:
        """The event of the open traceback of ``key``; ``next_body`` is the line after it, joined
        to its exception line when that was hard-wrapped (``…an illegal me`` / ``mory access…``).
        """
        tb = self._open.pop(key)
        if tb.exception_lines and tb.exception_lines[-1].split(":")[0].endswith(REPORTED_ELSEWHERE):
            return []
        lines = tb.exception_lines
        if lines and next_body and next_body[0] not in " \t":
            lines = [*lines[:-1], lines[-1] + next_body]
        found = [c for c in map(classify_failure, reversed(lines)) if c is not None]
        specific = [c for c in found if c.name not in GENERIC_CLASSES]
        chosen = specific or found
        failure_class = chosen[0] if chosen else None
        detail = tb.exception_lines[-1] if tb.exception_lines else "traceback cut short"
        return [_failure_event(tb.line, tb.step, failure_class, detail)]


def _continues_after_exception(tb: _OpenTraceback, body: str, is_header: bool) -> bool:
    """True for the lines that may follow an exception line inside the same traceback."""
    return (
        not body
        or body in _CHAIN_MARKERS
        or _SPAWN_CHILD.fullmatch(body) is not None
        or (tb.chained and is_header)
    )


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
