"""Timestamp formats to aware UTC datetimes; bad text raises ValueError only."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from ckpt_advisor.parsers.events import EventKind
from ckpt_advisor.parsers.timestamps import (
    LocalZone,
    first_pass_start,
    parse_iso_or_epoch,
    parse_mdy_hms,
    parse_ymd_hms,
)
from tests.parsers._helpers import parse, utc

PARIS = ZoneInfo("Europe/Paris")


def test_logging_asctime_is_read_in_the_given_zone() -> None:
    """``2026-11-29 22:11:38,483`` in Paris (UTC+1 in winter) is 21:11:38.483 UTC."""
    assert parse_ymd_hms("2026-11-29 22:11:38,483", PARIS) == datetime(
        2026, 11, 29, 21, 11, 38, 483000, tzinfo=UTC
    )


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        ("2026-11-29 22:11:38,483", (2026, 11, 29, 22, 11, 38, 483000)),
        ("2026-11-29T22:11:38.5", (2026, 11, 29, 22, 11, 38, 500000)),
        ("2026-11-29 22:11:38.12345", (2026, 11, 29, 22, 11, 38, 123450)),
        ("2026-11-29 22:11:38,123456", (2026, 11, 29, 22, 11, 38, 123456)),
        ("2026-11-29 23:59:59", (2026, 11, 29, 23, 59, 59, 0)),
        ("٢٠٢٦-11-29 22:11:38,483", (2026, 11, 29, 22, 11, 38, 483000)),  # Arabic-Indic year
    ],
)
def test_asctime_in_utc_reads_every_shape_as_its_fields(text: str, fields: tuple[int, ...]) -> None:
    """In UTC each shape (``T`` or space, 1 to 6 fraction digits after ``,`` or ``.``, digits
    ``fromisoformat`` refuses) gives its fields' instant, in ``datetime.UTC`` itself."""
    parsed = parse_ymd_hms(text, UTC)
    assert parsed == datetime(*fields, tzinfo=UTC)
    assert parsed.tzinfo is UTC


@pytest.mark.parametrize(
    "text", ["2026-11-29 24:00:00,000", "2026-02-29 10:00:00", "0000-01-01 00:00:00"]
)
def test_asctime_in_utc_refuses_what_the_fields_refuse(text: str) -> None:
    """Hour 24 (some Pythons' ``fromisoformat`` reads it as the next midnight), a day the
    month lacks and year 0 raise ValueError in UTC as in any other zone."""
    with pytest.raises(ValueError):
        parse_ymd_hms(text, UTC)
    with pytest.raises(ValueError):
        parse_ymd_hms(text, PARIS)


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


NEW_YORK = ZoneInfo("America/New_York")


def _hf_save(wall: str, step: int) -> list[str]:
    """An HF Trainer save's start and end lines (transformers 5.24.0 format) on 2026-11-01,
    ``wall`` being ``"start|end"`` local times."""
    start, end = wall.split("|")
    return [
        f"[INFO|trainer.py:4149] 2026-11-01 {start} >> Saving model checkpoint to "
        f"/data/hf/run/checkpoint-{step}",
        f"[INFO|modeling_utils.py:3639] 2026-11-01 {end} >> Model weights saved in "
        f"/data/hf/run/checkpoint-{step}/model.safetensors",
    ]


def test_a_save_across_the_repeated_hour_keeps_its_end_after_its_start() -> None:
    """In America/New_York clocks fall back at 02:00 EDT on 2026-11-01: a save from 01:58 EDT
    to 01:03 EST lasts 5 minutes, and later records of the repeated hour are read as EST."""
    lines = [
        *_hf_save("01:40:00,000|01:41:00,000", 100),
        *_hf_save("01:58:00,000|01:03:00,000", 200),
        *_hf_save("01:30:00,000|01:31:00,000", 300),
        *_hf_save("02:10:00,000|02:11:00,000", 400),
        "[INFO|trainer.py:2675] 2026-11-01 02:12:00,000 >> ***** Running training *****",
    ]  # the last record ends the last save (a file ending inside a save leaves it open)
    events, _ = parse(lines, "hf_trainer", tz=NEW_YORK)
    times = [
        e.time for e in events if e.kind in (EventKind.CHECKPOINT_START, EventKind.CHECKPOINT_END)
    ]
    assert times == [
        utc("2026-11-01 05:40:00"),
        utc("2026-11-01 05:41:00"),
        utc("2026-11-01 05:58:00"),
        utc("2026-11-01 06:03:00"),  # 01:03 EST, not 05:03 UTC (EDT)
        utc("2026-11-01 06:30:00"),
        utc("2026-11-01 06:31:00"),
        utc("2026-11-01 07:10:00"),
        utc("2026-11-01 07:11:00"),
    ]
    ends = [e for e in events if e.kind == EventKind.CHECKPOINT_END]
    assert [e.duration_s for e in ends] == [60.0, 300.0, 60.0, 60.0]


def test_the_first_pass_of_the_repeated_hour_stays_daylight_time() -> None:
    """Before clocks fall back, 01:10 then 01:50 (a little disorder of 2 minutes too) are EDT:
    the second occurrence is only chosen when the first would go back more than 5 minutes."""
    zone = LocalZone(NEW_YORK)
    read = [zone.to_utc(datetime(2026, 11, 1, 1, m)) for m in (10, 50, 48)]
    assert read == [datetime(2026, 11, 1, 5, m, tzinfo=UTC) for m in (10, 50, 48)]


def test_a_stamp_in_the_spring_gap_is_shifted_forward() -> None:
    """02:30 on 2026-03-08 does not exist in New York (02:00 EST -> 03:00 EDT): it is read as
    03:30 EDT, after 01:59 EST and before 03:40 EDT, in order."""
    zone = LocalZone(NEW_YORK)
    read = [zone.to_utc(datetime(2026, 3, 8, h, m)) for h, m in ((1, 59), (2, 30), (3, 40))]
    assert read == [
        datetime(2026, 3, 8, 6, 59, tzinfo=UTC),
        datetime(2026, 3, 8, 7, 30, tzinfo=UTC),
        datetime(2026, 3, 8, 7, 40, tzinfo=UTC),
    ]


def _transitions(zone: ZoneInfo, year: int) -> list[datetime]:
    """The UTC hours of ``year`` at which ``zone``'s offset changes (to the hour)."""
    t = datetime(year, 1, 1, tzinfo=UTC)
    found = []
    while t.year == year:
        if (t + timedelta(hours=1)).astimezone(zone).utcoffset() != t.astimezone(zone).utcoffset():
            found.append(t + timedelta(hours=1))
        t += timedelta(hours=1)
    return found


@pytest.mark.parametrize(
    ("name", "year"),
    [
        ("Europe/Paris", 2026),
        ("America/New_York", 2026),
        ("Australia/Lord_Howe", 2026),  # a half-hour DST
        ("Europe/Amsterdam", 1937),  # +00:19:32 to +00:20: an offset of odd seconds
        ("Africa/Monrovia", 1972),  # -00:44:30 to UTC
    ],
)
def test_a_second_read_again_gives_what_reading_each_stamp_does(name: str, year: int) -> None:
    """Around every offset change of a zone, a zone that reads a stamp from its whole second's
    remembered readings plus its microseconds gives the time, the resolved fold and the error
    of one that reads every stamp itself, stamp by stamp, forwards and stepping back."""
    zone = ZoneInfo(name)
    remembered, itself = LocalZone(zone), LocalZone(zone)
    itself._per_second = False
    changes = _transitions(zone, year)
    assert changes
    for change in changes:
        local = change.astimezone(zone).replace(tzinfo=None)
        stamps = [
            local + timedelta(seconds=k * 0.7373, microseconds=k % 7) for k in range(-9000, 9000)
        ]
        stamps += [
            local - timedelta(minutes=45) + timedelta(microseconds=k * 250_001) for k in range(99)
        ]
        for naive in stamps:
            assert _read(remembered, naive) == _read(itself, naive), naive
            assert remembered.last_utc == itself.last_utc
    for naive in (datetime(1, 1, 1, 0, 0, 0, 5), datetime.max, datetime(9999, 12, 31, 23, 0, 1)):
        assert _read(remembered, naive) == _read(itself, naive), naive


def _read(zone: LocalZone, naive: datetime) -> datetime | str:
    """``zone``'s reading of ``naive``, or the message of the error it raises."""
    try:
        return zone.to_utc(naive)
    except ValueError as exc:
        return str(exc)


def test_a_repeated_hour_stamp_no_earlier_stamp_places_is_kept_undecided() -> None:
    """01:10 with no stamp before it, or after a silence of an hour or more (00:05 EDT, then
    01:10: either pass follows it), is read as EDT with both readings kept; 01:50 after 01:10
    continues the file's own pass and keeps none."""
    zone = LocalZone(NEW_YORK)
    assert zone.to_utc(datetime(2026, 11, 1, 1, 10)) == datetime(2026, 11, 1, 5, 10, tzinfo=UTC)
    assert zone.undecided == (
        datetime(2026, 11, 1, 5, 10, tzinfo=UTC),
        datetime(2026, 11, 1, 6, 10, tzinfo=UTC),
    )
    zone.undecided = None
    zone.to_utc(datetime(2026, 11, 1, 1, 50))
    assert zone.undecided is None
    quiet = LocalZone(NEW_YORK)
    quiet.to_utc(datetime(2026, 11, 1, 0, 5))
    quiet.to_utc(datetime(2026, 11, 1, 1, 10))
    assert quiet.undecided is not None


@pytest.mark.parametrize(
    ("name", "stamp", "start"),
    [
        ("America/New_York", datetime(2026, 11, 1, 1, 0, 34, 840000), datetime(2026, 11, 1, 5)),
        ("America/New_York", datetime(2026, 11, 1, 1, 59, 59), datetime(2026, 11, 1, 5)),
        ("Europe/Paris", datetime(2026, 10, 25, 2, 30), datetime(2026, 10, 25, 0)),
        ("Australia/Lord_Howe", datetime(2026, 4, 5, 1, 45), datetime(2026, 4, 4, 14, 30)),
    ],
)
def test_the_first_pass_of_a_repeated_hour_begins_at_the_change_less_its_length(
    name: str, stamp: datetime, start: datetime
) -> None:
    """Where a repeated hour's first pass begins in UTC, from a stamp of it (to the second):
    01:00 EDT in New York, 02:00 CEST in Paris, 01:30 +11 on Lord Howe (a half-hour change)."""
    zone = ZoneInfo(name)
    first = stamp.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second = stamp.replace(tzinfo=zone, fold=1).astimezone(UTC)
    assert first_pass_start(first, second, zone) == start.replace(tzinfo=UTC)
