"""The sd_notify client against a real AF_UNIX datagram socket (sd_notify(3) protocol)."""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

from ckpt_advisor.agent.daemon.systemd import SystemdNotifier
from tests.agent.notify_listener import NotifyListener


def test_fields_arrive_as_one_datagram_with_newlines_folded() -> None:
    """READY=1 and STATUS= go in one datagram; a newline in a value cannot forge a field."""
    with NotifyListener() as listener:
        sd = SystemdNotifier({"NOTIFY_SOCKET": listener.address})
        assert sd.enabled
        assert sd.ready("2 job(s)\nREADY=0")
        msg = listener.wait_for("READY", timeout_s=5)
    assert msg == {"READY": "1", "STATUS": "2 job(s) READY=0"}


def test_filesystem_socket_path_works() -> None:
    """A NOTIFY_SOCKET that is a filesystem path (not abstract) receives STOPPING=1."""
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        path = str(Path(d) / "notify")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
            server.bind(path)
            server.settimeout(5)
            assert SystemdNotifier({"NOTIFY_SOCKET": path}).stopping()
            assert server.recv(4096) == b"STOPPING=1\nSTATUS=stopping"


def test_outside_systemd_every_call_is_a_no_op() -> None:
    """Without NOTIFY_SOCKET nothing is sent and the watchdog is off."""
    sd = SystemdNotifier({})
    assert not sd.enabled
    assert sd.watchdog_interval_s is None
    assert (sd.ready("x"), sd.status("x"), sd.watchdog(), sd.stopping()) == (False,) * 4


def test_watchdog_pings_at_half_the_period() -> None:
    """WATCHDOG_USEC=10 s gives a ping at most every 5 s of the (injected) monotonic clock."""
    now = [100.0]
    with NotifyListener() as listener:
        sd = SystemdNotifier(
            {"NOTIFY_SOCKET": listener.address, "WATCHDOG_USEC": "10000000"},
            clock=lambda: now[0],
        )
        assert sd.watchdog_interval_s == 5.0
        sent = []
        for t in (100.0, 101.0, 104.9, 105.0, 109.0, 110.5):
            now[0] = t
            sent.append(sd.watchdog())
        listener.wait_for("WATCHDOG", n=3, timeout_s=5)
    assert sent == [True, False, False, True, False, True]


def test_watchdog_meant_for_another_pid_is_ignored() -> None:
    """WATCHDOG_PID naming another process (a child of the service) turns pings off."""
    env = {"NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"}
    assert SystemdNotifier(env).watchdog_interval_s is None
    env["WATCHDOG_PID"] = str(os.getpid())
    assert SystemdNotifier(env).watchdog_interval_s == 0.5


def test_unreachable_socket_returns_false_and_does_not_raise() -> None:
    """A NOTIFY_SOCKET nobody listens on makes notify() return False, never raise."""
    assert SystemdNotifier({"NOTIFY_SOCKET": "/nonexistent/notify"}).ready("x") is False
