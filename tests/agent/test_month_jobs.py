"""Acceptance: simulated month-long jobs give M, C and the interval within bounds of the truth."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.month_jobs import SCENARIOS, Scenario, run_scenario


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_a_month_of_training_is_estimated_within_bounds(scenario: Scenario, tmp_path: Path) -> None:
    """30 days of real HF log lines and a timing file, through the tailer and the store: M
    within 10% and C within 5% of the truth in the data, the recommendation within 10% of
    Daly's optimum for it, every interruption counted, exponential or Weibull, small or
    large C/M."""
    row = run_scenario(scenario, tmp_path)
    assert row.failures_est == row.failures_true
    assert abs(row.mtbf_error) < 0.10
    assert abs(row.cost_error) < 0.05
    assert abs(row.interval_error) < 0.10
    if scenario.shape != 1.0 and row.failures_true >= 50:
        assert row.weibull_shape == pytest.approx(scenario.shape, rel=0.2)
