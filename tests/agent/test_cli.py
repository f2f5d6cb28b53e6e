"""The command line as users and scripts call it: the DESIGN.md JSON contracts and exit codes."""

from __future__ import annotations

import json
import math
import os
import pty
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckpt_advisor.agent.cli import main
from ckpt_advisor.agent.store.schema import SCHEMA_VERSION

FIXTURES = Path(__file__).parents[2] / "agent" / "fixtures" / "real"
PARSE_KEYS = {"kind", "time", "step", "duration_s", "failure_class", "line", "source", "parser"}
ESTIMATE_KEYS = {
    "job", "computed_at", "checkpoint_cost_s", "n_checkpoints", "mtbf_s", "mtbf_ci_s",
    "n_failures", "exposure_s", "current_interval_s", "young_interval_s", "daly_interval_s",
    "recommended_interval_s", "step_time_s", "recommended_interval_steps",
    "waste_fraction_current", "waste_fraction_recommended", "drift_ratio", "status",
}  # fmt: skip


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_ingest_of_the_two_hf_runs_reports_5_checkpoints_and_1_failure(tmp_path: Path) -> None:
    """Backfilling the captured HF crash and resume runs gives 5 saves and 1 failure, with every
    contract key present and unknown numbers null rather than 0."""
    db = str(tmp_path / "s.db")
    code, out, err = _run(
        "ingest", str(FIXTURES / "hf_trainer_crash.log"), str(FIXTURES / "hf_trainer_resume.log"),
        "--job", "hf", "--db", db,
    )  # fmt: skip
    assert code == 0, err
    assert "5 checkpoint(s), 1 failure(s)" in out  # the summary is the result: stdout
    code, out, _ = _run("estimates", "--db", db, "--json")
    [est] = json.loads(out)
    assert est.keys() >= ESTIMATE_KEYS
    assert (est["job"], est["n_checkpoints"], est["n_failures"]) == ("hf", 5, 1)
    assert est["status"] == "insufficient_data"
    assert est["checkpoint_cost_source"] == "log"
    assert 0.0 < est["checkpoint_cost_s"] < 0.1  # "saved in" lines 7–72 ms after the start
    assert est["mtbf_s"] > 0


def test_ingest_twice_stores_nothing_twice(tmp_path: Path) -> None:
    """A second ingest of the same file resumes at its stored offset: no event is duplicated."""
    db = str(tmp_path / "s.db")
    log = str(FIXTURES / "lightning_crash.log")
    _run("ingest", log, "--job", "lt", "--db", db)
    _, first, _ = _run("events", "--db", db, "--json")
    _run("ingest", log, "--job", "lt", "--db", db)
    _, second, _ = _run("events", "--db", db, "--json")
    assert first == second
    rows = [json.loads(line) for line in first.splitlines()]
    assert [r["step"] for r in rows if r["kind"] == "checkpoint_start"] == [40, 80, 120]
    assert all(r["job"] == "lt" and r.keys() >= PARSE_KEYS for r in rows)


def test_parse_json_has_the_contract_keys_per_event() -> None:
    """`parse --json` prints one object per event with the DESIGN.md keys and real values."""
    code, out, _ = _run("parse", str(FIXTURES / "hf_trainer_crash.log"), "--json")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert all(r.keys() >= PARSE_KEYS for r in rows)
    saves = [r for r in rows if r["kind"] == "checkpoint_start"]
    assert [(r["step"], r["line"], r["time"]) for r in saves] == [
        (25, 28, "2026-11-29T22:11:38.483000+00:00"),
        (50, 39, "2026-11-29T22:11:42.640000+00:00"),
    ]
    [failure] = [r for r in rows if r["kind"] == "failure"]
    assert failure["failure_class"] == "cuda_illegal_memory_access"


def test_interval_calculator_json() -> None:
    """`interval` gives Young sqrt(2MC) and Daly's eq. 37 for durations written with units, and
    the waste of Daly's exponential model, 1 − T/(M·(e^((T+C)/M) − 1)), with no warning."""
    code, out, _ = _run("interval", "--mtbf", "1d", "--cost", "5m", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["young_interval_s"] == pytest.approx(7200.0)
    assert data["daly_interval_s"] == pytest.approx(7001.389, abs=1e-3)
    assert data["waste_fraction_young"] == pytest.approx(
        1 - 7200 / (86400 * math.expm1(7500 / 86400))
    )
    assert data["waste_fraction_daly"] <= data["waste_fraction_young"]
    assert data["warnings"] == []


def test_interval_calculator_warns_when_the_cost_nears_the_mtbf() -> None:
    """`interval --mtbf 1h --cost 2h` prints a warning (and lists it in --json), and its waste
    fractions stay below 100%."""
    code, out, _ = _run("interval", "--mtbf", "1h", "--cost", "2h")
    assert code == 0
    assert "Warning: checkpoint cost is 2x the MTBF" in out
    assert "250" not in out
    code, out, _ = _run("interval", "--mtbf", "1h", "--cost", "2h", "--json")
    data = json.loads(out)
    [warning] = data["warnings"]
    assert "nearly pointless" in warning
    assert 0.9 < data["waste_fraction_daly"] < 1.0


def test_interval_refuses_a_two_tier_option_without_the_tiers_costs() -> None:
    """`interval --mtbf 6h --cost 4m --recoverable-fraction 0.75` exits 2 naming the option
    (it was ignored: one tier's answer printed as if the split were used)."""
    code, out, err = _run(
        "interval", "--mtbf", "6h", "--cost", "4m", "--recoverable-fraction", "0.75"
    )
    assert (code, out) == (2, "")
    assert err == (
        "ckpt-advisor: --recoverable-fraction: two-tier option(s), used with --memory-cost "
        "and --persistent-cost\n"
    )


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("interval", "--mtbf", "soon", "--cost", "5m"), 2, "not a duration: 'soon'"),
        (("parse", "/nonexistent/train.log"), 1, "/nonexistent/train.log: No such file"),
        (("parse", "--format", "nope", str(FIXTURES / "hf_trainer_crash.log")), 2, "nope"),
        (("estimates", "--db", "/nonexistent/s.db"), 1, "/nonexistent/s.db: no database here"),
        (("check-config", "--config", "/nonexistent/c.toml"), 2, "cannot read config"),
    ],
)
def test_bad_input_exits_nonzero_with_a_message_naming_it(
    args: tuple[str, ...], code: int, message: str
) -> None:
    """Bad input exits non-zero and the message names the bad value, file or key."""
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == code
    assert message in result.stderr + result.stdout


POINT_AT_STORE = (
    "has the daemon or ingest run? To read the daemon's store, give its config (--config "
    "FILE), or --db PATH, or set $CKPT_ADVISOR_DB=PATH\n"
)


def test_a_missing_store_is_named_with_what_named_it_and_how_to_name_another(
    tmp_path: Path,
) -> None:
    """``status``, ``estimates``, ``plot`` and ``silence`` where no store is: the error names
    the file, what it came from (the default, ``$CKPT_ADVISOR_DB``, the config's ``[store]
    path`` or one it lacks, ``--db``) and the three ways to point at the daemon's store."""
    home = tmp_path / "home"
    default = home / ".local" / "state" / "ckpt-advisor" / "ckpt-advisor.db"
    (tmp_path / "set.toml").write_text(f'[store]\npath = "{tmp_path / "d.db"}"\n')
    (tmp_path / "unset.toml").write_text('[agent]\nname = "a"\n')
    bare = {"HOME": str(home), "XDG_STATE_HOME": None, "STATE_DIRECTORY": None}
    cases = [
        (["status"], {}, f"{default}: no database here (the default: no --db or --config, "
         "no $CKPT_ADVISOR_DB)"),
        (["plot", "--job", "j", "-o", "p.png"], {}, f"{default}: no database here"),
        (["silence", "--job", "j", "--for", "24h"], {}, f"{default}: no database here"),
        (["estimates"], {"CKPT_ADVISOR_DB": "/nowhere/e.db"},
         "/nowhere/e.db: no database here (from $CKPT_ADVISOR_DB: no --db or --config)"),
        (["estimates", "--config", str(tmp_path / "set.toml")], {},
         f"{tmp_path / 'd.db'}: no database here (the [store] path of {tmp_path / 'set.toml'})"),
        (["estimates", "--config", str(tmp_path / "unset.toml")], {},
         f"{default}: no database here (the default: {tmp_path / 'unset.toml'} sets no "
         "[store] path, no $CKPT_ADVISOR_DB)"),
        (["events", "--db", "/nowhere/s.db"], {}, "/nowhere/s.db: no database here (from --db)"),
    ]  # fmt: skip
    for args, env, named in cases:
        result = CliRunner(env={"CKPT_ADVISOR_DB": None, **bare, **env}).invoke(main, args)
        assert (result.exit_code, result.stdout) == (1, ""), args
        assert result.stderr.startswith(f"ckpt-advisor: {named}"), args
        assert result.stderr.endswith(POINT_AT_STORE), args


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("parse", "--tz", "Nowhere/X", "f.log"), "unknown time zone 'Nowhere/X'"),
        (("ingest", "--job", " ", "--db", "x.db", "f.log"), "'--job': must not be empty"),
        (("events", "--kind", "bogus"), "'bogus' is not one of 'checkpoint_start'"),
        (("events", "--limit", "-1"), "-1 is not in the range 1<=x"),
        (("demo", "--days", "0"), "0 is not in the range 1<=x<=365"),
        (("parse", "--format", "megatron-lm", "f.log"), "unknown format 'megatron-lm'; known:"),
    ],
)
def test_bad_options_are_usage_errors_naming_the_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], message: str
) -> None:
    """Bad option values exit 2 with click's usage error naming the option, never a traceback."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f.log").write_text("x\n")
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_parse_reports_records_it_could_not_read(tmp_path: Path) -> None:
    """Bad timing records are not dropped silently: parse counts them on stderr with reasons."""
    timing = tmp_path / "t.jsonl"
    good = '{"step": 5, "start": "2026-11-01T00:00:00Z", "end": "2026-11-01T00:01:00Z"}'
    timing.write_text(f"{good}\nnot json\n" + '{"step": 6, "end": 1, "duration_s": -3}\n')
    code, out, err = _run("parse", str(timing), "--json")
    assert code == 0
    assert len(out.splitlines()) == 1
    assert f"{timing}: 2 line(s) could not be read:" in err
    assert f"{timing}:2: " in err and f"{timing}:3: " in err


def test_ingest_counts_records_it_could_not_read(tmp_path: Path) -> None:
    """ingest stores the good rows of a timing CSV and says how many rows it could not read,
    pointing at ``parse`` for the lines and reasons."""
    timing = tmp_path / "t.csv"
    timing.write_text(
        "step,start,end\n100,2026-01-01T00:00:00Z,2026-01-01T00:01:00Z\n"
        "200,bad,2026-01-01T00:02:00Z\n300\n"
    )
    code, out, err = _run("ingest", str(timing), "--job", "t", "--db", str(tmp_path / "s.db"))
    assert code == 0
    assert "t: 4 line(s) read, 1 event(s) stored" in out
    assert "t: 2 record(s) looked like data but could not be read; `ckpt-advisor parse" in err


def test_check_config_refuses_a_store_it_cannot_create(tmp_path: Path) -> None:
    """check-config fails (exit 2) when the store cannot be created there, naming the key, and
    warns when no job is configured."""
    config = tmp_path / "c.toml"
    config.write_text('[store]\npath = "/proc/ckpt-advisor-test/s.db"\n')
    result = CliRunner().invoke(main, ["check-config", "--config", str(config)])
    assert result.exit_code == 2
    assert f"{config}: store.path: cannot create /proc/ckpt-advisor-test/s.db" in result.stderr
    config.write_text(f'[store]\npath = "{tmp_path}/s.db"\n')
    result = CliRunner().invoke(main, ["check-config", "--config", str(config)])
    assert result.exit_code == 0
    assert "no [[jobs]]" in result.stderr
    assert f"store: {tmp_path}/s.db (created at the daemon's first start)\n" in result.stdout


def test_check_config_creates_nothing(tmp_path: Path) -> None:
    """check-config of a store in directories that do not exist yet says they will be made,
    and makes none of them; under a file, the store cannot be created (exit 2)."""
    config = tmp_path / "c.toml"
    config.write_text(f'[store]\npath = "{tmp_path}/state/sub/s.db"\n')
    result = CliRunner().invoke(main, ["check-config", "--config", str(config)])
    assert result.exit_code == 0, result.stderr
    assert f"(created with its directory {tmp_path}/state/sub at the daemon's first start)" in (
        result.stdout
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml"]
    config.write_text(f'[store]\npath = "{config}/sub/s.db"\n')
    result = CliRunner().invoke(main, ["check-config", "--config", str(config)])
    assert result.exit_code == 2
    assert f"cannot create {config}/sub/s.db: {config} is not a directory" in result.stderr


def test_check_config_connects_to_a_store_url(tmp_path: Path, pg_url: str) -> None:
    """check-config with ``[store] url`` connects to the server: an empty database is fine (the
    daemon makes its tables), a migrated one shows its schema version, a wrong password exits 2
    and a server that is not there exits 1, each naming the URL and never the password."""
    from tests.pg import ROLE_PASSWORD

    config = tmp_path / "c.toml"
    config.write_text(f'[store]\nurl = "{pg_url}"\n')
    env = {"CKPT_ADVISOR_DB_PASSWORD": ROLE_PASSWORD}
    runner = CliRunner()
    result = runner.invoke(main, ["check-config", "--config", str(config)], env=env)
    assert result.exit_code == 0, result.output
    assert f"store: {pg_url} (no ckpt-advisor tables yet: `ckpt-advisor migrate`" in result.stdout
    assert runner.invoke(main, ["migrate", "--config", str(config)], env=env).exit_code == 0
    result = runner.invoke(main, ["check-config", "--config", str(config)], env=env)
    assert f"store: {pg_url} (schema version {SCHEMA_VERSION})" in result.stdout
    wrong = runner.invoke(
        main, ["check-config", "--config", str(config)], env={"CKPT_ADVISOR_DB_PASSWORD": "no"}
    )
    assert wrong.exit_code == 2
    assert f"store.url: {pg_url}: cannot connect" in wrong.stderr
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    away = re.sub(r":\d+/", f":{port}/", pg_url)
    config.write_text(f'[store]\nurl = "{away}"\n')
    result = runner.invoke(main, ["check-config", "--config", str(config)], env=env)
    assert result.exit_code == 1
    assert f"store.url: {away}: cannot connect" in result.stderr
    assert ROLE_PASSWORD not in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("simulate", "--mtbf", "1s", "--cost", "6h"), "is not below M"),
        (("simulate", "--mtbf", "60s", "--cost", "1s", "--days", "3650"), "simulated failures"),
        (("simulate", "--mtbf", "6h", "--cost", "4m", "--interval", "0"), "--interval must be"),
        (("simulate", "--mtbf", "6h", "--cost", "4m", "--shape", "0.01"), "--shape must be"),
    ],
)
def test_simulate_refuses_runs_that_would_swamp_a_head_node(
    args: tuple[str, ...], message: str
) -> None:
    """simulate refuses C >= M, runs of millions of failures, zero intervals and extreme Weibull
    shapes with exit 2 and a reason, instead of eating gigabytes or hanging."""
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 2
    assert message in result.stderr


def test_events_limit_beyond_sqlite_integers_is_a_usage_error(tmp_path: Path) -> None:
    """A --limit larger than SQLite can hold is refused as a usage error, not an OverflowError."""
    result = CliRunner().invoke(main, ["events", "--db", str(tmp_path / "s.db"), "--limit", "1e30"])
    assert result.exit_code == 2
    huge = CliRunner().invoke(main, ["events", "--limit", str(10**25)])
    assert huge.exit_code == 2
    assert "Traceback" not in huge.stderr


def test_events_limit_gives_the_newest_events_oldest_first(tmp_path: Path) -> None:
    """events --limit N gives the newest N stored events (the last N of the whole listing, as
    journalctl -n and tail do), still printed oldest first, in the text and --json alike; with
    --kind, the newest N of that kind."""
    db = str(tmp_path / "s.db")
    for name in ("hf_trainer_crash.log", "hf_trainer_resume.log"):
        assert _run("ingest", str(FIXTURES / name), "--job", "hf", "--db", db)[0] == 0
    code, out, _ = _run("events", "--db", db, "--json")
    every = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(every) > 3
    assert [e["time"] for e in every] == sorted(e["time"] for e in every)
    newest = [
        json.loads(line)
        for line in _run("events", "--db", db, "--limit", "3", "--json")[1].splitlines()
    ]
    assert newest == every[-3:]
    assert newest[-1]["source"].endswith("hf_trainer_resume.log")
    saves = [e for e in every if e["kind"] == "checkpoint_start"]
    out = _run("events", "--db", db, "--kind", "checkpoint_start", "--limit", "2", "--json")[1]
    assert [json.loads(line) for line in out.splitlines()] == saves[-2:]
    table = _run("events", "--db", db, "--limit", "3")[1]
    assert table.startswith("3 event(s)")
    shown = [table.index(f"{Path(e['source']).name}:{e['line']} ") for e in newest]
    assert shown == sorted(shown)


def test_ingest_says_it_created_a_store_and_its_directories(tmp_path: Path) -> None:
    """ingest --db in directories that do not exist creates them and the store, as the
    daemon's first start does for its [store] path, and says so on stderr before it reads (a
    mistyped path is seen at once), the summary alone on stdout; a store that exists is not
    announced again, and a new file in an existing directory is announced as created."""
    db = tmp_path / "a" / "b" / "x.db"
    log = str(FIXTURES / "hf_trainer_crash.log")
    code, out, err = _run("ingest", log, "--job", "hf", "--db", str(db))
    assert code == 0 and db.is_file() and out.startswith("hf: 66 line(s) read")
    assert err == f"ckpt-advisor: new store {db}: created with its directory {db.parent}\n"
    code, _, err = _run("ingest", log, "--job", "hf", "--db", str(db))
    assert code == 0 and err == ""
    other = db.parent / "y.db"
    err = _run("ingest", log, "--job", "hf", "--db", str(other))[2]
    assert err == f"ckpt-advisor: new store {other}: created\n"


def _on_a_terminal(cmd: list[str]) -> bytes:
    """What ``cmd`` writes to its stderr, a pseudo-terminal (it must exit 0)."""
    leader, follower = pty.openpty()
    with subprocess.Popen(cmd, stderr=follower) as proc:
        os.close(follower)
        drawn = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            drawn += chunk
    os.close(leader)
    assert proc.returncode == 0
    return drawn


def test_ingest_draws_a_progress_bar_only_on_a_terminal(tmp_path: Path) -> None:
    """With stderr on a pseudo-terminal ``ingest`` of 4 MB draws rich's ``ingesting`` bar, and
    of 10 kB none (over before a bar is seen: no rich import at start-up); with stderr on a
    pipe it writes only its summary line (and on stderr only that it made a new store)."""
    log = FIXTURES / "hf_trainer_crash.log"
    big = tmp_path / "big.log"  # long enough to be read for a few of the bar's refreshes
    big.write_bytes(log.read_bytes() * 400)
    cmd = [sys.executable, "-m", "ckpt_advisor.agent", "ingest", "--job", "hf", "--db"]
    drawn = _on_a_terminal([*cmd, str(tmp_path / "a.db"), str(big)])
    assert b"ingesting" in drawn and b"\x1b[" in drawn
    assert b"ingesting" not in _on_a_terminal([*cmd, str(tmp_path / "c.db"), str(log)])
    piped = subprocess.run(
        [*cmd, str(tmp_path / "b.db"), str(log)], capture_output=True, check=True
    )
    assert piped.stdout.decode().splitlines() == [  # the result on stdout, nothing on stderr
        "hf: 66 line(s) read, 10 event(s) stored from 1 file(s); 2 checkpoint(s), "
        "1 failure(s), status insufficient_data"
    ]
    assert piped.stderr.decode() == f"ckpt-advisor: new store {tmp_path / 'b.db'}: created\n"


def test_ingest_into_a_store_that_refuses_writes_fails_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store that fails a write mid-ingest (a file this user may read but not write: SQLite's
    "attempt to write a readonly database") ends ``ingest`` with exit 1 and the store's message,
    not a traceback; the lock is released for the next run."""
    from ckpt_advisor.agent.store import StoreError
    from ckpt_advisor.agent.store.sqlite.writer import SqliteStore

    db = tmp_path / "s.db"

    def refuse(self: SqliteStore, *_args: object, **_kwargs: object) -> None:
        raise StoreError(f"{self.path}: write failed: attempt to write a readonly database")

    monkeypatch.setattr(SqliteStore, "commit_read", refuse)
    result = CliRunner().invoke(
        main, ["ingest", str(FIXTURES / "hf_trainer_crash.log"), "--job", "hf", "--db", str(db)]
    )
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert f"{db}: write failed: attempt to write a readonly database" in result.stderr
    monkeypatch.undo()
    code, _, err = _run(
        "ingest", str(FIXTURES / "hf_trainer_crash.log"), "--job", "hf", "--db", str(db)
    )
    assert code == 0, err


def test_check_config_warns_of_a_file_two_jobs_match(tmp_path: Path) -> None:
    """A file matched by the globs of two jobs is named with both jobs and the one that reads
    it (the first in the config); a file one job matches gives no such warning."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "train.log").write_text("hello\n")
    (logs / "other.txt").write_text("hello\n")
    config = tmp_path / "c.toml"
    config.write_text(
        f'[store]\npath = "{tmp_path}/s.db"\n'
        f'[[jobs]]\nname = "a"\nlogs = ["{logs}/*.log"]\n'
        f'[[jobs]]\nname = "b"\nlogs = ["{logs}/*"]\n'
    )
    result = CliRunner().invoke(main, ["check-config", "--config", str(config)])
    assert result.exit_code == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if "matched by" in line] == [
        f"ckpt-advisor: warning: {logs}/train.log: matched by the globs of jobs a and b: it is "
        "read once, as job a (the first in the config); narrow the other globs"
    ]


def test_the_demo_keeps_its_files_in_a_relative_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``demo --dir demo1`` (relative, as a new user types it) runs the replay there: its
    config's globs are made absolute (a relative glob is refused by the config, which made the
    demo end in a traceback), the store is under ``demo1/state`` and the commands it suggests
    name its absolute path; two days replayed in 2 s still measure C from the timing file."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["demo", "--dir", "demo1", "--days", "2", "--seconds", "2"])
    assert result.exit_code == 0, result.output
    store = tmp_path / "demo1" / "state" / "ckpt-advisor.db"
    assert store.is_file()
    assert f"ckpt-advisor estimates --db {store}" in result.output
    [cost] = [line for line in result.output.splitlines() if line.startswith("checkpoint cost C")]
    assert cost.split()[-2:] == ["4m", "00s"]


def test_check_config_warns_of_a_job_reading_nothing_a_glob_given_twice_and_no_channel(
    tmp_path: Path,
) -> None:
    """A job with neither logs nor timings, a glob given as both, and a Slack token with no
    channel each get a warning (the config is valid: exit 0); recommendations then go to the
    daemon log, as check-config says. With a channel, no Slack warning."""
    glob = f"{tmp_path}/run/*.log"
    config = tmp_path / "c.toml"
    body = (
        f'[store]\npath = "{tmp_path}/s.db"\n'
        '[[jobs]]\nname = "empty"\n'
        f'[[jobs]]\nname = "twice"\nlogs = ["{glob}"]\ntimings = ["{glob}"]\n'
    )
    config.write_text(body)
    env = {"SLACK_BOT_TOKEN": "xoxb-test"}
    result = CliRunner().invoke(main, ["check-config", "--config", str(config)], env=env)
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines() == [
        "ckpt-advisor: warning: job empty: no logs and no timings: the daemon reads nothing for it",
        f"ckpt-advisor: warning: job twice: {glob} is given as both logs and timings: its "
        "files are read once, as logs (format auto)",
        "ckpt-advisor: warning: a Slack token is set ($SLACK_BOT_TOKEN) but slack.channel is "
        "not: recommendations go to the daemon log",
    ]
    assert "recommendations go to the daemon log\n" in result.stdout
    config.write_text(body + '[slack]\nchannel = "#training-alerts"\n')
    result = CliRunner().invoke(main, ["check-config", "--config", str(config)], env=env)
    assert "slack.channel" not in result.stderr
    assert "recommendations go to Slack #training-alerts\n" in result.stdout
