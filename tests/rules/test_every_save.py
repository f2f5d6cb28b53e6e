"""Every save a job made, from either source, once (rules/progress.py ``every_save_index``):
where goodput and the restarts place saves when a timing file has some of them."""

from __future__ import annotations

import pytest

from ckpt_advisor.rules.goodput import BOTH_SOURCES, Bucket
from ckpt_advisor.rules.interruptions import cluster_interruptions
from ckpt_advisor.rules.job import estimate_job
from ckpt_advisor.rules.model import Observation
from ckpt_advisor.rules.progress import every_save_index, save_index
from ckpt_advisor.rules.runs import split_runs
from ckpt_advisor.rules.timeline import Timeline
from tests.rules.simulate import obs


def logged(end_s: float, step: int | None, seconds: float = 10.0) -> list[Observation]:
    """A log save's start and end lines (its logged duration ``seconds``)."""
    return [
        obs("checkpoint_start", end_s - seconds, step=step),
        obs("checkpoint_end", end_s, step=step, duration_s=seconds),
    ]


def record(end_s: float, step: int, seconds: float = 12.0, **fields: object) -> Observation:
    """A timing record ending ``end_s`` after T0 (it lasted ``seconds``)."""
    return obs("checkpoint_end", end_s, step=step, duration_s=seconds, from_timing_file=True,
               **fields)  # fmt: skip


def steps(at_s: range, step_s: float = 1.0) -> list[Observation]:
    """A step line every second of ``at_s`` (step = seconds since T0)."""
    return [obs("step", t, step=t, duration_s=step_s) for t in at_s]


def run(
    start_s: float, saves_at: tuple[int, ...], *, timed: bool, end_s: float
) -> list[Observation]:
    """A run from ``start_s``: steps each second, a logged save ending at each of ``saves_at``
    (its step the second it ends), and with ``timed`` its timing record too (from the log's
    first line to 2 s after its last)."""
    out = [obs("run_start", start_s), *steps(range(int(start_s) + 1, int(end_s)))]
    for at in saves_at:
        out += logged(at, at)
        out += [record(at + 2, at)] if timed else []
    return out


def _saves(observations: list[Observation]) -> list[tuple[float, bool]]:
    """Every save's mark: seconds after the first observation, and whether a timing record."""
    timeline = Timeline.of(observations)
    run_id = split_runs(timeline, cluster_interruptions(timeline), idle_gap_s=21600)
    at = every_save_index(timeline, run_id)
    found = zip(
        timeline.time_s[at] - timeline.time_s[0], timeline.from_timing_file[at], strict=True
    )
    return [(round(t, 3), bool(f)) for t, f in found]


def test_one_source_is_every_save() -> None:
    """Timing file only, log only, and both for every save: every save is ``save_index``'s (a
    save in both, at one run and step, once, as its timing record)."""
    both = run(0, (100, 200, 300), timed=True, end_s=400)
    timing_only = [o for o in both if o.from_timing_file or not o.kind.startswith("checkpoint")]
    log_only = run(0, (100, 200, 300), timed=False, end_s=400)
    for observations in (timing_only, log_only, both):
        timeline = Timeline.of(observations)
        run_id = split_runs(timeline, [], idle_gap_s=21600)
        assert every_save_index(timeline, run_id).tolist() == save_index(timeline, run_id).tolist()
    assert _saves(both) == [(102.0, True), (202.0, True), (302.0, True)]


def test_a_run_the_timing_file_missed_keeps_its_log_saves() -> None:
    """Two runs, the second's saves only in the log (the timing file stopped): its saves count
    where its log put them, costed by their lines (10 s each, the timed ones 12 s); the crash at
    350 s loses the 40 s since its own run's save at 310 s, not the 1,000 s since the first
    run's last timed save."""
    first = [*run(0, (100, 200), timed=True, end_s=300), obs("run_end", 300)]
    second = run(1000, (1110, 1210, 1310), timed=False, end_s=1351)
    crash = obs("failure", 1350, failure_class="cuda_illegal_memory_access")  # not re-dated
    restart = [obs("run_start", 1400), obs("resume", 1400, step=1310), *steps(range(1401, 1500))]
    observations = [*first, *second, crash, *restart]
    found = _saves(observations)
    assert found == [
        (102.0, True),
        (202.0, True),
        (1110.0, False),
        (1210.0, False),
        (1310.0, False),
    ]
    spans = estimate_job("j", observations, now_s=0.0).goodput_spans
    assert spans is not None
    g = spans.breakdown()
    assert (g.n_saves, g.n_log_saves, g.checkpoint_source) == (5, 3, BOTH_SOURCES)
    assert g[Bucket.CHECKPOINT] == pytest.approx(2 * 12.0 + 3 * 10.0)
    assert g[Bucket.LOST] == pytest.approx(40.0)
    assert g.checkpoint_is_lower_bound  # the log saves are lower bounds
    assert spans.breakdown(until_s=obs("x", 300).time_s).checkpoint_source == "timing_file"


def test_a_record_that_ends_after_its_runs_last_line_is_that_runs_save() -> None:
    """The last save's record ends after the run's clean end (it sorts into the next run): the
    run the record began in is its save's, so the log's lines of that save are the same save."""
    job = [*run(0, (100,), timed=False, end_s=101), obs("run_end", 101)]
    job += [record(101.5, 100, seconds=12.0), *run(5000, (), timed=False, end_s=5010)]
    found = _saves(job)
    assert found == [(101.5, True)]


def test_an_asynchronous_record_began_at_its_persist_start() -> None:
    """An asynchronous record (blocking 5 s, persisting 60 s) ends long after its run's end; it
    began 60 s before its end, in the run whose log saved at its step."""
    job = [*run(0, (100,), timed=False, end_s=101), obs("run_end", 101)]
    job += [record(150, 100, seconds=5.0, persist_s=60.0), *run(5000, (), timed=False, end_s=5010)]
    found = _saves(job)
    assert found == [(150.0, True)]


def test_a_fast_tier_save_in_the_log_is_not_a_persistent_one() -> None:
    """A two-tier job whose log prints every save: the fast tier's records are fast saves in
    the persistent tier's timeline, and the log's lines at their steps stay theirs, not
    persistent saves; goodput counts the 2 persistent saves, 12 s each, as before."""
    job = [obs("run_start", 0), *steps(range(1, 400))]
    for at, tier in ((100, "memory"), (200, "persistent"), (300, "memory"), (350, "persistent")):
        job += [*logged(at, at), record(at + 2, at, tier=tier)]
    est = estimate_job("j", job, now_s=0.0)
    assert est.goodput_spans is not None
    g = est.goodput_spans.breakdown()
    assert (g.n_saves, g.n_log_saves, g[Bucket.CHECKPOINT]) == (2, 0, 2 * 12.0)


def test_a_log_save_without_a_step_is_a_timed_runs_own_save() -> None:
    """A log save that names no step is taken as one of its run's timed saves when the run has
    any (nothing tells which), and as a save of its own in a run with none."""
    job = [*run(0, (), timed=False, end_s=300), *logged(100, None), record(102, 100)]
    job += [obs("run_end", 300), *run(1000, (), timed=False, end_s=1300), *logged(1100, None)]
    found = _saves(job)
    assert found == [(102.0, True), (1100.0, False)]
