"""The drift rule: one message per episode, repeats, hysteresis and no flapping."""

from __future__ import annotations

import dataclasses

import pytest

from ckpt_advisor.rules.drift import DriftRule, off_optimum
from ckpt_advisor.rules.model import Action, AlertState, JobEstimate, Status

HOUR_S = 3600.0
DAY_S = 86400.0

BASE = JobEstimate(
    job="llama",
    computed_at_s=0.0,
    checkpoint_cost_s=300.0,
    checkpoint_cost_ci_s=(280.0, 320.0),
    checkpoint_cost_source="timing_file",
    n_checkpoints=20,
    mtbf_s=86400.0,
    mtbf_ci_s=(50000.0, 200000.0),
    n_failures=5,
    exposure_s=432000.0,
    restart_cost_s=600.0,
    current_interval_s=7000.0,
    young_interval_s=7200.0,
    daly_interval_s=7000.0,
    recommended_interval_s=7000.0,
    recommended_interval_ci_s=(5000.0, 9000.0),
    step_time_s=2.0,
    current_interval_steps=3500,
    recommended_interval_steps=3500,
    waste_fraction_current=0.08,
    waste_fraction_recommended=0.08,
    drift_ratio=1.0,
    status=Status.OK,
    newest_event_s=0.0,
)


def at(
    ratio: float, recommended_s: float = 7000.0, *, n_failures: int = 5, n_checkpoints: int = 20
) -> JobEstimate:
    """An estimate whose current interval is ``ratio`` times ``recommended_s``, with the
    optimum's confidence band at ±20% of it."""
    return dataclasses.replace(
        BASE,
        drift_ratio=ratio,
        current_interval_s=ratio * recommended_s,
        recommended_interval_ci_s=(0.8 * recommended_s, 1.2 * recommended_s),
        recommended_interval_s=recommended_s,
        n_failures=n_failures,
        n_checkpoints=n_checkpoints,
    )


def run(rule: DriftRule, steps: list[tuple[float, JobEstimate]]) -> list[Action]:
    """Feed (now_s, estimate) pairs through the rule, threading the state; return the actions."""
    state = AlertState()
    actions = []
    for now_s, estimate in steps:
        decision = rule(estimate, state, now_s)
        actions.append(decision.action)
        state = decision.next_state
    return actions


def test_drift_notifies_once_then_stays_quiet_within_the_repeat_interval() -> None:
    """A job at 3x the optimum is told once; hourly checks for the next day say nothing."""
    steps = [(h * HOUR_S, at(3.0)) for h in range(24)]
    assert run(DriftRule(), steps) == [Action.NOTIFY] + [Action.NONE] * 23


def test_drift_repeats_after_the_repeat_interval() -> None:
    """The same drift is repeated once repeat_after_s has passed since the last message."""
    steps = [(0.0, at(3.0)), (DAY_S - 1, at(3.0)), (DAY_S, at(3.0)), (DAY_S + 60, at(3.0))]
    assert run(DriftRule(), steps) == [Action.NOTIFY, Action.NONE, Action.REPEAT, Action.NONE]


def test_a_material_change_of_the_recommendation_repeats_early() -> None:
    """A recommendation moving by more than 25% is news; a 10% move is not."""
    steps = [(0.0, at(3.0)), (60.0, at(3.0, 7700.0)), (120.0, at(3.0, 10000.0))]
    assert run(DriftRule(), steps) == [Action.NOTIFY, Action.NONE, Action.REPEAT]


def test_drift_resolves_only_inside_the_tighter_band() -> None:
    """Back to 1.4x (inside 1.5, outside 1.3) is quiet; 1.2x resolves and closes the episode."""
    rule = DriftRule()
    state = rule(at(2.0), AlertState(), 0.0).next_state
    between = rule(at(1.4), state, 60.0)
    assert between.action is Action.NONE and between.next_state == state
    resolved = rule(at(1.2), state, 120.0)
    assert resolved.action is Action.RESOLVE
    assert resolved.next_state == AlertState()


def test_ratios_oscillating_around_the_threshold_do_not_flap() -> None:
    """1.45x / 1.55x alternating every 5 min for a day gives one NOTIFY and one REPEAT only."""
    steps = [(i * 300.0, at(1.55 if i % 2 else 1.45)) for i in range(288 + 2)]
    actions = run(DriftRule(), steps)
    assert actions.count(Action.NOTIFY) == 1
    assert actions.count(Action.REPEAT) == 1
    assert Action.RESOLVE not in actions


def test_short_intervals_drift_too() -> None:
    """Checkpointing far too often (ratio 1/3) is drift just like too rarely."""
    assert run(DriftRule(), [(0.0, at(1.0 / 3.0))]) == [Action.NOTIFY]


def test_no_judgement_without_enough_failures_or_saves() -> None:
    """Below min_failures or min_saves nothing opens, and an open episode stays open."""
    rule = DriftRule(min_failures=2, min_saves=3)
    assert rule(at(3.0, n_failures=1), AlertState(), 0.0).action is Action.NONE
    assert rule(at(3.0, n_checkpoints=2), AlertState(), 0.0).action is Action.NONE
    open_state = AlertState(in_drift=True, last_sent_s=0.0, last_recommended_s=7000.0)
    decision = rule(at(1.0, n_failures=0), open_state, 10 * DAY_S)
    assert decision.action is Action.NONE and decision.next_state == open_state


def test_unknown_ratio_decides_nothing() -> None:
    """An estimate without a drift ratio (insufficient data) gives NONE and keeps the state."""
    estimate = dataclasses.replace(BASE, drift_ratio=None)
    assert DriftRule()(estimate, AlertState(), 0.0).action is Action.NONE


def test_notify_records_what_was_sent() -> None:
    """The next state holds the time and the recommendation of the message."""
    decision = DriftRule()(at(3.0, 6000.0), AlertState(), 1234.0)
    assert decision.next_state == AlertState(True, 1234.0, 6000.0)


@pytest.mark.parametrize(
    ("settings", "name"),
    [
        ({"ratio": 1.0}, "ratio"),
        ({"resolve_ratio": 1.6}, "resolve_ratio"),
        ({"resolve_ratio": 1.0}, "resolve_ratio"),
        ({"repeat_after_s": 0.0}, "repeat_after_s"),
        ({"min_failures": -1}, "min_failures"),
        ({"min_saves": 1.5}, "min_saves"),
        ({"change_fraction": 0.0}, "change_fraction"),
    ],
)
def test_settings_are_checked_when_the_rule_is_made(settings: dict[str, float], name: str) -> None:
    """A bad setting fails in __init__ with a ValueError naming it."""
    with pytest.raises(ValueError, match=name):
        DriftRule(**settings)  # type: ignore[arg-type]


def test_an_interval_inside_the_optimums_confidence_band_is_not_drift() -> None:
    """2x off but inside a band of 0.5x-3x the optimum: the data cannot tell it is wrong."""
    wide = dataclasses.replace(at(2.0), recommended_interval_ci_s=(3500.0, 21000.0))
    assert DriftRule()(wide, AlertState(), 0.0).action is Action.NONE
    assert DriftRule()(at(2.0), AlertState(), 0.0).action is Action.NOTIFY


def test_an_excess_worth_less_than_the_minimum_is_not_drift() -> None:
    """3x off costing 0.5 GPU-hour a day stays quiet under the 1 GPU-hour default; 2 speaks."""
    small = dataclasses.replace(at(3.0), excess_gpu_hours_per_day=0.5)
    large = dataclasses.replace(at(3.0), excess_gpu_hours_per_day=2.0)
    assert DriftRule()(small, AlertState(), 0.0).action is Action.NONE
    assert DriftRule()(large, AlertState(), 0.0).action is Action.NOTIFY
    assert DriftRule(min_excess_gpu_hours_per_day=0.0)(small, AlertState(), 0.0).action is (
        Action.NOTIFY
    )


def test_fleet_failures_count_towards_judging() -> None:
    """With no failure of its own but M pooled over 12 fleet failures, the rule judges."""
    pooled = dataclasses.replace(at(3.0, n_failures=0), mtbf_n_failures=12)
    assert DriftRule(min_failures=2)(pooled, AlertState(), 0.0).action is Action.NOTIFY


def test_off_optimum_needs_all_three_conditions() -> None:
    """Ratio out of band, current outside the confidence band, and excess worth it."""
    assert off_optimum(2.0, ratio_limit=1.5)
    assert not off_optimum(1.4, ratio_limit=1.5)
    assert not off_optimum(2.0, ratio_limit=1.5, current_s=200.0, band_s=(100.0, 300.0))
    assert off_optimum(2.0, ratio_limit=1.5, current_s=400.0, band_s=(100.0, 300.0))
    assert not off_optimum(
        2.0, ratio_limit=1.5, excess_gpu_hours_per_day=0.1, min_excess_gpu_hours_per_day=1.0
    )
