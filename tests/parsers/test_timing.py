"""Checkpoint timing files (JSON Lines and CSV): one checkpoint_end per good record."""

from __future__ import annotations

import pytest

from ckpt_advisor.parsers.events import EventKind
from tests.parsers._helpers import parse, summary, utc

END = EventKind.CHECKPOINT_END


def test_jsonl_records_of_every_shape() -> None:
    """start+end, end+duration_s, epoch times and blocking_s each give the right cost."""
    lines = [
        '{"step": 100, "start": "2026-11-29T22:00:00+00:00", "end": "2026-11-29T22:00:30+00:00"}',
        "",
        '{"step": 200, "end": "2026-11-29T23:00:00", "duration_s": 12.5, "path": "/ck/200"}',
        '{"step": 300, "start": 1795993200, "end": 1795993260, "blocking_s": 4, "bytes": 1e9}',
    ]
    events, parser = parse(lines, fmt="timing_jsonl")
    assert summary(events) == [
        (END, 1, utc("2026-11-29 22:00:30"), 100, 30.0, None),
        (END, 3, utc("2026-11-29 23:00:00"), 200, 12.5, None),
        (END, 4, utc("2026-11-29 23:01:00"), 300, 4.0, None),
    ]
    assert [e.persist_s for e in events] == [None, None, 60.0]
    assert events[1].detail == "/ck/200"
    assert parser.misses == 0


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"end": 1795993260, "duration_s": 3}', "missing step"),
        ('{"step": 1.5, "end": 1795993260, "duration_s": 3}', "whole number"),
        ('{"step": true, "end": 1795993260, "duration_s": 3}', "step must be a number"),
        ('{"step": 1, "duration_s": 3}', "missing end"),
        ('{"step": 1, "end": 1795993260}', "needs start or duration_s"),
        ('{"step": 1, "start": 1795993261, "end": 1795993260}', "end is before start"),
        ('{"step": 1, "end": 1795993260, "duration_s": -1}', "duration_s must be finite"),
        ('{"step": 1, "end": 1795993260, "duration_s": NaN}', "duration_s must be finite"),
        ('{"step": 1, "end": "tomorrow", "duration_s": 3}', "bad end"),
        ('{"step": 1, "end": [1], "duration_s": 3}', "end must be"),
        ('{"step": 1, "end": 1795993260, "duration_s": 1e308}', "longer than a save can last"),
        ('{"step": 1, "end": 1795993260, "duration_s": 604801}', "longer than a save can last"),
        ('{"step": 1, "start": 1795000000, "end": 1795993260}', "end - start is 993260 s"),
        ('{"step": 1, "end": 1795993260, "duration_s": 10, "blocking_s": 50}', "blocking_s (50 s)"),
        ('{"step": 1, "end": 1795993260000000, "duration_s": 3}', "microseconds?"),
    ],
)
def test_a_bad_jsonl_record_is_skipped_with_its_reason(line: str, reason: str) -> None:
    """Each kind of bad record is a miss naming the problem, and no event."""
    events, parser = parse([line], fmt="timing_jsonl")
    assert events == []
    assert parser.misses == 1
    assert parser.errors[0][0] == 1
    assert reason in parser.errors[0][1]


def test_csv_with_header_reads_rows_and_skips_bad_ones() -> None:
    """The header maps columns (any order, any case); empty cells are absent fields."""
    lines = [
        "Path, STEP ,start,end,blocking_s",
        "/ck/100,100,2026-11-29T22:00:00Z,2026-11-29T22:00:30Z,",
        "/ck/200,200,1795993200,1795993260,5.5",
        "/ck/300,300,1795993200",
        "/ck/400,x,1795993200,1795993260,",
    ]
    events, parser = parse(lines, fmt="timing_csv")
    assert summary(events) == [
        (END, 2, utc("2026-11-29 22:00:30"), 100, 30.0, None),
        (END, 3, utc("2026-11-29 23:01:00"), 200, 5.5, None),
    ]
    assert [line for line, _ in parser.errors] == [4, 5]


def test_csv_without_a_usable_header_reports_each_line() -> None:
    """Until a header names step and end, lines are header candidates, and misses."""
    events, parser = parse(["a,b,c", "1,2,3"], fmt="timing_csv")
    assert events == []
    assert parser.misses == 2


@pytest.mark.parametrize(
    ("first_line", "name"),
    [
        ('{"step": 1, "end": 1795993260, "duration_s": 3}', "timing_jsonl"),
        ("step,start,end", "timing_csv"),
        (
            "[INFO|trainer.py:1618] 2026-11-29 22:11:34,899 >> ***** Running training *****",
            "hf_trainer",
        ),
    ],
)
def test_auto_tells_timing_files_from_logs(first_line: str, name: str) -> None:
    """The first non-blank line decides between JSONL, CSV and a training log."""
    _, parser = parse(["", first_line])
    assert parser.name == name


def test_millisecond_epochs_are_read_as_milliseconds() -> None:
    """An epoch number no second count reaches before the year 5138 (JavaScript's and Java's
    milliseconds, number or string) is read as milliseconds, not refused as "year 57883"."""
    lines = [
        '{"step": 1, "start": 1795993200000, "end": 1795993260500}',
        '{"step": 2, "end": "1795993320000", "duration_s": 12}',
    ]
    events, parser = parse(lines, fmt="timing_jsonl")
    assert summary(events) == [
        (END, 1, utc("2026-11-29 23:01:00.5"), 1, 60.5, None),
        (END, 2, utc("2026-11-29 23:02:00"), 2, 12.0, None),
    ]
    assert parser.misses == 0


def test_the_longest_save_and_a_blocking_part_equal_to_it_are_accepted() -> None:
    """The bounds are inclusive: a save of exactly 7 days, and a synchronous save whose
    blocking part is the whole save, are records like any other."""
    lines = [
        '{"step": 1, "end": 1795993260, "duration_s": 604800}',
        '{"step": 2, "end": 1795993260, "duration_s": 30, "blocking_s": 30, "tier": "memory"}',
    ]
    events, parser = parse(lines, fmt="timing_jsonl")
    assert [(e.duration_s, e.persist_s, e.tier) for e in events] == [
        (604800.0, None, None),
        (30.0, 30.0, "memory"),
    ]
    assert parser.misses == 0
