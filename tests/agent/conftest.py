"""Shared fixtures for agent tests: real-but-local stand-ins for outside services."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.agent.fake_slack import FakeSlack


@pytest.fixture
def fake_slack() -> Iterator[FakeSlack]:
    """A running loopback Slack Web API (see ``fake_slack.py``), stopped after the test."""
    with FakeSlack() as slack:
        yield slack
