"""Faults of fleet mode, each with a real PostgreSQL server and real `ckpt-advisor run`
processes (docs/RELIABILITY.md, scenario 31): the server away at start or mid-read, an agent
SIGKILLed mid-commit, a wrong password and a missing grant."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

from tests import pg
from tests.agent.fleet import Agent, agent_config, agent_env, cli, stored_lines, timing_records
from tests.agent.notify_listener import NotifyListener
from tests.agent.processes import until
from tests.pg import PgServer


def _exactly_once(url: str, job: str, n: int) -> bool:
    lines = stored_lines(url, job)
    return sorted(line for _, line, _ in lines) == list(range(1, n + 1))


def test_server_away_at_start_then_every_line_stored_once(
    tmp_path: Path, pg_server: PgServer, pg_url: str
) -> None:
    """An agent started while the server is down runs, logs the outage once, backs off, says
    unhealthy in `status`; once the server is up every line (before and during) is stored
    exactly once."""
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "t.jsonl").write_text(timing_records(1, 50))
    config = agent_config(tmp_path, "a", pg_url, {"j": runs})
    assert cli("migrate", "--config", str(config)).returncode == 0
    pg_server.stop()
    agent = Agent(config, agent_env())
    try:
        agent.wait_log("retrying with backoff")
        with (runs / "t.jsonl").open("a") as fh:
            fh.write(timing_records(51, 25))
        assert until(lambda: "store unreachable" in cli("status", "--config", str(config)).stdout)
        status = cli("status", "--config", str(config), "--json")
        assert status.returncode == 1
        time.sleep(3)  # several retries
        pg_server.start()
        assert until(lambda: _exactly_once(pg_url, "j", 75), timeout_s=60)
        assert agent.stderr.count("retrying with backoff") == 1
        agent.wait_log("store writable again after")
        assert until(lambda: cli("status", "--config", str(config)).returncode == 0, 30)
    finally:
        assert agent.stop() == 0
    assert max(stored_lines(pg_url, "j").values()) == 1


def test_server_gone_mid_read_loses_and_doubles_nothing(
    tmp_path: Path, pg_server: PgServer, pg_url: str
) -> None:
    """The server crashes while the agent reads: the watchdog pings stop and systemd's status
    says why, lines appended meanwhile wait in the file (offsets unchanged), and after it comes
    back they are stored exactly once and the pings resume."""
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "t.jsonl").write_text(timing_records(1, 20))
    config = agent_config(tmp_path, "a", pg_url, {"j": runs})
    with NotifyListener() as notify:
        env = agent_env(NOTIFY_SOCKET=notify.address, WATCHDOG_USEC="400000")
        agent = Agent(config, env)
        try:
            assert until(lambda: _exactly_once(pg_url, "j", 20), timeout_s=60)
            notify.wait_for("WATCHDOG", n=2)
            pg_server.stop("immediate")
            with (runs / "t.jsonl").open("a") as fh:
                for i in range(21, 61):
                    fh.write(timing_records(i, 1))
                    fh.flush()
                    time.sleep(0.02)
            agent.wait_log("retrying with backoff")
            notify.wait_for("STATUS", contains="unhealthy: store unreachable")
            pings = notify.count("WATCHDOG")
            time.sleep(2.0)
            assert notify.count("WATCHDOG") == pings  # withheld while the store is away
            pg_server.start()
            assert until(lambda: _exactly_once(pg_url, "j", 60), timeout_s=60)
            notify.wait_for("WATCHDOG", n=pings + 1)
            assert agent.stderr.count("retrying with backoff") == 1
        finally:
            assert agent.stop() == 0


def test_agent_sigkilled_mid_commit_loses_and_doubles_nothing(tmp_path: Path, pg_url: str) -> None:
    """SIGKILL at random moments while a large backlog is read into PostgreSQL (commits every
    16 MiB) and a writer keeps appending: after a restart every line is stored exactly once."""
    runs = tmp_path / "runs"
    runs.mkdir()
    backlog, appended = 220_000, 2_000
    (runs / "t.jsonl").write_text(timing_records(1, backlog))
    config = agent_config(tmp_path, "a", pg_url, {"j": runs})
    rng = random.Random(7)

    def write() -> None:
        with (runs / "t.jsonl").open("a") as fh:
            for i in range(backlog + 1, backlog + appended + 1, 20):
                fh.write(timing_records(i, 20))
                fh.flush()
                time.sleep(0.01)

    writer = threading.Thread(target=write)
    agent = Agent(config, agent_env())
    writer.start()
    kills = 0
    for _ in range(3):
        agent.wait_log("ckpt-advisor starting")
        time.sleep(rng.uniform(0.3, 2.0))
        if agent.proc.poll() is None:
            agent.kill()
            kills += 1
        (config.parent / "agent.stderr").write_text("")
        agent.start()
    writer.join()
    try:
        assert until(lambda: _exactly_once(pg_url, "j", backlog + appended), timeout_s=180)
    finally:
        assert agent.stop() == 0
    assert kills == 3


def test_wrong_password_exits_2_naming_the_url_not_the_password(
    tmp_path: Path, pg_url: str
) -> None:
    """A wrong password: exit 2 at start, one line naming the URL (no password) and the
    server's reason; no traceback, the password nowhere."""
    config = agent_config(tmp_path, "a", pg_url, {})
    out = cli("run", "--config", str(config), env=agent_env(**{pg.PASSWORD_ENV: "not-it-123"}))
    assert out.returncode == 2, out.stderr
    assert pg_url in out.stderr and "password authentication failed" in out.stderr
    assert "Traceback" not in out.stderr and "not-it-123" not in out.stderr


def test_missing_grant_exits_2_naming_the_missing_right(
    tmp_path: Path, pg_server: PgServer, pg_url: str
) -> None:
    """A role that may read but not write the store's tables: exit 2 at start naming the
    right it lacks and the GRANT that gives it."""
    config = agent_config(tmp_path, "owner", pg_url, {})
    assert cli("migrate", "--config", str(config)).returncode == 0
    database = pg_url.rsplit("/", 1)[1]
    pg_server.sql(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'looker') THEN "
        f"CREATE ROLE looker LOGIN PASSWORD '{pg.ROLE_PASSWORD}'; END IF; END $$"
    )
    pg_server.sql("GRANT SELECT ON ALL TABLES IN SCHEMA public TO looker", database)
    reader = agent_config(tmp_path, "looker", pg.PgServer.url(pg_server, database, "looker"), {})
    out = cli("run", "--config", str(reader))
    assert out.returncode == 2, out.stderr
    assert "role looker lacks INSERT on table files" in out.stderr
    assert "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES" in out.stderr
    assert "Traceback" not in out.stderr
    listed = cli("estimates", "--config", str(reader), "--json")  # reading is all it may do
    assert listed.returncode == 0 and json.loads(listed.stdout) == []
