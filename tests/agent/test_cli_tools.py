"""The people-facing tools: ``simulate`` (Monte Carlo and backtest), ``plot``, ``estimates``."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.app import estimator_of
from ckpt_advisor.agent.cli import main
from ckpt_advisor.agent.contracts import backtest_json
from ckpt_advisor.agent.estimate import fleet_rate
from ckpt_advisor.agent.store import open_store
from ckpt_advisor.agent.synth import simulate
from ckpt_advisor.rules.interval import daly_interval_s
from ckpt_advisor.rules.policy import JobFacts
from tests.agent.helpers import downgrade_to_version_3


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def week_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A week of a simulated HF job (M = 6 h, C = 4 min) ingested into a store; the store's
    path and the job's true interruption count."""
    workdir = tmp_path_factory.mktemp("week")
    job = simulate(mtbf_s=6 * 3600.0, cost_s=240.0, interval_steps=1200, seed=3)
    (workdir / "train.log").write_text("".join(text for _, text in job.log))
    (workdir / "ckpt_timings.jsonl").write_text("".join(text for _, text in job.timings))
    db = workdir / "ckpt.db"
    for name in ("train.log", "ckpt_timings.jsonl"):
        _run("ingest", str(workdir / name), "--job", "week", "--db", str(db))
    return db, job.n_interruptions


def test_simulate_prints_daly_the_given_intervals_and_the_best() -> None:
    """The Monte Carlo JSON holds Daly's interval first, then the given one, and a best interval
    whose waste is no worse than Daly's by more than the noise."""
    out = json.loads(
        _run(
            "simulate",
            "--mtbf",
            "6h",
            "--cost",
            "4m",
            "--restart",
            "10m",
            "--interval",
            "2h",
            "--sweep",
            "--replicates",
            "30",
            "--days",
            "10",
            "--json",
        )
    )
    assert out["mode"] == "monte_carlo"
    daly, given = out["intervals"]
    assert daly["interval_s"] == pytest.approx(out["daly_interval_s"])
    assert given["interval_s"] == 7200.0
    assert given["waste_fraction"] > daly["waste_fraction"]
    assert out["best"]["waste_fraction"] <= daly["waste_fraction"]
    assert daly["waste_fraction"] - out["best"]["waste_fraction"] < 3 * daly["waste_stderr"]


def test_simulate_names_the_first_order_formula_out_of_its_range() -> None:
    """At T = 1 s with C = 4 min the first-order waste C/T + T/(2M) is 240 (24000%): the table
    says the formula is out of its range (C ≪ T ≪ M) instead of printing it; JSON keeps the
    value; Daly's row prints its formula figure."""
    args = ["simulate", "--mtbf", "6h", "--cost", "4m", "--interval", "1s"]
    args += ["--replicates", "5", "--days", "2"]
    daly, given = _run(*args).splitlines()[1:3]
    assert "(first-order formula over 100%: it holds for C ≪ T ≪ M)" in given
    assert "24000" not in given and "(first-order formula 14.93%)" in daly
    rows = json.loads(_run(*args, "--json"))["intervals"]
    assert rows[1]["waste_fraction_formula"] == pytest.approx(240 + 1 / (2 * 6 * 3600))


def test_simulate_with_a_weibull_shape_and_bad_arguments() -> None:
    """--shape is accepted and echoed; missing --mtbf exits with the config error code."""
    out = json.loads(
        _run(
            "simulate",
            "--mtbf",
            "1d",
            "--cost",
            "1m",
            "--shape",
            "0.7",
            "--replicates",
            "5",
            "--json",
        )
    )
    assert out["shape"] == 0.7
    result = CliRunner().invoke(main, ["simulate", "--cost", "1m"])
    assert result.exit_code == 2
    assert "--mtbf and --cost" in result.output


def test_backtest_replays_the_jobs_own_interruptions(week_db: tuple[Path, int]) -> None:
    """The backtest replays each recorded interruption: Daly's interval, the current one and
    the sweep's best, with the best no worse than the others."""
    db, interruptions = week_db
    out = json.loads(_run("simulate", "--job", "week", "--db", str(db), "--sweep", "--json"))
    assert out["mode"] == "backtest"
    assert out["n_failures"] == interruptions
    daly, current = out["intervals"]
    assert current["interval_s"] == pytest.approx(out["current_interval_s"])
    assert out["best"]["waste_fraction"] <= min(daly["waste_fraction"], current["waste_fraction"])
    assert 0.0 < daly["waste_fraction"] < 1.0


def test_plot_writes_a_png_of_the_waste_curve(week_db: tuple[Path, int], tmp_path: Path) -> None:
    """plot writes a PNG file for a job with an estimate and prints the curve it drew (x_s in
    seconds, waste, the axis' unit picked: hours for a 2-hour interval, under a name no reader
    takes for x's; the contract's first names x and unit kept), and fails clearly for an
    unknown job."""
    db, _ = week_db
    png = tmp_path / "curve.png"
    out = json.loads(_run("plot", "--job", "week", "--db", str(db), "-o", str(png), "--json"))
    assert (out["job"], out["output"], out["axis_unit"]) == ("week", str(png), "h")
    assert (out["x"], out["unit"]) == (out["x_s"], "h")
    [est] = json.loads(_run("estimates", "--db", str(db), "--json"))
    x, waste = out["x_s"], out["waste"]
    assert len(x) == len(waste) == 200 and x == sorted(x)
    marks = [est["recommended_interval_s"], est["current_interval_s"]]
    marks += est["recommended_interval_ci_s"]  # the curve spans every marked interval
    assert x[0] == pytest.approx(min(marks) / 3, rel=0.01)
    assert x[-1] == pytest.approx(max(marks) * 3, rel=0.01)
    best = x[waste.index(min(waste))]
    assert best == pytest.approx(est["recommended_interval_s"], rel=0.05)  # Daly's optimum
    assert out["insufficient_data"] is None and out["waste_upper"] is None
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = CliRunner().invoke(main, ["plot", "--job", "nope", "--db", str(db), "-o", str(png)])
    assert result.exit_code == 1
    assert "no job 'nope' here; known: week" in result.output


def test_plot_json_without_output_prints_the_curve_alone(
    week_db: tuple[Path, int], tmp_path: Path
) -> None:
    """plot --json with no -o prints the same curve as with one, "output" null, and draws
    nothing; plot with neither -o nor --json is a usage error naming -o."""
    db, _ = week_db
    png = tmp_path / "curve.png"
    drawn = json.loads(_run("plot", "--job", "week", "--db", str(db), "-o", str(png), "--json"))
    alone = json.loads(_run("plot", "--job", "week", "--db", str(db), "--json"))
    assert alone["output"] is None
    assert {**alone, "output": str(png)} == drawn
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curve.png"]
    result = CliRunner().invoke(main, ["plot", "--job", "week", "--db", str(db)])
    assert result.exit_code == 2
    assert "-o/--output names the PNG file to draw" in result.output


def test_plot_json_of_a_job_with_no_estimate_says_why(
    week_db: tuple[Path, int], tmp_path: Path
) -> None:
    """A known job with no estimate stored yet (the daemon read its events, no estimate ran):
    plot --json printed nothing and exited 1. Now it prints the plot object, its curve empty,
    "insufficient_data" saying why, and exits 0 (as goodput --json with no wall time, and
    estimates --json's []); with -o, the same object, nothing drawn, exit 1; without --json,
    the reason on stderr, exit 1."""
    db = tmp_path / "no-estimate.db"
    source, conn = sqlite3.connect(week_db[0]), sqlite3.connect(db)
    source.backup(conn)  # the store's WAL too
    with conn:
        conn.execute("DELETE FROM estimates")
    source.close()
    conn.close()
    result = CliRunner().invoke(main, ["plot", "--job", "week", "--db", str(db), "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {
        "job": "week",
        "x_s": [],
        "axis_unit": "min",
        "unit": "min",
        "x": [],
        "waste": [],
        "waste_upper": None,
        "insufficient_data": "no estimate stored for job 'week'",
        "output": None,
    }
    png = tmp_path / "curve.png"
    args = ["plot", "--job", "week", "--db", str(db), "-o", str(png)]
    drawn = CliRunner().invoke(main, [*args, "--json"])
    assert drawn.exit_code == 1
    assert json.loads(drawn.stdout) == json.loads(result.stdout)
    assert not png.exists()
    alone = CliRunner().invoke(main, args)
    assert (alone.exit_code, alone.stdout) == (1, "")
    assert alone.stderr == "ckpt-advisor: no estimate stored for job 'week'\n"


def test_estimates_json_carries_the_new_facts(week_db: tuple[Path, int]) -> None:
    """estimates --json keeps the contract keys and adds per-class M, the Weibull fields, the
    persist latency and the excess waste (null when unknown)."""
    db, interruptions = week_db
    [row] = json.loads(_run("estimates", "--db", str(db), "--json"))
    assert row["n_failures"] == interruptions
    assert row["mtbf_source"] in ("exponential", "weibull")
    classes = row["mtbf_by_class"]
    assert sum(c["n_failures"] for c in classes.values()) == interruptions
    assert row["weibull_shape"] is not None
    assert row["persist_latency_s"] is None
    assert row["excess_gpu_hours_per_day"] is None


def test_estimates_show_the_simulated_goodput_now_and_at_the_recommended_interval(
    week_db: tuple[Path, int],
) -> None:
    """estimates --json has goodput_current and goodput_recommended (the job's own C, M and R
    simulated at each interval): a job saving every 2 h where ~50 min is best gains; the table
    shows them in one column."""
    db, _ = week_db
    [row] = json.loads(_run("estimates", "--db", str(db), "--json"))
    now, best = row["goodput_current"], row["goodput_recommended"]
    assert 0.5 < now < best < 1.0
    assert best - now > 0.02
    assert f"{now:.1%}→{best:.1%}" in _run("estimates", "--db", str(db))


def test_fleet_rate_pools_the_other_jobs_per_unit() -> None:
    """Other jobs' exposure × units and failures add up; the job itself and jobs of unknown size
    are left out; no such job gives None."""
    rows = [
        {"job": "a", "exposure_s": 100.0, "n_failures": 2},
        {"job": "b", "exposure_s": 50.0, "n_failures": 1},
        {"job": "c", "exposure_s": 70.0, "n_failures": 9},
    ]
    fleet = fleet_rate(rows, {"a": JobFacts(units=4), "b": JobFacts(gpus=8, units=8)}, "new")
    assert fleet is not None
    assert (fleet.unit_exposure_s, fleet.n_failures) == (800.0, 3)
    assert fleet_rate(rows, {"a": JobFacts(units=4)}, "a") is None
    assert fleet_rate(rows, {"a": JobFacts(gpus=4)}, "new") is None  # gpus alone: no units


def test_backtest_of_a_store_of_an_older_schema_says_how_to_upgrade(
    week_db: tuple[Path, int], tmp_path: Path
) -> None:
    """``simulate --job`` on a read-only open of a schema-3 store fails with the upgrade advice
    (exit 1, no traceback); the same command works once the store was opened read-write."""
    db = tmp_path / "old.db"
    with sqlite3.connect(week_db[0]) as source, sqlite3.connect(db) as copy:
        source.backup(copy)
    downgrade_to_version_3(db)
    result = CliRunner().invoke(main, ["simulate", "--job", "week", "--db", str(db)])
    assert result.exit_code == 1 and result.exception is not None
    assert "schema version 3" in result.stderr and "open it once read-write" in result.stderr
    _run("events", "--db", str(db), "--limit", "1")  # reads need no upgrade
    _run("ingest", str(week_db[0].parent / "train.log"), "--job", "week", "--db", str(db))
    assert "backtest" in _run("simulate", "--job", "week", "--db", str(db), "--json")


def test_the_backtests_best_is_the_best_of_every_interval_replayed(
    week_db: tuple[Path, int],
) -> None:
    """``best`` is the lowest waste of all the intervals replayed, the tried ones too: a job's
    current interval can lie beyond the grid's span (Daly's / 4 to × 4) and beat all of it (a
    captured job saving every 6× Daly's interval was shown a "best" worse than its own). Here
    a grid far from Daly's: Daly's interval, tried, is the best."""
    db, _ = week_db
    est = estimator_of(None).estimate(open_store(db), "week", datetime.now(UTC).timestamp())
    assert est.mtbf_s is not None and est.checkpoint_cost_s is not None
    daly_s = daly_interval_s(est.mtbf_s, est.checkpoint_cost_s)
    out = backtest_json(est, tried_s=[daly_s], grid_s=[daly_s / 50, daly_s * 50])
    [daly] = out["intervals"]
    assert out["best"] == daly
    assert 0.0 < daly["waste_fraction"] < 1.0
