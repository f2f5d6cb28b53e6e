"""End to end: the daemon as a subprocess, real files, real SQLite, real slack-sdk to a loopback
Slack. A training log goes in; one Slack recommendation comes out."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ckpt_advisor.agent.synth import simulate
from ckpt_advisor.rules.interval import daly_interval_s
from tests.agent.fake_slack import FakeSlack
from tests.agent.helpers import TOKEN_ENV
from tests.agent.processes import until, wait_started

FIXTURES = Path(__file__).parents[2] / "agent" / "fixtures" / "real"


def _write_config(tmp: Path, slack: FakeSlack | None, *, estimate_every: str = "1s") -> Path:
    watched = tmp / "runs"
    watched.mkdir(exist_ok=True)
    slack_section = (
        f'[slack]\nchannel = "#training-alerts"\ntoken_env = "{TOKEN_ENV}"\n'
        f'base_url = "{slack.base_url}"\ntimeout = "5s"\n'
        if slack
        else ""
    )
    config = tmp / "config.toml"
    config.write_text(
        f'[store]\npath = "{tmp / "state" / "ckpt.db"}"\n\n'
        f'[schedule]\nestimate_every = "{estimate_every}"\nafter_failure = "0.2s"\n'
        f'poll_every = "0.2s"\n\n'
        f'[[jobs]]\nname = "llama-8b"\nlogs = ["{watched}/**/*.log"]\n'
        f'timings = ["{watched}/**/ckpt_timings.jsonl"]\ngpus = 64\n\n' + slack_section
    )
    return config


@pytest.fixture
def daemon_env(fake_slack: FakeSlack) -> dict[str, str]:
    env = dict(os.environ)
    env[TOKEN_ENV] = fake_slack.token
    return env


def start_daemon(config: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ckpt_advisor.agent", "run", "--config", str(config)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def stop_daemon() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=20)


def _estimates(db: Path) -> list[dict[str, object]]:
    out = subprocess.run(
        [sys.executable, "-m", "ckpt_advisor.agent", "estimates", "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_week_of_training_posts_one_recommendation_near_daly(
    tmp_path: Path,
    fake_slack: FakeSlack,
    daemon_env: dict[str, str],
    stop_daemon: list[subprocess.Popen[str]],
) -> None:
    """A week of log + timing file copied into a watched dir yields exactly one Slack message
    (its detail and plot as two replies in its thread) whose recommended interval is within 15%
    of the Daly interval of the true M and C, and whose current interval is the compute time
    between saves (1200 steps of 6 s = 7200 s, C excluded)."""
    mtbf_s, cost_s = 6 * 3600.0, 240.0
    job = simulate(mtbf_s=mtbf_s, cost_s=cost_s, interval_steps=1200, step_time_s=6.0, seed=3)
    staging = tmp_path / "staging"
    staging.mkdir()
    (staging / "train.log").write_text("".join(text for _, text in job.log))
    (staging / "ckpt_timings.jsonl").write_text("".join(text for _, text in job.timings))
    config = _write_config(tmp_path, fake_slack)
    proc = start_daemon(config, daemon_env)
    stop_daemon.append(proc)
    time.sleep(1.0)
    shutil.copytree(staging, tmp_path / "runs" / "job-1234")

    request = fake_slack.wait_for(1, timeout_s=30)[0]  # its replies may follow at once
    assert request.path == "/api/chat.postMessage"
    assert request.headers["authorization"] == f"Bearer {fake_slack.token}"
    body = request.body
    assert body["channel"] == "#training-alerts"
    assert "llama-8b" in body["text"]
    assert "save_steps=" in json.dumps(body["blocks"])

    [est] = _estimates(tmp_path / "state" / "ckpt.db")
    truth = daly_interval_s(mtbf_s, cost_s)
    assert est["status"] == "drift"
    assert est["n_failures"] == job.n_interruptions
    assert est["n_checkpoints"] == job.n_saves
    assert abs(float(est["recommended_interval_s"]) / truth - 1) < 0.15  # type: ignore[arg-type]
    assert abs(float(est["checkpoint_cost_s"]) / cost_s - 1) < 0.01  # type: ignore[arg-type]
    assert est["current_interval_s"] == pytest.approx(job.interval_s, rel=0.005)
    assert job.interval_s == 7200.0
    assert est["current_interval_steps"] == 1200

    deadline = time.monotonic() + 30  # the replies follow once the plot is drawn
    while len(fake_slack.posted) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(3.0)  # several more estimate cycles: the same episode is not posted again
    top = [m for m in fake_slack.posted if "thread_ts" not in m]
    assert len(top) == 1
    replies = [m for m in fake_slack.posted if m.get("thread_ts") == top[0]["ts"]]
    assert len(replies) == 2  # the detail and the waste-curve plot, in the message's thread
    assert [len(m.get("files") or []) for m in replies] == [0, 1]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0


def test_live_lines_of_real_hf_runs_are_stored_once(
    tmp_path: Path,
    daemon_env: dict[str, str],
    stop_daemon: list[subprocess.Popen[str]],
    fake_slack: FakeSlack,
) -> None:
    """The captured HF crash and resume runs, appended line by line to a watched file while the
    daemon runs, give 5 checkpoints and 1 failure; a restart of the daemon repeats nothing."""
    config = _write_config(tmp_path, fake_slack)
    proc = start_daemon(config, daemon_env)
    stop_daemon.append(proc)
    log = tmp_path / "runs" / "train.log"
    with log.open("ab") as fh:
        for name in ("hf_trainer_crash.log", "hf_trainer_resume.log"):
            for line in (FIXTURES / name).read_bytes().splitlines(keepends=True):
                fh.write(line)
                fh.flush()
                time.sleep(0.005)
    db = tmp_path / "state" / "ckpt.db"
    deadline = time.monotonic() + 20
    est: dict[str, object] = {}
    while time.monotonic() < deadline:
        rows = _estimates(db) if db.exists() else []
        if rows and rows[0]["n_checkpoints"] == 5:
            est = rows[0]
            break
        time.sleep(0.3)
    assert est.get("n_checkpoints") == 5
    assert est["n_failures"] == 1
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    events_before = subprocess.run(
        [sys.executable, "-m", "ckpt_advisor.agent", "events", "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()

    proc2 = start_daemon(config, daemon_env)
    stop_daemon.append(proc2)
    wait_started(proc2)
    time.sleep(1.0)
    proc2.send_signal(signal.SIGTERM)
    assert proc2.wait(timeout=20) == 0
    events_after = subprocess.run(
        [sys.executable, "-m", "ckpt_advisor.agent", "events", "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert events_after == events_before
    assert fake_slack.messages == []  # one failure is not enough evidence to advise


def test_bad_config_exits_2_naming_key(tmp_path: Path) -> None:
    """`run` with an invalid config exits with code 2 before starting, naming file and key."""
    config = tmp_path / "c.toml"
    config.write_text('[schedule]\nestimate_evry = "5m"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "ckpt_advisor.agent", "run", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert f"{config}: schedule.estimate_evry: unknown key" in proc.stderr


def test_commands_the_daemon_prints_carry_its_config(tmp_path: Path) -> None:
    """The daemon started as ``run --config config.toml`` from its config's folder, with a
    store elsewhere and a token without files:write: the message's silence hint and the log's
    warning about the plot name the config by its absolute path, and the hint, pasted into a
    shell elsewhere (no store at the default path), silences the job."""
    job = simulate(mtbf_s=6 * 3600.0, cost_s=240.0, interval_steps=1200, step_time_s=6.0, seed=3)
    staging = tmp_path / "staging"
    staging.mkdir()
    (staging / "train.log").write_text("".join(text for _, text in job.log))
    (staging / "ckpt_timings.jsonl").write_text("".join(text for _, text in job.timings))
    env = {k: v for k, v in os.environ.items() if k not in ("CKPT_ADVISOR_DB", "STATE_DIRECTORY")}
    env |= {"HOME": str(tmp_path / "home"), "XDG_STATE_HOME": ""}
    with FakeSlack(scopes=("chat:write", "channels:history")) as slack:
        config = _write_config(tmp_path, slack)
        env[TOKEN_ENV] = slack.token
        log = tmp_path / "daemon.log"
        with log.open("w") as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ckpt_advisor.agent", "run", "--config", config.name],
                cwd=config.parent,
                env=env,
                stderr=stderr,
                text=True,
            )
            try:
                assert until(lambda: "ckpt-advisor starting" in log.read_text(), 60.0)
                shutil.copytree(staging, tmp_path / "runs" / "job-1234")
                assert until(lambda: "files:write" in log.read_text(), 60.0)
            finally:
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(timeout=20) == 0
        [top] = [
            r.body
            for r in slack.requests
            if r.path.endswith("/chat.postMessage") and "thread_ts" not in r.body
        ]
    hint = f"ckpt-advisor silence --job llama-8b --for 24h --config {config}"
    assert top["blocks"][-1]["elements"][0]["text"].endswith(f"silence: `{hint}`")
    assert top["text"].endswith(f"silence: {hint}")
    assert f"(`ckpt-advisor slack-test --config {config}` lists the scopes)" in log.read_text()
    pasted = subprocess.run(
        [sys.executable, "-m", "ckpt_advisor.agent", *shlex.split(hint)[1:]],
        cwd=tmp_path / "home",
        env=env,
        capture_output=True,
        text=True,
    )
    assert (pasted.returncode, pasted.stdout.split(" until ")[0]) == (0, "llama-8b: silenced")
