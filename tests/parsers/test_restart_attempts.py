"""Failed restart attempts belong to the interruption they try to recover from (README "How it
decides", docs/DESIGN.md "M from data"): a restarted worker that dies in init_process_group
before training progresses again is part of the first failure's restart cost R (Daly's model
counts failures during restart in R), not an interruption of its own. That needs a log that
shows progress: in a job that logs none (a plain print loop under torchrun), a new launch
between two failures makes them two.

The attempt is a real paste (public/torchrun/mmdet_6779_restart_after_init_timeout.log: the
second attempt dies in the store-based barrier, torchrun restarts again); what came before and
after it is given as observations, dated as the daemon dates untimed lines (when read).
"""

from __future__ import annotations

from pathlib import Path

from ckpt_advisor.parsers.events import EventKind
from ckpt_advisor.rules.interruptions import cluster_interruptions
from ckpt_advisor.rules.model import Observation
from ckpt_advisor.rules.timeline import Timeline
from tests.parsers._helpers import parse, read_lines

ATTEMPT = Path(__file__).parent / "fixtures" / "public" / "torchrun"
T0 = 1_800_000_000.0


def _attempt_at(time_s: float) -> list[Observation]:
    events, _ = parse(read_lines(ATTEMPT / "mmdet_6779_restart_after_init_timeout.log"))
    return [
        Observation(e.kind.value, time_s, failure_class=e.failure_class, source="attempt.log")
        for e in events
    ]


def _steps(start_s: float, n: int, first: int) -> list[Observation]:
    return [Observation("step", start_s + 10 * i, step=first + i) for i in range(n)]


def test_the_pasted_attempt_is_a_death_in_init_and_a_restart() -> None:
    """The attempt's lines give its failure (dist_init_timeout, with the launcher's exit code and
    'Worker group failed' echoes) and torchrun's restart."""
    kinds = [(o.kind, o.failure_class) for o in _attempt_at(T0)]
    assert ("failure", "dist_init_timeout") in kinds
    assert kinds[-1] == ("restart", None)
    assert {k for k, _ in kinds} == {EventKind.FAILURE.value, EventKind.RESTART.value}


def test_an_attempt_dying_before_progress_joins_the_first_interruption() -> None:
    """Training, an ECC failure, torchrun restarts; the restarted group dies in init 40 min
    later (no step between) and restarts again; training goes on: one interruption, its root
    cause the ECC error, its end the failed attempt (the attempt's time is restart cost)."""
    timeline = Timeline.of(
        [
            *_steps(T0, 50, 0),
            Observation("failure", T0 + 600, failure_class="cuda_ecc"),
            Observation("restart", T0 + 610),
            *_attempt_at(T0 + 3000),
            *_steps(T0 + 3100, 50, 40),
        ]
    )
    [interruption] = cluster_interruptions(timeline)
    assert interruption.failure_class == "cuda_ecc"
    assert (interruption.start_s, interruption.end_s) == (T0 + 600, T0 + 3000)


def test_an_attempt_after_progress_is_an_interruption_of_its_own() -> None:
    """The same death in init after the restarted job trained again is a second interruption."""
    timeline = Timeline.of(
        [
            *_steps(T0, 50, 0),
            Observation("failure", T0 + 600, failure_class="cuda_ecc"),
            Observation("restart", T0 + 610),
            *_steps(T0 + 700, 50, 40),
            *_attempt_at(T0 + 5000),
            *_steps(T0 + 5100, 50, 90),
        ]
    )
    assert [i.failure_class for i in cluster_interruptions(timeline)] == [
        "cuda_ecc",
        "dist_init_timeout",
    ]


def _launches(*kinds: tuple[str, float]) -> Timeline:
    """Observations at seconds after T0, in the shape of the real launches (torchrun_raise.log:
    a launch banner, its crash 14 s later); failures of class ``killed``."""
    return Timeline.of(
        [
            Observation(kind, T0 + at_s, failure_class="killed" if kind == "failure" else None)
            for kind, at_s in kinds
        ]
    )


def test_a_new_launch_where_no_progress_is_logged_is_an_interruption_of_its_own() -> None:
    """A plain print loop under torchrun logs no progress a parser reads: two launches 31 s
    apart, each crashing, are two interruptions (a launch's run may have trained: nothing can
    show it did not), however far apart, where they were one (a failed restart attempt)."""
    for later_s in (0.0, 7 * 60.0, 37 * 60.0):
        timeline = _launches(
            ("run_start", 0),
            ("failure", 14),
            ("run_start", 35 + later_s),
            ("failure", 45 + later_s),
        )
        assert len(cluster_interruptions(timeline)) == 2


def test_a_restart_where_no_progress_is_logged_still_joins_the_crash() -> None:
    """torchrun's own restart of the launch's workers comes while other nodes still report the
    crash: their failure a second later is the same interruption."""
    timeline = _launches(("run_start", 0), ("failure", 14), ("restart", 14), ("failure", 15))
    assert len(cluster_interruptions(timeline)) == 1


def test_a_new_launch_without_progress_where_progress_is_logged_is_a_failed_attempt() -> None:
    """Where the job logs its steps, a launch that shows none before it dies is a restart
    attempt that failed before training: it joins the interruption it tried to recover from."""
    timeline = Timeline.of(
        [
            *_steps(T0, 50, 0),
            Observation("failure", T0 + 600, failure_class="cuda_ecc"),
            Observation("run_start", T0 + 700),
            Observation("failure", T0 + 720, failure_class="dist_init_timeout"),
            Observation("run_start", T0 + 800),
            *_steps(T0 + 810, 50, 40),
        ]
    )
    [interruption] = cluster_interruptions(timeline)
    assert interruption.failure_class == "cuda_ecc"
