"""AdvisedInterval: a training job following its advice file (real files, a fake clock)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from ckpt_advisor.agent.training import AdoptionPolicy, AdvisedInterval, checkpoint_timer
from ckpt_advisor.parsers.adoption import interval_change
from ckpt_advisor.parsers.events import EventKind

T0 = 1_800_000_000.0


class Clock:
    """A clock the test moves: each call returns ``now``."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def _write(path: Path, record: object) -> None:
    path.write_text(record if isinstance(record, str) else json.dumps(record))


def _advice(interval_s: float, *, computed_at: float = T0, status: str = "drift") -> dict:
    return {
        "job": "demo",
        "status": status,
        "recommended_interval_s": interval_s,
        "recommended_interval_steps": None,
        "computed_at": computed_at,
    }


def _run(schedule: AdvisedInterval, clock: Clock, steps: range, step_s: float = 2.0) -> list[int]:
    """Step through ``steps`` (``step_s`` apart), returning the steps where the interval moved."""
    moved = []
    for step in steps:
        clock.now += step_s
        if schedule.step_done(step) is not None:
            moved.append(step)
    return moved


POLICY = AdoptionPolicy(min_interval_s=40.0, max_interval_s=2000.0, min_change_gap_s=300.0)


def test_follows_the_advice_in_bounded_steps_and_logs_each_change(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """At 2 s a step, 100 steps (200 s) advised to 50 s: halves to 50 steps, waits the 300 s
    gap, then 25 steps; each change is one line the parser reads back as interval_change."""
    advice = tmp_path / "demo.json"
    _write(advice, _advice(50.0))
    clock = Clock()
    schedule = AdvisedInterval(advice, interval_steps=100, policy=POLICY, clock=clock)
    with caplog.at_level(logging.WARNING, logger="ckpt_advisor.training"):
        moved = _run(schedule, clock, range(1, 400))
    assert schedule.interval_steps == 25
    assert schedule.changes == 2
    assert moved[1] - moved[0] >= 150  # 300 s at 2 s a step
    events = [interval_change(r.getMessage(), 1) for r in caplog.records]
    assert [e.kind for e in events if e] == [EventKind.INTERVAL_CHANGE] * 2
    assert [(e.step, e.duration_s, e.detail) for e in events if e] == [
        (moved[0], 100.0, "100 -> 50 steps"),
        (moved[1], 50.0, "50 -> 25 steps"),
    ]


@pytest.mark.parametrize(
    ("content", "warning"),
    [
        (None, "not found"),
        ("{broken", "malformed"),
        (_advice(50.0, computed_at=T0 - 7200.0), "is stale"),
    ],
)
def test_unusable_advice_changes_nothing_and_warns_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: object, warning: str
) -> None:
    """A missing, malformed or stale file keeps the interval and is warned about once over
    many polls; a good file afterwards is followed."""
    advice = tmp_path / "demo.json"
    if content is not None:
        _write(advice, content)
    clock = Clock()
    schedule = AdvisedInterval(advice, interval_steps=100, policy=POLICY, clock=clock)
    with caplog.at_level(logging.WARNING, logger="ckpt_advisor.training"):
        _run(schedule, clock, range(1, 200))
        assert schedule.interval_steps == 100
        assert sum(warning in r.getMessage() for r in caplog.records) == 1
        _write(advice, _advice(120.0, computed_at=clock.now))
        _run(schedule, clock, range(200, 230))
    assert schedule.interval_steps == 60


def test_ranks_take_rank_zeros_decision(tmp_path: Path) -> None:
    """Rank 1 never reads the file (its path does not exist) yet moves with rank 0, on the
    same step, through the broadcast; polls fall on the same steps on both."""
    advice = tmp_path / "demo.json"
    _write(advice, _advice(50.0))
    clock = Clock()
    box: list[int | None] = []

    def send(value: int | None) -> int | None:
        box.append(value)
        return value

    def receive(value: int | None) -> int | None:
        assert value is None
        return box.pop(0)

    rank0 = AdvisedInterval(advice, interval_steps=100, policy=POLICY, clock=clock, broadcast=send)
    rank1 = AdvisedInterval(
        tmp_path / "absent.json",
        interval_steps=100,
        policy=POLICY,
        clock=clock,
        broadcast=receive,
        is_main=False,
    )
    for step in range(1, 400):
        clock.now += 2.0
        assert rank0.step_done(step) == rank1.step_done(step)
    assert rank0.interval_steps == rank1.interval_steps == 25


def test_save_due_counts_from_the_last_save_and_the_timer_notes_saves(tmp_path: Path) -> None:
    """A hand-written loop: save_due is true 100 steps after the last save; checkpoint_timer
    with the schedule records the save (the timing file gets its line)."""
    clock = Clock()
    schedule = AdvisedInterval(
        tmp_path / "none.json", interval_steps=100, policy=POLICY, clock=clock
    )
    assert not schedule.save_due(99)
    assert schedule.save_due(100)
    timings = tmp_path / "t.jsonl"
    with checkpoint_timer(timings, step=100, schedule=schedule):
        pass
    assert schedule.last_save_step == 100
    assert not schedule.save_due(150)
    assert json.loads(timings.read_text())["step"] == 100


def test_step_time_leaves_out_steps_with_a_save(tmp_path: Path) -> None:
    """Steps of 2 s with one 60 s save between two of them: the median step time stays 2 s."""
    clock = Clock()
    schedule = AdvisedInterval(
        tmp_path / "none.json", interval_steps=100, policy=POLICY, clock=clock
    )
    for step in range(1, 20):
        clock.now += 2.0
        if step == 10:
            schedule.save_done(step)
            clock.now += 60.0
        schedule.step_done(step)
    assert schedule.step_time_s == 2.0


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({}, ValueError, "needs timing_file or advice_file"),
        ({"advice_file": "a.json", "min_interval_s": 60.0}, ValueError, "max_interval_s"),
        ({"timing_file": "t.jsonl", "min_interval_s": 60.0}, ValueError, "only with advice_file"),
        (
            {"advice_file": "a.json", "min_interval_s": 1.0, "max_interval_s": 2.0, "often": 1.0},
            TypeError,
            "often",
        ),
    ],
)
def test_callbacks_refuse_incomplete_advice_settings_before_importing_their_library(
    kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    """Both callback factories check their settings first (no transformers or lightning is
    installed here): no file, a missing bound, a bound without advice, an unknown keyword."""
    from ckpt_advisor.agent.training import hf_trainer_callback, lightning_callback

    for factory in (hf_trainer_callback, lightning_callback):
        with pytest.raises(error, match=message):
            factory(**kwargs)
