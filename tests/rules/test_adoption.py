"""The advice-file record and the policy that decides whether a job adopts the advice."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ckpt_advisor.rules.adoption import AdoptionPolicy, Advice, TierAdvice, parse_advice

NOW_S = 1_800_000_000.0
GOOD = {
    "job": "llama",
    "status": "drift",
    "recommended_interval_s": 3000.0,
    "recommended_interval_steps": 500,
    "computed_at": "2027-01-15T08:00:00+00:00",
}


def _advice(
    interval_s: float | None = 3000.0, status: str = "drift", age_s: float = 60.0
) -> Advice:
    return Advice("llama", status, interval_s, None, NOW_S - age_s)


POLICY = AdoptionPolicy(min_interval_s=600.0, max_interval_s=4 * 3600.0, min_change_gap_s=3600.0)


def test_parse_advice_reads_the_contract_keys_and_tiers() -> None:
    """The DESIGN.md keys, ISO computed_at (naive = UTC) and optional tier intervals."""
    advice = parse_advice(
        {**GOOD, "tiers": {"memory": {"interval_s": 300.0, "interval_steps": 50}}, "extra": 1}
    )
    assert advice.computed_at_s == datetime(2027, 1, 15, 8, tzinfo=UTC).timestamp()
    assert advice.interval_s() == 3000.0
    assert advice.interval_steps() == 500
    assert advice.tiers["memory"] == TierAdvice(300.0, 50)
    assert advice.interval_s("memory") == 300.0
    assert advice.interval_s("persistent") is None
    naive = parse_advice({**GOOD, "computed_at": "2027-01-15T08:00:00"})
    assert naive.computed_at_s == advice.computed_at_s
    assert parse_advice({**GOOD, "computed_at": 1.7e9}).computed_at_s == 1.7e9


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ([], "not a JSON object"),
        ({k: v for k, v in GOOD.items() if k != "status"}, "missing key.*status"),
        ({**GOOD, "recommended_interval_s": "fast"}, "recommended_interval_s must be a number"),
        ({**GOOD, "recommended_interval_s": -5}, "recommended_interval_s must be > 0"),
        ({**GOOD, "recommended_interval_steps": 2.5}, "recommended_interval_steps must be"),
        ({**GOOD, "computed_at": "yesterday"}, "computed_at is not ISO 8601"),
        ({**GOOD, "tiers": {"memory": 5}}, "tiers.memory must be an object"),
    ],
)
def test_parse_advice_names_the_bad_key(record: object, message: str) -> None:
    """A malformed record is refused with the key named."""
    with pytest.raises(ValueError, match=message):
        parse_advice(record)


def test_drift_advice_is_adopted() -> None:
    """Current 2000 s, advised 3000 s, drift: adopt 3000 s."""
    decision = POLICY(_advice(), current_interval_s=2000.0, now_s=NOW_S)
    assert decision.interval_s == 3000.0
    assert not decision.stale


def test_one_change_is_at_most_the_factor() -> None:
    """Advised 10× longer moves 2× (the default factor); advised 10× shorter halves."""
    assert POLICY(_advice(20_000.0), current_interval_s=2000.0, now_s=NOW_S).interval_s == 4000.0
    assert POLICY(_advice(200.0), current_interval_s=2000.0, now_s=NOW_S).interval_s == 1000.0


def test_the_users_bounds_always_hold() -> None:
    """Advised below min_interval_s stops at it; above max_interval_s stops at it; a current
    interval outside the bounds is brought inside even past the change factor."""
    assert POLICY(_advice(100.0), current_interval_s=1000.0, now_s=NOW_S).interval_s == 600.0
    assert (
        POLICY(_advice(30_000.0), current_interval_s=10_000.0, now_s=NOW_S).interval_s == 4 * 3600.0
    )
    assert POLICY(_advice(700.0), current_interval_s=100.0, now_s=NOW_S).interval_s == 600.0


@pytest.mark.parametrize(
    ("advice", "last_change_s", "reason"),
    [
        (_advice(age_s=7200.0), None, "computed 7200 s ago"),
        (_advice(age_s=-7200.0), None, "in the future"),
        (_advice(status="ok"), None, "status ok"),
        (_advice(status="insufficient_data"), None, "status insufficient_data"),
        (_advice(interval_s=None), None, "no advised interval"),
        (_advice(), NOW_S - 600.0, "wait 3000 s"),
        (_advice(2100.0), None, "dead band"),
    ],
)
def test_nothing_changes_without_fresh_drift_advice_outside_the_gap_and_dead_band(
    advice: Advice, last_change_s: float | None, reason: str
) -> None:
    """Stale (either way), non-drift, empty, too soon after a change, or within 10% of the
    current interval: keep it, and say why; only staleness asks for a warning."""
    decision = POLICY(advice, current_interval_s=2000.0, now_s=NOW_S, last_change_s=last_change_s)
    assert decision.interval_s is None
    assert reason in decision.reason
    assert decision.stale == ("ago" in reason or "future" in reason)


def test_tier_advice_is_followed_when_asked() -> None:
    """With tier="memory" the memory tier's interval is the target, not the single one."""
    advice = Advice("j", "drift", 3000.0, None, NOW_S, {"memory": TierAdvice(900.0, None)})
    assert POLICY(advice, current_interval_s=1500.0, now_s=NOW_S, tier="memory").interval_s == 900.0


def test_steps_round_within_the_factor_and_the_bounds() -> None:
    """1.9 s at 0.15 s/step rounds to 13 steps; from 25 steps the factor 2 keeps at least 13;
    a min bound of 1.2 s at 0.15 s/step keeps at least 8 steps."""
    policy = AdoptionPolicy(min_interval_s=1.2, max_interval_s=30.0)
    assert policy.steps(1.9, 0.15) == 13
    assert policy.steps(1.7, 0.15, current_steps=25) == 13  # 11 would be more than halving
    assert policy.steps(0.5, 0.15) == 8
    assert policy.steps(0.01, 100.0) == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_interval_s": 0.0, "max_interval_s": 10.0}, "min_interval_s"),
        ({"min_interval_s": 10.0, "max_interval_s": 5.0}, "max_interval_s must be >="),
        ({"min_interval_s": 1.0, "max_interval_s": 5.0, "max_change_factor": 1.0}, "factor"),
        ({"min_interval_s": 1.0, "max_interval_s": 5.0, "min_change_gap_s": -1.0}, "gap"),
        ({"min_interval_s": 1.0, "max_interval_s": 5.0, "min_relative_change": 1.0}, "relative"),
    ],
)
def test_bad_policies_are_refused(kwargs: dict[str, float], message: str) -> None:
    """Bounds that cannot hold are refused with the setting named."""
    with pytest.raises(ValueError, match=message):
        AdoptionPolicy(**kwargs)
