"""Log output for journald and for log shippers: one event per line, with a level, no secrets.

``text`` (the default) writes ``LEVEL logger: message`` to stderr; journald adds the time. When
stderr is the journal (``$JOURNAL_STREAM`` names it, systemd.exec(5)), each line starts with the
syslog priority prefix ``<N>`` that journald turns into the entry's priority (sd-daemon(3)), so
``journalctl -p warning`` works. ``json`` writes one JSON object per line (``time``, ``level``,
``logger``, ``message``, and ``exception`` when there is one) for Vector, Fluent Bit, Promtail.
In both, newlines inside a message or traceback are escaped, so one event is one line, and every
configured secret (the Slack token) is replaced by ``<redacted>``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Final, TextIO

FORMATS: Final = ("text", "json")
REDACTED: Final = "<redacted>"

# sd-daemon(3): SD_ERR "<3>", SD_WARNING "<4>", SD_INFO "<6>", SD_DEBUG "<7>"; CRITICAL is SD_CRIT.
_PRIORITY: Final = {
    logging.CRITICAL: 2,
    logging.ERROR: 3,
    logging.WARNING: 4,
    logging.INFO: 6,
    logging.DEBUG: 7,
}


def stream_is_journal(stream: TextIO, environ: dict[str, str] | None = None) -> bool:
    """True when ``stream`` is the journald stream systemd connected (``$JOURNAL_STREAM`` holds
    its ``device:inode``)."""
    value = (os.environ if environ is None else environ).get("JOURNAL_STREAM", "")
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError):
        return False
    return value == f"{st.st_dev}:{st.st_ino}"


class _Redacting(logging.Formatter):
    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self._secrets = [s for s in secrets if s]

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text


class TextFormatter(_Redacting):
    """``LEVEL logger: message`` on one line (``<N>`` syslog prefix when ``journal``)."""

    def __init__(self, secrets: Iterable[str] = (), *, journal: bool = False) -> None:
        super().__init__(secrets)
        self._journal = journal

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as one line."""
        text = f"{record.levelname} {record.name}: {record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        text = self._redact(text).replace("\r", "\\r").replace("\n", "\\n")
        if self._journal:
            text = f"<{_PRIORITY.get(record.levelno, 6)}>{text}"
        return text


class JsonFormatter(_Redacting):
    """One JSON object per line: ``time`` (ISO 8601 UTC), ``level``, ``logger``, ``message``,
    ``exception`` (when the record has one)."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as one JSON line."""
        out = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": self._redact(record.getMessage()),
        }
        if record.exc_info:
            out["exception"] = self._redact(self.formatException(record.exc_info))
        return json.dumps(out, ensure_ascii=False)


def setup_logging(level: str = "INFO", fmt: str = "text", *, secrets: Iterable[str] = ()) -> None:
    """Send the root logger to stderr in ``fmt`` (``text`` or ``json``) at ``level``.

    Chatty libraries (APScheduler, watchdog, slack-sdk, urllib3) are kept at WARNING.

    Raises:
        ValueError: unknown ``fmt``.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown log format {fmt!r} (use one of {', '.join(FORMATS)})")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter(secrets)
        if fmt == "json"
        else TextFormatter(secrets, journal=stream_is_journal(sys.stderr))
    )
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO), handlers=[handler], force=True
    )
    for noisy in ("apscheduler", "watchdog", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # slack-sdk logs every failed request at ERROR; the notifier reports each failure once,
    # with what to fix, so its own copy would only double the line.
    logging.getLogger("slack_sdk").setLevel(logging.CRITICAL)
