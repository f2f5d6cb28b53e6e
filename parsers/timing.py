"""Checkpoint timing files: one record per file written, JSON Lines or CSV with a header
(DESIGN.md; the records of one save are grouped in ``rules/saves.py``).

Fields: ``step`` (int, required); ``end`` (required) and either ``start`` or ``duration_s``;
optional ``blocking_s`` (the part that stalls training, for asynchronous checkpointing),
``path``, ``bytes`` and ``tier`` (where the save went: ``memory``, ``local`` or
``persistent``, for jobs that save to two tiers; :data:`TIERS`). Times are ISO 8601 (offset
optional; naive means UTC) or Unix epoch seconds, as numbers or strings; an epoch above
:data:`MS_EPOCH_ABOVE` (no second count reaches it before the year 5138) is read as
milliseconds, as JavaScript and Java write them, and one above :data:`MAX_MS_EPOCH` is refused
("microseconds?"). A save lasts at most :data:`MAX_SAVE_S` (7 days: longer is a unit error or a
corrupt record), and its ``blocking_s`` never exceeds its whole duration. Field names are
case-sensitive in JSON; CSV header names are compared after stripping and lower-casing.

Each record gives one ``checkpoint_end`` event: ``time`` = end, ``step``, ``duration_s`` = the
blocking cost (``blocking_s`` if given, else ``end − start`` or ``duration_s``), ``persist_s`` =
the whole save (``end − start`` or ``duration_s``) when ``blocking_s`` is given, ``detail`` =
``path``, ``tier`` = ``tier``. ``bytes`` is checked but has no event field yet. A bad record
is skipped and reported (``StreamParser.misses``/``errors``); blank lines are not records.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping
from datetime import datetime

from ckpt_advisor.parsers.events import Event, EventKind
from ckpt_advisor.parsers.registry import CSV, JSONL
from ckpt_advisor.parsers.stream import Diagnostics, StreamParser
from ckpt_advisor.parsers.timestamps import parse_iso_or_epoch

REQUIRED_COLUMNS = frozenset(("step", "end"))
MAX_SAVE_S = 7 * 86400.0
"""The longest save a record may give (``duration_s``, ``blocking_s`` or ``end − start``)."""
MS_EPOCH_ABOVE = 1e11
"""An epoch number above this is milliseconds (1e11 s is the year 5138; 1e11 ms is 1973)."""
MAX_MS_EPOCH = 1e14
"""An epoch number above this is refused: the year 5138 in milliseconds, so microseconds or
nanoseconds."""
TIERS = ("memory", "local", "persistent")
"""Values of the ``tier`` field, least durable first (``rules/tiers.py`` ``Tier``: a test checks
they agree)."""


def timing_event(fields: Mapping[str, object], lineno: int, parser: str) -> Event:
    """Build the ``checkpoint_end`` event of one timing record.

    Args:
        fields: the record's fields; absent optional fields are missing keys (or ``None``).
        lineno: 1-based line of the record.
        parser: ``Event.parser`` (``"timing_jsonl"`` or ``"timing_csv"``).

    Raises:
        ValueError: a required field is missing, or a field has the wrong type or range; the
            message names the field.
    """
    step = _as_step(fields.get("step"))
    end = _as_time(fields.get("end"), "end")
    start = fields.get("start")
    if start is not None:
        total_s = (end - _as_time(start, "start")).total_seconds()
        if total_s < 0:
            raise ValueError("end is before start")
        _as_save(total_s, "end - start")
    elif fields.get("duration_s") is not None:
        total_s = _as_save(_as_number(fields["duration_s"], "duration_s"), "duration_s")
    else:
        raise ValueError("needs start or duration_s")
    blocking = fields.get("blocking_s")
    blocking_s = None if blocking is None else _as_number(blocking, "blocking_s")
    if blocking_s is not None and blocking_s > total_s:
        raise ValueError(
            f"blocking_s ({blocking_s:g} s) exceeds the save's whole duration ({total_s:g} s): "
            "the part that stalls training is part of the save"
        )
    if fields.get("bytes") is not None:
        _as_number(fields["bytes"], "bytes")
    path = fields.get("path")
    tier = fields.get("tier")
    if tier is not None and tier not in TIERS:
        raise ValueError(f"tier must be one of {', '.join(TIERS)}, got {str(tier)[:40]!r}")
    return Event(
        EventKind.CHECKPOINT_END,
        lineno,
        parser,
        time=end,
        step=step,
        duration_s=total_s if blocking_s is None else blocking_s,
        persist_s=None if blocking_s is None else total_s,
        detail=None if path is None else str(path),
        tier=None if tier is None else str(tier),
    )


class TimingJsonlParser(StreamParser):
    """``timing_jsonl``: one JSON object per line, e.g.
    ``{"step": 500, "start": "2026-11-29T22:11:38+00:00", "end": "2026-11-29T22:12:01+00:00"}``.
    """

    def __init__(self, diagnostics: Diagnostics | None = None) -> None:
        super().__init__(JSONL, diagnostics)

    def _feed(self, line: str, lineno: int) -> list[Event]:
        text = line.strip().lstrip("\ufeff")
        if not text:
            return []
        try:
            record = json.loads(text)
        except (ValueError, RecursionError) as exc:
            self._diagnostics.report(lineno, f"not JSON: {exc}")
            return []
        if not isinstance(record, dict):
            self._diagnostics.report(lineno, "not a JSON object")
            return []
        return _event_or_miss(self._diagnostics, record, lineno, self.name)

    def _finish(self) -> list[Event]:
        return []


class TimingCsvParser(StreamParser):
    """``timing_csv``: a header line (``step,start,end,bytes,path``), then one save per row.

    Until a header naming ``step`` and ``end`` has been read, each non-blank line is taken as a
    header candidate (and reported if it is not one).
    """

    def __init__(self, diagnostics: Diagnostics | None = None) -> None:
        super().__init__(CSV, diagnostics)
        self._columns: list[str] | None = None

    def _feed(self, line: str, lineno: int) -> list[Event]:
        if not line.strip():
            return []
        try:
            cells = next(csv.reader([line.lstrip("\ufeff")]))
        except csv.Error as exc:
            self._diagnostics.report(lineno, f"bad CSV: {exc}")
            return []
        if self._columns is None:
            columns = [cell.strip().lower() for cell in cells]
            if REQUIRED_COLUMNS.issubset(columns):
                self._columns = columns
            else:
                self._diagnostics.report(lineno, "CSV header lacks the step and end columns")
            return []
        if len(cells) != len(self._columns):
            self._diagnostics.report(lineno, f"{len(cells)} cells for {len(self._columns)} columns")
            return []
        record = {
            col: cell.strip()
            for col, cell in zip(self._columns, cells, strict=True)
            if cell.strip()
        }
        return _event_or_miss(self._diagnostics, record, lineno, self.name)

    def _finish(self) -> list[Event]:
        return []


def looks_like_timing_header(line: str) -> str | None:
    """Name the timing format whose first record or header ``line`` is, else ``None``.

    A JSON object with ``step`` and ``end`` keys is ``timing_jsonl``; a comma-separated line
    of plain names including ``step`` and ``end`` is ``timing_csv``.
    """
    text = line.strip().lstrip("\ufeff")
    if text.startswith("{"):
        try:
            record = json.loads(text)
        except (ValueError, RecursionError):
            return None
        return JSONL if isinstance(record, dict) and REQUIRED_COLUMNS.issubset(record) else None
    names = [name.strip().lower() for name in text.split(",")]
    if REQUIRED_COLUMNS.issubset(names) and all(n.replace("_", "").isalnum() for n in names):
        return CSV
    return None


def _event_or_miss(
    diagnostics: Diagnostics, record: Mapping[str, object], lineno: int, parser: str
) -> list[Event]:
    try:
        return [timing_event(record, lineno, parser)]
    except ValueError as exc:
        diagnostics.report(lineno, str(exc))
        return []


def _as_number(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{field} must be a number, got {type(value).__name__}")
    try:
        number = float(value)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"{field} must be a number, got {str(value)[:40]!r}") from exc
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{field} must be finite and >= 0, got {number!r}")
    return number


def _as_save(seconds: float, field: str) -> float:
    if seconds > MAX_SAVE_S:
        raise ValueError(
            f"{field} is {seconds:.6g} s, longer than a save can last (7 days, "
            f"{MAX_SAVE_S:.0f} s): a unit error (milliseconds?) or a corrupt record"
        )
    return seconds


def _as_step(value: object) -> int:
    if value is None:
        raise ValueError("missing step")
    number = _as_number(value, "step")
    if not number.is_integer() or number >= 1e15:
        raise ValueError(f"step must be a whole number below 1e15, got {number!r}")
    return int(number)


def _as_time(value: object, field: str) -> datetime:
    if value is None:
        raise ValueError(f"missing {field}")
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{field} must be an ISO 8601 string or epoch seconds")
    epoch = _epoch_number(value)
    if epoch is not None and epoch > MS_EPOCH_ABOVE:
        if epoch > MAX_MS_EPOCH:
            raise ValueError(
                f"{field} {epoch:.6g} is too large for epoch seconds or milliseconds "
                "(microseconds? nanoseconds?): write Unix seconds"
            )
        value = epoch / 1000.0  # milliseconds
    try:
        return parse_iso_or_epoch(value)
    except ValueError as exc:
        raise ValueError(f"bad {field}: {exc}") from exc


def _epoch_number(value: int | float | str) -> float | None:
    """``value`` as a number of the epoch, or None when it is not one (an ISO string)."""
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(value.strip())
    except ValueError:
        return None
