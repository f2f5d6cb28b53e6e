"""A bounded figure shown as a bound, in one place: how the figures of an ``estimates --json``
row that rest on C and M are marked when either is known only from below
(``checkpoint_cost_is_lower_bound``: C from log lines that miss part of a save;
``mtbf_is_lower_bound``: running time only bounded), for the tables, the plot and the JSON
contracts alike.

The current interval is the save spacing less C: at a lower-bound C it is an upper bound
(``≤ 3.74s``: :func:`current_text`). Daly's interval grows with C and with M: at a lower bound
of either it is a range, or a lower bound when that range has no upper end (``≥ 1.2s``, the
setting ``save_steps=9 or more``: :func:`interval_is_open_above`). Waste grows with C and falls
with M; goodput the other way round. A figure computed at a lower-bound C is then a bound one
way, at a lower-bound M a bound the other way, and at lower bounds of both no bound either way
(:func:`bound_mark`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ckpt_advisor.agent.units import format_duration

if TYPE_CHECKING:
    from ckpt_advisor.rules.model import JobEstimate

AT_LEAST, AT_MOST = "≥ ", "≤ "
"""The marks put before a lower and an upper bound (``≥ 43s``, ``≤ 79.2%``)."""

NO_BOUND = "C and M are both lower bounds: no bound either way"
"""Why a figure that :func:`bound_mark` gives None for is not shown (``-``)."""


ROW_KEYS = (
    "checkpoint_cost_s",
    "checkpoint_cost_is_lower_bound",
    "checkpoint_cost_range_s",
    "mtbf_s",
    "mtbf_is_lower_bound",
    "recommended_interval_s",
    "recommended_interval_range_s",
    "recommended_setting",
    "current_interval_s",
    "current_interval_is_upper_bound",
)
"""The figures of an ``estimates --json`` row the marks read: :func:`estimate_row`."""


def estimate_row(est: JobEstimate) -> dict[str, Any]:
    """The figures of ``est`` the marks read (:data:`ROW_KEYS`), under their ``estimates
    --json`` names, which are the estimate's field names, for callers that hold the estimate
    itself (the Slack message, ``goodput``); ranges stay tuples ``(low, high)``."""
    return {key: getattr(est, key) for key in ROW_KEYS}


def at_least(text: str, is_lower_bound: bool) -> str:
    """``text`` (a figure as shown), after :data:`AT_LEAST` when it is a lower bound:
    ``≥ 43s``."""
    return f"{AT_LEAST}{text}" if is_lower_bound else text


def at_most(text: str, is_upper_bound: bool) -> str:
    """``text`` (a figure as shown), after :data:`AT_MOST` when it is an upper bound:
    ``≤ 3.74s``."""
    return f"{AT_MOST}{text}" if is_upper_bound else text


def current_text(row: Mapping[str, Any]) -> str:
    """The row's current interval (``2h 00m``), ``≤ 3.74s`` when it is an upper bound (the save
    spacing less a lower-bound C: ``current_interval_is_upper_bound``); ``-`` unknown."""
    current = format_duration(row.get("current_interval_s"))
    upper = bool(row.get("current_interval_is_upper_bound"))
    return at_most(current, upper and row.get("current_interval_s") is not None)


def cost_text(row: Mapping[str, Any]) -> str:
    """The row's C (``43s``), or ``≥ 43s`` / ``43s–2m 01s`` when it is a lower bound from log
    lines (the plausible range when it has an upper end); ``-`` unknown."""
    cost = format_duration(row.get("checkpoint_cost_s"))
    if not row.get("checkpoint_cost_is_lower_bound") or row.get("checkpoint_cost_s") is None:
        return cost
    high = (row.get("checkpoint_cost_range_s") or [None, None])[1]
    return at_least(cost, True) if high is None else f"{cost}–{format_duration(high)}"


def mtbf_text(row: Mapping[str, Any]) -> str:
    """The row's M (``5h 49m``), ``≥ 5h 49m`` when it is a lower bound (running time of files
    without timestamps not all measured); ``-`` unknown."""
    mtbf = format_duration(row.get("mtbf_s"))
    return at_least(mtbf, bool(row.get("mtbf_is_lower_bound")) and row.get("mtbf_s") is not None)


def bound_mark(row: Mapping[str, Any], *, grows_with_cost: bool) -> str | None:
    """The mark of a figure computed at the row's C and M (a waste or a simulated goodput):
    ``""`` when neither is a lower bound; when one is, :data:`AT_LEAST` or :data:`AT_MOST` as the
    figure grows or falls with it (``grows_with_cost``: it grows with C and falls with M, as
    waste does; else the reverse, as goodput); None when both are: the figure is then no bound
    either way, and is not to be shown as one."""
    cost_low = bool(row.get("checkpoint_cost_is_lower_bound"))
    mtbf_low = bool(row.get("mtbf_is_lower_bound"))
    if cost_low and mtbf_low:
        return None
    if not (cost_low or mtbf_low):
        return ""
    return AT_LEAST if cost_low == grows_with_cost else AT_MOST


def at_bounds(row: Mapping[str, Any]) -> str:
    """`` if C is 43s``, `` if M is 5h 49m``, `` if C is 43s and M is 5h 49m``: the lower bounds
    a figure that is no bound either way (as a difference of two bounds: a gain in points) is
    computed at, to follow it; ``""`` when neither C nor M is a lower bound (or is unknown)."""
    at = [
        f"{name} is {format_duration(row.get(key))}"
        for name, key, flag in (
            ("C", "checkpoint_cost_s", "checkpoint_cost_is_lower_bound"),
            ("M", "mtbf_s", "mtbf_is_lower_bound"),
        )
        if row.get(flag) and row.get(key) is not None
    ]
    return f" if {' and '.join(at)}" if at else ""


def replay_mark(row: Mapping[str, Any], *, grows_with_cost: bool) -> str:
    """The mark of a figure replayed from the job's own recorded lives at its C (a backtest's
    waste or goodput, :func:`rules.simulate.replay`): it rests on C alone (M does not enter a
    replay), so :data:`AT_LEAST` or :data:`AT_MOST` as it grows or falls with C when C is a
    lower bound (:func:`bound_mark` with M taken as measured), else ``""``. At a lower-bound M
    the lives replayed are the timed running time only: the figure is that replay's, not a
    bound of the job's (the untimed files' running time and interruptions are not in it)."""
    cost_only = {"checkpoint_cost_is_lower_bound": row.get("checkpoint_cost_is_lower_bound")}
    return bound_mark(cost_only, grows_with_cost=grows_with_cost) or ""


def interval_is_bounded(row: Mapping[str, Any]) -> bool:
    """Whether the row's recommended interval is a range or a lower bound: C or M is a lower
    bound."""
    return bool(row.get("checkpoint_cost_is_lower_bound") or row.get("mtbf_is_lower_bound"))


def interval_is_open_above(row: Mapping[str, Any]) -> bool:
    """Whether the row's recommended interval has no upper end: C or M is a lower bound and the
    interval's range over the plausible C and M's interval (``recommended_interval_range_s``)
    is unknown or open above."""
    bounds = row.get("recommended_interval_range_s")
    return interval_is_bounded(row) and (not bounds or bounds[1] is None)


def setting_is_lower_bound(row: Mapping[str, Any]) -> bool:
    """Whether the row's ``recommended_setting`` is a lower bound, to be read ``or more`` (its
    interval open above); False without a setting (``recommended_setting_is_lower_bound``)."""
    return bool(row.get("recommended_setting")) and interval_is_open_above(row)
