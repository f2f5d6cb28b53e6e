"""Argument checks shared by the rules: each returns the value or raises a ``ValueError``."""

from __future__ import annotations

import math


def require_positive(name: str, value: float) -> float:
    """Return ``value`` as a float if it is finite and > 0; raise ``ValueError``."""
    number = float(value)
    if not math.isfinite(number) or number <= 0.0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return number


def require_non_negative(name: str, value: float) -> float:
    """Return ``value`` as a float if it is finite and >= 0; raise ``ValueError``."""
    number = float(value)
    if not math.isfinite(number) or number < 0.0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return number


def require_probability(name: str, value: float) -> float:
    """Return ``value`` if it lies strictly between 0 and 1; raise ``ValueError``."""
    number = float(value)
    if not 0.0 < number < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value!r}")
    return number


def require_count(name: str, value: int, *, minimum: int = 0) -> int:
    """Return ``value`` if it is an int >= ``minimum``; raise ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value
