"""Interruptions, runs and exposure read from a job's timeline."""

from __future__ import annotations

import numpy as np
import pytest

from ckpt_advisor.rules.interruptions import cluster_interruptions
from ckpt_advisor.rules.model import Observation
from ckpt_advisor.rules.runs import exposure_s, lives_s, running_time_at_s, split_runs
from ckpt_advisor.rules.timeline import Kind, Timeline, any_between
from tests.rules.simulate import T0, obs


def steps(first_s: float, last_s: float, every_s: float, first_step: int = 0) -> list[Observation]:
    """``step`` observations every ``every_s`` seconds from ``first_s`` to ``last_s``."""
    times = np.arange(first_s, last_s + every_s / 2, every_s)
    return [obs("step", t, step=first_step + i) for i, t in enumerate(times.tolist())]


def crash_burst(at_s: float) -> list[Observation]:
    """A CUDA crash as 8 ranks, the launcher and Slurm report it within 20 seconds."""
    burst = [obs("failure", at_s + 0.1 * r, failure_class="python_exception") for r in range(3)]
    burst.append(obs("failure", at_s + 0.5, failure_class="cuda_illegal_memory_access"))
    burst += [obs("failure", at_s + 1 + r, failure_class="nccl_error") for r in range(4)]
    burst.append(obs("failure", at_s + 12, failure_class="child_failed"))
    burst.append(obs("failure", at_s + 20, failure_class="slurm_task_failure"))
    return burst


def test_a_burst_from_all_ranks_launcher_and_slurm_is_one_interruption() -> None:
    """8 rank lines + launcher + Slurm within seconds give 1 interruption classed by root cause."""
    timeline = Timeline.of(steps(0, 3600, 10) + crash_burst(3605))
    [interruption] = cluster_interruptions(timeline)
    assert interruption.failure_class == "cuda_illegal_memory_access"
    assert interruption.n_observations == 10
    assert interruption.start_s == T0 + 3605
    assert interruption.end_s == T0 + 3625
    assert not interruption.planned


def test_a_burst_of_generic_classes_only_keeps_its_first_class() -> None:
    """With no specific class in the burst, the first generic one names it."""
    timeline = Timeline.of([obs("failure", 0, failure_class="signal"), obs("failure", 1)])
    assert [i.failure_class for i in cluster_interruptions(timeline)] == ["signal"]


def test_failures_separated_by_progress_are_separate_interruptions() -> None:
    """Two crashes an hour apart with steps between count twice."""
    timeline = Timeline.of(
        steps(0, 1000, 10) + crash_burst(1005) + steps(2000, 5000, 10) + crash_burst(5005)
    )
    assert len(cluster_interruptions(timeline)) == 2


def test_failed_restart_attempts_before_progress_join_the_interruption() -> None:
    """Restarts failing before any step, even hours later after queueing, join the interruption."""
    timeline = Timeline.of(
        [
            *steps(0, 1000, 10),
            obs("failure", 1005, failure_class="ecc_error"),
            obs("restart", 8000),
            obs("resume", 8030, step=90),
            obs("failure", 8100, failure_class="nccl_error"),
            obs("restart", 20000),
            obs("failure", 20060, failure_class="python_exception"),
            obs("restart", 30000),
            *steps(30100, 40000, 10, first_step=90),
        ]
    )
    [interruption] = cluster_interruptions(timeline)
    assert (interruption.start_s, interruption.end_s) == (T0 + 1005, T0 + 20060)
    assert interruption.failure_class == "ecc_error"
    assert interruption.n_observations == 3


def _within_a_minute(*between: Observation) -> int:
    """Interruptions of two CUDA crashes 50 s apart (inside the 60 s burst gap) after an
    hour of steps, with ``between`` (times from 1001 to 1049 s) between them."""
    timeline = Timeline.of(
        [
            *steps(0, 1000, 10),
            obs("failure", 1000, failure_class="cuda_illegal_memory_access"),
            *between,
            obs("failure", 1050, failure_class="cuda_illegal_memory_access"),
        ]
    )
    return len(cluster_interruptions(timeline))


def test_a_run_that_started_again_and_trained_ends_a_burst_however_soon() -> None:
    """A resume followed by steps and a save, 50 s after a crash, then the same crash: two
    interruptions (a restart 5 s after the crash, trained for 40 s), whatever the burst gap."""
    assert (
        _within_a_minute(
            obs("run_start", 1005),
            obs("resume", 1005, step=50),
            obs("step", 1010, step=55),
            obs("checkpoint_start", 1020, step=75),
            obs("checkpoint_end", 1021, step=75, duration_s=1.0),
        )
        == 2
    )


def test_a_start_with_progress_before_it_but_none_after_is_a_failed_attempt() -> None:
    """Order matters: another rank's stray step, then a restart, then a death before any
    progress is one interruption (the restart failed); steps after the restart make it two."""
    stray = obs("step", 1002, step=99)
    assert _within_a_minute(stray, obs("restart", 1010)) == 1
    assert _within_a_minute(stray, obs("restart", 1010), obs("step", 1020, step=60)) == 2
    assert _within_a_minute(obs("restart", 1010), obs("step", 1020), obs("restart", 1030)) == 2


def test_progress_flushed_without_a_start_stays_in_the_burst() -> None:
    """Steps and a save end other ranks flush after the crash, with no start among them, are
    part of the burst: one interruption; a start alone (an attempt that died) joins too."""
    assert _within_a_minute(obs("step", 1001, step=100), obs("checkpoint_end", 1002)) == 1
    assert _within_a_minute(obs("run_start", 1010), obs("resume", 1011, step=50)) == 1


def test_watchdog_timeouts_after_a_silent_gap_join_the_interruption() -> None:
    """The NCCL watchdog firing 10 minutes after the crash, with nothing logged, is the same one."""
    timeline = Timeline.of(
        [
            *steps(0, 1000, 10),
            obs("failure", 1005, failure_class="cuda_illegal_memory_access"),
            obs("failure", 1605, failure_class="nccl_timeout"),
        ]
    )
    assert len(cluster_interruptions(timeline)) == 1


def test_failures_far_apart_with_nothing_between_are_separate() -> None:
    """A log with only failure lines days apart does not fold them into one."""
    timeline = Timeline.of([obs("failure", 0), obs("failure", 86400), obs("failure", 2 * 86400)])
    assert len(cluster_interruptions(timeline)) == 3


def test_a_planned_end_makes_the_whole_burst_planned() -> None:
    """Time limit + dying ranks' NCCL errors is one planned interruption named time_limit."""
    timeline = Timeline.of(
        [
            *steps(0, 1000, 10),
            obs("failure", 1001, failure_class="nccl_error"),
            obs("failure", 1002, failure_class="time_limit", planned=True),
        ]
    )
    [interruption] = cluster_interruptions(timeline)
    assert interruption.planned
    assert interruption.failure_class == "time_limit"


def test_exposure_excludes_downtime_and_counts_the_censored_tail() -> None:
    """Running time = start-to-failure plus restart-to-newest; the hour down is not counted."""
    timeline = Timeline.of(
        [
            obs("run_start", 0),
            *steps(10, 1000, 10),
            *crash_burst(1000),
            obs("restart", 4620),
            obs("resume", 4650, step=50),
            *steps(4700, 6000, 10, first_step=50),
        ]
    )
    interruptions = cluster_interruptions(timeline)
    run_id = split_runs(timeline, interruptions, idle_gap_s=6 * 3600)
    # run 1: 0 -> 1000 (failure); run 2: 4620 (restart) -> 6000 (newest)
    assert exposure_s(timeline, run_id) == pytest.approx(1000 + 1380)
    assert exposure_s(timeline, run_id, since_s=T0 + 500) == pytest.approx(500 + 1380)


def test_an_idle_gap_and_a_clean_run_end_are_not_exposure() -> None:
    """Silence longer than idle_gap_s and the time after run_end are downtime."""
    timeline = Timeline.of(
        [
            *steps(0, 1000, 10),
            obs("run_end", 1000),
            *steps(5000, 6000, 10),
            *steps(20000, 21000, 10),
        ]
    )
    run_id = split_runs(timeline, [], idle_gap_s=3600)
    assert exposure_s(timeline, run_id) == pytest.approx(3000)
    assert np.unique(run_id).size == 3


def test_a_new_log_file_starts_a_new_run_but_timing_files_do_not() -> None:
    """The gap before a new log source's first line is downtime; a timing file adds no break."""
    first = [obs("step", t, step=t, source="a.log") for t in (0, 100, 200)]
    timing = [obs("checkpoint_end", 150, duration_s=5.0, from_timing_file=True, source="t.jsonl")]
    second = [obs("step", t, step=t, source="b.log") for t in (1000, 1100)]
    timeline = Timeline.of(first + timing + second)
    run_id = split_runs(timeline, [], idle_gap_s=3600)
    assert run_id.tolist() == [0, 0, 0, 0, 1, 1]
    assert exposure_s(timeline, run_id) == pytest.approx(300)


def test_timeline_sorts_observations_and_codes_kinds() -> None:
    """Observations in any order come out sorted, with unknown kinds as OTHER and NaN for None."""
    timeline = Timeline.of([obs("step", 5, step=3), obs("mystery", 1), obs("checkpoint_end", 2)])
    assert timeline.time_s.tolist() == [T0 + 1, T0 + 2, T0 + 5]
    assert timeline.kind.tolist() == [Kind.OTHER, Kind.CHECKPOINT_END, Kind.STEP]
    assert np.isnan(timeline.step[:2]).all() and timeline.step[2] == 3
    assert timeline.newest_s == T0 + 5


def test_timeline_rejects_non_finite_times() -> None:
    """A NaN time is a ValueError, not a silently misplaced event."""
    with pytest.raises(ValueError, match="time_s"):
        Timeline.of([Observation("step", float("nan"))])


def test_clustering_rejects_negative_gaps() -> None:
    """gap_s must be >= 0 and the error names it."""
    with pytest.raises(ValueError, match="gap_s"):
        cluster_interruptions(Timeline.of([]), gap_s=-1.0)


def test_a_restart_stamped_like_its_failure_still_counts_as_a_failed_attempt() -> None:
    """Ties in time keep line order: restart, then failure at the same stamp, joins the burst."""
    timeline = Timeline.of(
        [
            *steps(0, 1000, 10),
            obs("failure", 1005, failure_class="ecc_error"),
            obs("run_start", 9000),
            obs("resume", 9000, step=50),
            obs("failure", 9000, failure_class="nccl_error"),
        ]
    )
    [interruption] = cluster_interruptions(timeline)
    assert interruption.n_observations == 2


def test_running_time_clock_stops_while_the_job_is_down() -> None:
    """Running time at 500 s is 500; during the hour down it stays at 1000; at the newest
    observation it is 1000 + 1380; before the first observation it is 0."""
    timeline = Timeline.of(
        [
            obs("run_start", 0),
            *steps(10, 1000, 10),
            *crash_burst(1000),
            obs("restart", 4620),
            *steps(4700, 6000, 10, first_step=50),
        ]
    )
    run_id = split_runs(timeline, cluster_interruptions(timeline), idle_gap_s=6 * 3600)
    clock = running_time_at_s(timeline, run_id, T0 + np.array([-5.0, 500.0, 3000.0, 6000.0]))
    assert clock == pytest.approx([0.0, 500.0, 1000.0, 2380.0])


def test_lives_are_running_time_between_interruptions_with_a_censored_tail() -> None:
    """Failures at 1000 s and (after an hour down) 1380 s later give lives 1000 and 1380 and a
    tail of 500 s of running time to the newest observation."""
    timeline = Timeline.of(
        [
            obs("run_start", 0),
            *steps(10, 1000, 10),
            *crash_burst(1000),
            obs("restart", 4600),
            *steps(4610, 5980, 10, first_step=50),
            *crash_burst(5980),
            obs("restart", 9000),
            *steps(9010, 9500, 10, first_step=100),
        ]
    )
    interruptions = cluster_interruptions(timeline)
    run_id = split_runs(timeline, interruptions, idle_gap_s=6 * 3600)
    gaps, tail = lives_s(timeline, run_id, interruptions)
    assert gaps == pytest.approx([1000.0, 1380.0])
    assert tail == pytest.approx(500.0)
    assert gaps.sum() + tail == pytest.approx(exposure_s(timeline, run_id))


def test_a_run_that_stops_silently_before_a_new_run_is_an_unknown_interruption() -> None:
    """A run killed without a word (steps, then nothing, then run_start/resume) gets a failure
    of class unknown at its last observation; exposure is the two runs' 100 s each."""
    timeline, added = Timeline.of(
        [
            obs("run_start", 0),
            *steps(10, 100, 10),
            obs("run_start", 400),
            obs("resume", 401, step=5),
            *steps(410, 500, 10, first_step=6),
        ]
    ).with_unseen_interruptions()
    assert added == 1
    [interruption] = cluster_interruptions(timeline)
    assert interruption.failure_class == "unknown"
    assert interruption.start_s == T0 + 100 and not interruption.planned
    run_id = split_runs(timeline, [interruption], idle_gap_s=21600)
    assert exposure_s(timeline, run_id) == pytest.approx(100.0 + 100.0)


@pytest.mark.parametrize(
    ("ending", "seen"),
    [
        ([obs("run_end", 101)], 0),
        ([obs("failure", 101, failure_class="time_limit", planned=True)], 0),
        ([obs("failure", 101, failure_class="oom")], 0),
        ([], 1),
    ],
)
def test_only_runs_with_no_end_and_no_failure_get_an_unseen_interruption(
    ending: list[Observation], seen: int
) -> None:
    """A clean run_end, a planned end or a seen failure before the new run adds nothing; the
    first run seen (its start opens the timeline) adds nothing either."""
    _, added = Timeline.of(
        [obs("run_start", 0), *steps(10, 100, 10), *ending, obs("run_start", 400)]
    ).with_unseen_interruptions()
    assert added == seen


def test_a_real_failure_near_an_unseen_end_names_the_root_cause() -> None:
    """A kernel Xid line from another source, stamped after the new run's start but before its
    progress, clusters with the unknown failure and wins as root cause (unknown is generic)."""
    timeline, added = Timeline.of(
        [
            obs("run_start", 0),
            *steps(10, 100, 10),
            obs("run_start", 400),
            obs("failure", 405, failure_class="xid_79", source="dmesg"),
            *steps(410, 420, 10),
        ]
    ).with_unseen_interruptions()
    assert added == 1
    [interruption] = cluster_interruptions(timeline)
    assert interruption.failure_class == "xid_79"
    assert interruption.n_observations == 2


def test_a_failure_dated_before_the_runs_last_save_still_ends_the_run() -> None:
    """An untimed traceback dated by the bar clock sorts before the run's last save lines: the
    run has a failure, so no unknown interruption is added on top of it."""
    _, added = Timeline.of(
        [
            obs("run_start", 0),
            *steps(10, 100, 10),
            obs("failure", 100, step=10, failure_class="cuda_illegal_memory_access"),
            obs("checkpoint_start", 100.5, step=10),
            obs("checkpoint_end", 538, step=10),
            obs("run_start", 1800),
            *steps(1810, 1900, 10),
        ]
    ).with_unseen_interruptions()
    assert added == 0


def test_any_between_is_the_running_count_of_marks_between_positions() -> None:
    """Whether a marked index lies strictly between consecutive positions is what a running
    count of the marks says, with repeated, adjacent and edge positions."""
    rng = np.random.default_rng(5)
    for _ in range(2000):
        marked = rng.random(int(rng.integers(1, 15))) < rng.random()
        positions = np.sort(rng.integers(0, marked.size, int(rng.integers(0, 6)))).astype(np.intp)
        counts = np.concatenate(([0], np.cumsum(marked)))  # marks before each index
        expected = counts[positions[1:]] - counts[positions[:-1] + 1] > 0
        assert any_between(marked, positions).tolist() == expected.tolist()
    marked = np.array([False, True, False, False, True])
    assert any_between(marked, np.array([0, 2, 3, 4])).tolist() == [True, False, False]
