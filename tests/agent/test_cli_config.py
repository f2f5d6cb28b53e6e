"""The commands that estimate take the daemon's config: ``ingest --config`` and ``simulate --job
--config`` estimate with its ``[estimation]`` policy and the job's ``gpus``/``nodes`` (issue 13:
they used the defaults, and ``ingest`` stored that estimate)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.agent.synth import simulate


def _run(*args: str) -> tuple[str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout, result.stderr


@pytest.fixture(scope="module")
def week(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A week of a simulated HF job saving every 2 h where ~50 min is best (M = 6 h, C = 4 min):
    its log and timing file in one folder."""
    workdir = tmp_path_factory.mktemp("week")
    job = simulate(mtbf_s=6 * 3600.0, cost_s=240.0, interval_steps=1200, seed=3)
    (workdir / "train.log").write_text("".join(text for _, text in job.log))
    (workdir / "ckpt_timings.jsonl").write_text("".join(text for _, text in job.timings))
    return workdir


def _config(path: Path, db: Path, estimation: str = "", job: str = "") -> Path:
    path.write_text(
        f'[store]\npath = "{db}"\n[estimation]\n{estimation}\n[[jobs]]\nname = "week"\n{job}\n'
    )
    return path


def _ingest(week: Path, *args: str) -> dict[str, object]:
    files = [str(week / "train.log"), str(week / "ckpt_timings.jsonl")]
    _run("ingest", *files, "--job", "week", *args)
    db = args[args.index("--db") + 1] if "--db" in args else None
    out, _ = _run("estimates", *(["--db", db] if db else ["--config", args[-1]]), "--json")
    [row] = json.loads(out)
    assert isinstance(row, dict)
    return row


def test_ingest_with_a_config_estimates_with_its_gpus_and_thresholds(
    week: Path, tmp_path: Path
) -> None:
    """The same files: without a config the stored estimate knows no GPUs; with ``gpus = 64``
    it gives the excess in GPU-hours (and still drift at 2.4x); with ``drift_ratio = 10`` in
    ``[estimation]`` the same interval is ok; a minimum excess above what 64 GPUs lose is ok
    too. The store is the config's (no --db)."""
    plain = _ingest(week, "--db", str(tmp_path / "plain.db"))
    assert plain["gpus"] is None and plain["excess_gpu_hours_per_day"] is None
    assert plain["status"] == "drift"
    sized = _ingest(
        week, "--config", str(_config(tmp_path / "a.toml", tmp_path / "a.db", job="gpus = 64"))
    )
    assert (sized["gpus"], sized["units"], sized["status"]) == (64, 64, "drift")
    assert isinstance(sized["drift_ratio"], float) and 2.0 < sized["drift_ratio"] < 3.0
    assert isinstance(sized["excess_gpu_hours_per_day"], float)
    assert sized["excess_gpu_hours_per_day"] > 10.0
    assert (sized["mtbf_s"], sized["n_failures"]) == (plain["mtbf_s"], plain["n_failures"])
    lenient = _config(tmp_path / "b.toml", tmp_path / "b.db", "drift_ratio = 10", "gpus = 64")
    assert _ingest(week, "--config", str(lenient))["status"] == "ok"
    worth = "min_excess_gpu_hours_per_day = 10000"
    costly = _config(tmp_path / "c.toml", tmp_path / "c.db", worth, "gpus = 64")
    assert _ingest(week, "--config", str(costly))["status"] == "ok"


def test_the_configured_confidence_labels_the_estimates(week: Path, tmp_path: Path) -> None:
    """``[estimation] confidence = 0.8``: the stored estimate records its level, M's interval
    is inside the default 0.9's, and the estimates table heads it "80% CI", never "90%"."""
    plain = _ingest(week, "--db", str(tmp_path / "plain.db"))
    config = _config(tmp_path / "c.toml", tmp_path / "c.db", "confidence = 0.8")
    eighty = _ingest(week, "--config", str(config))
    assert (plain["confidence"], eighty["confidence"]) == (0.9, 0.8)
    low, high = eighty["mtbf_ci_s"]  # type: ignore[misc]
    plain_low, plain_high = plain["mtbf_ci_s"]  # type: ignore[misc]
    assert plain_low < low < high < plain_high
    table, _ = _run("estimates", "--config", str(config))
    [header] = [line for line in table.splitlines() if " MTBF " in line]
    assert "80% CI" in header and "90%" not in table
    table, _ = _run("estimates", "--db", str(tmp_path / "plain.db"))
    assert "90% CI" in table


def test_ingest_with_a_config_reads_with_the_jobs_patterns(tmp_path: Path) -> None:
    """A log only the job's ``[[jobs.patterns]]`` can read gives its five saves through ingest
    --config (none without it)."""
    log = tmp_path / "custom.log"
    log.write_text("".join(f"ckpt step={k * 100} took 42.5s\n" for k in range(1, 6)))
    pattern = (
        '[[jobs.patterns]]\nkind = "checkpoint_end"\n'
        "regex = 'ckpt step=(?P<step>\\d+) took (?P<duration_s>[\\d.]+)s'"
    )
    config = _config(tmp_path / "c.toml", tmp_path / "c.db", job=pattern)
    out, _ = _run("ingest", str(log), "--job", "week", "--config", str(config))
    assert "5 checkpoint(s)" in out
    out, _ = _run("ingest", str(log), "--job", "week", "--db", str(tmp_path / "bare.db"))
    assert "0 checkpoint(s)" in out


def test_backtest_with_a_config_uses_its_window(week: Path, tmp_path: Path) -> None:
    """``simulate --job --config`` estimates with the config's policy: an M window of one day
    replays fewer interruptions than the default 30 days."""
    config = _config(tmp_path / "c.toml", tmp_path / "c.db", 'mtbf_window = "1d"')
    files = [str(week / "train.log"), str(week / "ckpt_timings.jsonl")]
    _run("ingest", *files, "--job", "week", "--db", str(tmp_path / "c.db"))
    wide, _ = _run("simulate", "--job", "week", "--db", str(tmp_path / "c.db"), "--json")
    narrow, _ = _run("simulate", "--job", "week", "--config", str(config), "--json")
    assert 0 < json.loads(narrow)["n_failures"] < json.loads(wide)["n_failures"]


def test_a_jobs_timezone_reads_its_stamps_there(tmp_path: Path) -> None:
    """One config, two jobs on the same HF capture (stamps printed without an offset): the job
    whose nodes log in New York time (`[[jobs]] timezone`) has its events 5 h later in UTC
    than the one read in `[parse] timezone`, in the daemon's tailer and through ingest
    --config (unless --tz says otherwise)."""
    from datetime import UTC, datetime, timedelta

    from ckpt_advisor.agent.app import watch_specs
    from ckpt_advisor.agent.config import load_config
    from ckpt_advisor.agent.store import open_store
    from ckpt_advisor.agent.tail import Tailer

    capture = Path(__file__).parents[1] / "parsers" / "fixtures" / "hf_trainer"
    for job in ("ny", "utc"):
        (tmp_path / job).mkdir()
        (tmp_path / job / "train.log").write_bytes((capture / "hf_trainer_446.log").read_bytes())
    config_file = tmp_path / "c.toml"
    config_file.write_text(
        f'[store]\npath = "{tmp_path / "d.db"}"\n'
        f'[[jobs]]\nname = "ny"\nlogs = ["{tmp_path}/ny/*.log"]\ntimezone = "America/New_York"\n'
        f'[[jobs]]\nname = "utc"\nlogs = ["{tmp_path}/utc/*.log"]\n'
    )
    config = load_config(config_file)
    store = open_store(tmp_path / "d.db")
    now = datetime(2026, 12, 1, tzinfo=UTC)
    tailer = Tailer(store, watch_specs(config), clock=lambda: now, tz=UTC, backfill=True)
    tailer.scan()
    tailer.close()
    first = {job: store.events(job=job)[0].event for job in ("ny", "utc")}
    assert first["utc"].time == datetime(
        2026, 11, 29, 23, 6, 56, 302000, tzinfo=UTC
    )  # its run_start
    assert first["ny"].time == first["utc"].time + timedelta(hours=5)
    ingest = ["ingest", str(tmp_path / "ny" / "train.log"), "--job", "ny", "--config"]
    for db, tz, hours in (("i.db", (), 5), ("t.db", ("--tz", "UTC"), 0)):
        _run(*ingest, str(config_file), "--db", str(tmp_path / db), *tz)
        got = open_store(tmp_path / db).events(job="ny")[0].event.time
        assert got == first["utc"].time + timedelta(hours=hours)
