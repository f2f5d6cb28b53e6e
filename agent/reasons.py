"""Why a job is in its state (:class:`rules.model.Reason`) as a short sentence, at the edge.

The sentence answers "why was nothing posted?" (or why something was) in the one duration style
of the tables, the log and Slack (:func:`agent.units.format_duration`); times are UTC. The
typed reason itself is what ``--json`` and the metrics give (``decision``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from ckpt_advisor.agent.units import format_duration as d
from ckpt_advisor.rules.model import Reason, ReasonCode

_MISSING = {
    "checkpoint_cost": "checkpoint cost C unknown",
    "mtbf": "MTBF M unknown",
    "current_interval": "current interval unknown",
}


def _utc(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _ratio(v: Mapping[str, Any]) -> str:
    return f"{v['ratio']:.2f}× the optimum"


def _gpu_h(value: float) -> str:
    return f"{value:,.2g}" if abs(value) < 10 else f"{value:,.0f}"


def _insufficient(reason: Reason) -> str:
    v = reason.values
    parts = [_MISSING[name] for name in reason.missing if name in _MISSING]
    if "saves" in reason.missing:
        parts.append(f"{v['n_saves']:.0f} of {v['min_saves']:.0f} timed saves needed")
    if "failures" in reason.missing:
        parts.append(f"{v['n_failures']:.0f} of {v['min_failures']:.0f} interruptions needed")
    return "not enough data: " + ("; ".join(parts) or "the drift ratio is unknown")


def _confidence(v: Mapping[str, Any]) -> str:
    high = v.get("band_high_s")
    band = f"{d(v['band_low_s'])}–{d(high)}" if high is not None else f"≥ {d(v['band_low_s'])}"
    return (
        f"{_ratio(v)}, but the current {d(v['current_s'])} is inside the optimum's confidence "
        f"band ({band}): the data cannot tell it is wrong"
    )


def _below(v: Mapping[str, Any]) -> str:
    return (
        f"{_ratio(v)}, but the change would save {_gpu_h(v['excess_gpu_hours_per_day'])} "
        f"GPU-h/day, below the {_gpu_h(v['min_excess_gpu_hours_per_day'])} GPU-h/day threshold"
    )


def _drift(v: Mapping[str, Any]) -> str:
    excess = v.get("excess_gpu_hours_per_day")
    worth = "" if excess is None else f", {_gpu_h(excess)} GPU-h/day to gain"
    return f"drift: {_ratio(v)} (beyond {v['drift_ratio']:g}×){worth}"


def _held(reason: Reason) -> str:
    return f" (a {reason.held} message is held)" if reason.held is not None else ""


def _silenced(reason: Reason) -> str:
    return f"silenced until {_utc(reason.values['until_s'])}{_held(reason)}"


def _reading(reason: Reason) -> str:
    v = reason.values
    files = f"{v['files']:.0f} file(s)"
    if (behind := v["bytes_behind"]) >= 100_000:
        where = f"{files}, {behind / 1e6:,.1f} MB behind"
    elif behind:
        where = f"{files}, {behind:,.0f} bytes behind"
    else:
        where = f"{files} read, their last lines not settled yet"
    return f"messages wait: reading its backlog: {where}{_held(reason)}"


def _values(text: Callable[[Mapping[str, Any]], str]) -> Callable[[Reason], str]:
    return lambda reason: text(reason.values)


_TEXT: dict[ReasonCode, Callable[[Reason], str]] = {
    ReasonCode.INSUFFICIENT_DATA: _insufficient,
    ReasonCode.WITHIN_BAND: _values(
        lambda v: f"within band: {_ratio(v)} (drift beyond {v['drift_ratio']:g}×)"
    ),
    ReasonCode.WITHIN_CONFIDENCE: _values(_confidence),
    ReasonCode.BELOW_THRESHOLD: _values(_below),
    ReasonCode.DRIFT: _values(_drift),
    ReasonCode.HYSTERESIS: _values(
        lambda v: (
            f"hysteresis: {_ratio(v)}, between the resolve band ({v['resolve_ratio']:g}×) and "
            f"drift ({v['drift_ratio']:g}×): the open episode stays open"
        )
    ),
    ReasonCode.ALREADY_POSTED: _values(
        lambda v: (
            f"already posted at {_utc(v['last_sent_s'])}: repeated from "
            f"{_utc(v['next_repeat_s'])}, or sooner if the advice moves by more than "
            f"{v['change_fraction']:.0%}"
        )
    ),
    ReasonCode.REPEAT_DUE: _values(lambda v: f"still {_ratio(v)}: repeated"),
    ReasonCode.ADVICE_MOVED: _values(
        lambda v: (
            f"the advice moved to {d(v['recommended_s'])}"
            + (f" from {d(v['previous_s'])}" if "previous_s" in v else "")
        )
    ),
    ReasonCode.RESOLVED: _values(
        lambda v: f"back within range: {_ratio(v)} (inside {v['resolve_ratio']:g}×)"
    ),
    ReasonCode.SILENCED: _silenced,
    ReasonCode.READING_BACKLOG: _reading,
}


def render_reason(reason: Reason) -> str:
    """One short sentence for ``reason`` (no trailing period)."""
    return _TEXT[reason.code](reason)
