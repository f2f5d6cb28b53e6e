"""Shared fixtures for agent tests: real-but-local stand-ins for outside services."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Iterator

import pytest

from ckpt_advisor.agent.daemon.loop import Daemon
from tests.agent.fake_slack import FakeSlack


@pytest.fixture
def fake_slack() -> Iterator[FakeSlack]:
    """A running loopback Slack Web API (see ``fake_slack.py``), stopped after the test."""
    with FakeSlack() as slack:
        yield slack


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    """Subprocesses a test starts (append them); those still running are killed after it."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def running() -> Iterator[Callable[[Daemon], threading.Thread]]:
    """Starts an in-process daemon's main loop on a thread; every daemon started is stopped
    (and its thread joined) after the test."""
    started: list[tuple[Daemon, threading.Thread]] = []
    result: dict[int, int] = {}

    def start(daemon: Daemon) -> threading.Thread:
        thread = threading.Thread(target=lambda: result.setdefault(id(daemon), daemon.run()))
        thread.start()
        started.append((daemon, thread))
        return thread

    yield start
    for daemon, thread in started:
        daemon.stop()
        thread.join(timeout=20)
