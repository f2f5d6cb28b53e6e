"""Shared fixtures for agent tests: real-but-local stand-ins for outside services."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

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
