"""Tracebacks and bare exception lines: one classified failure each, at the right line."""

from __future__ import annotations

import pytest

from ckpt_advisor.parsers import make_parser
from ckpt_advisor.parsers.events import EventKind
from ckpt_advisor.parsers.logs import PRE_STAMP_HOLD_LINES
from ckpt_advisor.parsers.traceback import FAILURE_CLASSES, FailureClass, classify_failure
from tests.parsers._helpers import parse, without_clock

FRAMES = [
    '  File "/home/user/train.py", line 26, in <module>',
    "    tr.train()",
    "    ^^^^^^^^^^",
]


def _traceback(exception_line: str, prefix: str = "") -> list[str]:
    lines = ["Traceback (most recent call last):", *FRAMES, exception_line]
    return [prefix + line for line in lines]


def _failures(lines: list[str]) -> list[tuple[int, str | None]]:
    events, _ = parse(lines)
    return [(e.line, e.failure_class) for e in events if e.kind is EventKind.FAILURE]


@pytest.mark.parametrize("failure_class", FAILURE_CLASSES, ids=lambda c: c.name)
def test_each_class_sample_is_classified_as_that_class(failure_class: FailureClass) -> None:
    """The real sample line of every failure class is recognised as that class."""
    assert classify_failure(failure_class.sample) is failure_class


def test_an_unknown_exception_is_a_python_exception() -> None:
    """A traceback whose message names no known class still counts, as ``python_exception``."""
    assert _failures(_traceback("ValueError: bad shape")) == [(1, "python_exception")]


def test_the_same_traceback_from_two_ranks_gives_one_event() -> None:
    """Back-to-back copies of one failure from two ranks are one interruption: one event."""
    lines = _traceback("RuntimeError: CUDA error: an illegal memory access was encountered")
    lines = [f"[rank0]: {line}" for line in lines] + [f"[rank1]: {line}" for line in lines]
    assert _failures(lines) == [(1, "cuda_illegal_memory_access")]


def test_interleaved_rank_tracebacks_do_not_mix() -> None:
    """Lines of two ranks printed at the same time are told apart by their ``[rankN]:`` prefix."""
    rank0 = _traceback(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "[rank0]: "
    )
    rank1 = _traceback("ValueError: other", "[rank1]:")
    lines = [line for pair in zip(rank0, rank1, strict=True) for line in pair]
    assert sorted(_failures(lines)) == [(1, "cuda_oom"), (2, "python_exception")]


def test_a_chained_exception_is_one_failure_classified_by_its_known_cause() -> None:
    """``During handling of the above exception…`` continues the same failure."""
    lines = [
        *_traceback(
            "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1333, unhandled system error"
        ),
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        *_traceback("KeyError: 'loss'"),
        "done",
    ]
    assert _failures(lines) == [(1, "nccl_error")]


def test_a_keyboard_interrupt_is_planned() -> None:
    """Ctrl-C ends the run on purpose: a planned failure that censors MTBF exposure."""
    events, _ = parse(_traceback("KeyboardInterrupt"))
    assert [(e.failure_class, e.planned) for e in events] == [("keyboard_interrupt", True)]


def test_a_bare_cuda_error_line_counts_without_a_traceback() -> None:
    """``RuntimeError: CUDA error: …`` alone is a failure; its message's next lines are not."""
    lines = [
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    ]
    assert _failures(lines) == [(1, "cuda_illegal_memory_access")]


def test_a_bare_exception_of_no_known_class_is_not_a_failure() -> None:
    """A lone ``ValueError: …`` (a printed warning, a handled error) is not an interruption."""
    assert _failures(["ValueError: could not parse config, using defaults"]) == []


def test_message_lines_after_a_traceback_are_not_new_failures() -> None:
    """NCCL's multi-line message (``ncclSystemError: …``) stays part of its traceback."""
    lines = [
        *_traceback(
            "torch.distributed.DistBackendError: NCCL error in: ../ProcessGroupNCCL.cpp:1333, "
            "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.6"
        ),
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or "
        "device error.",
        "Last error:",
    ]
    assert _failures(lines) == [(1, "nccl_error")]


def test_a_watchdog_timeout_is_an_nccl_timeout() -> None:
    """The c10d watchdog's collective timeout is told apart from other NCCL errors."""
    line = (
        "RuntimeError: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808, "
        "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600020 milliseconds before timing out."
    )
    assert _failures(_traceback(line)) == [(1, "nccl_timeout")]


def test_a_traceback_cut_short_is_flushed_by_finish() -> None:
    """A traceback whose exception line never came is reported at finish, unclassified."""
    events, _ = parse(["Traceback (most recent call last):", *FRAMES])
    assert [(e.line, e.failure_class, e.detail) for e in events] == [
        (1, "python_exception", "traceback cut short")
    ]


def test_a_new_traceback_closes_one_cut_short() -> None:
    """A second header before the first one's exception line closes the first one."""
    lines = [
        "Traceback (most recent call last):",
        *FRAMES,
        *_traceback("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."),
    ]
    assert _failures(lines) == [(1, "python_exception"), (5, "cuda_oom")]


def test_a_traceback_silent_for_many_lines_is_closed() -> None:
    """After 500 lines without its own output an open traceback is taken as cut short (in a
    file without stamps, its failure is then held PRE_STAMP_HOLD_LINES more lines for one)."""
    parser = make_parser("auto")
    parser.feed("[rank3]: Traceback (most recent call last):", 1)
    last = 503 + PRE_STAMP_HOLD_LINES
    fed = without_clock(e for lineno in range(2, last) for e in parser.feed("step done", lineno))
    assert [(e.line, e.failure_class) for e in fed] == [(1, "python_exception")]
    assert parser.finish() == []


def test_failures_carry_the_last_confirmed_step() -> None:
    """A traceback's step is the last step the log confirmed before it."""
    lines = [
        "Epoch 0, global step 40: 'l' reached 0.1 (best 0.1), saving model to '/c/a.ckpt' as top 1",
        *_traceback("RuntimeError: CUDA error: an illegal memory access was encountered"),
    ]
    events, _ = parse(lines)
    assert [(e.kind, e.step) for e in events] == [
        (EventKind.CHECKPOINT_START, 40),
        (EventKind.FAILURE, 40),
    ]
