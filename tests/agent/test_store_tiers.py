"""The store keeps each save's tier: events --json shows it, the estimate reads it per tier."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.agent.training import timing_record

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _timing_file(path: Path) -> None:
    """Saves every 100 s of compute: 1 s to memory, every 5th one 30 s to storage (the real
    writer's records)."""
    now = T0
    lines = []
    for n in range(1, 41):
        persistent = n % 5 == 0
        now += timedelta(seconds=100)
        end = now + timedelta(seconds=30.0 if persistent else 1.0)
        tier = "persistent" if persistent else "memory"
        lines.append(json.dumps(timing_record(n * 50, now, end, tier=tier)) + "\n")
        now = end
    path.write_text("".join(lines))


def test_tiers_are_stored_and_estimated_per_tier(tmp_path: Path) -> None:
    """After ingest, events --json gives each save's tier, and estimates --json has C per tier
    (1 s and 30 s), the current pair (100 s x 5), no pair without interruptions, and the
    single-tier C of the persistent saves alone."""
    timings = tmp_path / "ckpt_timings.jsonl"
    _timing_file(timings)
    db = str(tmp_path / "s.db")
    runner = CliRunner()
    assert runner.invoke(main, ["ingest", str(timings), "--job", "j", "--db", db]).exit_code == 0
    events = runner.invoke(main, ["events", "--json", "--db", db, "--limit", "100"]).stdout
    tiers = [json.loads(line)["tier"] for line in events.splitlines()]
    assert tiers.count("persistent") == 8 and tiers.count("memory") == 32
    est = json.loads(runner.invoke(main, ["estimates", "--json", "--db", db]).stdout)[0]
    assert est["checkpoint_cost_s"] == 30.0
    two = est["tiers"]
    assert (two["fast_tier"], two["fast_cost_s"], two["persistent_cost_s"]) == ("memory", 1.0, 30.0)
    assert (two["n_fast_saves"], two["n_persistent_saves"]) == (20, 8)
    assert two["current_saves_per_persistent"] == 5
    assert abs(two["current_fast_interval_s"] - 100.0) < 1e-6
    assert two["fast_interval_s"] is None and two["mtbf_persistent_s"] is None
