"""Time stamps at the start of a line that no stack's own header reads (docs/FORMATS.md §21).

Two kinds, whatever the stack:

* **A container runtime's prefix**, before the program's own line: ``kubectl logs
  --timestamps`` writes ``msg.timestamp.Format(RFC3339NanoFixed)`` and a space before each line
  (kubernetes ``pkg/kubelet/kuberuntime/logs/logs.go`` ``logWriter.write``; ``RFC3339NanoFixed
  = "2006-01-02T15:04:05.000000000Z07:00"``, ``pkg/kubelet/types/constants.go``), and ``docker
  logs -t`` the same format (moby ``api/server/httputils/write_log_stream.go``, jsonmessage's
  ``RFC3339NanoFixed``): ``2026-12-02T12:39:19.923456789Z ``, nine fraction digits, ``Z`` for
  UTC (the time the runtime read the line), else an offset. :func:`split_runtime` cuts it off.
* **A logger's stamp instead of a stack's header**: Python logging's ``%(asctime)s``
  (``2026-12-02 12:39:15,136``, ``logging.Formatter.default_time_format`` plus ``,%03d``
  msecs) first in a ``basicConfig`` format (``%(asctime)s %(levelname)s %(name)s:``,
  ``%(asctime)s - %(name)s - %(levelname)s -``, ``[%(asctime)s] %(levelname)s``), loguru's
  default ``{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <8} | …`` (``loguru/_defaults.py``), ISO
  8601 with ``T`` and a ``Z`` or an offset (``datetime.isoformat()``, ``dmesg --time-format
  iso``'s ``2024-04-29T14:55:41,678628+02:00``). :func:`leading_stamp` finds it.

A stamp with ``Z`` or an offset is absolute: read as printed, whatever the job's zone. A naive
one is the node's wall clock, read in the job's zone like every other naive stamp
(``parsers/timestamps.py``).
"""

from __future__ import annotations

import re
from datetime import datetime, tzinfo

from ckpt_advisor.parsers.timestamps import parse_iso_or_epoch, parse_ymd_hms

_STAMP = (
    r"(?P<time>(?P<ymdhms>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?:[.,](?P<fraction>\d{1,9}))?"
    r"(?P<zone>Z|[+-]\d\d:?\d\d)?)"
)

_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|SUCCESS|TRACE)"
_NAME = r"(?:root|[\w<>]*[._:][\w.<>:]*)"
"""A logger's name as formats print it: ``root``, or with a dot, ``_`` or ``:``
(``transformers.trainer``, ``__main__``, loguru's ``{name}:{function}:{line}``), so that a
message's first word is not taken for one."""
_SEP = r"[ \t]*[-|:]?[ \t]*"
_END = r"[ \t]*[-|:]?[ \t]?"
"""The separator before the message, with the one space formats put there: a message's own
leading spaces are its (Megatron-LM's `` loading checkpoint from …``)."""
_LOG_HEAD = (
    rf"[-|]?[ \t]*(?:{_NAME}[ \t]+[-|][ \t]+)?{_LEVEL}\b"
    rf"(?:{_SEP}{_NAME}(?=[ \t]*[-|:](?:[ \t]|$)))?{_END}"
)
"""The level and logger name after the stamp, in the orders the formats of §21 print them:
``INFO transformers.trainer: ``, ``- transformers.trainer - INFO - ``, ``- INFO -
transformers.trainer - ``, loguru's ``| INFO     | transformers.trainer:_save:3850 - ``."""

LEADING_STAMP = re.compile(rf"\[?{_STAMP}(?![\d:])\]?[ \t]*(?:{_LOG_HEAD})?(?P<msg>.*)", re.DOTALL)
"""A record that starts with its time, optionally in brackets; ``msg`` is the rest after the
level and logger name, if the format prints them there (so that a message printed empty, the
record's text on the next line, shows as empty, and patterns anchored at a message's start
match)."""

RUNTIME_PREFIX = re.compile(
    r"(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}(?:Z|[+-]\d\d:\d\d)) (?P<msg>.*)", re.DOTALL
)
"""``RFC3339NanoFixed`` and a space, the whole prefix a container runtime writes."""

_TIME = re.compile(_STAMP)


def leading_stamp(text: str) -> re.Match[str] | None:
    """The stamp ``text`` starts with (groups ``time`` and ``msg``), or None. Most pieces a
    stack is fed start with a letter or a bracket and a letter: two character tests."""
    first = text[1:2] if text[:1] == "[" else text[:1]
    if not first.isdigit():
        return None
    return LEADING_STAMP.match(text)


def split_runtime(line: str) -> tuple[str | None, str]:
    """``(stamp, rest)``: a container runtime's stamp cut off ``line``, or ``(None, line)``.
    A line without one costs two slice tests."""
    if line[10:11] != "T" or line[19:20] != ".":
        return None, line
    m = RUNTIME_PREFIX.match(line)
    if m is None:
        return None, line
    return m["time"], m["msg"]


def parse_line_stamp(text: str, tz: tzinfo) -> datetime:
    """Parse a stamp :func:`leading_stamp` or :func:`split_runtime` found: with ``Z`` or an
    offset as printed (``tz`` unused), naive in ``tz``; a fraction past microseconds is cut.

    Returns:
        aware UTC datetime.

    Raises:
        ValueError: not such a stamp, or no real date.
    """
    m = _TIME.fullmatch(text)
    if m is None:
        raise ValueError(f"not a YYYY-MM-DD HH:MM:SS time: {text[:40]!r}")
    fraction = f".{m['fraction'][:6]}" if m["fraction"] else ""
    if m["zone"] is None:
        return parse_ymd_hms(m["ymdhms"] + fraction, tz)
    return parse_iso_or_epoch(m["ymdhms"] + fraction + m["zone"])
