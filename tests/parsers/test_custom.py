"""Custom patterns from the config: validation and events, without Python."""

from __future__ import annotations

import pytest

from ckpt_advisor.parsers import compile_pattern, make_parser
from ckpt_advisor.parsers.events import EventKind
from tests.parsers._helpers import summary, utc, without_clock


def _feed(lines: list[str], patterns: list[tuple[str, str]], fmt: str = "auto") -> list[object]:
    parser = make_parser(fmt, patterns=[compile_pattern(k, r) for k, r in patterns])
    events = []
    for lineno, line in enumerate(lines, start=1):
        events.extend(parser.feed(line, lineno))
    return summary(without_clock(events + parser.finish()))


def test_a_custom_end_pattern_gives_step_time_and_duration() -> None:
    """Named groups step/time/duration_s fill the event; the parser is named 'custom'."""
    regex = r"\[(?P<time>[\d: -]+)\] ckpt step=(?P<step>\d+) done in (?P<duration_s>[\d.]+)s"
    rows = _feed(["[2026-01-02 03:04:05] ckpt step=700 done in 12.5s"], [("checkpoint_end", regex)])
    assert rows == [(EventKind.CHECKPOINT_END, 1, utc("2026-01-02 03:04:05"), 700, 12.5, None)]


def test_a_custom_pattern_wins_over_the_stack_on_its_line() -> None:
    """A line a custom pattern matches is not also read by the stack (no double count)."""
    line = "[INFO|trainer.py:3850] 2026-11-29 22:11:38,483 >> Saving model checkpoint to "
    line += "/o/checkpoint-5"
    rows = _feed([line], [("checkpoint_start", r"checkpoint-(?P<step>\d+)")], "hf_trainer")
    assert rows == [(EventKind.CHECKPOINT_START, 1, None, 5, None, None)]


@pytest.mark.parametrize(
    ("kind", "regex", "message"),
    [
        ("checkpoint_done", r"x", "unknown kind 'checkpoint_done'"),
        ("step", r"(unclosed", "bad regex"),
        ("step", r"it (?P<iteration>\d+)", "unknown group(s) iteration"),
        ("step", r"\d*", "matches an empty line"),
    ],
)
def test_bad_custom_patterns_are_refused_with_the_reason(
    kind: str, regex: str, message: str
) -> None:
    """Unknown kind, bad regex, unknown group and empty-matching regexes raise ValueError."""
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        compile_pattern(kind, regex)


def test_custom_patterns_make_the_parser_ask_for_every_line() -> None:
    """With custom patterns the line filter is off (None): a backfill that skips non-keyword
    lines would otherwise never show the custom lines to the parser."""
    plain = make_parser("auto")
    custom = make_parser(
        "auto", patterns=[compile_pattern("checkpoint_end", r"ckpt (?P<step>\d+)")]
    )
    for parser in (plain, custom):
        parser.feed("[INFO|trainer.py:1618] 2026-11-29 22:11:34,899 >> ***** Running training", 1)
    assert plain.line_filter is not None
    assert custom.line_filter is None
