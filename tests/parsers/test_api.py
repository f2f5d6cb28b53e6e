"""The public API the agent codes against, and the package's purity."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from ckpt_advisor.parsers import STACKS, available_formats, make_parser
from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.generic import Generic
from ckpt_advisor.parsers.stack import Header, ParseContext, Pattern, Stack


def test_available_formats_lists_auto_stacks_and_timing_files() -> None:
    """``auto`` first, then every stack, then the timing formats."""
    assert available_formats() == [
        "auto",
        "hf_trainer",
        "accelerate",
        "lightning",
        "nemo",
        "deepspeed",
        "megatron",
        "megatron_progress",
        "torchtitan",
        "composer",
        "timing_jsonl",
        "timing_csv",
    ]


def test_every_format_makes_a_parser() -> None:
    """Each listed format builds a parser named after it (``auto`` until it detects)."""
    for fmt in available_formats():
        assert make_parser(fmt).name == fmt


def test_an_unknown_format_is_named_with_the_known_ones() -> None:
    """The error names the bad format and lists every known one."""
    with pytest.raises(
        ValueError, match=r"'megatron-lm'.*auto, hf_trainer, accelerate, .*, timing_csv"
    ):
        make_parser("megatron-lm")


STACK_CLASSES: list[type[Stack]] = [*STACKS.values(), Generic]
"""Every registered stack and the generic fallback: a new stack's table is checked here without
a line of test code."""


def _message(stack: type[Stack], sample: str) -> str:
    """A sample line's message, as the stack's parser sees it: after the first of its headers
    that matches (the bare line when none does, e.g. a stack's header-less messages)."""
    for header in stack.headers:
        m = header.regex.search(sample)
        if m is not None:
            return str(m["msg"])
    return sample


@pytest.mark.parametrize(
    ("stack", "pattern"),
    [(stack, p) for stack in STACK_CLASSES for p in stack.patterns],
    ids=lambda v: v.name,
)
def test_every_pattern_matches_its_own_sample_line(stack: type[Stack], pattern: Pattern) -> None:
    """Each table entry's documented real sample line names its source, and its message (after
    the stack's header) holds the keyword and is matched first by that entry: no earlier entry
    of the table shadows it on its own sample."""
    message = _message(stack, pattern.sample)
    assert pattern.keyword in message
    assert pattern.regex.search(message)
    hit = stack(ParseContext(tz=UTC, year_hint=None, report=lambda _n, _r: None)).match(message)
    assert hit is not None
    assert hit[0].name == pattern.name
    assert pattern.source


@pytest.mark.parametrize(
    ("stack", "header"),
    [(stack, h) for stack in STACK_CLASSES for h in stack.headers],
    ids=lambda v: v.keyword if isinstance(v, Header) else v.name,
)
def test_every_header_matches_its_own_sample_line(stack: type[Stack], header: Header) -> None:
    """Each record header's sample line holds its keyword, matches, and its time parses to an
    aware UTC datetime."""
    assert header.keyword in header.sample
    m = header.regex.search(header.sample)
    assert m is not None
    assert header.parse_time(m["time"], UTC).tzinfo is UTC
    assert header.source


def test_estimated_at_is_replace_for_every_field() -> None:
    """``Event.estimated_at`` (a fast hand-written copy) equals ``dataclasses.replace`` with a
    new time and ``time_estimated``, for an event with every field set; a field added to
    :class:`Event` fails here until the copy and this sample carry it."""
    sample = {
        "kind": EventKind.CHECKPOINT_END,
        "line": 7,
        "parser": "hf_trainer",
        "time": datetime(2026, 1, 1, tzinfo=UTC),
        "step": 1200,
        "duration_s": 240.0,
        "failure_class": "nccl_timeout",
        "planned": True,
        "persist_s": 31.5,
        "detail": "/data/run/checkpoint-1200",
        "time_estimated": False,
        "tier": "persistent",
    }
    assert set(sample) == {f.name for f in dataclasses.fields(Event)}
    event = Event(**sample)  # type: ignore[arg-type]
    later = datetime(2026, 1, 2, tzinfo=UTC)
    assert event.estimated_at(later) == dataclasses.replace(event, time=later, time_estimated=True)
