"""Timestamp strings from logs and timing files to aware UTC datetimes.

No framework prints a UTC offset (FORMATS.md §0.3): a naive wall-clock stamp is the node's local
time, so it is read in the zone the caller gives (``tz``) and converted to UTC. Timing files are
the exception: their schema (DESIGN.md) says naive means UTC. Every function raises
``ValueError`` (never anything else) on text that is not a valid time.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, tzinfo

_YMD_HMS_MS = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[,.](\d{1,6}))?")
_MDY_HMS = re.compile(r"(\d\d)/(\d\d)/(\d{4}) (\d\d):(\d\d):(\d\d)")


def _to_utc(moment: datetime) -> datetime:
    try:
        return moment.astimezone(UTC)
    except OverflowError as exc:  # e.g. 0001-01-01 00:00 in a zone east of UTC
        raise ValueError(f"time out of range in UTC: {moment.isoformat()}") from exc


def _aware(naive: datetime, tz: tzinfo) -> datetime:
    return _to_utc(naive.replace(tzinfo=tz))


def parse_ymd_hms(text: str, tz: tzinfo) -> datetime:
    """Parse ``YYYY-MM-DD HH:MM:SS[,mmm]`` (Python logging ``asctime``) read in ``tz``.

    The fraction may use ``,`` (logging's default ``%(asctime)s``) or ``.`` and have 1 to 6
    digits. Example: ``2026-11-29 22:11:38,483`` (transformers explicit format, FORMATS.md §1).

    Returns:
        aware UTC datetime.

    Raises:
        ValueError: ``text`` is not in that shape or names no real date.
    """
    m = _YMD_HMS_MS.fullmatch(text)
    if m is None:
        raise ValueError(f"not a YYYY-MM-DD HH:MM:SS,mmm time: {text[:40]!r}")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    micro = int((m[7] or "0").ljust(6, "0"))
    return _aware(datetime(year, month, day, hour, minute, second, micro), tz)


def parse_mdy_hms(text: str, tz: tzinfo) -> datetime:
    """Parse ``%m/%d/%Y %H:%M:%S`` read in ``tz``, e.g. ``10/20/2023 15:41:03``.

    The ``datefmt`` of the transformers example scripts' ``logging.basicConfig`` (FORMATS.md §1).

    Returns:
        aware UTC datetime.

    Raises:
        ValueError: ``text`` is not in that shape or names no real date.
    """
    m = _MDY_HMS.fullmatch(text)
    if m is None:
        raise ValueError(f"not a MM/DD/YYYY HH:MM:SS time: {text[:40]!r}")
    month, day, year, hour, minute, second = (int(g) for g in m.groups())
    return _aware(datetime(year, month, day, hour, minute, second), tz)


def parse_epoch(seconds: float) -> datetime:
    """Convert Unix epoch seconds to an aware UTC datetime.

    Raises:
        ValueError: ``seconds`` is not finite or out of the datetime range.
    """
    if not math.isfinite(seconds):
        raise ValueError(f"epoch seconds must be finite, got {seconds!r}")
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError) as exc:
        raise ValueError(f"epoch seconds out of range: {seconds!r}") from exc


def parse_iso_or_epoch(value: str | float, tz: tzinfo = UTC) -> datetime:
    """Parse an ISO 8601 time (offset optional, ``Z`` allowed) or Unix epoch seconds.

    ``value`` may be a number or a string holding either form (``"1764454298.5"`` or
    ``"2026-11-29T22:11:38.483+01:00"``). Naive ISO times are read in ``tz`` (UTC by default,
    as the timing-file schema in DESIGN.md says).

    Returns:
        aware UTC datetime.

    Raises:
        ValueError: neither form, or out of range.
    """
    if isinstance(value, int | float):
        return parse_epoch(float(value))
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return parse_epoch(seconds)
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        return _aware(parsed, tz)
    return _to_utc(parsed)
