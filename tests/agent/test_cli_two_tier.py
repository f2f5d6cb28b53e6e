"""`ckpt-advisor interval` for two tiers: the pair of intervals and how it is asked for."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.rules.two_level import TwoTierJob, optimal_plan


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_two_tier_calculator_json() -> None:
    """5 s memory saves, 5 min persistent ones, M = 6 h of which 75% a memory copy survives:
    the exact optimum (13 memory saves per persistent one, T1 ≈ 527 s), beside the
    first-order pair and the persistent-only baseline, which wastes more."""
    code, out, _ = _run(
        "interval", "--memory-cost", "5s", "--persistent-cost", "5m", "--mtbf", "6h",
        "--recoverable-fraction", "0.75", "--restart", "10m", "--memory-restart", "1m", "--json",
    )  # fmt: skip
    assert code == 0
    data = json.loads(out)
    job = TwoTierJob(5.0, 300.0, 8 * 3600.0, 24 * 3600.0, 60.0, 600.0)
    best = optimal_plan(job)
    assert data["mtbf_memory_s"] == 8 * 3600.0
    assert data["mtbf_persistent_s"] == 24 * 3600.0
    assert data["recoverable_fraction"] == pytest.approx(0.75)
    assert data["saves_per_persistent"] == best.saves_per_persistent == 13
    assert data["memory_interval_s"] == pytest.approx(best.fast_interval_s)
    assert data["persistent_interval_s"] == pytest.approx(13 * best.fast_interval_s)
    assert data["waste_fraction"] <= data["first_order"]["waste_fraction"]
    assert data["persistent_only"]["waste_fraction"] > data["waste_fraction"] + 0.05


def test_the_mtbfs_can_be_given_per_tier() -> None:
    """--memory-mtbf 8h with --persistent-mtbf 1d, or with --mtbf 6h (the total), is the same
    job as a 0.75 fraction of 6 h; the table names both intervals."""
    per_tier = _run(
        "interval", "--memory-cost", "5s", "--persistent-cost", "5m",
        "--memory-mtbf", "8h", "--persistent-mtbf", "1d", "--json",
    )  # fmt: skip
    derived = _run(
        "interval", "--memory-cost", "5s", "--persistent-cost", "5m",
        "--memory-mtbf", "8h", "--mtbf", "6h", "--json",
    )  # fmt: skip
    a, b = json.loads(per_tier[1]), json.loads(derived[1])
    assert a["saves_per_persistent"] == b["saves_per_persistent"]
    assert a["mtbf_persistent_s"] == pytest.approx(b["mtbf_persistent_s"])
    code, out, _ = _run(
        "interval", "--memory-cost", "5s", "--persistent-cost", "5m", "--mtbf", "6h",
        "--recoverable-fraction", "0.75",
    )  # fmt: skip
    assert code == 0
    assert "Memory tier:     every 8m" in out
    assert "13 saves per persistent save" in out
    assert "persistent saves only" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--memory-cost", "5s", "--persistent-cost", "5m"), "need --recoverable-fraction"),
        (("--memory-cost", "5s", "--mtbf", "6h", "--recoverable-fraction", "0.5"), "both"),
        (("--memory-cost", "5s", "--persistent-cost", "5m", "--recoverable-fraction", "0.5"),
         "needs --mtbf"),
        (("--memory-cost", "5s", "--persistent-cost", "5m", "--memory-mtbf", "1h",
          "--mtbf", "2h"), "must exceed --mtbf"),
        (("--memory-cost", "0", "--persistent-cost", "5m", "--mtbf", "6h",
          "--recoverable-fraction", "0.5"), "fast_cost_s"),
        (("--mtbf", "6h"), "give --mtbf and --cost"),
    ],
)  # fmt: skip
def test_incomplete_two_tier_input_exits_2_naming_what_is_missing(
    args: tuple[str, ...], message: str
) -> None:
    """Missing or inconsistent two-tier options exit 2 with a message that names them."""
    code, _, err = _run("interval", *args)
    assert code == 2
    assert message in err
