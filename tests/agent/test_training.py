"""Timing-file writers: the context manager's records, and real callback output parsed back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckpt_advisor.agent.training import checkpoint_timer, timing_record
from ckpt_advisor.parsers.events import EventKind
from tests.parsers._helpers import parse, read_lines

FIXTURES = Path(__file__).parents[1] / "parsers" / "fixtures"


def test_checkpoint_timer_appends_one_record_per_save(tmp_path: Path) -> None:
    """Each ``with`` block appends step, start <= end with offset, path and bytes written."""
    timing = tmp_path / "ckpt_timings.jsonl"
    for step in (10, 20):
        target = tmp_path / f"step-{step}.bin"
        with checkpoint_timer(timing, step=step, path=target):
            target.write_bytes(b"x" * step)
    records = [json.loads(line) for line in timing.read_text().splitlines()]
    assert [(r["step"], r["bytes"], r["path"]) for r in records] == [
        (10, 10, str(tmp_path / "step-10.bin")),
        (20, 20, str(tmp_path / "step-20.bin")),
    ]
    assert all(r["start"] <= r["end"] and r["end"][-6] in "+-" for r in records)
    events, parser = parse(read_lines(timing))
    assert parser.name == "timing_jsonl"
    assert [(e.kind, e.step) for e in events] == [
        (EventKind.CHECKPOINT_END, 10),
        (EventKind.CHECKPOINT_END, 20),
    ]


def test_a_failed_save_writes_no_record(tmp_path: Path) -> None:
    """An exception in the body propagates and leaves the timing file untouched."""
    timing = tmp_path / "t.jsonl"
    with pytest.raises(OSError), checkpoint_timer(timing, step=1):
        raise OSError("disk full")
    assert not timing.exists()


def test_timing_record_refuses_naive_times() -> None:
    """Records carry offsets: naive datetimes are refused."""
    from datetime import datetime

    with pytest.raises(ValueError, match="timezone-aware"):
        timing_record(1, datetime(2026, 1, 1), datetime(2026, 1, 1))


@pytest.mark.parametrize(
    ("name", "steps"),
    [
        ("hf_trainer/ckpt_timings.jsonl", [10, 20, 30, 30, 40]),
        ("lightning/ckpt_timings.jsonl", [10, 10, 20, 20, 30, 30, 40, 40, 45]),
    ],
)
def test_files_written_by_the_real_callbacks_parse(name: str, steps: list[int]) -> None:
    """The HF/Lightning callbacks' real output (captured with the libraries) reads back whole."""
    events, parser = parse(read_lines(FIXTURES / name))
    assert parser.misses == 0
    assert [e.step for e in events] == steps
    assert all(e.duration_s is not None and 0 < e.duration_s < 1 for e in events)
