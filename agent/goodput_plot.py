"""Badput over time as a PNG: ``ckpt-advisor goodput --job NAME --plot FILE.png``.

Stacked bars of the four badput buckets per UTC day (per hour for a window under four days),
as a share of each period's wall time: goodput is what each bar leaves of 100%. matplotlib is
imported inside :func:`plot_badput` (Agg backend), so nothing else loads it.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from ckpt_advisor.agent.units import format_duration

if TYPE_CHECKING:
    import pandas as pd

BADPUT_COLOURS = {
    "checkpoint": "tab:blue",
    "lost": "tab:red",
    "restart": "tab:orange",
    "idle": "tab:gray",
}
"""The badput buckets in stacking order (bottom first) and their colours."""

LABELLED_BARS = 40
"""Up to this many periods, each bar is labelled with its goodput."""

HOURLY_BELOW_S = 4 * 86400.0
"""Windows shorter than this are drawn per hour (a day or two is one or two bars per day)."""


def plot_badput(
    frame: pd.DataFrame,
    path: str | Path,
    *,
    title: str,
    hourly: bool = False,
    lower_bound: bool = False,
) -> Path:
    """Draw the badput buckets of ``frame`` stacked per period to ``path`` (PNG).

    Args:
        frame: :func:`agent.goodput.by_period` rows (one per period, in time order).
        path: where to write the PNG.
        title: the plot's title (the job and its overall goodput).
        hourly: the rows are hours (else days).
        lower_bound: True when checkpoint time comes from log lines (a lower bound): the legend
            says so.

    Returns:
        The path written.

    Raises:
        ValueError: ``frame`` has no wall time.
        OSError: the file cannot be written.
    """
    wall = frame["wall_s"]
    if not len(frame) or float(wall.sum()) <= 0:
        raise ValueError("no wall time to draw")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    import pandas as pd

    share = frame.div(wall.where(wall > 0), axis=0).fillna(0.0) * 100.0
    starts = pd.DatetimeIndex(frame.index).tz_convert(None).to_pydatetime()
    # a bar as wide as its period's wall time (the window's first and last may be partial)
    widths = (wall / 86400.0 * 0.9).tolist()
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=100)
    bottom = [0.0] * len(frame)
    for name, colour in BADPUT_COLOURS.items():
        values = share[f"{name}_s"].tolist()
        label = (
            f"{name} (at least: from log lines)" if name == "checkpoint" and lower_bound else name
        )
        total = format_duration(float(frame[f"{name}_s"].sum()))
        ax.bar(
            starts, values, width=widths, bottom=bottom, align="edge", color=colour,
            label=f"{label}: {total}",
        )  # fmt: skip
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    full = wall >= 0.05 * float(wall.max())  # a sliver of a period sets no scale
    top = max((b for b, f in zip(bottom, full.tolist(), strict=True) if f), default=100.0)
    ax.set_ylim(0, max(5.0, min(100.0, top * 1.2 + 3.0)))
    if len(frame) <= LABELLED_BARS:
        for start, width, height, good, f in zip(
            starts, widths, bottom, frame["goodput"].tolist(), full.tolist(), strict=True
        ):
            if f and good == good:  # not NaN
                ax.annotate(
                    f"{good:.0%}", (start + timedelta(days=width / 2), min(height, 97.0)),
                    xytext=(0, 2), textcoords="offset points", ha="center", fontsize=7,
                    color="tab:green",
                )  # fmt: skip
    ax.set_ylabel("badput (% of the period's wall time)")
    ax.grid(True, axis="y", alpha=0.3)
    # matplotlib.dates has no annotations: mypy --strict would call these untyped
    locator = mdates.AutoDateLocator(minticks=3, maxticks=10)  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    labelled = "; green: the period's goodput" if len(frame) <= LABELLED_BARS else ""
    ax.set_xlabel(f"UTC, per {'hour' if hourly else 'day'}{labelled} (goodput is the rest of 100%)")
    ax.set_title(title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=4, fontsize="small")
    out = Path(path)
    fig.tight_layout()
    fig.savefig(out, format="png")
    plt.close(fig)
    return out
