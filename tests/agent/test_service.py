"""The daemon as systemd runs it: a real subprocess with a real ``$NOTIFY_SOCKET``, signals,
the Prometheus endpoint, ``status``, JSON logs, and ``slack-test`` against a loopback Slack."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ckpt_advisor.agent.store import open_reader
from ckpt_advisor.agent.synth import simulate
from ckpt_advisor.agent.units import parse_duration_s
from ckpt_advisor.rules.adoption import parse_advice
from tests.agent.fake_slack import FakeSlack
from tests.agent.notify_listener import NotifyListener
from tests.agent.processes import RunProcess as Daemon

ROOT = Path(__file__).parents[2]
FIXTURES = ROOT / "agent" / "fixtures" / "real"
UNIT = ROOT / "systemd" / "ckpt-advisor.service"
TOKEN_ENV = "CKPT_ADVISOR_TEST_TOKEN"


def _unit_seconds(key: str) -> float:
    match = re.search(rf"^{key}=(\S+)$", UNIT.read_text(), re.MULTILINE)
    assert match, key
    return parse_duration_s(match.group(1))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(
    tmp: Path,
    jobs: dict[str, str],
    *,
    extra: str = "",
    slack: FakeSlack | None = None,
    gpus: int | None = None,
) -> Path:
    """Write tmp/config.toml with one job per (name, glob) and return its path."""
    text = (
        f'[store]\npath = "{tmp / "state" / "ckpt.db"}"\n\n'
        '[schedule]\nestimate_every = "1s"\nafter_failure = "0.2s"\npoll_every = "0.2s"\n\n'
    )
    for name, pattern in jobs.items():
        text += f'[[jobs]]\nname = "{name}"\nlogs = ["{pattern}"]\n'
        text += f'timings = ["{Path(pattern).parent}/**/ckpt_timings.jsonl"]\n'
        text += f"gpus = {gpus}\n\n" if gpus else "\n"
    if slack is not None:
        text += (
            f'[slack]\nchannel = "#training-alerts"\ntoken_env = "{TOKEN_ENV}"\n'
            f'base_url = "{slack.base_url}"\ntimeout = "5s"\n\n'
        )
    config = tmp / "config.toml"
    config.write_text(text + extra)
    return config


@pytest.fixture
def notify() -> Iterator[NotifyListener]:
    with NotifyListener() as listener:
        yield listener


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    started: list[Daemon] = []
    yield started
    for d in started:
        d.stop()


def _env(notify: NotifyListener, *, watchdog_s: float = 0.4, **extra: str) -> dict[str, str]:
    env = dict(os.environ, NOTIFY_SOCKET=notify.address, WATCHDOG_USEC=str(int(watchdog_s * 1e6)))
    env.pop("WATCHDOG_PID", None)
    env.update(extra)
    return env


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ckpt_advisor.agent", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_ready_after_first_scan_watchdog_pings_and_stopping_on_sigterm(
    tmp_path: Path, notify: NotifyListener, daemons: list[Daemon]
) -> None:
    """READY=1 comes only once the logs already on disk are stored, WATCHDOG=1 pings follow,
    `status` is healthy while it runs; SIGTERM sends STOPPING=1, exits 0 within the unit's
    TimeoutStopSec, and `status` then exits 1, naming the file it followed."""
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy(FIXTURES / "hf_trainer_crash.log", runs / "train.log")
    config = _config(tmp_path, {"llama": f"{runs}/*.log"})
    daemon = Daemon(config, _env(notify))
    daemons.append(daemon)

    ready = notify.wait_for("READY")
    db = tmp_path / "state" / "ckpt.db"
    stored = open_reader(db).count_events("llama")
    assert stored > 0  # the first scan was committed before READY=1
    assert "1 job(s), 1 file(s)" in ready["STATUS"]
    notify.wait_for("WATCHDOG", n=3)
    assert all(m["WATCHDOG"] == "1" for m in notify.messages if "WATCHDOG" in m)

    healthy = _cli("status", "--db", str(db), "--json")
    assert healthy.returncode == 0, healthy.stdout
    report = json.loads(healthy.stdout)
    assert report["healthy"] is True
    assert report["daemon"]["pid"] == daemon.proc.pid
    assert report["daemon"]["files"][0]["path"] == str(runs / "train.log")
    assert report["daemon"]["files"][0]["lag_bytes"] == 0

    started = time.monotonic()
    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.proc.wait(timeout=60) == 0
    assert time.monotonic() - started < _unit_seconds("TimeoutStopSec")
    assert notify.messages[-1]["STOPPING"] == "1"
    stopped = _cli("status", "--db", str(db))
    assert stopped.returncode == 1
    assert "daemon stopped" in stopped.stdout
    assert "1 file(s) followed then" in stopped.stdout  # what it followed until it stopped
    files = json.loads(_cli("status", "--db", str(db), "--json").stdout)["daemon"]["files"]
    assert [(f["path"], f["lag_bytes"]) for f in files] == [(str(runs / "train.log"), 0)]


def test_sighup_rejects_a_bad_config_then_picks_up_a_new_job(
    tmp_path: Path, notify: NotifyListener, daemons: list[Daemon]
) -> None:
    """SIGHUP with a broken config logs the file and key and keeps running on the old config;
    SIGHUP with a new job and glob makes the daemon read that job's files."""
    first, second = tmp_path / "runs-a", tmp_path / "runs-b"
    first.mkdir()
    second.mkdir()
    config = _config(tmp_path, {"job-a": f"{first}/*.log"})
    daemon = Daemon(config, _env(notify))
    daemons.append(daemon)
    notify.wait_for("READY")

    good = config.read_text()
    config.write_text(good + '[metrics]\nlisten = "localhost:http"\n')
    daemon.proc.send_signal(signal.SIGHUP)
    daemon.wait_log("config reload rejected, keeping the running config")
    assert f"{config}: metrics.listen:" in daemon.stderr
    pings = notify.count("WATCHDOG")
    notify.wait_for("WATCHDOG", n=pings + 2)  # still alive and healthy
    assert daemon.proc.poll() is None

    _config(tmp_path, {"job-a": f"{first}/*.log", "job-b": f"{second}/*.log"})
    daemon.proc.send_signal(signal.SIGHUP)
    daemon.wait_log("config reloaded from")
    shutil.copy(FIXTURES / "hf_trainer_crash.log", second / "train.log")
    store = open_reader(tmp_path / "state" / "ckpt.db")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and store.count_events("job-b") == 0:
        time.sleep(0.1)
    assert store.count_events("job-b") > 0
    assert store.count_events("job-a") == 0
    assert daemon.stop() == 0


def test_metrics_endpoint_json_logs_and_no_token_in_logs(
    tmp_path: Path, notify: NotifyListener, daemons: list[Daemon], fake_slack: FakeSlack
) -> None:
    """While the daemon runs, /metrics answers in Prometheus text format with the per-job,
    per-file, tailer, notification and scheduler families, and /advice/JOB and the advice file
    hold the drifting job's recommendation; every log line is one JSON object with a level,
    and the Slack token appears in none."""
    job = simulate(mtbf_s=6 * 3600.0, cost_s=240.0, interval_steps=1200, step_time_s=6.0, seed=3)
    runs = tmp_path / "runs"
    (runs / "job-1").mkdir(parents=True)
    (runs / "job-1" / "train.log").write_text("".join(text for _, text in job.log))
    (runs / "job-1" / "ckpt_timings.jsonl").write_text("".join(text for _, text in job.timings))
    port = _free_port()
    config = _config(
        tmp_path,
        {"llama-8b": f"{runs}/**/*.log"},
        slack=fake_slack,
        gpus=64,
        extra=f'[metrics]\nlisten = "127.0.0.1:{port}"\n\n'
        f'[advice]\ndir = "{tmp_path / "advice"}"\nendpoint = true\n',
    )
    env = _env(notify, **{TOKEN_ENV: fake_slack.token})
    daemon = Daemon(config, env, "--log-format", "json")
    daemons.append(daemon)
    fake_slack.wait_for(1, timeout_s=30)
    notify.wait_for("WATCHDOG", n=2)

    def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            assert resp.headers["Content-Type"].startswith("text/plain")
            text = resp.read().decode()
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text)
            for s in fam.samples
        }

    # The message is sent by the delivery job, woken by the estimate run that queued it; the
    # per-job gauges are set when the estimate ends, the queue gauge when the delivery does.
    deadline = time.monotonic() + 20
    samples = scrape()
    while ("ckpt_advisor_drift", (("job", "llama-8b"),)) not in samples or samples.get(
        ("ckpt_advisor_notifications_queued", ())
    ):
        assert time.monotonic() < deadline, sorted(samples)
        time.sleep(0.1)
        samples = scrape()

    def value(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted(labels.items())))]

    j = {"job": "llama-8b"}
    c = value("ckpt_advisor_checkpoint_cost_seconds", **j)
    assert abs(c / 240.0 - 1) < 0.01
    m = value("ckpt_advisor_mtbf_seconds", **j)
    assert (
        value("ckpt_advisor_mtbf_bound_seconds", bound="lower", **j)
        < m
        < value("ckpt_advisor_mtbf_bound_seconds", bound="upper", **j)
    )
    assert value("ckpt_advisor_drift", **j) == 1.0
    assert value("ckpt_advisor_job_status", status="drift", **j) == 1.0
    assert value("ckpt_advisor_current_interval_seconds", **j) > value(
        "ckpt_advisor_recommended_interval_seconds", **j
    )
    current = value("ckpt_advisor_waste_fraction", interval="current", **j)
    best = value("ckpt_advisor_waste_fraction", interval="recommended", **j)
    assert value("ckpt_advisor_excess_gpu_hours_per_day", **j) == pytest.approx(
        (current - best) * 64 * 24
    )
    log_path = str(runs / "job-1" / "train.log")
    assert value("ckpt_advisor_file_lag_bytes", path=log_path, **j) == 0
    assert value("ckpt_advisor_file_last_read_timestamp_seconds", path=log_path, **j) > 0
    n_lines = sum(p.read_bytes().count(b"\n") for p in (runs / "job-1").iterdir())
    assert value("ckpt_advisor_lines_total") == n_lines
    # the message, its detail and its plot (both in its thread)
    assert value("ckpt_advisor_notifications_total", result="sent") == 3
    assert value("ckpt_advisor_notifications_queued") == 0
    assert value("ckpt_advisor_estimate_run_duration_seconds_count") >= 1
    assert ("ckpt_advisor_scheduler_misses_total", ()) in samples  # 1 s runs may overlap
    assert value("ckpt_advisor_healthy") == 1
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/advice/llama-8b", timeout=10) as resp:
        served = parse_advice(json.loads(resp.read()))
    written = parse_advice(json.loads((tmp_path / "advice" / "llama-8b.json").read_text()))
    for advice in (served, written):
        assert advice.status == "drift"
        assert advice.recommended_interval_s == pytest.approx(
            value("ckpt_advisor_recommended_interval_seconds", **j), rel=0.05
        )

    assert daemon.stop() == 0
    lines = daemon.stderr.splitlines()
    records = [json.loads(line) for line in lines]
    assert {r["level"] for r in records} <= {"debug", "info", "warning", "error", "critical"}
    assert any("metrics at http://127.0.0.1" in r["message"] for r in records)
    assert fake_slack.token not in daemon.stderr


def test_slack_test_posts_a_message(tmp_path: Path, fake_slack: FakeSlack) -> None:
    """`slack-test` posts one message to the configured channel with the configured token."""
    config = _config(tmp_path, {}, slack=fake_slack)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ckpt_advisor.agent",
            "slack-test",
            "--config",
            str(config),
            "--text",
            "a<b",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, **{TOKEN_ENV: fake_slack.token}),
    )
    assert out.returncode == 0, out.stderr
    assert "posted to #training-alerts" in out.stdout
    assert "token scopes: channels:history, chat:write, files:write" in out.stdout
    assert "missing scope" not in out.stdout
    request, scopes = fake_slack.wait_for(2)
    assert request.headers["authorization"] == f"Bearer {fake_slack.token}"
    assert request.body["channel"] == "#training-alerts"
    assert request.body["text"] == "a&lt;b"
    assert scopes.path == "/api/auth.test"


def test_slack_test_names_the_missing_upload_scope(tmp_path: Path) -> None:
    """A token without files:write still posts; `slack-test` says that scope is missing and
    that messages go out without the waste-curve plot."""
    with FakeSlack(scopes=("chat:write", "channels:history")) as slack:
        config = _config(tmp_path, {}, slack=slack)
        out = _run_env(
            ["slack-test", "--config", str(config)], dict(os.environ, **{TOKEN_ENV: slack.token})
        )
    assert out.returncode == 0, out.stderr
    assert (
        "missing scope files:write: messages go out without the waste-curve plot; add it under "
        "the Slack app's OAuth & Permissions and reinstall the app"
    ) in out.stdout


def test_slack_test_reports_a_rejected_token_without_printing_it(
    tmp_path: Path, fake_slack: FakeSlack
) -> None:
    """A rejected token makes `slack-test` exit 1 with Slack's error and a hint, not the token;
    with no token at all it exits 2 naming the variable."""
    config = _config(tmp_path, {}, slack=fake_slack)
    fake_slack.script(200, error="invalid_auth")
    env = dict(os.environ, **{TOKEN_ENV: fake_slack.token})
    out = _run_env(["slack-test", "--config", str(config)], env)
    assert out.returncode == 1
    assert "invalid_auth" in out.stderr
    assert fake_slack.token not in out.stderr + out.stdout
    env.pop(TOKEN_ENV)
    env.pop("CREDENTIALS_DIRECTORY", None)
    missing = _run_env(["slack-test", "--config", str(config)], env)
    assert missing.returncode == 2
    assert f"${TOKEN_ENV}" in missing.stderr


def _run_env(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ckpt_advisor.agent", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
