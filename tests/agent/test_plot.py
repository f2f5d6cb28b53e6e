"""The waste-curve plot: a unit picked from the range, labels that never run into each other,
a lower bound of C drawn as one, insufficient data marked on the picture (issue 16)."""

from __future__ import annotations

import dataclasses
import itertools
import os
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest

from ckpt_advisor.agent.contracts import estimate_json
from ckpt_advisor.agent.plot import curve, draw, figure, unit_for
from ckpt_advisor.rules.model import Reason, ReasonCode, Status
from tests.agent.helpers import ON_64_GPUS
from tests.samples import drifting_estimate

PICTURES = Path(os.environ.get("CKPT_ADVISOR_PLOTS", "build/plots"))
"""Where the tests leave their pictures, to be looked at (``CKPT_ADVISOR_PLOTS``)."""


def _row(**changes: Any) -> dict[str, Any]:
    return estimate_json(dataclasses.replace(drifting_estimate(**ON_64_GPUS), **changes))


def _labels(row: dict[str, Any], name: str) -> list[Any]:
    """The drawn x tick labels (text, window extent) of ``row``'s plot; the picture is kept."""
    fig, _ = figure(row)
    try:
        fig.canvas.draw()
        PICTURES.mkdir(parents=True, exist_ok=True)
        fig.savefig(PICTURES / f"{name}.png")
        ax = fig.axes[0]
        renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
        lo, hi = ax.get_xlim()
        return [
            (t.get_text(), t.get_window_extent(renderer))
            for t in ax.get_xticklabels()
            if t.get_text() and lo <= t.get_position()[0] <= hi
        ]
    finally:
        plt.close(fig)


@pytest.mark.parametrize(
    ("high_s", "unit"), [(30.0, "s"), (180.0, "s"), (181.0, "min"), (3 * 3600.0, "min"),
                         (4 * 3600.0, "h")],
)  # fmt: skip
def test_the_unit_follows_the_range(high_s: float, unit: str) -> None:
    """Seconds up to 3 min, minutes up to 3 h, hours beyond."""
    assert unit_for(high_s)[0] == unit


@pytest.mark.parametrize(
    ("name", "scale_s"), [("seconds", 1e-3), ("minutes", 0.05), ("hours", 1.0), ("days", 8.0)]
)
def test_tick_labels_are_plain_and_never_overlap(name: str, scale_s: float) -> None:
    """From a 1.2 s interval (the HF CPU fixtures, where hours gave ``3e-054e-05…``) to days,
    every x label is a plain number in the picked unit and no two labels overlap."""
    row = _row(
        current_interval_s=14_400.0 * scale_s,
        recommended_interval_s=3_600.0 * scale_s,
        mtbf_s=21_600.0 * scale_s,
        checkpoint_cost_s=300.0 * scale_s,
        recommended_interval_ci_s=(3_000.0 * scale_s, 4_400.0 * scale_s),
    )
    labels = _labels(row, f"ticks-{name}")
    assert len(labels) >= 3
    for text, _ in labels:
        assert "e" not in text and float(text) > 0
    boxes = sorted((box for _, box in labels), key=lambda b: b.x0)
    assert all(a.x1 < b.x0 for a, b in itertools.pairwise(boxes))


def test_a_lower_bound_of_c_is_drawn_as_one() -> None:
    """C ≥ 43 s with no upper bound: the title says "C ≥ 43s", the curve is labelled as the
    waste at that bound and the recommended range runs to the right edge; with an upper bound
    the curve is a band between the waste at both ends of C, labelled so."""
    bound = dict(
        checkpoint_cost_s=43.0,
        checkpoint_cost_source="log",
        checkpoint_cost_is_lower_bound=True,
        checkpoint_cost_range_s=(43.0, None),
        recommended_interval_range_s=(900.0, None),
        recommended_interval_s=1_500.0,
        current_interval_s=300.0,
    )
    fig, drawn = figure(_row(**bound))
    try:
        ax = fig.axes[0]
        assert ax.get_title().startswith("llama-70b: M 6h 00m, C ≥ 43s")
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "waste if C is 43s (a lower bound: more if C is)" in legend
        assert "recommended range: ≥ 25m 00s" in legend
        fig.savefig(PICTURES / "lower-bound-open.png")
    finally:
        plt.close(fig)
    assert drawn.waste_upper is None
    upper = curve(_row(**{**bound, "checkpoint_cost_range_s": (43.0, 121.0)}))
    assert upper.waste_upper is not None
    assert all(high > low for low, high in zip(upper.waste, upper.waste_upper, strict=True))
    ranged = {
        "checkpoint_cost_range_s": (43.0, 121.0),
        "recommended_interval_range_s": (900.0, 2_400.0),
    }
    _labels(_row(**{**bound, **ranged}), "lower-bound-range")
    fig, _ = figure(_row(**{**bound, **ranged}))
    try:
        legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    finally:
        plt.close(fig)
    assert legend[:3] == [
        "waste for C from 43s to 2m 01s",
        "waste at C's lower bound, 43s",
        "recommended range",
    ]


def test_insufficient_data_is_marked_on_the_plot(tmp_path: Path) -> None:
    """A job with too few interruptions gets its curve drawn dotted with "insufficient data:
    1 of 2 interruptions needed" on it; one without M gets a picture saying so, not an error."""
    reason = Reason(
        ReasonCode.INSUFFICIENT_DATA,
        {"n_saves": 12, "min_saves": 3, "n_failures": 1, "min_failures": 2},
        missing=("failures",),
    )
    rough = _row(status=Status.INSUFFICIENT_DATA, reason=reason, n_failures=1)
    fig, drawn = figure(rough)
    try:
        texts = [t.get_text() for t in fig.axes[0].texts]
        assert texts == ["insufficient data: 1 of 2 interruptions needed"]
        assert fig.axes[0].get_title().endswith("— insufficient data")
        fig.savefig(PICTURES / "insufficient.png")
    finally:
        plt.close(fig)
    assert drawn.insufficient == "not enough data: 1 of 2 interruptions needed"
    blank = draw(_row(mtbf_s=None, status=Status.INSUFFICIENT_DATA, reason=reason), tmp_path / "b")
    assert blank.interval_s == [] and blank.insufficient is not None
    assert (tmp_path / "b").read_bytes()[:4] == b"\x89PNG"
