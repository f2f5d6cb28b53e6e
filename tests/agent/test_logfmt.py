"""Daemon log lines: one event per line with a level, JSON for shippers, no secrets."""

from __future__ import annotations

import json
import logging
import os
import sys

import pytest

from ckpt_advisor.agent.logfmt import JsonFormatter, TextFormatter, setup_logging, stream_is_journal

TOKEN = "xoxb-1234-secret"


def _record(msg: str, level: int = logging.WARNING, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise RuntimeError(f"boom with {TOKEN}\nsecond line")
        except RuntimeError:
            exc_info = sys.exc_info()
    return logging.LogRecord("ckpt_advisor.agent.x", level, __file__, 1, msg, (), exc_info)


def test_text_is_one_line_with_level_and_redacted() -> None:
    """A multi-line message with a traceback stays on one line and hides the token."""
    line = TextFormatter([TOKEN]).format(_record(f"a\nb {TOKEN}", exc=True))
    assert "\n" not in line
    assert line.startswith("WARNING ckpt_advisor.agent.x: a\\nb <redacted>\\nTraceback")
    assert TOKEN not in line


def test_journal_lines_carry_the_syslog_priority() -> None:
    """Under journald each line starts with <N> (sd-daemon(3)): <3> error, <6> info."""
    fmt = TextFormatter(journal=True)
    assert fmt.format(_record("x", logging.ERROR)) == "<3>ERROR ckpt_advisor.agent.x: x"
    assert fmt.format(_record("x", logging.INFO)) == "<6>INFO ckpt_advisor.agent.x: x"


def test_json_line_has_time_level_logger_message_exception() -> None:
    """The JSON formatter emits one parseable object per record, redacted."""
    line = JsonFormatter([TOKEN]).format(_record(f"sent {TOKEN}", logging.ERROR, exc=True))
    assert "\n" not in line
    obj = json.loads(line)
    assert obj["level"] == "error"
    assert obj["logger"] == "ckpt_advisor.agent.x"
    assert obj["message"] == "sent <redacted>"
    assert "RuntimeError: boom with <redacted>" in obj["exception"]
    assert obj["time"].endswith("+00:00")


def test_journal_stream_is_recognised_by_device_and_inode() -> None:
    """$JOURNAL_STREAM must name stderr's own device:inode to count as the journal."""
    with open(os.devnull, "w") as stream:
        st = os.fstat(stream.fileno())
        assert stream_is_journal(stream, {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"})
        assert not stream_is_journal(stream, {"JOURNAL_STREAM": "1:2"})
        assert not stream_is_journal(stream, {})


def test_unknown_format_is_rejected() -> None:
    """setup_logging refuses a format it does not know."""
    with pytest.raises(ValueError, match="unknown log format 'xml'"):
        setup_logging("INFO", "xml")
