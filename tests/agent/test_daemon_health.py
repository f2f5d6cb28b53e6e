"""Watchdog pings follow health: an estimate run stuck past estimate_timeout stops them until it
finishes. In-process daemon, real store, real notification socket, a notifier that hangs."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from agent.config import parse_config
from agent.daemon import build_daemon
from agent.sdnotify import SystemdNotifier
from agent.store import Store
from rules.model import AlertState
from tests.agent.notify_listener import NotifyListener


class HangingNotifier:
    """Blocks in send() until released, like a Slack call that never answers."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def send(self, message: dict[str, Any], *, key: str | None = None) -> str:
        self.entered.set()
        self.release.wait(timeout=30)
        return "1.0"

    def find(self, key: str, since_s: float) -> str | None:
        return None


def test_stuck_estimate_withholds_watchdog_pings_until_it_ends(tmp_path: Path) -> None:
    """While an estimate run exceeds estimate_timeout, STATUS says unhealthy and no WATCHDOG=1
    is sent; once it ends, pings resume."""
    runs = tmp_path / "runs"
    runs.mkdir()
    config = parse_config(
        {
            "store": {"path": str(tmp_path / "ckpt.db")},
            "schedule": {"estimate_every": "1h", "poll_every": "0.05s", "estimate_timeout": "0.3s"},
            "jobs": [{"name": "llama", "logs": [f"{runs}/*.log"]}],
        }
    )
    store = Store(config.store.path)
    store.record_decision(
        "llama", AlertState(), message={"text": "queued before start"}, action="notify", now_s=0
    )
    notifier = HangingNotifier()
    with NotifyListener() as listener:
        systemd = SystemdNotifier({"NOTIFY_SOCKET": listener.address, "WATCHDOG_USEC": "100000"})
        daemon = build_daemon(config, store=store, notifier=notifier, systemd=systemd)
        thread = threading.Thread(target=daemon.run)
        thread.start()
        try:
            listener.wait_for("READY", timeout_s=10)
            assert notifier.entered.wait(timeout=10)
            listener.wait_for("STATUS", contains="unhealthy: estimate run stuck", timeout_s=10)
            pings = listener.count("WATCHDOG")
            time.sleep(0.5)  # 10 watchdog half-periods
            assert listener.count("WATCHDOG") == pings
            assert "estimate run stuck" in (daemon.problem() or "")
            notifier.release.set()
            listener.wait_for("WATCHDOG", n=pings + 2, timeout_s=10)
            assert daemon.problem() is None
        finally:
            notifier.release.set()
            daemon.stop()
            thread.join(timeout=30)
    assert not thread.is_alive()
    assert [m["state"] for m in store.messages()] == ["sent"]
