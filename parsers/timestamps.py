"""Timestamp strings from logs and timing files to aware UTC datetimes.

No framework prints a UTC offset (docs/FORMATS.md §0.3): a naive wall-clock stamp is the
node's local time, so it is read in the zone the caller gives (``tz``) and converted to UTC.
Timing files are the exception: their schema (DESIGN.md) says naive means UTC. Every function
raises ``ValueError`` (never anything else) on text that is not a valid time.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo

_YMD_HMS_MS = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[,.](\d{1,6}))?")
_MDY_HMS = re.compile(r"(\d\d)/(\d\d)/(\d{4}) (\d\d):(\d\d):(\d\d)")
_MICROSECOND = timedelta(microseconds=1)


def _to_utc(moment: datetime) -> datetime:
    try:
        return moment.astimezone(UTC)
    except OverflowError as exc:  # e.g. 0001-01-01 00:00 in a zone east of UTC
        raise ValueError(f"time out of range in UTC: {moment.isoformat()}") from exc


class LocalZone(tzinfo):
    """A zone for one parser's naive stamps that resolves DST transitions from context.

    Wall-clock stamps are ambiguous for an hour when clocks fall back (``01:30`` happens twice
    on 2026-11-01 in America/New_York) and do not exist for an hour when they spring forward.
    ``datetime`` alone reads an ambiguous time as its first occurrence (``fold=0``), which puts
    every record of the repeated hour up to an hour early and a save's end before its start.
    This zone remembers the UTC time of the last stamp it converted: an ambiguous wall time is
    read as its second occurrence (``fold=1``) when the first would lie more than
    ``tolerance`` before the previous stamp (logs move forward; a little disorder between
    ranks is tolerated); a time in the spring gap is shifted forward by the gap (PEP 495: with
    ``fold=0`` a missing time takes the offset before the transition, so ``02:30`` reads as
    ``03:30`` EDT). An ambiguous time that the previous stamp does not place (there is none,
    or it lies an hour or more before the first reading: either reading follows it) is read as
    its first occurrence and both readings are kept in :attr:`undecided`, for the file's clock
    to report. One instance per parser (:func:`parsers.make_parser` makes it): the state
    is that file's. Offsets, DST and names come from the wrapped zone (a ``ZoneInfo``).

    Args:
        zone: the nodes' local zone.
        tolerance_s: how far a stamp may go back before a repeated hour is taken as the
            second one, seconds.
    """

    def __init__(self, zone: tzinfo, tolerance_s: float = 300.0) -> None:
        self.zone = zone
        self.tolerance = timedelta(seconds=tolerance_s)
        self.last_utc: datetime | None = None
        self._per_second = type(zone) is ZoneInfo or (
            type(zone) is timezone and not zone.utcoffset(None) % timedelta(seconds=1)
        )
        """Whether both readings of a stamp are those of its whole second plus its
        microseconds: true of a ``ZoneInfo`` (``zoneinfo`` finds the offset from the local
        time's whole seconds, ``_get_local_timestamp`` in CPython's ``_zoneinfo``, and its
        offsets and transitions are whole seconds, RFC 8536) and of a fixed offset of whole
        seconds."""
        self._second: tuple[datetime, datetime, datetime] | None = None
        """A memo: the last whole second read and its two UTC readings (fold 0 and 1)."""
        self.undecided: tuple[datetime, datetime] | None = None
        """Both readings (the one taken first) of the last repeated-hour stamp that the file's
        stamps could not place (:meth:`at`), until the file's clock takes it
        (``parsers.clock.FileClock.printed``)."""

    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return self.zone.utcoffset(dt)

    def dst(self, dt: datetime | None) -> timedelta | None:
        return self.zone.dst(dt)

    def tzname(self, dt: datetime | None) -> str | None:
        return self.zone.tzname(dt)

    def __repr__(self) -> str:
        return f"LocalZone({self.zone!r})"

    def to_utc(self, naive: datetime) -> datetime:
        """The UTC time of a naive local stamp, resolved as the class docstring says.

        Raises:
            ValueError: out of range in UTC.
        """
        micro = naive.microsecond
        return self.at(naive.replace(microsecond=0) if micro else naive, micro)

    def _of_second(self, whole: datetime, micro: int) -> tuple[datetime, datetime] | None:
        """Both readings of ``whole`` plus ``micro`` µs from those of ``whole`` (remembered),
        or None where ``whole`` or the sum is out of range."""
        try:
            if self._second is None or self._second[0] != whole:
                self._second = (
                    whole,
                    _to_utc(whole.replace(tzinfo=self.zone, fold=0)),
                    _to_utc(whole.replace(tzinfo=self.zone, fold=1)),
                )
            after = _MICROSECOND * micro  # exact; timedelta(microseconds=) parses keywords
            return self._second[1] + after, self._second[2] + after
        except (OverflowError, ValueError):
            return None

    def at(self, whole: datetime, micro: int) -> datetime:
        """:meth:`to_utc` of the naive stamp ``whole`` (a whole second) plus ``micro`` µs; the
        readings of ``whole`` are remembered (seconds printed again cost no conversion).

        Raises:
            ValueError: out of range in UTC.
        """
        readings = self._of_second(whole, micro) if self._per_second else None
        if readings is None:  # read the stamp itself (and raise as it does)
            naive = whole.replace(microsecond=micro)
            readings = (
                _to_utc(naive.replace(tzinfo=self.zone, fold=0)),
                _to_utc(naive.replace(tzinfo=self.zone, fold=1)),
            )
        first, second = readings
        moment = first
        if second > first:  # ambiguous: the repeated hour after clocks fall back
            if self.last_utc is not None and first < self.last_utc - self.tolerance:
                moment = second
            elif self.last_utc is None or first - self.last_utc >= second - first:
                self.undecided = (first, second)  # no stamp before, or none within the hour
        elif second < first:  # nonexistent: in the gap when clocks spring forward
            moment = first  # fold=0 uses the offset before the gap: shifted forward by it
        self.last_utc = moment if self.last_utc is None else max(self.last_utc, moment)
        return moment


def first_pass_start(first: datetime, second: datetime, zone: tzinfo) -> datetime:
    """The UTC instant the first pass of a repeated hour begins, for a stamp of that hour read
    as ``first`` (aware UTC) or ``second`` in ``zone``: the change of offset lies after
    ``first`` and at most the hour's length later, and is found to the second (tzdata's
    changes are whole seconds, RFC 8536); the first pass ends there."""
    before = first.astimezone(zone).utcoffset()
    whole = first.replace(microsecond=0)  # still in the first pass: it begins on a second
    hour_s = round((second - first).total_seconds())
    low, high = 0, hour_s  # seconds after ``whole``: low has the old offset, high the new
    while high - low > 1:
        middle = (low + high) // 2
        if (whole + timedelta(seconds=middle)).astimezone(zone).utcoffset() == before:
            low = middle
        else:
            high = middle
    return whole + timedelta(seconds=high - hour_s)


def _aware(naive: datetime, tz: tzinfo) -> datetime:
    if isinstance(tz, LocalZone):
        return tz.to_utc(naive)
    return _to_utc(naive.replace(tzinfo=tz))


def parse_ymd_hms(text: str, tz: tzinfo) -> datetime:
    """Parse ``YYYY-MM-DD HH:MM:SS[,mmm]`` (Python logging ``asctime``) read in ``tz``.

    The fraction may use ``,`` (logging's default ``%(asctime)s``) or ``.`` and have 1 to 6
    digits. Example: ``2026-11-29 22:11:38,483`` (transformers explicit format, docs/FORMATS.md §1).

    In UTC (the default zone) a matched stamp is read by ``datetime.fromisoformat`` (C: ~0.2
    µs, where the fields and ``replace(tzinfo=)`` took ~1.9), with the same result: Python 3.11+
    reads this shape (``T`` or a space, a fraction of 1 to 6 digits after ``,`` or ``.``) as
    the fields, and a zero offset gives ``datetime.UTC`` itself. Hour 24 (which later Pythons
    read as the next day's midnight, where the fields refuse it) and what it refuses (a
    non-ASCII digit, no real date) are left to the fields, which raise as before.

    Returns:
        aware UTC datetime.

    Raises:
        ValueError: ``text`` is not in that shape or names no real date.
    """
    m = _YMD_HMS_MS.fullmatch(text)
    if m is None:
        raise ValueError(f"not a YYYY-MM-DD HH:MM:SS,mmm time: {text[:40]!r}")
    if tz is UTC and m[4] < "24":
        try:
            return datetime.fromisoformat(text + "+00:00")
        except ValueError:
            pass  # the fields below give the error (or read digits fromisoformat refuses)
    micro = int((m[7] or "0").ljust(6, "0"))
    whole = _whole_second(text[:19])
    if isinstance(tz, LocalZone):
        return tz.at(whole, micro)
    return _to_utc(whole.replace(microsecond=micro, tzinfo=tz))


@lru_cache(maxsize=256)
def _whole_second(stamp: str) -> datetime:
    """The naive time of a ``YYYY-MM-DD HH:MM:SS`` stamp (``T`` allowed between the two),
    already matched by :data:`_YMD_HMS_MS`: fixed-width fields.

    Raises:
        ValueError: no real date.
    """
    return datetime(
        int(stamp[:4]),
        int(stamp[5:7]),
        int(stamp[8:10]),
        int(stamp[11:13]),
        int(stamp[14:16]),
        int(stamp[17:19]),
    )


def parse_mdy_hms(text: str, tz: tzinfo) -> datetime:
    """Parse ``%m/%d/%Y %H:%M:%S`` read in ``tz``, e.g. ``10/20/2023 15:41:03``.

    The ``datefmt`` of the transformers example scripts' ``logging.basicConfig``
    (docs/FORMATS.md §1).

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


_MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTHS = {name: number for number, name in enumerate(_MONTH_NAMES, 1)}
_HALF_YEAR_S = 183 * 86400


def resolve_year(month: int, day: int, reference: datetime | None, year_hint: int | None) -> int:
    """The year of a stamp printed without one (``E1206 18:44:12``, ``Feb 14 05:03:41``).

    ``reference`` is the last full date seen in the same file: the stamp is taken in the year
    that puts it within half a year of it (so ``Jan 2`` after ``2024-12-31`` is 2025). Without a
    reference, ``year_hint`` (``make_parser(year_hint=…)``) is used as is.

    Raises:
        ValueError: neither a reference nor a hint: the year is unknown, never guessed.
    """
    if reference is None:
        if year_hint is None:
            raise ValueError("stamp has no year and none is known yet")
        return year_hint
    year = reference.year
    for candidate in (year, year + 1, year - 1):
        try:
            moment = datetime(candidate, month, day, tzinfo=reference.tzinfo)
        except ValueError:  # Feb 29 in a non-leap year
            continue
        if abs((moment - reference).total_seconds()) <= _HALF_YEAR_S:
            return candidate
    return year


def parse_mmdd_hms(
    mmdd: str, hms: str, tz: tzinfo, reference: datetime | None, year_hint: int | None
) -> datetime:
    """Parse a glog-style ``<MMDD> HH:MM:SS`` stamp (no year) read in ``tz``.

    ``mmdd`` is ``(tm_mon+1)*100+tm_mday`` printed with ``%d``, so the month is NOT zero-padded
    in c10's logger (``321`` = Mar 21, ``1206`` = Dec 6; ``c10/util/Logging.cpp``, docs/FORMATS.md
    §0.4) and is in torch ≥2.4's launcher (``0801``). The sub-second part that follows the
    stamp is not passed: c10 prints CLOCK_MONOTONIC nanoseconds there, not wall time.

    Raises:
        ValueError: no real date, or no year known (see :func:`resolve_year`).
    """
    if not (3 <= len(mmdd) <= 4 and mmdd.isdigit()):
        raise ValueError(f"not a MMDD date: {mmdd!r}")
    month, day = int(mmdd[:-2]), int(mmdd[-2:])
    hour, minute, second = (int(part) for part in hms.split(":"))
    year = resolve_year(month, day, reference, year_hint)
    return _aware(datetime(year, month, day, hour, minute, second), tz)


def parse_syslog_time(
    text: str, tz: tzinfo, reference: datetime | None, year_hint: int | None
) -> datetime:
    """Parse ``Mon DD HH:MM:SS`` (journalctl/syslog, no year, e.g. ``Feb 14 05:03:41``) in ``tz``.

    Raises:
        ValueError: not that shape, no real date, or no year known (see :func:`resolve_year`).
    """
    parts = text.split()
    if len(parts) != 3 or parts[0] not in _MONTHS or not parts[1].isdigit():
        raise ValueError(f"not a 'Mon DD HH:MM:SS' time: {text[:40]!r}")
    month, day = _MONTHS[parts[0]], int(parts[1])
    hour, minute, second = (int(part) for part in parts[2].split(":"))
    year = resolve_year(month, day, reference, year_hint)
    return _aware(datetime(year, month, day, hour, minute, second), tz)


def parse_ctime(text: str, tz: tzinfo) -> datetime:
    """Parse ``Www Mmm DD HH:MM:SS YYYY`` in ``tz`` (``dmesg -T``: ``Sun Feb 20 06:16:58 2022``).

    Raises:
        ValueError: not that shape or no real date.
    """
    parts = text.split()
    if len(parts) != 5 or parts[1] not in _MONTHS or not parts[2].isdigit():
        raise ValueError(f"not a ctime-style time: {text[:40]!r}")
    hour, minute, second = (int(part) for part in parts[3].split(":"))
    moment = datetime(int(parts[4]), _MONTHS[parts[1]], int(parts[2]), hour, minute, second)
    return _aware(moment, tz)


def parse_elastic_time(text: str, tz: tzinfo) -> datetime:
    """Parse torchelastic's ``YYYY-MM-DD_HH:MM:SS`` (``ChildFailedError`` banner ``time :``).

    ``datetime.fromtimestamp(ts).isoformat(sep="_")`` in
    ``torch/distributed/elastic/multiprocessing/errors/__init__.py``: local time, in ``tz``.

    Raises:
        ValueError: not that shape or no real date.
    """
    return parse_ymd_hms(text.replace("_", " ", 1), tz)
