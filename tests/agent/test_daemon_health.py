"""Watchdog pings follow health: an estimate run stuck past estimate_timeout stops them until it
finishes. In-process daemon, real store, real notification socket, an estimate that hangs."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ckpt_advisor.agent.app import build_daemon
from ckpt_advisor.agent.config import parse_config
from ckpt_advisor.agent.daemon.health import START_EXTEND_S
from ckpt_advisor.agent.daemon.systemd import SystemdNotifier
from ckpt_advisor.agent.store import open_store
from ckpt_advisor.agent.tail import Tailer, WatchSpec
from ckpt_advisor.rules.model import AlertState
from tests.agent.helpers import downgrade_to_version_3
from tests.agent.notify_listener import NotifyListener

NOW = datetime(2026, 1, 2, tzinfo=UTC)


class RecordingNotifier:
    """Accepts every message at once."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send(
        self, message: dict[str, Any], *, key: str | None = None, thread_ts: str | None = None
    ) -> str:
        self.sent.append(message)
        return "1.0"

    def find(self, key: str, since_s: float, *, thread_ts: str | None = None) -> str | None:
        return None


class Hang:
    """Wraps a function so that it blocks until released (an estimate stuck on a slow disk)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, *args: Any) -> Any:
        self.entered.set()
        self.release.wait(timeout=30)
        return self.fn(*args)


def test_stuck_estimate_withholds_watchdog_pings_until_it_ends(tmp_path: Path) -> None:
    """While an estimate run exceeds estimate_timeout, STATUS says unhealthy and no WATCHDOG=1
    is sent; once it ends, pings resume. Delivery has its own job: a message queued before
    start is sent even while the estimate is stuck."""
    runs = tmp_path / "runs"
    runs.mkdir()
    config = parse_config(
        {
            "store": {"path": str(tmp_path / "ckpt.db")},
            "schedule": {"estimate_every": "1h", "poll_every": "0.05s", "estimate_timeout": "0.3s"},
            "jobs": [{"name": "llama", "logs": [f"{runs}/*.log"]}],
        }
    )
    store = open_store(config.store.path)
    store.record_decision(
        "llama", AlertState(), message={"text": "queued before start"}, action="notify", now_s=0
    )
    notifier = RecordingNotifier()
    with NotifyListener() as listener:
        systemd = SystemdNotifier({"NOTIFY_SOCKET": listener.address, "WATCHDOG_USEC": "100000"})
        daemon = build_daemon(config, store=store, notifier=notifier, systemd=systemd)
        hang = Hang(daemon.advisor.run_job)
        daemon.advisor.run_job = hang  # type: ignore[method-assign]
        thread = threading.Thread(target=daemon.run)
        thread.start()
        try:
            listener.wait_for("READY", timeout_s=10)
            assert hang.entered.wait(timeout=10)
            listener.wait_for("STATUS", contains="unhealthy: estimate run stuck", timeout_s=10)
            pings = listener.count("WATCHDOG")
            time.sleep(0.5)  # 10 watchdog half-periods
            assert listener.count("WATCHDOG") == pings
            assert "estimate run stuck" in (daemon.problem() or "")
            deadline = time.monotonic() + 20  # the delivery job runs every 15 s and at start
            while not notifier.sent and time.monotonic() < deadline:
                time.sleep(0.1)
            assert notifier.sent == [{"text": "queued before start"}]
            hang.release.set()
            listener.wait_for("WATCHDOG", n=pings + 2, timeout_s=10)
            assert daemon.problem() is None
        finally:
            hang.release.set()
            daemon.stop()
            thread.join(timeout=30)
    assert not thread.is_alive()
    assert [m["state"] for m in store.messages()] == ["sent"]


def test_a_store_upgrade_at_start_extends_the_start_timeout(tmp_path: Path) -> None:
    """A daemon opening a schema-3 store tells systemd it is upgrading (STATUS) and asks for
    time in proportion to the events before the rewrite (EXTEND_TIMEOUT_USEC); a current store
    asks for nothing."""
    db = tmp_path / "ckpt.db"
    store = open_store(db)
    log = tmp_path / "train.log"
    log.write_text(
        "".join(
            f"[INFO|trainer.py:4149] 2026-01-01 00:{i:02d}:00,000 >> Saving model checkpoint to "
            f"/data/run/checkpoint-{i}\n"
            for i in range(40)
        )
    )
    Tailer(
        store, [WatchSpec("llama", (str(log),))], clock=lambda: NOW, tz=UTC, backfill=True
    ).scan()
    store.close()
    downgrade_to_version_3(db)
    config = parse_config(
        {"store": {"path": str(db)}, "jobs": [{"name": "llama", "logs": [str(log)]}]}
    )
    with NotifyListener() as listener:
        systemd = SystemdNotifier({"NOTIFY_SOCKET": listener.address})
        build_daemon(config, notifier=RecordingNotifier(), systemd=systemd).store.close()
        status = listener.wait_for("STATUS", contains="upgrading the store", timeout_s=10)
        extend = listener.wait_for("EXTEND_TIMEOUT_USEC", timeout_s=10)
        assert status["STATUS"] == "upgrading the store: 40 events"
        assert int(extend["EXTEND_TIMEOUT_USEC"]) == int((START_EXTEND_S + 40 * 30e-6) * 1e6)
        build_daemon(config, notifier=RecordingNotifier(), systemd=systemd).store.close()
        time.sleep(0.3)
        assert listener.count("EXTEND_TIMEOUT_USEC") == 1
