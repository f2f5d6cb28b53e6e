"""docs/RELIABILITY.md scenarios for the daemon: its threads in-process on real files, watchdog and
APScheduler, and as a subprocess killed, stopped and suspended."""

from __future__ import annotations

import errno
import itertools
import os
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ckpt_advisor.agent.app import build_daemon
from ckpt_advisor.agent.config import parse_config
from ckpt_advisor.agent.daemon import watcher as agent_watcher
from ckpt_advisor.agent.daemon.loop import Daemon
from ckpt_advisor.agent.notify.slack import SlackNotifier
from ckpt_advisor.agent.store import open_store
from ckpt_advisor.rules.model import AlertState
from tests.agent.fake_slack import FakeSlack
from tests.agent.helpers import TOKEN_ENV, daemon_config
from tests.agent.processes import start_daemon, until
from tests.agent.tail.helpers import record


def test_shared_filesystem_is_polled_not_watched(
    tmp_path: Path, running: Callable[[Daemon], threading.Thread]
) -> None:
    """Scenario 13: a watched directory that the mount table puts on NFS gets no inotify watch;
    lines written there arrive through the stat poll (a file new since the last discovery
    through the next one: every second here, 20 s by default, the tests' whole wait)."""
    table = tmp_path / "mounts"
    table.write_text(f"/dev/vda / ext4 rw 0 0\nfiler:/x {tmp_path / 'runs'} nfs4 rw 0 0\n")
    config = parse_config(daemon_config(tmp_path, discover_every="1s"))
    daemon = build_daemon(config, mount_table=str(table))
    running(daemon)
    (tmp_path / "runs" / "t.jsonl").write_text(record(1))
    assert until(lambda: daemon.store.count_events() == 1)
    assert daemon.watcher.observer is None


def test_inotify_limit_warns_once_and_polls(
    tmp_path: Path,
    running: Callable[[Daemon], threading.Thread],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Scenario 14: inotify refusing a watch (ENOSPC, the watch limit) gives one warning and
    the daemon keeps ingesting by polling (a new file found by the next discovery: every
    second here)."""

    class Exhausted(agent_watcher.Observer):  # type: ignore[misc,name-defined]
        def schedule(self, *args: Any, **kwargs: Any) -> Any:
            raise OSError(errno.ENOSPC, "inotify watch limit reached")

    monkeypatch.setattr(agent_watcher, "Observer", Exhausted)
    config = parse_config(daemon_config(tmp_path, discover_every="1s"))
    daemon = build_daemon(config)
    with caplog.at_level("WARNING", logger="ckpt_advisor.agent.daemon"):
        running(daemon)
        for step in range(1, 4):
            with (tmp_path / "runs" / "t.jsonl").open("a") as fh:
                fh.write(record(step))
        assert until(lambda: daemon.store.count_events() == 3)
    warnings = [r for r in caplog.records if "notifications unavailable" in r.getMessage()]
    assert len(warnings) == 1


def test_dead_watcher_is_restarted(
    tmp_path: Path, running: Callable[[Daemon], threading.Thread]
) -> None:
    """Scenario 15: the watchdog observer thread dying is noticed and a new one started."""
    daemon = build_daemon(parse_config(daemon_config(tmp_path)))
    running(daemon)
    watcher = daemon.watcher
    assert until(lambda: watcher.observer is not None and watcher.observer.is_alive())
    first = watcher.observer
    assert first is not None
    first.stop()
    first.join(5)
    assert until(lambda: watcher.observer is not None and watcher.observer is not first)
    assert watcher.observer is not None and watcher.observer.is_alive()
    (tmp_path / "runs" / "t.jsonl").write_text(record(1))
    assert until(lambda: daemon.store.count_events() == 1)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_dead_scheduler_thread_exits_non_zero(tmp_path: Path) -> None:
    """Scenario 15: the scheduler's thread dying makes the daemon exit with code 1 (systemd's
    Restart=on-failure restarts it), not run on without estimates."""
    daemon = build_daemon(parse_config(daemon_config(tmp_path)))
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(daemon.run()))
    thread.start()
    assert until(lambda: daemon.scheduler.running)

    def boom() -> float:
        raise RuntimeError("scheduler loop crashed")

    daemon.scheduler.scheduler._process_jobs = boom  # APScheduler's loop step, to crash it
    daemon.scheduler.scheduler.wakeup()
    thread.join(timeout=20)
    assert result == [1]


def test_scheduler_is_utc_so_dst_neither_stalls_nor_repeats(tmp_path: Path) -> None:
    """Scenario 27: the estimate schedule is in UTC: across the Europe/Berlin autumn change the
    fire times stay exactly estimate_every apart (no hour repeated or skipped)."""
    daemon = build_daemon(parse_config(daemon_config(tmp_path, estimate_every="30m")))
    daemon.scheduler.start()
    try:
        trigger = daemon.scheduler.scheduler.get_job("estimate").trigger
        t = datetime(2026, 10, 25, 0, 0, tzinfo=UTC)
        prev, gaps = None, set()
        for _ in range(12):
            t = trigger.get_next_fire_time(prev, t + timedelta(microseconds=1))
            if prev is not None:
                gaps.add(t - prev)
            prev = t
        assert gaps == {timedelta(minutes=30)}
        assert str(trigger.timezone) == "UTC"
    finally:
        daemon.scheduler.shutdown(wait=True)


def test_ingestion_goes_on_while_slack_rate_limits(
    tmp_path: Path, fake_slack: FakeSlack, running: Callable[[Daemon], threading.Thread]
) -> None:
    """Scenario 18: while delivery sleeps through a 429 Retry-After, lines are still stored."""
    config = parse_config(daemon_config(tmp_path))
    store = open_store(config.store.path)
    store.record_decision(
        "j", AlertState(True, 1.0, 60.0), message={"text": "hi"}, action="notify", now_s=1.0
    )
    fake_slack.script(429, retry_after=3)
    notifier = SlackNotifier(fake_slack.token, "#a", base_url=fake_slack.base_url)
    daemon = build_daemon(config, store=store, notifier=notifier)
    running(daemon)
    assert until(lambda: daemon.scheduler.running)
    daemon.scheduler.scheduler.add_job(daemon.outbox.deliver, id="deliver-now")
    fake_slack.wait_for(1)
    (tmp_path / "runs" / "t.jsonl").write_text(record(1))
    assert until(lambda: store.count_events() == 1, 2.5)
    assert fake_slack.messages == []  # still waiting out Retry-After
    assert until(lambda: len(fake_slack.messages) == 1)


# -- as a subprocess ------------------------------------------------------------------------


def _write_config(tmp: Path, estimate_every: str = "1h") -> Path:
    (tmp / "runs").mkdir(exist_ok=True)
    path = tmp / "c.toml"
    path.write_text(
        f'[store]\npath = "{tmp / "s.db"}"\n[schedule]\npoll_every = "0.1s"\n'
        f'estimate_every = "{estimate_every}"\n'
        f'[[jobs]]\nname = "j"\ntimings = ["{tmp}/runs/*.jsonl"]\n'
    )
    return path


def _steps(db: Path) -> list[int]:
    with sqlite3.connect(db) as conn:
        return sorted(r[0] for r in conn.execute("SELECT step FROM events"))


def test_sigterm_restart_resumes_without_gap_or_duplicate(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    """Scenario 1: append, SIGTERM, append while down, restart: every line stored once."""
    config, db, log = _write_config(tmp_path), tmp_path / "s.db", tmp_path / "runs" / "t.jsonl"
    log.write_text("".join(record(s) for s in range(1, 51)))
    procs.append(proc := start_daemon(config))
    assert until(lambda: db.exists() and len(_steps(db)) == 50)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    with log.open("a") as fh:
        fh.write("".join(record(s) for s in range(51, 101)))
    procs.append(proc := start_daemon(config))
    assert until(lambda: len(_steps(db)) >= 100)
    time.sleep(0.5)
    assert _steps(db) == list(range(1, 101))


def test_sigkill_at_random_moments_loses_and_repeats_nothing(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    """Scenario 2: the daemon SIGKILLed five times while lines stream in (partial lines
    included), restarted each time: at the end every complete line is stored exactly once."""
    config, db, log = _write_config(tmp_path), tmp_path / "s.db", tmp_path / "runs" / "t.jsonl"
    step = 0
    with log.open("a") as fh:
        for _ in range(5):
            procs.append(proc := start_daemon(config))
            for _ in range(400):
                step += 1
                text = record(step)
                fh.write(text[:20])
                fh.flush()
                fh.write(text[20:])
                fh.flush()
            time.sleep(0.15)
            proc.kill()
            proc.wait(10)
    procs.append(start_daemon(config))
    assert until(lambda: len(_steps(db)) >= step, 60)
    time.sleep(0.5)
    assert _steps(db) == list(range(1, step + 1))


def test_suspended_daemon_runs_the_missed_estimate_once(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    """Scenario 16: SIGSTOP for 6 s with a 1 s estimate schedule, then SIGCONT: the missed runs
    are coalesced into one (no burst of estimates on resume)."""
    config, db = _write_config(tmp_path, estimate_every="1s"), tmp_path / "s.db"
    (tmp_path / "runs" / "t.jsonl").write_text(record(1))
    procs.append(proc := start_daemon(config))

    def times() -> list[float]:
        with sqlite3.connect(db) as conn:
            return sorted(r[0] for r in conn.execute("SELECT computed_at_s FROM estimates"))

    assert until(lambda: db.exists() and len(times()) >= 2)
    proc.send_signal(signal.SIGSTOP)
    stopped_s = time.time()
    time.sleep(6)
    proc.send_signal(signal.SIGCONT)
    time.sleep(2.5)
    after = [t for t in times() if t > stopped_s]
    assert 1 <= len(after) <= 4  # one coalesced run, then the regular 1 s ones
    assert all(b - a > 0.5 for a, b in itertools.pairwise(after))


def test_token_is_not_in_the_process_arguments(
    tmp_path: Path, fake_slack: FakeSlack, procs: list[subprocess.Popen[str]]
) -> None:
    """Scenario 23: the token comes from the environment; `ps` (the command line) never shows
    it."""
    config = _write_config(tmp_path)
    with config.open("a") as fh:
        fh.write(
            f'[slack]\nchannel = "#a"\ntoken_env = "{TOKEN_ENV}"\n'
            f'base_url = "{fake_slack.base_url}"\n'
        )
    procs.append(proc := start_daemon(config, {**os.environ, TOKEN_ENV: fake_slack.token}))
    cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode()
    assert fake_slack.token not in cmdline
    assert str(config) in cmdline
