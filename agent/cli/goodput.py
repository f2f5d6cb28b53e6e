"""``goodput``: a job's wall time split into productive, checkpoint, lost, restart and idle time,
from its stored events (no instrumentation), with the history by day, a plot and an export."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from ckpt_advisor.agent.cli.common import (
    best_cell,
    db_option,
    duration,
    estimating_config_option,
    examples,
    fail,
    load_config,
    read_store,
    require_job,
    short_time,
    table,
)
from ckpt_advisor.agent.marks import (
    NO_BOUND,
    at_bounds,
    bound_mark,
    current_text,
    estimate_row,
)
from ckpt_advisor.agent.units import format_duration

if TYPE_CHECKING:
    from collections.abc import Callable

    from ckpt_advisor.rules.goodput import GoodputSpans
    from ckpt_advisor.rules.model import JobEstimate


@click.command(
    epilog=examples(
        "ckpt-advisor goodput --job llama-70b --config config.toml",
        "ckpt-advisor goodput --job llama-70b --since 7d --by-day --plot badput.png",
        "ckpt-advisor goodput --job llama-70b --spans spans.csv --json",
    )
)
@click.option("--job", required=True, help="The job to account for.")
@click.option(
    "--since",
    callback=duration,
    help="Only the last DURATION before the job's newest event (e.g. 7d); default: all of it.",
)
@db_option
@estimating_config_option
@click.option("--by-day", is_flag=True, help="Also print the split of each UTC day.")
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    help="Draw the badput buckets over time (stacked, by day) to this PNG.",
)
@click.option(
    "--spans",
    "spans_path",
    type=click.Path(dir_okay=False),
    help="Write every labelled stretch of wall time to this CSV (for a notebook).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object (docs/DESIGN.md).")
def goodput(
    job: str,
    since: float | None,
    db: str | None,
    config_path: str | None,
    by_day: bool,
    plot_path: str | None,
    spans_path: str | None,
    as_json: bool,
) -> None:
    """Goodput of JOB: how its wall time split into productive compute (progress that was kept),
    blocking checkpoints, lost progress (since the last completed save before each
    interruption), restart (interruption to the next run's first progress) and idle time, each
    with how it was measured; and the goodput simulated at the current and recommended
    intervals with the job's own C, M and R. The window ends at the job's newest event."""
    from ckpt_advisor.agent.app import estimator_of
    from ckpt_advisor.agent.contracts import goodput_json
    from ckpt_advisor.agent.goodput import by_day_json, by_period, spans_frame
    from ckpt_advisor.agent.notes import render_note
    from ckpt_advisor.agent.store import StoreError
    from ckpt_advisor.rules.goodput import BUCKETS
    from ckpt_advisor.rules.model import NoteCode

    estimator = estimator_of(load_config(config_path) if config_path else None)
    store = read_store(db, config_path)
    require_job(job, store.jobs())
    try:
        est = estimator.estimate(store, job, datetime.now(UTC).timestamp())
    except StoreError as exc:  # a store of an older schema, never opened for writing since
        fail(str(exc))
    spans = est.goodput_spans
    untimed = next((n for n in est.notes if n.code is NoteCode.NO_TIMESTAMPS), None)
    unmeasured = None if untimed is None else f"no wall time to split: {render_note(untimed)}"
    g = None
    if spans is not None and spans.last_s is not None:
        g = spans.breakdown(since_s=-float("inf") if since is None else spans.last_s - since)
    if spans is None or g is None or (unmeasured is not None and g.wall_s == 0.0):
        # every event dated when read (the untimed files), or none with a time at all
        why = unmeasured or "no events with a time: nothing to account for"
        _no_split(est, why, since, as_json=as_json, asked=bool(plot_path or spans_path))
        return
    days = by_period(spans, since_s=g.since_s, until_s=g.until_s)
    if spans_path:
        try:
            spans_frame(spans).to_csv(spans_path, index=False)
        except OSError as exc:
            fail(f"{spans_path}: {exc.strerror}")
    out = goodput_json(est, g, since_s=since, by_day=by_day_json(days))
    good = "-" if g.goodput is None else f"{g.goodput:.1%}"
    low_good = out["goodput_range"][0]
    if g.checkpoint_is_lower_bound and low_good is not None:
        good = f"{low_good:.1%} to {good}"
    if plot_path:
        _plot(spans, g.since_s, g.until_s, plot_path, job, good, g.checkpoint_is_lower_bound)
    files = (("spans CSV", spans_path), ("badput plot", plot_path))
    written = [f"{job}: {what} written to {path}" for what, path in files if path]
    if as_json:  # stdout holds the JSON alone: what was written is said on stderr
        click.echo(json.dumps(out, indent=2))
        for line in written:
            click.echo(line, err=True)
        return
    gpus = est.gpus
    head = ["bucket", "time", "share", *(["GPU-h"] if gpus else []), "measured by"]
    rows = []
    for name in BUCKETS:
        low, high = out["measured_by"][name]["range_s"]
        # a bound: its time, share and GPU-hours are each the same range
        shown = _span(low, high, format_duration)
        share = _span(low, high, lambda s: f"{s / g.wall_s:.1%}") if g.wall_s else "-"
        gpu_h = [_span(low, high, lambda s: f"{s * gpus / 3600.0:,.1f}")] if gpus else []
        how = out["measured_by"][name]
        source = how["source"].replace("_", " ") + (
            f", {how['bound']} bound" if how["bound"] else ""
        )
        rows.append([name, shown, share, *gpu_h, source])
    table(
        f"{job}: goodput {good} of {format_duration(g.wall_s)} wall time, "
        f"{short_time(out['window_start'])} to {short_time(out['window_end'])} UTC; "
        f"{g.n_saves} save(s), {g.n_interruptions} interruption(s)",
        head,
        rows,
    )
    # the sentences below the table: a terminal narrower than them folds them, not the table
    for sentence in out["notes"]:  # first: they say what clock the numbers above are on
        click.echo(f"Note on the split's clock: {sentence}")
    click.echo("How each was measured:")
    for name in BUCKETS:
        click.echo(f"  {name}: {out['measured_by'][name]['how']}")
    if untimed is not None:
        click.echo(f"Caution, the split is not measured around these: {render_note(untimed)}")
    if by_day:
        table(
            "by UTC day",
            ["day", "wall", "goodput", *BUCKETS[1:]],
            [
                [
                    r["day"],
                    format_duration(r["wall_s"]),
                    "-" if r["goodput"] is None else f"{r['goodput']:.1%}",
                    *(format_duration(r[f"{name}_s"]) for name in BUCKETS[1:]),
                ]
                for r in out["by_day"]
            ],
        )
    click.echo(_simulated_line(est))
    for line in written:  # what the command did, after the table: stdout
        click.echo(line)


def _no_split(
    est: JobEstimate, why: str, since: float | None, *, as_json: bool, asked: bool
) -> None:
    """A job with no wall time to split: the reason on stderr, exit 1; with --json, first the
    goodput object with its split null and ``insufficient_data`` saying why (exit 0, as
    ``estimates --json`` prints ``[]`` with no estimate, unless a --plot or --spans file
    ``asked`` for cannot be written: exit 1)."""
    from ckpt_advisor.agent.contracts import goodput_json

    if as_json:
        out = goodput_json(est, None, since_s=since, by_day=[], insufficient=why)
        click.echo(json.dumps(out, indent=2))
        if not asked:
            return
    fail(f"{est.job}: {why}")


def _span(low: float, high: float, cell: Callable[[float], str]) -> str:
    """A bucket's figure, ``cell`` of its seconds; ``cell(low) – cell(high)`` when the bucket
    is a bound (log saves may hide part of their cost: :meth:`rules.goodput.Goodput.range_s`)."""
    return cell(low) if low == high else f"{cell(low)} – {cell(high)}"


def _simulated_line(est: JobEstimate) -> str:
    """What the recommended interval would change, in one line (or why it is unknown): each
    goodput marked as the bound it is at a lower-bound C or M (``≤ 69.6%``), the recommended
    interval as the table shows it (``≥ 1.2s``), the gain in points, no bound, said at the
    bounds it is computed at (``+3.0 points if C is 0.037s``); at lower bounds of both, no
    figure (:func:`agent.marks.bound_mark`)."""
    current, best = est.goodput_current, est.goodput_recommended
    if best is None:
        return "simulated goodput: unknown (C or M is not known yet)"
    row = estimate_row(est)
    head = "simulated with this job's C, M and R:"
    if (mark := bound_mark(row, grows_with_cost=False)) is None:
        return f"{head} - ({NO_BOUND})"
    at_best = f"{mark}{best:.1%} at the recommended interval ({best_cell(row)})"
    if current is None:
        return f"{head} {at_best}; current interval unknown"
    return (
        f"{head} goodput {mark}{current:.1%} at the current interval "
        f"({current_text(row)}), {at_best}: "
        f"{(best - current) * 100:+.1f} points{at_bounds(row)}"
    )


def _plot(
    spans: GoodputSpans,
    since_s: float,
    until_s: float,
    path: str,
    job: str,
    good: str,
    lower_bound: bool,
) -> None:
    from ckpt_advisor.agent.goodput import by_period
    from ckpt_advisor.agent.goodput_plot import HOURLY_BELOW_S, plot_badput

    hourly = until_s - since_s < HOURLY_BELOW_S
    frame = by_period(spans, since_s=since_s, until_s=until_s, freq="h" if hourly else "D")
    try:
        plot_badput(
            frame,
            path,
            title=f"{job}: badput over time (goodput {good} of "
            f"{format_duration(until_s - since_s)})",
            hourly=hourly,
            lower_bound=lower_bound,
        )
    except ValueError as exc:
        fail(f"{job}: {exc}")
    except OSError as exc:
        fail(f"{path}: {exc.strerror}")


COMMANDS = (goodput,)
