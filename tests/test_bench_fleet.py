"""``python -m bench fleet`` on a small fleet (slow: real agents and a real PostgreSQL): every
line appended is stored once, each sampled line is found, and the figures are printed."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import pytest

from bench import fleet
from tests import pg


@pytest.mark.slow
def test_a_small_fleet_stores_every_line_appended(tmp_path: Path) -> None:
    """Two agents of three jobs at 100 lines/s for 10 s: the store takes in what was offered,
    no sampled line is lost, and the 20,000-event store is estimated and sized."""
    if why := pg.unavailable():
        pytest.skip(why)
    ap = argparse.ArgumentParser()
    fleet.add_arguments(ap)
    args = ap.parse_args(
        ["--fleet-agents", "2", "--fleet-jobs", "3", "--fleet-s", "10", "--fleet-rate", "100",
         "--fleet-estimate-events", "20000"]
    )  # fmt: skip
    args.work, args.python = tmp_path, sys.executable
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    rows = {figure: (measured, met) for figure, measured, _, met in fleet.bench_fleet(args, env)}
    [(taken, met)] = [v for k, v in rows.items() if k.endswith("events/s stored")]
    assert met, taken
    stored, offered = (float(x.replace(",", "")) for x in re.findall(r"([\d,]+)/s", taken))
    assert stored == pytest.approx(offered, rel=0.05)
    latency, _ = rows["fleet: append -> stored in PostgreSQL (p99)"]
    assert ", 0 lost)" in latency
    assert "fleet: estimate over 20,000 events (PostgreSQL)" in rows
