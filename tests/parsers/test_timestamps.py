"""Timestamp formats to aware UTC datetimes; bad text raises ValueError only."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from parsers.timestamps import parse_iso_or_epoch, parse_mdy_hms, parse_ymd_hms

PARIS = ZoneInfo("Europe/Paris")


def test_logging_asctime_is_read_in_the_given_zone() -> None:
    """``2026-11-29 22:11:38,483`` in Paris (UTC+1 in winter) is 21:11:38.483 UTC."""
    assert parse_ymd_hms("2026-11-29 22:11:38,483", PARIS) == datetime(
        2026, 11, 29, 21, 11, 38, 483000, tzinfo=UTC
    )


def test_us_date_format_is_read_in_the_given_zone() -> None:
    """``10/20/2023 15:41:03`` in Paris (UTC+2 in summer) is 13:41:03 UTC."""
    assert parse_mdy_hms("10/20/2023 15:41:03", PARIS) == datetime(
        2023, 10, 20, 13, 41, 3, tzinfo=UTC
    )


def test_iso_with_offset_and_epoch_agree() -> None:
    """An ISO time with offset, a ``Z`` time and epoch seconds name the same instant."""
    instant = datetime(2026, 11, 29, 22, 11, 38, 500000, tzinfo=UTC)
    assert parse_iso_or_epoch("2026-11-29T23:11:38.5+01:00") == instant
    assert parse_iso_or_epoch("2026-11-29T22:11:38.5Z") == instant
    assert parse_iso_or_epoch(instant.timestamp()) == instant
    assert parse_iso_or_epoch(str(instant.timestamp())) == instant


def test_naive_iso_is_utc_by_default() -> None:
    """Timing files' naive ISO times mean UTC."""
    assert parse_iso_or_epoch("2026-11-29 22:11:38") == datetime(
        2026, 11, 29, 22, 11, 38, tzinfo=UTC
    )
    assert parse_iso_or_epoch("2026-11-29 22:11:38", timezone(timedelta(hours=2))).hour == 20


@pytest.mark.parametrize(
    "call",
    [
        lambda: parse_ymd_hms("2026-02-30 10:00:00,000", UTC),
        lambda: parse_ymd_hms("yesterday", UTC),
        lambda: parse_mdy_hms("13/01/2026 10:00:00", UTC),
        lambda: parse_iso_or_epoch("nan"),
        lambda: parse_iso_or_epoch(1e300),
        lambda: parse_iso_or_epoch("0001-01-01T00:00:00+01:00"),
        lambda: parse_iso_or_epoch("soon"),
    ],
)
def test_bad_times_raise_value_error(call: Callable[[], object]) -> None:
    """Impossible dates, non-finite or out-of-range numbers and junk raise ValueError."""
    with pytest.raises(ValueError):
        call()
