"""Goodput at the edge: how each bucket was measured, in words, and the history by day.

The numbers come from :mod:`rules.goodput` (the labelled spans an estimate carries); here they
are described for people (:func:`measured_by`) and laid out with pandas for tables, plots and
notebooks (:func:`by_period`, :func:`spans_frame`). pandas is imported inside the functions
that need it, so the daemon and the other commands never load it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ckpt_advisor.agent.notes import MISSED_BY_STACK
from ckpt_advisor.rules.goodput import (
    BOTH_SOURCES,
    BUCKETS,
    LOG_LINES,
    TIMING_FILE,
    Bucket,
    Goodput,
    GoodputSpans,
)

if TYPE_CHECKING:
    import pandas as pd

_FILE_LINE = {
    TIMING_FILE: "timing file",
    LOG_LINES: "log lines",
    BOTH_SOURCES: "timing file and log lines",
    "inferred": "inferred",
}


def measured_by(g: Goodput) -> dict[str, dict[str, Any]]:
    """Per bucket name: ``source`` (``timing_file``, ``log_lines``, for checkpoint also
    ``timing_file_and_log_lines``, or ``inferred``), ``bound`` (``lower``, ``upper`` or null for
    a measurement), ``range_s`` (``[low, high]``) and ``how``, a sentence (``goodput --json``
    ``measured_by``)."""
    n_saves, n_int = g.n_saves, g.n_interruptions
    lower = g.checkpoint_is_lower_bound
    missed = MISSED_BY_STACK.get(g.checkpoint_stack or "", "it may not mark every part")

    def logged(whose: str) -> str:
        """How log saves are costed, ``whose`` naming them (``each of 3 save(s)'``)."""
        if lower:
            return (
                f"from {whose} first line to its last: a lower bound (a log may not mark a "
                f"save's end: {missed}); at most the time to the first step shown after each "
                "save (else to its run's next line)"
            )
        stack = g.checkpoint_stack
        return f"{whose} logged blocking time, to its end line ({stack} logs a save's end)"

    timed = f"the blocking part of each of {n_saves - g.n_log_saves} save(s)"
    saves = {
        TIMING_FILE: timed,
        LOG_LINES: logged(f"each of {n_saves} save(s)'"),
        BOTH_SOURCES: f"{timed} in the timing file; {g.n_log_saves} only in the log: "
        + logged("each one's"),
    }.get(g.checkpoint_source or "", "no save seen")
    restart_end = (
        "the first step of the run that recovered (dated back by the step time)"
        if g.step_dated
        else "the first line of the run that recovered (no step time to date its first step)"
    )
    unlogged = "; part of it may be saves the log does not see end" if lower else ""
    how = {
        Bucket.PRODUCTIVE: (
            "log_lines",
            "upper" if lower else None,
            f"running time between the logs' lines, less saves and lost work{unlogged}",
        ),
        Bucket.CHECKPOINT: (
            g.checkpoint_source or LOG_LINES,
            "lower" if lower else None,
            saves,
        ),
        Bucket.LOST: (
            "inferred" if g.n_inferred else "log_lines",
            "upper" if lower else None,
            f"from the save each of {n_int} interruption(s) was resumed from (else the last "
            f"completed save) to its failure{unlogged}"
            + (
                f"; {g.n_inferred} had no failure line (a run that stopped without a word before "
                "a new run): taken at its last line"
                if g.n_inferred
                else ""
            ),
        ),
        Bucket.RESTART: (
            "log_lines",
            None,
            f"from each interruption's first failure line to {restart_end}, failed restart "
            "attempts included",
        ),
        Bucket.IDLE: (
            "inferred",
            None,
            "wall time no run accounts for: between runs that ended without a failure, "
            "silences, and start-up before a first step",
        ),
    }
    return {
        BUCKETS[bucket]: {
            "source": source,
            "bound": bound,
            "range_s": list(g.range_s(bucket)),
            "how": f"{_FILE_LINE[source]}: {text}",
        }
        for bucket, (source, bound, text) in how.items()
    }


def period_edges_s(since_s: float, until_s: float, freq: str = "D") -> list[float]:
    """Epoch seconds of the window's ends with every UTC period boundary (``D``: midnight,
    ``h``: the hour) between them."""
    import pandas as pd

    start = pd.Timestamp(since_s, unit="s", tz="UTC")
    end = pd.Timestamp(until_s, unit="s", tz="UTC")
    inner = pd.date_range(start.floor(freq), end, freq=freq, inclusive="right")
    return [since_s, *(t.timestamp() for t in inner if since_s < t.timestamp() < until_s), until_s]


def by_period(
    spans: GoodputSpans, *, since_s: float, until_s: float, freq: str = "D"
) -> pd.DataFrame:
    """Each UTC period's buckets over the window: one row per period (index: its start, a
    UTC timestamp), columns ``productive_s`` … ``idle_s``, ``wall_s`` and ``goodput`` (NaN for
    a period with no wall time). The first and last rows hold only the window's part."""
    import pandas as pd

    edges = period_edges_s(since_s, until_s, freq)
    seconds = spans.seconds(np.array(edges))
    frame = pd.DataFrame(
        seconds,
        columns=[f"{name}_s" for name in BUCKETS],
        index=pd.to_datetime(edges[:-1], unit="s", utc=True),
    )
    frame.index.name = "start"
    frame["wall_s"] = seconds.sum(axis=1)
    frame["goodput"] = frame["productive_s"].div(frame["wall_s"].where(frame["wall_s"] > 0))
    return frame


def by_day_json(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of :func:`by_period` (by day) as ``goodput --json`` ``by_day``: ``day``
    (``YYYY-MM-DD``), the seconds and ``goodput`` (null with no wall time)."""
    import pandas as pd

    days = pd.DatetimeIndex(frame.index).strftime("%Y-%m-%d").tolist()
    seconds = [name for name in frame.columns if name != "goodput"]
    return [
        {
            "day": day,
            **{name: float(value) for name, value in zip(seconds, values[:-1], strict=True)},
            "goodput": None if np.isnan(values[-1]) else float(values[-1]),
        }
        for day, values in zip(days, frame[[*seconds, "goodput"]].to_numpy().tolist(), strict=True)
    ]


def spans_frame(spans: GoodputSpans) -> pd.DataFrame:
    """Every labelled span, for a notebook: ``start``, ``end`` (UTC timestamps), ``bucket``,
    ``seconds``, ``interruption`` (its number for lost and restart spans, else 0) and
    ``unlogged_save`` (inside a log save's possibly unlogged part)."""
    import pandas as pd

    return pd.DataFrame(
        {
            "start": pd.to_datetime(spans.start_s, unit="s", utc=True),
            "end": pd.to_datetime(spans.end_s, unit="s", utc=True),
            "bucket": [BUCKETS[b] for b in spans.bucket.tolist()],
            "seconds": spans.end_s - spans.start_s,
            "interruption": spans.interruption,
            "unlogged_save": spans.unlogged,
        }
    )
