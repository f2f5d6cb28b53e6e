"""A save is the timing records of one run, step and tier whose times touch (rules/saves.py):
its cost, spacing and goodput are the save's, not each file's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ckpt_advisor.parsers.timing import TimingJsonlParser
from ckpt_advisor.rules.cost import persist_latency_s
from ckpt_advisor.rules.goodput import Bucket
from ckpt_advisor.rules.interruptions import cluster_interruptions
from ckpt_advisor.rules.job import estimate_job
from ckpt_advisor.rules.model import Observation
from ckpt_advisor.rules.runs import split_runs
from ckpt_advisor.rules.saves import TimedSaves
from ckpt_advisor.rules.timeline import Timeline
from tests.rules.simulate import obs

LIGHTNING = Path(__file__).parents[1] / "parsers/fixtures/lightning/ckpt_timings.jsonl"


def timed(end_s: float, step: int, seconds: float, **fields: object) -> Observation:
    """A timing record ending ``end_s`` after T0 that lasted ``seconds``."""
    return obs("checkpoint_end", end_s, step=step, duration_s=seconds, from_timing_file=True,
               **fields)  # fmt: skip


def two_files_per_save() -> list[Observation]:
    """The user's job: every 600 s a save at step 100·i writes ``step=….ckpt`` for 10 s and
    then ``last.ckpt`` for 10 s (two records, the second starting as the first ends)."""
    out = []
    for i in range(1, 11):
        start_s = 600.0 * i
        out += [timed(start_s + 10, 100 * i, 10.0), timed(start_s + 20, 100 * i, 10.0)]
    return out


def grouped(observations: list[Observation]) -> TimedSaves:
    timeline = Timeline.of(observations)
    run_id = split_runs(timeline, cluster_interruptions(timeline), idle_gap_s=21600)
    return TimedSaves.of(timeline, run_id)


def test_a_save_that_writes_two_files_costs_both() -> None:
    """Two records per save: C is the save's 20 s (10 s + 10 s, back to back), the interval
    580 s (600 s start to start minus 20 s), 10 saves, and goodput's checkpoint time 10 × 20 s
    = 200 s; per file it was C 10 s, interval 590 s and 90 s (the first save cut off)."""
    est = estimate_job("two", two_files_per_save(), now_s=0.0)
    assert est.n_checkpoints == 10
    assert est.checkpoint_cost_s == 20.0
    assert est.current_interval_s == 580.0
    assert est.goodput_spans is not None
    assert est.goodput_spans.breakdown()[Bucket.CHECKPOINT] == pytest.approx(200.0)


def test_the_lightning_callbacks_records_are_one_save_per_step() -> None:
    """The captured Lightning run (save_last=True): steps 10-40 write the step file and then
    last.ckpt; a save's cost is first start to last end, by hand from the records:
    04.650377 − 04.645079 = 5.298 ms, 04.703529 − 04.695917 = 7.612 ms, 04.779048 − 04.767727
    = 11.321 ms, 04.870326 − 04.854546 = 15.780 ms, and on_exception.ckpt at step 45 2.456 ms;
    C is their median, 7.612 ms (per file it was 2.456 ms)."""
    parser = TimingJsonlParser()
    lines = LIGHTNING.read_text().splitlines()
    events = [e for n, line in enumerate(lines, 1) for e in parser.feed(line, n)]
    observations = [
        Observation(str(e.kind), e.time.timestamp(), e.step, e.duration_s, from_timing_file=True)
        for e in events
        if e.time is not None
    ]
    saves = grouped(observations)
    assert saves.blocking_s.tolist() == pytest.approx(
        [0.005298, 0.007612, 0.011321, 0.015780, 0.002456], abs=2e-6
    )
    est = estimate_job("lightning", observations, now_s=0.0)
    assert est.n_checkpoints == 5
    assert est.checkpoint_cost_s == pytest.approx(0.007612, abs=2e-6)


def test_tiers_pauses_and_ranks_decide_what_is_one_save() -> None:
    """Two tiers at one step are two saves; a pause over 1 s at one step too (something ran in
    between); overlapping records of ranks are one save lasting their span (100 s to 130 s:
    30 s, not the 50 s their durations sum to)."""
    saves = grouped(
        [
            timed(10, 100, 10.0, tier="memory"),
            timed(20, 100, 10.0, tier="persistent"),  # starts as the memory copy ends
            timed(1010, 200, 10.0),
            timed(1061, 200, 10.0),  # starts 41 s after the first ended: another save
            timed(2125, 300, 25.0),  # ranks: 2100-2125 and 2105-2130
            timed(2130, 300, 25.0),
        ]
    )
    assert saves.blocking_s.tolist() == [10.0, 10.0, 10.0, 10.0, 30.0]
    assert (saves.start_s - 1.7e9).tolist() == [0.0, 10.0, 1000.0, 1051.0, 2100.0]


def test_an_asynchronous_save_of_two_files_blocks_for_both_blocking_parts() -> None:
    """Two async records of one save: blocking 0-2 s and 2-5 s, persisting to 40 s and 45 s:
    the save blocks 5 s (its latest blocking end) and persists 45 s (its latest end), by hand
    from the records' starts (end − whole) and blocking parts."""
    records = [
        timed(40, 100, 2.0, persist_s=40.0),  # 0 s to 40 s, blocking to 2 s
        timed(45, 100, 3.0, persist_s=43.0),  # 2 s to 45 s, blocking to 5 s
    ]
    saves = grouped(records)
    assert saves.blocking_s.tolist() == [5.0]
    assert saves.persist_s.tolist() == [45.0]
    timeline = Timeline.of(records)
    run_id = np.zeros(len(timeline), np.intp)
    assert persist_latency_s(timeline, run_id, window=3) == 45.0
