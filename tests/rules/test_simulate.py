"""The Monte Carlo of a checkpointed job and the replay of recorded lives."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckpt_advisor.rules.interval import daly_interval_s, exponential_waste_fraction, waste_fraction
from ckpt_advisor.rules.simulate import draw_lives, interval_grid_s, replay, simulate_intervals

HOUR_S = 3600.0
DAY_S = 86400.0


def test_replay_counts_whole_cycles_of_each_life() -> None:
    """Lives of 250 s and 90 s with T = 100, C = 20, R = 30 keep 2 and 0 cycles; a 130 s tail
    keeps its compute minus one save: useful 200 + 110, wall 340 + 60 + 130."""
    result = replay([250.0, 90.0], interval_s=100.0, cost_s=20.0, restart_s=30.0, tail_s=130.0)
    assert result.useful_s == 310.0
    assert result.wall_s == 530.0
    assert result.n_failures == 2
    assert result.waste_fraction == pytest.approx(1.0 - 310.0 / 530.0)


def test_replay_rejects_bad_input() -> None:
    """Negative lives or a zero interval are refused with the argument named."""
    with pytest.raises(ValueError, match="lives_s"):
        replay([-1.0], interval_s=10.0, cost_s=1.0, restart_s=0.0)
    with pytest.raises(ValueError, match="interval_s"):
        replay([1.0], interval_s=0.0, cost_s=1.0, restart_s=0.0)


@given(
    st.lists(st.floats(min_value=0.0, max_value=1e6), max_size=30),
    st.floats(min_value=1.0, max_value=1e5),
    st.floats(min_value=0.0, max_value=1e4),
    st.floats(min_value=0.0, max_value=1e4),
)
def test_replay_never_keeps_more_than_the_wall_time(
    lives: list[float], interval_s: float, cost_s: float, restart_s: float
) -> None:
    """Useful work is between 0 and the wall time, whatever the lives and settings."""
    result = replay(lives, interval_s=interval_s, cost_s=cost_s, restart_s=restart_s)
    assert 0.0 <= result.useful_s <= result.wall_s + 1e-6


@pytest.mark.parametrize("shape", [1.0, 0.7, 1.5])
def test_drawn_lives_have_the_requested_mean(shape: float) -> None:
    """Lives drawn over 2000 MTBFs average M within 5%, for exponential and Weibull shapes."""
    lives, tail = draw_lives(
        np.random.default_rng(3),
        mtbf_s=HOUR_S,
        restart_s=60.0,
        horizon_s=2000 * HOUR_S,
        shape=shape,
    )
    assert lives.mean() == pytest.approx(HOUR_S, rel=0.05)
    assert lives.sum() + lives.size * 60.0 + tail == pytest.approx(2000 * HOUR_S)


@pytest.mark.parametrize(
    ("mtbf_s", "cost_s", "restart_s"),
    [(6 * HOUR_S, 240.0, 600.0), (DAY_S, 300.0, 600.0), (HOUR_S, 600.0, 300.0)],
)
def test_simulated_waste_matches_the_exact_exponential_model(
    mtbf_s: float, cost_s: float, restart_s: float
) -> None:
    """At Daly's interval and at 2x it, the simulated waste is within 4 standard errors (and 3%
    relative) of Daly's exponential model (the waste the estimates report), small or large C/M."""
    daly_s = daly_interval_s(mtbf_s, cost_s)
    for result in simulate_intervals(
        [daly_s, 2 * daly_s], mtbf_s=mtbf_s, cost_s=cost_s, restart_s=restart_s, replicates=100
    ):
        truth = exponential_waste_fraction(result.interval_s, mtbf_s, cost_s, restart_s)
        assert abs(result.waste_fraction - truth) < 4 * result.waste_stderr
        assert result.waste_fraction == pytest.approx(truth, rel=0.03)


def test_simulated_waste_matches_the_first_order_formula_when_c_is_small() -> None:
    """With C/M = 1/1440 the first-order waste C/T + T/2M + R/M is within 3% of the simulation."""
    mtbf_s, cost_s, restart_s = 5 * DAY_S, 300.0, 600.0
    daly_s = daly_interval_s(mtbf_s, cost_s)
    [result] = simulate_intervals(
        [daly_s], mtbf_s=mtbf_s, cost_s=cost_s, restart_s=restart_s, horizon_s=365 * DAY_S
    )
    assert result.waste_fraction == pytest.approx(
        waste_fraction(daly_s, mtbf_s, cost_s, restart_s), rel=0.03
    )


@pytest.mark.parametrize("shape", [1.0, 0.7])
def test_the_best_simulated_interval_is_daly_within_noise(shape: float) -> None:
    """A sweep over 0.25x-4x Daly finds a best interval whose waste beats Daly's by less than
    3 standard errors (exponential and Weibull 0.7 lives): the flat curve leaves Daly optimal."""
    mtbf_s, cost_s, restart_s = 6 * HOUR_S, 240.0, 600.0
    daly_s = daly_interval_s(mtbf_s, cost_s)
    results = simulate_intervals(
        [daly_s, *interval_grid_s(mtbf_s, cost_s, points=41)],
        mtbf_s=mtbf_s,
        cost_s=cost_s,
        restart_s=restart_s,
        shape=shape,
        replicates=100,
    )
    at_daly, swept = results[0], results[1:]
    best = min(swept, key=lambda r: r.waste_fraction)
    assert at_daly.waste_fraction - best.waste_fraction < 3 * at_daly.waste_stderr
    assert 0.7 < best.interval_s / daly_s < 1.4


def test_the_same_seed_gives_the_same_numbers() -> None:
    """Simulations are reproducible from their seed and differ between seeds."""
    run = [
        simulate_intervals([3000.0], mtbf_s=HOUR_S * 6, cost_s=200.0, replicates=5, seed=s)[0]
        for s in (7, 7, 8)
    ]
    assert run[0] == run[1]
    assert run[0] != run[2]


def test_interval_grid_is_centred_on_daly() -> None:
    """The grid runs from Daly/span to Daly·span with Daly in the middle."""
    grid = interval_grid_s(DAY_S, 300.0, span=4.0, points=5)
    daly_s = daly_interval_s(DAY_S, 300.0)
    assert grid == pytest.approx([daly_s / 4, daly_s / 2, daly_s, daly_s * 2, daly_s * 4])
    with pytest.raises(ValueError, match="span"):
        interval_grid_s(DAY_S, 300.0, span=1.0)


@pytest.mark.parametrize(
    ("shape", "horizon_s", "restart_s", "cost_s"),
    [
        (1.0, 1000 * HOUR_S, 60.0, 200.0),
        (0.3, 300 * HOUR_S, 0.0, 0.0),
        (1.5, 0.5 * HOUR_S, 5.0, 9.0),
    ],
)
def test_simulated_intervals_are_the_replays_of_lives_drawn_one_replicate_at_a_time(
    shape: float, horizon_s: float, restart_s: float, cost_s: float
) -> None:
    """All replicates drawn and replayed at once give exactly the numbers of :func:`draw_lives`
    called once per replicate and :func:`replay` of each one's lives: also when some replicates
    need a second batch of lives (Weibull 0.3) and when a job is shorter than a life."""
    intervals = [300.0, 2000.0, 7000.0]
    rng = np.random.default_rng(11)
    draws = [
        draw_lives(rng, mtbf_s=HOUR_S, restart_s=restart_s, horizon_s=horizon_s, shape=shape)
        for _ in range(60)
    ]
    expected = []
    for interval in intervals:
        runs = [
            replay(lives, interval_s=interval, cost_s=cost_s, restart_s=restart_s, tail_s=tail)
            for lives, tail in draws
        ]
        waste = np.array([r.waste_fraction for r in runs])
        expected.append(
            (
                float(waste.mean()),
                float(waste.std(ddof=1) / np.sqrt(waste.size)),
                float(np.mean([r.n_failures for r in runs])),
            )
        )
    results = simulate_intervals(
        intervals,
        mtbf_s=HOUR_S,
        cost_s=cost_s,
        restart_s=restart_s,
        shape=shape,
        horizon_s=horizon_s,
        replicates=60,
        seed=11,
    )
    got = [(r.waste_fraction, r.waste_stderr, r.failures_per_replicate) for r in results]
    assert got == expected
    assert [r.goodput for r in results] == [1.0 - w for w, _, _ in expected]
