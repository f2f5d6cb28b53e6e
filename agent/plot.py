"""The waste curve of a job as a PNG: ``ckpt-advisor plot --job NAME -o FILE.png``, and the
picture attached to a Slack message.

The curve is Daly's full waste model under exponential failures
(:func:`rules.interval.exponential_waste_fraction`, the one the estimates report) against the
checkpoint interval, with the current interval, the recommended one and its band. What the
picture must make plain at a glance:

- the interval's unit is picked from the range drawn (seconds, minutes or hours), and the log
  axis is labelled at 1-2-5 steps only, so labels never run into each other;
- when C is only a lower bound, the curve is drawn over the plausible C (a shaded band between
  the curves at its ends, or the curve at the bound, labelled so, when C has no upper bound);
  when C or M is one, they are marked so in the title (``C ≥ 43s``, ``M ≥ 5h 49m``), the
  recommended range is open to the right when the interval's is, with the recommended interval
  ``≥``, and the waste at each interval is marked as the bound it is (``≥`` at a lower-bound C,
  ``≤`` at a lower-bound M, left out at both: :func:`agent.marks.bound_mark`);
- a job with insufficient data says so on the plot (and why), curve or no curve.

matplotlib is imported inside :func:`draw` (with the non-interactive Agg backend), so the CLI and
the daemon start without it.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ckpt_advisor.agent.marks import (
    at_least,
    bound_mark,
    cost_text,
    current_text,
    interval_is_bounded,
    interval_is_open_above,
    mtbf_text,
)
from ckpt_advisor.agent.units import format_duration
from ckpt_advisor.rules.interval import exponential_waste_fraction

POINTS = 200
UNITS = (("s", 1.0, 180.0), ("min", 60.0, 3 * 3600.0), ("h", 3600.0, math.inf))
"""(name, seconds per unit, largest interval drawn in it)."""


def waste_curve(
    mtbf_s: float, cost_s: float, restart_s: float, intervals_s: list[float]
) -> list[float]:
    """Waste under exponential failures (Daly's full model,
    :func:`rules.interval.exponential_waste_fraction`, the one the estimates report) at each
    interval."""
    return [exponential_waste_fraction(t, mtbf_s, cost_s, restart_s) for t in intervals_s]


@dataclass(frozen=True, slots=True)
class Curve:
    """What a plot draws, in seconds and fractions (``plot --json``).

    Attributes:
        job: the job.
        axis_unit: the unit the x axis is labelled in (``s``, ``min`` or ``h``); the
            intervals themselves stay in seconds.
        interval_s: the intervals of the curve (x), seconds, ascending; empty without C or M.
        waste: waste at each, at C (the lower bound when C is one).
        waste_upper: waste at the upper end of the plausible C when C is a lower bound with
            one, else None.
        insufficient: why the data do not suffice (the estimate's ``decision_text``), or None.
    """

    job: str
    axis_unit: str
    interval_s: list[float]
    waste: list[float]
    waste_upper: list[float] | None
    insufficient: str | None

    def to_json(self) -> dict[str, Any]:
        """``{"job", "x_s": [...] (seconds), "axis_unit", "waste": [...], "waste_upper", …}``.

        ``x`` and ``unit`` are the contract's first names for ``x_s`` and ``axis_unit``, kept
        (docs/DESIGN.md, "Contracts"): ``x`` is in seconds whatever ``unit`` says.
        """
        return {
            "job": self.job,
            "x_s": self.interval_s,
            "axis_unit": self.axis_unit,
            "unit": self.axis_unit,
            "x": self.interval_s,
            "waste": self.waste,
            "waste_upper": self.waste_upper,
            "insufficient_data": self.insufficient,
        }


def _marks(row: dict[str, Any]) -> list[float]:
    bounds = row.get("recommended_interval_range_s") or row.get("recommended_interval_ci_s") or []
    values = [row.get("recommended_interval_s"), row.get("current_interval_s"), *bounds]
    return [float(v) for v in values if v]


def unit_for(high_s: float) -> tuple[str, float]:
    """The unit an axis up to ``high_s`` seconds reads best in: ``("min", 60.0)``."""
    return next((name, scale) for name, scale, top in UNITS if high_s <= top)


def empty_curve(job: str, why: str, marks_s: Sequence[float] = ()) -> Curve:
    """A curve with nothing to draw (C or M unknown, or no estimate stored at all) and ``why``:
    its axis in the unit of three times the largest of ``marks_s`` (intervals, seconds), of
    an hour without."""
    unit = unit_for(max(marks_s) * 3.0 if marks_s else 3600.0)[0]
    return Curve(job, unit, [], [], None, why)


def curve(row: dict[str, Any]) -> Curve:
    """The curve of one ``estimates --json`` object (``mtbf_s`` and ``checkpoint_cost_s``
    known, else an empty curve), over a third of the smallest to three times the largest
    interval marked."""
    mtbf_s, cost_s = row.get("mtbf_s"), row.get("checkpoint_cost_s")
    insufficient = row.get("decision_text") if row.get("status") == "insufficient_data" else None
    marks = _marks(row)
    if mtbf_s is None or cost_s is None or not marks:
        return empty_curve(str(row.get("job")), insufficient or "M or C is unknown", marks)
    low, high = min(marks) / 3.0, max(marks) * 3.0
    intervals_s = [float(t) for t in np.geomspace(low, high, POINTS)]
    restart_s = row.get("restart_cost_s") or 0.0
    upper = None
    cost_range = row.get("checkpoint_cost_range_s")
    if row.get("checkpoint_cost_is_lower_bound") and cost_range and cost_range[1] is not None:
        upper = waste_curve(mtbf_s, float(cost_range[1]), restart_s, intervals_s)
    waste = waste_curve(mtbf_s, cost_s, restart_s, intervals_s)
    return Curve(str(row.get("job")), unit_for(high)[0], intervals_s, waste, upper, insufficient)


def draw(row: dict[str, Any], out: Path | io.BytesIO) -> Curve:
    """Draw a job's waste against the checkpoint interval (:func:`figure`) as a PNG into
    ``out`` (a path or a buffer); returns the curve drawn. Raises OSError when the file cannot
    be written."""
    import matplotlib.pyplot as plt

    fig, drawn = figure(row)
    try:
        fig.savefig(out, format="png")
    finally:
        plt.close(fig)
    return drawn


def figure(row: dict[str, Any]) -> tuple[Any, Curve]:
    """The matplotlib figure of a job's waste curve, and the curve (the caller closes it).

    Marks the current interval, the recommended one and its band: the optimum's confidence band,
    or, when C or M is a lower bound, Daly's interval over M's interval and the plausible C (open
    to the right from the recommended interval when it has no upper end). ``row`` is one
    ``estimates --json`` object.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    drawn = curve(row)
    scale = dict((name, s) for name, s, _ in UNITS)[drawn.axis_unit]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    if drawn.interval_s:
        _draw_curve(ax, row, drawn, scale)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_minor_locator(LogLocator(base=10, subs=tuple(range(1, 10))))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlim(drawn.interval_s[0] / scale, drawn.interval_s[-1] / scale)
        ax.legend(loc="best", fontsize="small")
        ax.grid(True, which="both", alpha=0.3)
    else:
        ax.set_xticks([])
        ax.set_yticks([])
    if drawn.insufficient:
        ax.text(
            0.5,
            0.5 if not drawn.interval_s else 0.12,
            "insufficient data: " + _wrap(drawn.insufficient.removeprefix("not enough data: ")),
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize="medium",
            color="tab:orange",
            bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "tab:orange"},
        )
    ax.set_xlabel(f"checkpoint interval, compute time between saves ({drawn.axis_unit})")
    ax.set_ylabel("time lost (%)")
    title = _title(row) + (" — insufficient data" if drawn.insufficient else "")
    ax.set_title(title, fontsize="medium")
    fig.tight_layout()
    return fig, drawn


def _draw_curve(ax: Any, row: dict[str, Any], drawn: Curve, scale: float) -> None:
    mtbf_s, cost_s = float(row["mtbf_s"]), float(row["checkpoint_cost_s"])
    restart_s = row.get("restart_cost_s") or 0.0
    x = [t / scale for t in drawn.interval_s]
    waste = [100.0 * w for w in drawn.waste]
    if drawn.waste_upper is not None:
        high_c = row["checkpoint_cost_range_s"][1]
        ax.fill_between(
            x,
            waste,
            [100.0 * w for w in drawn.waste_upper],
            color="grey",
            alpha=0.3,
            label=f"waste for C from {format_duration(cost_s)} to {format_duration(high_c)}",
        )
    label = _curve_label(row, banded=drawn.waste_upper is not None)
    rough = drawn.insufficient is not None  # drawn, but not to be trusted yet
    ax.plot(x, waste, color="grey" if rough else "black", linestyle=":" if rough else "-",
            label=label + (" (too little data to trust)" if rough else ""))  # fmt: skip
    bounded, open_above = interval_is_bounded(row), interval_is_open_above(row)
    band = row.get("recommended_interval_range_s") if bounded else None
    if open_above and row.get("recommended_interval_s"):
        band = [row["recommended_interval_s"], None]  # at least the interval at the bounds
    band = band or row.get("recommended_interval_ci_s")
    if band:
        right = band[1] if band[1] is not None else drawn.interval_s[-1]
        what = "recommended range" if bounded else "optimum's confidence band"
        if band[1] is None:
            what += f": {at_least(format_duration(band[0]), True)}"
        ax.axvspan(band[0] / scale, right / scale, color="tab:green", alpha=0.15, label=what)
    mark = bound_mark(row, grows_with_cost=True)  # waste at the bounds: None, no bound either way
    for key, colour, name in (
        ("recommended_interval_s", "tab:green", "recommended"),
        ("current_interval_s", "tab:red", "current"),
    ):
        value = row.get(key)
        if value:
            w = exponential_waste_fraction(value, mtbf_s, cost_s, restart_s)
            shown = (
                at_least(format_duration(value), open_above)
                if name == "recommended"
                else current_text(row)
            )
            shown += "" if mark is None else f", {mark}{w:.1%}"
            ax.axvline(value / scale, color=colour, linestyle="--", label=f"{name}: {shown}")


def _curve_label(row: dict[str, Any], *, banded: bool) -> str:
    """The curve's legend entry: Daly's waste, or the C and M it is drawn at that are lower
    bounds, and which way the waste goes with each (``banded``: C has a plausible upper end, the
    band between the curves at its ends is drawn too)."""
    c, m = format_duration(row["checkpoint_cost_s"]), format_duration(row["mtbf_s"])
    c_low, m_low = (
        bool(row.get("checkpoint_cost_is_lower_bound")),
        bool(row.get("mtbf_is_lower_bound")),
    )
    if banded:
        also = f", if M is {m} (a lower bound: less if M is)" if m_low else ""
        return f"waste at C's lower bound, {c}{also}"
    if c_low and m_low:
        return f"waste if C is {c} and M is {m} (lower bounds: more if C is, less if M is)"
    if c_low:
        return f"waste if C is {c} (a lower bound: more if C is)"
    if m_low:
        return f"waste if M is {m} (a lower bound: less if M is)"
    return "waste (Daly, exponential failures)"


def _title(row: dict[str, Any]) -> str:
    """``JOB: M 6h 00m, C ≥ 43s, R 10m 00s``: C and M marked where bounded (agent/marks.py)."""
    restart = row.get("restart_cost_s")
    r = "R not measured (0 assumed)" if restart is None else f"R {format_duration(restart)}"
    return f"{row.get('job')}: M {mtbf_text(row)}, C {cost_text(row)}, {r}"


def _wrap(text: str, width: int = 60) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width))


def plot_waste_curve(row: dict[str, Any], path: str | Path) -> tuple[Path, Curve]:
    """Draw ``row``'s waste curve (:func:`draw`) into the PNG file ``path``; returns the path
    and the curve. Raises OSError when the file cannot be written."""
    out = Path(path)
    return out, draw(row, out)


def render_waste_curve(row: dict[str, Any]) -> bytes:
    """``row``'s waste curve (:func:`draw`) as PNG bytes, for a Slack upload. Raises
    ValueError when M or C is unknown (nothing worth attaching)."""
    if row.get("mtbf_s") is None or row.get("checkpoint_cost_s") is None:
        raise ValueError(f"job {row.get('job')!r}: M or C is unknown, no curve to draw")
    buffer = io.BytesIO()
    draw(row, buffer)
    return buffer.getvalue()
