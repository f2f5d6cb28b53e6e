"""The waste curve of a job as a PNG: ``ckpt-advisor plot --job NAME -o FILE.png``.

matplotlib is imported inside :func:`plot_waste_curve` (with the non-interactive Agg backend), so
the CLI and the daemon start without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ckpt_advisor.agent.units import format_duration
from ckpt_advisor.rules.interval import exponential_waste_fraction


def waste_curve(
    mtbf_s: float, cost_s: float, restart_s: float, intervals_s: list[float]
) -> list[float]:
    """Waste under exponential failures (Daly's full model,
    :func:`rules.interval.exponential_waste_fraction`, the one the estimates report) at each
    interval."""
    return [exponential_waste_fraction(t, mtbf_s, cost_s, restart_s) for t in intervals_s]


def plot_waste_curve(row: dict[str, Any], path: str | Path) -> Path:
    """Draw a job's waste against the checkpoint interval and write it to ``path`` (PNG).

    Marks the current interval, the recommended one and the optimum's confidence band.

    Args:
        row: one ``estimates --json`` object; needs ``mtbf_s`` and ``checkpoint_cost_s``;
            ``restart_cost_s``, ``current_interval_s``, ``recommended_interval_s`` and
            ``recommended_interval_ci_s`` are drawn when present.
        path: where to write the PNG.

    Returns:
        The path written.

    Raises:
        ValueError: M or C unknown in ``row``.
        OSError: the file cannot be written.
    """
    mtbf_s, cost_s = row.get("mtbf_s"), row.get("checkpoint_cost_s")
    if mtbf_s is None or cost_s is None:
        raise ValueError(f"job {row.get('job')!r}: M or C is unknown, no curve to draw")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    restart_s = row.get("restart_cost_s") or 0.0
    recommended_s = row.get("recommended_interval_s")
    current_s = row.get("current_interval_s")
    band = row.get("recommended_interval_ci_s")
    marks = [v for v in (recommended_s, current_s, *(band or [])) if v]
    low, high = min(marks) / 3.0, max(marks) * 3.0
    intervals_s = [float(t) for t in np.geomspace(low, high, 200)]
    waste = waste_curve(mtbf_s, cost_s, restart_s, intervals_s)
    hours = [t / 3600.0 for t in intervals_s]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    ax.plot(
        hours, [100.0 * w for w in waste], color="black", label="waste (Daly, exponential failures)"
    )
    if band:
        ax.axvspan(
            band[0] / 3600.0,
            band[1] / 3600.0,
            color="tab:green",
            alpha=0.15,
            label="optimum's confidence band",
        )
    for value, colour, label in (
        (recommended_s, "tab:green", "recommended"),
        (current_s, "tab:red", "current"),
    ):
        if value:
            w = exponential_waste_fraction(value, mtbf_s, cost_s, restart_s)
            ax.axvline(
                value / 3600.0,
                color=colour,
                linestyle="--",
                label=f"{label}: {format_duration(value)}, {w:.1%}",
            )
    ax.set_xscale("log")
    plain = matplotlib.ticker.FuncFormatter(lambda x, _pos: f"{x:g}")
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(plain)
    ax.set_xlabel("checkpoint interval (hours)")
    ax.set_ylabel("time lost (%)")
    ax.set_title(
        f"{row.get('job')}: M {format_duration(mtbf_s)}, C {format_duration(cost_s)}, "
        f"R {format_duration(restart_s)}"
    )
    ax.legend(loc="upper center", fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
    out = Path(path)
    fig.tight_layout()
    fig.savefig(out, format="png")
    plt.close(fig)
    return out
