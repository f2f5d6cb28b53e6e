"""A figure resting on a bounded C or M is printed as a bound (agent/marks.py), on stores
backfilled from real captures: the HF Trainer crash and resume runs (C from "saved in" lines: a
lower bound), Megatron's saves beside Lightning's crash log without timestamps (C measured,
M a lower bound: the Lightning run's time is only steps × its step time), and the HF crash log
beside the same Lightning log (both lower bounds)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main

REAL = Path(__file__).parents[2] / "agent" / "fixtures" / "real"
MEGATRON = Path(__file__).parents[1] / "parsers" / "fixtures" / "megatron" / "megatron_2026.log"
LOGS = {
    "c_bound": (REAL / "hf_trainer_crash.log", REAL / "hf_trainer_resume.log"),
    "m_bound": (MEGATRON, REAL / "lightning_crash.log"),
    "both": (REAL / "hf_trainer_crash.log", REAL / "lightning_crash.log"),
}


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), env={"COLUMNS": "250"})
    return result.exit_code, result.stdout


@pytest.fixture(scope="module")
def dbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """One store per case of LOGS, the job named as its case."""
    out = {}
    for job, logs in LOGS.items():
        db = str(tmp_path_factory.mktemp(job) / "s.db")
        assert _run("ingest", *map(str, logs), "--job", job, "--db", db)[0] == 0
        out[job] = db
    return out


def _estimate(db: str) -> dict[str, Any]:
    code, out = _run("estimates", "--db", db, "--json")
    assert code == 0
    [row] = json.loads(out)
    return row


def _table_row(db: str, job: str) -> str:
    code, out = _run("estimates", "--db", db)
    assert code == 0
    [row] = [line for line in out.splitlines() if line.strip().startswith(f"{job} ")]
    return row


def test_the_stores_bound_what_their_names_say(dbs: dict[str, str]) -> None:
    """Which of C and M each store knows only from below, with the goodput simulated at them."""
    bounds = {}
    for job, db in dbs.items():
        est = _estimate(db)
        assert est["goodput_current"] is not None and est["goodput_recommended"] is not None
        bounds[job] = (est["checkpoint_cost_is_lower_bound"], est["mtbf_is_lower_bound"])
    assert bounds == {"c_bound": (True, False), "m_bound": (False, True), "both": (True, True)}


def test_the_goodput_column_is_a_bound_the_way_c_or_m_bounds_it(dbs: dict[str, str]) -> None:
    """At a lower-bound C (0.037 s) the goodput simulated now and at the recommended interval
    (69.6% and 72.6%) are upper bounds: '≤ 69.6%→≤ 72.6%'; at a lower-bound M (1m 05s)
    lower bounds: '≥ 61.5%→≥ 71.1%'; at both, no bound either way: '-'. The title says so."""
    shown = {}
    for job, db in dbs.items():
        est = _estimate(db)
        now, best = est["goodput_current"], est["goodput_recommended"]
        shown[job] = (f"{now:.1%}", f"{best:.1%}", _table_row(db, job).rstrip())
    assert shown["c_bound"][:2] == ("69.6%", "72.6%")
    assert shown["c_bound"][2].endswith("  ≤ 69.6%→≤ 72.6%")
    assert shown["m_bound"][:2] == ("61.5%", "71.1%")
    assert shown["m_bound"][2].endswith("  ≥ 61.5%→≥ 71.1%")
    assert shown["both"][2].endswith(" or more   -")
    _, table = _run("estimates", "--db", dbs["both"])
    assert "; goodput ≤ at such a C, ≥ at such an M, - at both)" in table.splitlines()[0]
