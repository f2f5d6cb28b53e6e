"""The two-tier Monte Carlo, and the model's pair against a brute force over both intervals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckpt_advisor.rules.simulate_tiers import (
    Interruptions,
    brute_force,
    draw_interruptions,
    plan_grid,
    replay_plans,
)
from ckpt_advisor.rules.two_level import TwoTierJob, optimal_plan

HOUR_S = 3600.0
DAY_S = 86400.0


def _drawn(
    lives: list[float], recoverable: list[bool], tail_s: float, wall_s: float
) -> Interruptions:
    n = len(lives)
    return Interruptions(
        np.array([lives]),
        np.array([recoverable], bool),
        np.ones((1, n), bool),
        np.array([tail_s]),
        np.array([wall_s]),
    )


def test_replay_rolls_back_to_the_copy_that_survived() -> None:
    """T1 = 100, k = 3, C1 = 10, C2 = 40: a 250 s life completes 2 fast saves (kept after a
    recoverable failure), a later 150 s life completes the persistent save (segment 3) and one
    more, then a node loss rolls back to segment 3; the 0 s tail adds nothing: useful 300 s."""
    drawn = _drawn([250.0, 150.0 + 10.0 + 110.0, 10.0], [True, False, True], 0.0, 1000.0)
    # life 1: segments 0,1 (110 s each) -> done 2; life 2: segment 2 (140 s) + segment 3 (110 s)
    # -> 4, node loss -> floor(4/3)*3 = 3; life 3: nothing completes -> 3
    goodput = replay_plans([(100.0, 3)], drawn, fast_cost_s=10.0, persistent_cost_s=40.0)
    assert goodput[0, 0] == pytest.approx(300.0 / 1000.0)


def test_replay_keeps_the_tails_compute() -> None:
    """With no interruption, a 500 s tail of T1 = 100, k = 2, C1 = 10, C2 = 50 completes
    segments of 110 + 150 + 110 s and keeps 100 s of the last 130 s: useful 400 s."""
    drawn = _drawn([], [], 500.0, 500.0)
    drawn = Interruptions(
        np.zeros((1, 1)), np.zeros((1, 1), bool), np.zeros((1, 1), bool), drawn.tail_s, drawn.wall_s
    )
    goodput = replay_plans([(100.0, 2)], drawn, fast_cost_s=10.0, persistent_cost_s=50.0)
    assert goodput[0, 0] == pytest.approx(400.0 / 500.0)


@given(
    st.lists(st.tuples(st.floats(0.0, 1e5), st.booleans()), min_size=1, max_size=20),
    st.floats(0.0, 1e5),
    st.floats(1.0, 1e4),
    st.integers(1, 50),
    st.floats(0.1, 100.0),
    st.floats(0.1, 1000.0),
)
def test_replay_keeps_between_nothing_and_the_running_time(
    lives: list[tuple[float, bool]], tail: float, t1: float, k: int, c1: float, c2: float
) -> None:
    """Whatever the interruptions and the plan, useful work is between 0 and the running time
    (lives plus tail; restarts only add wall time)."""
    running = sum(x for x, _ in lives) + tail
    drawn = Interruptions(
        np.array([[x for x, _ in lives]]),
        np.array([[r for _, r in lives]], bool),
        np.ones((1, len(lives)), bool),
        np.array([tail]),
        np.array([max(running, 1.0)]),
    )
    goodput = replay_plans([(t1, k)], drawn, fast_cost_s=c1, persistent_cost_s=c2)[0, 0]
    assert 0.0 <= goodput * max(running, 1.0) <= running + 1e-6


def test_drawn_classes_arrive_at_their_rates() -> None:
    """Over 400 days, NCCL timeouts (M 8 h) and node failures (M 24 h) arrive 3:1, so 75% are
    recoverable, and lives average the combined M of 6 h."""
    drawn = draw_interruptions(
        np.random.default_rng(5),
        class_mtbf_s={"nccl_timeout": 8 * HOUR_S, "node_failure": 24 * HOUR_S},
        fast_restart_s=60.0,
        persistent_restart_s=600.0,
        horizon_s=400 * DAY_S,
        replicates=1,
    )
    lives = drawn.lives_s[drawn.present]
    assert drawn.recoverable[drawn.present].mean() == pytest.approx(0.75, abs=0.03)
    assert lives.mean() == pytest.approx(6 * HOUR_S, rel=0.05)


JOBS = [
    # (C1, C2, M, recoverable fraction, R1, R2): DLRover-like memory tier; a slow local disk;
    # mostly node losses
    (5.0, 300.0, 6 * HOUR_S, 0.75, 60.0, 600.0),
    (60.0, 600.0, 3 * HOUR_S, 0.5, 120.0, 900.0),
    (10.0, 120.0, 12 * HOUR_S, 0.2, 30.0, 300.0),
]


@pytest.mark.parametrize(("c1", "c2", "mtbf", "fraction", "r1", "r2"), JOBS)
def test_model_pair_is_within_one_percent_of_the_brute_force_best(
    c1: float, c2: float, mtbf: float, fraction: float, r1: float, r2: float
) -> None:
    """On generated jobs (interruptions per class, each with the tier that survives it), the
    exact model's (T1, k) is within 1% goodput of the best of a 15 × k grid over both
    intervals, and the simulation's goodput at that pair is the model's within 0.5%."""
    job = TwoTierJob.from_fraction(
        fast_cost_s=c1,
        persistent_cost_s=c2,
        mtbf_s=mtbf,
        recoverable_fraction=fraction,
        fast_restart_s=r1,
        persistent_restart_s=r2,
    )
    plan = optimal_plan(job)
    drawn = draw_interruptions(
        np.random.default_rng(11),
        class_mtbf_s={"nccl_timeout": mtbf / fraction, "node_failure": mtbf / (1 - fraction)},
        fast_restart_s=r1,
        persistent_restart_s=r2,
        horizon_s=30 * DAY_S,
        replicates=60,
    )
    pair = (plan.fast_interval_s, plan.saves_per_persistent)
    result = brute_force(
        pair, plan_grid(pair, points=15), drawn, fast_cost_s=c1, persistent_cost_s=c2
    )
    assert result.shortfall < 0.01
    assert result.plan_goodput == pytest.approx(plan.goodput, abs=0.005)
    # a pair far from the model's is measurably worse: the check can fail
    far = replay_plans([(pair[0] * 4, pair[1])], drawn, fast_cost_s=c1, persistent_cost_s=c2).mean()
    assert far < result.plan_goodput - 0.005
