"""Durations at the edge: text such as ``90s``, ``5m``, ``6h``, ``2d`` to seconds and back.

Units are converted to seconds once, here, where text enters (config, CLI flags) and leaves
(tables, Slack). Everything inside works in float seconds.
"""

from __future__ import annotations

import math
import re

_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(ms|min|s|m|h|d|w)", re.IGNORECASE)


def parse_duration_s(text: str | float | int) -> float:
    """Parse a duration into seconds.

    Accepts a number (seconds), a numeric string (``"90"``, ``"2.5"``) or unit parts that add up
    (``"90s"``, ``"5m"``, ``"1h30m"``, ``"2d"``, ``"500ms"``; units ms, s, m/min, h, d, w).

    Raises:
        ValueError: empty, negative, non-finite or unparseable text; the message quotes it.
    """
    if isinstance(text, bool):
        raise ValueError(f"not a duration: {text!r}")
    if isinstance(text, int | float):
        value = float(text)
    else:
        raw = text.strip()
        try:
            value = float(raw)
        except ValueError:
            compact = raw.replace(" ", "").lower()
            parts = _PART.findall(compact)
            if not parts or "".join(n + u for n, u in parts) != compact:
                raise ValueError(
                    f"not a duration: {text!r} (use seconds or e.g. 90s, 5m, 6h, 2d)"
                ) from None
            value = sum(float(n) * _UNIT_S[u] for n, u in parts)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"not a duration: {text!r} (must be finite and >= 0)")
    return value


def format_duration(seconds: float | None) -> str:
    """Render seconds for people: ``45s``, ``12m 30s``, ``2h 05m``, ``3d 4h``; ``-`` for None;
    a negative span with a minus sign (``-7h 00m``: a clock finding's offset)."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    if seconds < 0:
        return f"-{format_duration(-seconds)}"
    s = round(seconds)
    if seconds < 60:
        return f"{seconds:.3g}s" if seconds < 10 else f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {(s % 3600) // 60:02d}m"
    return f"{s // 86400}d {(s % 86400) // 3600}h"


def ci_label(confidence: float | None) -> str:
    """``90% CI``: a confidence interval's label at its level (an estimate's ``confidence``, the
    configured ``[estimation] confidence``); ``CI`` when the level is not known (an estimate
    stored before it was recorded)."""
    return "CI" if confidence is None else f"{confidence:.0%} CI"


def format_ago(epoch_s: float | None, now_s: float) -> str:
    """How long before ``now_s`` the Unix time ``epoch_s`` was, for people: ``5m 00s ago``;
    ``never`` for None (a time after ``now``, from a clock that stepped, reads ``0s ago``)."""
    if epoch_s is None:
        return "never"
    return f"{format_duration(max(0.0, now_s - epoch_s))} ago"


def format_in(epoch_s: float, now_s: float) -> str:
    """How long after ``now_s`` the Unix time ``epoch_s`` comes, for people: ``in 23h 59m``
    (``in 0s`` for a time already past)."""
    return f"in {format_duration(max(0.0, epoch_s - now_s))}"
