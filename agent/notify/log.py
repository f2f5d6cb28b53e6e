"""The notifier without a Slack token: each message's text goes to the daemon's own log."""

from __future__ import annotations

import logging
import time
from typing import Any

from ckpt_advisor.agent.notify.message import unescape_slack


class LogNotifier:
    """Writes each message's fallback text to ``logger`` at WARNING (no Slack token configured).

    The Slack escaping is undone first, so the log shows the text as written in the training logs.
    """

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger

    def __repr__(self) -> str:
        return f"LogNotifier(logger={self.logger.name!r})"

    def send(
        self, message: dict[str, Any], *, key: str | None = None, thread_ts: str | None = None
    ) -> str:
        """Log ``message["text"]`` (a reply's too: a log has no threads); return a Slack-like id
        (``"<epoch seconds>.<micros>"``)."""
        self.logger.warning("%s", unescape_slack(message["text"]))
        return f"{time.time():.6f}"

    def find(self, key: str, since_s: float, *, thread_ts: str | None = None) -> str | None:
        """A log line cannot be half-sent: never found, always safe to write again."""
        return None
