"""Durations at the edge: parsing config/CLI text to seconds and rendering seconds for people."""

from __future__ import annotations

import pytest

from ckpt_advisor.agent.units import format_duration, parse_duration_s


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90.0),
        ("5m", 300.0),
        ("6h", 21600.0),
        ("2d", 172800.0),
        ("1h30m", 5400.0),
        ("2.5", 2.5),
        (7, 7.0),
        ("500ms", 0.5),
        ("1w", 604800.0),
    ],
)
def test_parse_duration(text: str | int, seconds: float) -> None:
    """Numbers are seconds; unit parts add up."""
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "5 parsecs", "-3", "nan", "5m garbage"])
def test_parse_duration_rejects_and_quotes(text: str) -> None:
    """Unparseable or negative text raises ValueError quoting the input."""
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration_s(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (0.072, "0.072s"),
        (45, "45s"),
        (750, "12m 30s"),
        (9000, "2h 30m"),
        (300000, "3d 11h"),
        (-25200.0, "-7h 00m"),
        (-0.5, "-0.5s"),
    ],
)
def test_format_duration(seconds: float | None, text: str) -> None:
    """Seconds render in the largest sensible units, a negative span with its sign (a zone
    offset in ``parse``: it printed ``-2.52e+04s``)."""
    assert format_duration(seconds) == text
