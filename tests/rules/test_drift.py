"""The drift verdict (``EstimationPolicy.judge``) and the alerting over it: one message per
episode, repeats, hysteresis and no flapping."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ckpt_advisor.rules.drift import decide, hold_if_silenced, hold_while_reading
from ckpt_advisor.rules.model import Action, AlertState, JobEstimate, ReasonCode, Status
from ckpt_advisor.rules.policy import EstimationPolicy
from tests.samples import drifting_estimate

HOUR_S = 3600.0
DAY_S = 86400.0

BASE = drifting_estimate(n_checkpoints=20, n_failures=5)
"""Any estimate: :func:`at` sets every field the drift rule reads."""


POLICY = EstimationPolicy()


def judged(estimate: JobEstimate, policy: EstimationPolicy = POLICY) -> JobEstimate:
    """``estimate`` with the status ``policy`` gives it (as ``estimate_job`` does)."""
    verdict = policy.judge(
        ratio=estimate.drift_ratio,
        n_saves=estimate.n_checkpoints,
        n_failures=estimate.n_failures,
        cost_s=estimate.checkpoint_cost_s,
        mtbf_s=estimate.mtbf_s,
        current_s=estimate.current_interval_s,
        band_s=estimate.recommended_interval_ci_s,
        excess_gpu_hours_per_day=estimate.excess_gpu_hours_per_day,
    )
    return dataclasses.replace(estimate, status=verdict.status, reason=verdict.reason)


def at(
    ratio: float, recommended_s: float = 7000.0, *, n_failures: int = 5, n_checkpoints: int = 20
) -> JobEstimate:
    """An estimate whose current interval is ``ratio`` times ``recommended_s``, with the
    optimum's confidence band at ±20% of it, judged by the default policy."""
    return judged(
        dataclasses.replace(
            BASE,
            drift_ratio=ratio,
            current_interval_s=ratio * recommended_s,
            recommended_interval_ci_s=(0.8 * recommended_s, 1.2 * recommended_s),
            recommended_interval_s=recommended_s,
            n_failures=n_failures,
            n_checkpoints=n_checkpoints,
        )
    )


def run(steps: list[tuple[float, JobEstimate]], policy: EstimationPolicy = POLICY) -> list[Action]:
    """Feed (now_s, estimate) pairs through the rule, threading the state; return the actions."""
    state = AlertState()
    actions = []
    for now_s, estimate in steps:
        decision = decide(estimate, state, now_s, policy)
        actions.append(decision.action)
        state = decision.next_state
    return actions


def test_drift_notifies_once_then_stays_quiet_within_the_repeat_interval() -> None:
    """A job at 3x the optimum is told once; hourly checks for the next day say nothing."""
    steps = [(h * HOUR_S, at(3.0)) for h in range(24)]
    assert run(steps) == [Action.NOTIFY] + [Action.NONE] * 23


def test_drift_repeats_after_the_repeat_interval() -> None:
    """The same drift is repeated once repeat_after_s has passed since the last message."""
    steps = [(0.0, at(3.0)), (DAY_S - 1, at(3.0)), (DAY_S, at(3.0)), (DAY_S + 60, at(3.0))]
    assert run(steps) == [Action.NOTIFY, Action.NONE, Action.REPEAT, Action.NONE]


def test_a_material_change_of_the_recommendation_repeats_early() -> None:
    """A recommendation moving by more than 25% is news; a 10% move is not."""
    steps = [(0.0, at(3.0)), (60.0, at(3.0, 7700.0)), (120.0, at(3.0, 10000.0))]
    assert run(steps) == [Action.NOTIFY, Action.NONE, Action.REPEAT]


def test_drift_resolves_only_inside_the_tighter_band() -> None:
    """Back to 1.4x (inside 1.5, outside 1.3) is quiet; 1.2x resolves and closes the episode."""
    state = decide(at(2.0), AlertState(), 0.0).next_state
    between = decide(at(1.4), state, 60.0)
    assert between.action is Action.NONE and between.next_state == state
    resolved = decide(at(1.2), state, 120.0)
    assert resolved.action is Action.RESOLVE
    assert resolved.next_state == AlertState()


def test_ratios_oscillating_around_the_threshold_do_not_flap() -> None:
    """1.45x / 1.55x alternating every 5 min for a day gives one NOTIFY and one REPEAT only."""
    steps = [(i * 300.0, at(1.55 if i % 2 else 1.45)) for i in range(288 + 2)]
    actions = run(steps)
    assert actions.count(Action.NOTIFY) == 1
    assert actions.count(Action.REPEAT) == 1
    assert Action.RESOLVE not in actions


def test_short_intervals_drift_too() -> None:
    """Checkpointing far too often (ratio 1/3) is drift just like too rarely."""
    assert run([(0.0, at(1.0 / 3.0))]) == [Action.NOTIFY]


def test_no_judgement_without_enough_failures_or_saves() -> None:
    """Below min_failures or min_saves nothing opens, and an open episode stays open."""
    assert at(3.0, n_failures=1).status is Status.INSUFFICIENT_DATA
    assert decide(at(3.0, n_failures=1), AlertState(), 0.0).action is Action.NONE
    assert decide(at(3.0, n_checkpoints=2), AlertState(), 0.0).action is Action.NONE
    open_state = AlertState(in_drift=True, last_sent_s=0.0, last_recommended_s=7000.0)
    decision = decide(at(1.0, n_failures=0), open_state, 10 * DAY_S)
    assert decision.action is Action.NONE and decision.next_state == open_state


def test_unknown_ratio_decides_nothing() -> None:
    """An estimate without a drift ratio (insufficient data) gives NONE and keeps the state."""
    estimate = judged(dataclasses.replace(BASE, drift_ratio=None))
    assert estimate.status is Status.INSUFFICIENT_DATA
    assert decide(estimate, AlertState(), 0.0).action is Action.NONE


def test_notify_records_what_was_sent() -> None:
    """The next state holds the time and the recommendation of the message."""
    decision = decide(at(3.0, 6000.0), AlertState(), 1234.0)
    assert decision.next_state == AlertState(True, 1234.0, 6000.0)


@pytest.mark.parametrize(
    ("settings", "name"),
    [
        ({"drift_ratio": 1.0}, "drift_ratio"),
        ({"resolve_ratio": 1.6}, "resolve_ratio"),
        ({"resolve_ratio": 1.0}, "resolve_ratio"),
        ({"repeat_after_s": 0.0}, "repeat_after_s"),
        ({"min_failures": -1}, "min_failures"),
        ({"min_saves": 1.5}, "min_saves"),
        ({"change_fraction": 0.0}, "change_fraction"),
        ({"confidence": 1.5}, "confidence"),
        ({"cost_window_saves": 0}, "cost_window_saves"),
        ({"mtbf_window_s": float("nan")}, "mtbf_window_s"),
        ({"burst_gap_s": -1.0}, "burst_gap_s"),
        ({"min_weibull_failures": 1}, "min_weibull_failures"),
        ({"min_excess_gpu_hours_per_day": -1.0}, "min_excess_gpu_hours_per_day"),
        ({"price_per_gpu_hour": -2.5}, "price_per_gpu_hour"),
    ],
)
def test_settings_are_checked_when_the_policy_is_made(
    settings: dict[str, float], name: str
) -> None:
    """A bad setting fails when the policy is made, with a ValueError naming it."""
    with pytest.raises(ValueError, match=name):
        EstimationPolicy(**settings)  # type: ignore[arg-type]


def test_an_interval_inside_the_optimums_confidence_band_is_not_drift() -> None:
    """2x off but inside a band of 0.5x-3x the optimum: the data cannot tell it is wrong."""
    wide = judged(dataclasses.replace(at(2.0), recommended_interval_ci_s=(3500.0, 21000.0)))
    assert wide.status is Status.OK
    assert decide(wide, AlertState(), 0.0).action is Action.NONE
    assert decide(at(2.0), AlertState(), 0.0).action is Action.NOTIFY


def test_an_excess_worth_less_than_the_minimum_is_not_drift() -> None:
    """3x off costing 0.5 GPU-hour a day stays quiet under the 1 GPU-hour default; 2 speaks."""
    small = judged(dataclasses.replace(at(3.0), excess_gpu_hours_per_day=0.5))
    large = judged(dataclasses.replace(at(3.0), excess_gpu_hours_per_day=2.0))
    assert decide(small, AlertState(), 0.0).action is Action.NONE
    assert decide(large, AlertState(), 0.0).action is Action.NOTIFY
    lenient = EstimationPolicy(min_excess_gpu_hours_per_day=0.0)
    assert decide(judged(small, lenient), AlertState(), 0.0, lenient).action is Action.NOTIFY


def test_fleet_failures_count_towards_judging() -> None:
    """With no failure of its own but M pooled over 12 fleet failures, the policy judges (the
    estimator passes the failures behind M, here the pooled 12)."""
    policy = EstimationPolicy(min_failures=2)
    assert policy.judge(ratio=3.0, n_saves=20, n_failures=0).status is Status.INSUFFICIENT_DATA
    assert policy.judge(ratio=3.0, n_saves=20, n_failures=12).status is Status.DRIFT


def test_drift_needs_all_three_conditions() -> None:
    """Ratio out of band, current outside the confidence band, and excess worth it."""
    drift, ok = Status.DRIFT, Status.OK

    def judge(ratio: float, **kwargs: Any) -> Status:
        return POLICY.judge(ratio=ratio, n_saves=3, n_failures=2, **kwargs).status

    assert judge(2.0) is drift
    assert judge(1.4) is ok
    assert judge(0.6) is drift
    band = (100.0, 300.0)
    assert judge(2.0, current_s=200.0, band_s=band) is ok
    assert judge(2.0, current_s=400.0, band_s=band) is drift
    assert judge(2.0, excess_gpu_hours_per_day=0.1) is ok


def test_a_job_off_its_optimum_but_below_the_gpu_hour_threshold_says_so() -> None:
    """Issue 11's case: 2.34x off the optimum, worth 0.41 GPU-hour a day under the 1 GPU-hour
    threshold: nothing is posted, and the reason carries both numbers."""
    quiet = judged(dataclasses.replace(at(2.34), excess_gpu_hours_per_day=0.41))
    decision = decide(quiet, AlertState(), 0.0)
    assert (quiet.status, decision.action) == (Status.OK, Action.NONE)
    assert decision.reason.to_json() == {
        "code": "below_threshold",
        "ratio": 2.34,
        "excess_gpu_hours_per_day": 0.41,
        "min_excess_gpu_hours_per_day": 1.0,
    }


def test_an_open_episode_far_off_but_held_by_its_verdict_gives_the_verdict_s_reason() -> None:
    """Posted at 2x; then 3.03x off but worth 0.29 GPU-hour a day, or inside the optimum's
    confidence band: the episode stays open and the reason is the verdict's (below the
    threshold, with both numbers; within confidence), never hysteresis, which is kept for a
    ratio between the resolve band and drift (1.4x)."""
    state = decide(at(2.0), AlertState(), 100.0).next_state
    below = judged(dataclasses.replace(at(3.03), excess_gpu_hours_per_day=0.29))
    held = decide(below, state, 200.0)
    assert (held.action, held.next_state) == (Action.NONE, state)
    assert held.reason.to_json() == {
        "code": "below_threshold",
        "ratio": 3.03,
        "excess_gpu_hours_per_day": 0.29,
        "min_excess_gpu_hours_per_day": 1.0,
    }
    wide = judged(dataclasses.replace(at(3.03), recommended_interval_ci_s=(3500.0, 30000.0)))
    assert decide(wide, state, 200.0).reason.code is ReasonCode.WITHIN_CONFIDENCE
    assert decide(at(1.4), state, 200.0).reason.code is ReasonCode.HYSTERESIS


def test_insufficient_data_names_what_is_missing() -> None:
    """Without C the reason names the checkpoint cost; with one interruption of two needed it
    names the failures and gives both counts."""
    no_cost = judged(dataclasses.replace(BASE, drift_ratio=None, checkpoint_cost_s=None))
    assert no_cost.reason.code is ReasonCode.INSUFFICIENT_DATA
    assert no_cost.reason.missing == ("checkpoint_cost",)
    few = decide(at(3.0, n_failures=1), AlertState(), 0.0).reason
    assert few.missing == ("failures",)
    assert (few.values["n_failures"], few.values["min_failures"]) == (1, 2)


def test_every_quiet_decision_says_why() -> None:
    """Within the band, inside the confidence band, hysteresis, already posted at T (with the
    repeat time) and resolved each have their own code and numbers."""
    assert decide(at(1.2), AlertState(), 0.0).reason.code is ReasonCode.WITHIN_BAND
    wide = judged(dataclasses.replace(at(2.0), recommended_interval_ci_s=(3500.0, 21000.0)))
    inside = decide(wide, AlertState(), 0.0).reason
    assert inside.code is ReasonCode.WITHIN_CONFIDENCE
    assert (inside.values["band_low_s"], inside.values["band_high_s"]) == (3500.0, 21000.0)
    state = decide(at(2.0), AlertState(), 100.0).next_state
    between = decide(at(1.4), state, 200.0).reason
    assert (between.code, between.values["resolve_ratio"]) == (ReasonCode.HYSTERESIS, 1.3)
    posted = decide(at(2.0), state, 300.0).reason
    assert posted.code is ReasonCode.ALREADY_POSTED
    assert (posted.values["last_sent_s"], posted.values["next_repeat_s"]) == (100.0, 100.0 + DAY_S)
    assert decide(at(1.1), state, 400.0).reason.code is ReasonCode.RESOLVED


def test_a_silence_holds_the_action_and_keeps_the_state() -> None:
    """A NOTIFY due while silenced is NONE (silenced until T, the NOTIFY held) with the state
    unchanged; once the silence is over the NOTIFY stands, and a quiet decision keeps its own
    reason."""
    notify = decide(at(3.0), AlertState(), 0.0)
    held = hold_if_silenced(notify, AlertState(), 0.0, 3600.0)
    assert (held.action, held.next_state) == (Action.NONE, AlertState())
    assert held.reason.to_json() == {"code": "silenced", "until_s": 3600.0, "held": "notify"}
    assert hold_if_silenced(notify, AlertState(), 3600.0, 3600.0) is notify
    quiet = decide(at(1.2), AlertState(), 0.0)
    assert hold_if_silenced(quiet, AlertState(), 0.0, 3600.0) is quiet


def test_a_backlog_being_read_holds_the_action_and_keeps_the_state() -> None:
    """A NOTIFY while 2 files are behind is NONE (reading_backlog, the NOTIFY held) with the
    state unchanged, rendered as the daemon logs it; with nothing behind the NOTIFY stands, and
    a quiet decision keeps its own reason."""
    from ckpt_advisor.agent.reasons import render_reason

    notify = decide(at(3.0), AlertState(), 0.0)
    held = hold_while_reading(notify, AlertState(), 2, 3_500_000)
    assert (held.action, held.next_state) == (Action.NONE, AlertState())
    assert held.reason.to_json() == {
        "code": "reading_backlog",
        "files": 2.0,
        "bytes_behind": 3_500_000.0,
        "held": "notify",
    }
    assert render_reason(held.reason) == (
        "messages wait: reading its backlog: 2 file(s), 3.5 MB behind (a notify message is held)"
    )
    settling = hold_while_reading(notify, AlertState(), 1, 0).reason
    assert render_reason(settling) == (
        "messages wait: reading its backlog: 1 file(s) read, their last lines not settled yet "
        "(a notify message is held)"
    )
    assert hold_while_reading(notify, AlertState(), 0, 0) is notify
    quiet = decide(at(1.2), AlertState(), 0.0)
    assert hold_while_reading(quiet, AlertState(), 2, 10) is quiet
