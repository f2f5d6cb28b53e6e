"""The calculators: ``interval`` (Young and Daly), ``simulate`` (Monte Carlo, or a backtest of
a job's own interruptions) and ``plot`` (a job's waste curve)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from ckpt_advisor.agent.cli.common import (
    EXIT_CONFIG,
    config_option,
    db_option,
    duration,
    estimating_config_option,
    examples,
    fail,
    load_config,
    read_store,
    require_job,
)
from ckpt_advisor.agent.marks import NO_BOUND, at_least, at_most, bound_mark, replay_mark
from ckpt_advisor.agent.units import format_duration

if TYPE_CHECKING:
    from ckpt_advisor.rules.model import JobEstimate

MAX_SIMULATED_FAILURES = 2_000_000
"""``simulate`` refuses runs larger than this (memory and minutes on a shared head node)."""


@click.command(
    epilog=examples(
        "ckpt-advisor interval --mtbf 6h --cost 4m",
        "ckpt-advisor interval --mtbf 6h --cost 4m --restart 10m --current 2h --json",
        "ckpt-advisor interval --memory-cost 5s --persistent-cost 5m --mtbf 6h "
        "--recoverable-fraction 0.75",
    )
)
@click.option("--mtbf", callback=duration, help="Mean time between failures (all of them).")
@click.option("--cost", callback=duration, help="Checkpoint cost (blocking).")
@click.option("--restart", default="0", callback=duration, help="Restart cost after a failure.")
@click.option("--current", callback=duration, help="Current interval, to compare.")
@click.option("--memory-cost", callback=duration, help="Two tiers: cost of a fast save.")
@click.option("--persistent-cost", callback=duration, help="Two tiers: cost of a persistent save.")
@click.option(
    "--recoverable-fraction",
    type=click.FloatRange(0.0, 1.0, max_open=True),
    help="Two tiers: share of the interruptions a fast copy survives (with --mtbf).",
)
@click.option(
    "--memory-mtbf", callback=duration, help="Two tiers: MTBF of the interruptions it survives."
)
@click.option(
    "--persistent-mtbf", callback=duration, help="Two tiers: MTBF of those it does not survive."
)
@click.option(
    "--memory-restart", callback=duration, help="Two tiers: restart from a fast copy [--restart]."
)
@click.option("--json", "as_json", is_flag=True)
def interval(
    mtbf: float | None,
    cost: float | None,
    restart: float,
    current: float | None,
    memory_cost: float | None,
    persistent_cost: float | None,
    recoverable_fraction: float | None,
    memory_mtbf: float | None,
    persistent_mtbf: float | None,
    memory_restart: float | None,
    as_json: bool,
) -> None:
    """Young and Daly checkpoint intervals and the waste at each (a calculator).

    Waste fractions use Daly's exponential model (rules.interval.exponential_waste_fraction);
    a C/M above 0.5 adds a line to ``warnings`` (checkpointing is then nearly pointless).

    Two tiers (--memory-cost and --persistent-cost; the fast tier may be host memory or local
    disk): the pair of intervals of rules.two_level, with the interruptions split by
    --recoverable-fraction of --mtbf, or given as --memory-mtbf and --persistent-mtbf (or
    --memory-mtbf and --mtbf)."""
    from ckpt_advisor.agent.contracts import interval_json

    if memory_cost is not None or persistent_cost is not None:
        _interval_two_tier(
            memory_cost,
            persistent_cost,
            mtbf=mtbf,
            fraction=recoverable_fraction,
            memory_mtbf=memory_mtbf,
            persistent_mtbf=persistent_mtbf,
            restarts=(restart if memory_restart is None else memory_restart, restart),
            as_json=as_json,
        )
        return
    tier_only = {
        "--recoverable-fraction": recoverable_fraction,
        "--memory-mtbf": memory_mtbf,
        "--persistent-mtbf": persistent_mtbf,
        "--memory-restart": memory_restart,
    }
    if given := [name for name, value in tier_only.items() if value is not None]:
        fail(
            f"{', '.join(given)}: two-tier option(s), used with --memory-cost and "
            "--persistent-cost",
            EXIT_CONFIG,
        )
    if mtbf is None or cost is None:
        fail("give --mtbf and --cost (or --memory-cost and --persistent-cost)", EXIT_CONFIG)
    if mtbf <= 0 or cost <= 0:
        fail("--mtbf and --cost must be greater than zero", EXIT_CONFIG)
    out = interval_json(mtbf, cost, restart, current)
    young, daly = out["young_interval_s"], out["daly_interval_s"]
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(
        f"Young interval: {format_duration(young)} ({young:.0f} s), "
        f"waste {out['waste_fraction_young']:.2%}"
    )
    click.echo(
        f"Daly interval:  {format_duration(daly)} ({daly:.0f} s), "
        f"waste {out['waste_fraction_daly']:.2%}"
    )
    if current is not None:
        click.echo(
            f"Current:        {format_duration(current)} ({current:.0f} s), "
            f"waste {out['waste_fraction_current']:.2%}"
        )
    for line in out["warnings"]:
        click.echo(f"Warning: {line}")


def _interval_two_tier(
    memory_cost: float | None,
    persistent_cost: float | None,
    *,
    mtbf: float | None,
    fraction: float | None,
    memory_mtbf: float | None,
    persistent_mtbf: float | None,
    restarts: tuple[float, float],
    as_json: bool,
) -> None:
    """``interval`` for two tiers: the exact optimum pair, the first-order pair and the
    persistent-only baseline (rules/two_level.py), as a table or JSON."""
    from ckpt_advisor.agent.contracts import two_tier_json
    from ckpt_advisor.rules.two_level import (
        TwoTierJob,
        first_order_plan,
        optimal_plan,
        single_tier_plan,
    )

    if memory_cost is None or persistent_cost is None:
        fail("two tiers need both --memory-cost and --persistent-cost", EXIT_CONFIG)
    try:
        if fraction is not None:
            if mtbf is None:
                fail("--recoverable-fraction needs --mtbf (the MTBF of all of them)", EXIT_CONFIG)
            job = TwoTierJob.from_fraction(
                fast_cost_s=memory_cost,
                persistent_cost_s=persistent_cost,
                mtbf_s=mtbf,
                recoverable_fraction=fraction,
                fast_restart_s=restarts[0],
                persistent_restart_s=restarts[1],
            )
        elif memory_mtbf is not None and (persistent_mtbf is not None or mtbf is not None):
            if persistent_mtbf is None:
                assert mtbf is not None
                if memory_mtbf <= mtbf:
                    fail("--memory-mtbf must exceed --mtbf (it counts fewer)", EXIT_CONFIG)
                persistent_mtbf = 1.0 / (1.0 / mtbf - 1.0 / memory_mtbf)
            job = TwoTierJob(memory_cost, persistent_cost, memory_mtbf, persistent_mtbf, *restarts)
        else:
            fail(
                "two tiers need --recoverable-fraction with --mtbf, or --memory-mtbf with "
                "--persistent-mtbf or --mtbf",
                EXIT_CONFIG,
            )
    except ValueError as exc:
        fail(str(exc), EXIT_CONFIG)
    best, first, single = optimal_plan(job), first_order_plan(job), single_tier_plan(job)

    out = two_tier_json(job, best, first, single)
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    t1, t2 = best.fast_interval_s, best.persistent_interval_s
    click.echo(
        f"Memory tier:     every {format_duration(t1)} ({t1:.0f} s) of compute, "
        f"{best.saves_per_persistent} saves per persistent save"
    )
    click.echo(f"Persistent tier: every {format_duration(t2)} ({t2:.0f} s) of compute")
    click.echo(
        f"Waste {best.waste_fraction:.2%} (first order: {format_duration(first.fast_interval_s)}"
        f" x {first.saves_per_persistent}, {first.waste_fraction:.2%}); persistent saves only: "
        f"every {format_duration(single.fast_interval_s)}, waste {single.waste_fraction:.2%}"
    )


@click.command(
    epilog=examples(
        "ckpt-advisor simulate --mtbf 6h --cost 4m --restart 10m --sweep",
        "ckpt-advisor simulate --mtbf 6h --cost 4m --shape 0.7 --interval 2h --interval 30m",
        "ckpt-advisor simulate --job llama-70b --config config.toml --sweep   # a backtest",
    )
)
@click.option("--mtbf", callback=duration, help="Mean time between failures (not with --job).")
@click.option("--cost", callback=duration, help="Checkpoint cost, blocking (not with --job).")
@click.option(
    "--restart",
    default="0",
    callback=duration,
    help="Restart cost after a failure (not with --job).",
)
@click.option(
    "--shape",
    default=1.0,
    show_default=True,
    help="Weibull shape, 1: exponential (not with --job).",
)
@click.option(
    "--interval",
    "intervals",
    multiple=True,
    callback=lambda c, p, v: [duration(c, p, x) for x in v],
    help="Interval to try (repeatable); Daly's is always tried.",
)
@click.option(
    "--sweep",
    is_flag=True,
    help="Also try a grid of fixed intervals (Daly's / 4 to × 4); show the best of all tried.",
)
@click.option(
    "--days", default=30.0, show_default=True, help="Simulated job length (not with --job)."
)
@click.option(
    "--replicates", default=200, show_default=True, help="Simulated jobs (not with --job)."
)
@click.option("--seed", default=0, show_default=True, help="Random seed (not with --job).")
@click.option("--job", help="Backtest: replay this job's own interruptions from the store.")
@db_option
@estimating_config_option
@click.option("--json", "as_json", is_flag=True)
def simulate(
    mtbf: float | None,
    cost: float | None,
    restart: float,
    shape: float,
    intervals: list[float],
    sweep: bool,
    days: float,
    replicates: int,
    seed: int,
    job: str | None,
    db: str | None,
    config_path: str | None,
    as_json: bool,
) -> None:
    """Monte Carlo goodput and waste of checkpoint intervals, or a backtest with --job.

    Without --job: simulate REPLICATES jobs of DAYS with lives of mean MTBF (exponential, or
    Weibull of SHAPE), C and R, and replay each interval against the same lives. With --job:
    replay the job's own recorded interruptions (running time between them) with its estimated
    C and R against its current, recommended and given intervals; nothing is drawn at random,
    so the Monte Carlo's options (--mtbf, --cost, --restart, --shape, --days, --replicates,
    --seed) are refused. Figures resting on a lower-bound C or M are marked as bounds.
    """
    from ckpt_advisor.agent.contracts import backtest_json, monte_carlo_json
    from ckpt_advisor.rules.interval import daly_interval_s
    from ckpt_advisor.rules.simulate import interval_grid_s

    if job is not None:
        from ckpt_advisor.agent.app import estimator_of
        from ckpt_advisor.agent.store import StoreError

        _refuse_monte_carlo_options()
        estimator = estimator_of(load_config(config_path) if config_path else None)
        store = read_store(db, config_path)
        require_job(job, store.jobs())
        try:
            now_s = datetime.now(UTC).timestamp()
            est = estimator.estimate(store, job, now_s)
        except StoreError as exc:  # a store of an older schema, never opened for writing since
            fail(str(exc))
        if est.checkpoint_cost_s is None or est.mtbf_s is None:
            fail(f"job {job!r}: C or M is unknown, nothing to backtest")
        mtbf, cost = est.mtbf_s, est.checkpoint_cost_s
        restart = est.restart_cost_s or 0.0
    elif mtbf is None or cost is None or mtbf <= 0 or cost <= 0:
        fail("--mtbf and --cost (> 0) are needed without --job", EXIT_CONFIG)
    elif shape < 0.2 or replicates < 2 or days <= 0:
        fail("--shape must be >= 0.2, --days > 0 and --replicates >= 2", EXIT_CONFIG)
    if any(t <= 0 for t in intervals):
        fail("--interval must be greater than zero", EXIT_CONFIG)
    if cost >= mtbf:
        fail(
            f"C ({format_duration(cost)}) is not below M ({format_duration(mtbf)}): the job "
            "would mostly write checkpoints; see `ckpt-advisor interval` for the numbers",
            EXIT_CONFIG,
        )
    if job is None and (failures := days * 86400 / mtbf * replicates) > MAX_SIMULATED_FAILURES:
        fail(
            f"that is ~{failures:,.0f} simulated failures (limit {MAX_SIMULATED_FAILURES:,}): "
            "use fewer --days or --replicates",
            EXIT_CONFIG,
        )
    tried = [daly_interval_s(mtbf, cost), *intervals]
    if job is not None:
        tried += [t for t in (est.current_interval_s,) if t]
    grid = interval_grid_s(mtbf, cost) if sweep else []
    if job is not None:
        out = backtest_json(est, tried_s=tried, grid_s=grid)
    else:
        out = monte_carlo_json(
            mtbf_s=mtbf,
            cost_s=cost,
            restart_s=restart,
            tried_s=tried,
            grid_s=grid,
            shape=shape,
            days=days,
            replicates=replicates,
            seed=seed,
        )
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    head = (
        _backtest_head(est)
        if job
        else f"{replicates} simulated jobs of {days:g} days, lives "
        + ("exponential" if shape == 1.0 else f"Weibull of shape {shape:g}")
    )
    # a backtest runs at the job's C and M, either of which may be a lower bound
    m = at_least(format_duration(mtbf), bool(out.get("mtbf_is_lower_bound")))
    c = at_least(format_duration(cost), bool(out.get("checkpoint_cost_is_lower_bound")))
    measured_r = job is None or est.restart_cost_s is not None
    r = format_duration(restart) if measured_r else "not measured (0 assumed)"
    click.echo(f"{head}; M {m}, C {c}, R {r}")
    labels = [
        "Daly",
        *(["given"] * len(intervals)),
        *(["current"] * (len(tried) - 1 - len(intervals))),
    ]
    rows = list(zip(labels, out["intervals"], strict=True))
    currents = [r for label, r in rows if label == "current"]  # the best may be one of them
    if grid:
        rows.append(("best", out["best"]))
    # the replay rests on C alone, the first-order formula on C and M (agent/marks.py); the
    # Monte Carlo's C and M are given, its out has neither bound
    waste_mark, good_mark = (replay_mark(out, grows_with_cost=up) for up in (True, False))
    formula_mark = bound_mark(out, grows_with_cost=True)
    for label, r in rows:
        err = f" ± {r['waste_stderr']:.2%}" if r["waste_stderr"] is not None else ""
        formula = r["waste_fraction_formula"]
        first_order = (
            "over 100%: it holds for C ≪ T ≪ M"
            if formula > 1
            else "-"
            if formula_mark is None
            else f"{formula_mark}{formula:.2%}"
        )
        interval = format_duration(r["interval_s"])
        if r in currents:  # the job's: the save spacing less C, an upper bound at C's
            interval = at_most(interval, bool(out.get("current_interval_is_upper_bound")))
        click.echo(
            f"{label:8} {interval:>10}  waste {waste_mark}"
            f"{r['waste_fraction']:.2%}{err} (first-order formula {first_order}), goodput "
            f"{good_mark}{r['goodput']:.2%}"
        )
    if formula_mark is None:
        click.echo(f"first-order formula -: {NO_BOUND}")


def _refuse_monte_carlo_options() -> None:
    """Exit 2 when an option only the Monte Carlo uses is given with --job: a backtest replays
    the job's own lives at its estimated C, M and R, so they would change nothing (its output
    was the same for --days 0.01 and 1) and the size limit they set does not apply."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    given = [
        f"--{name}"
        for name in ("mtbf", "cost", "restart", "shape", "days", "replicates", "seed")
        if ctx.get_parameter_source(name) is not ParameterSource.DEFAULT
    ]
    if given:
        fail(
            f"{', '.join(given)}: Monte Carlo option(s), not used by a backtest (--job replays "
            "the job's own interruptions at its estimated C, M and R)",
            EXIT_CONFIG,
        )


def _backtest_head(est: JobEstimate) -> str:
    """``backtest of JOB (N interruptions)``; at a lower-bound M, how many of the interruptions
    M counts are replayed (``1 of 2``): only the timed running time is, its lives."""
    replayed = len(est.lives_s)
    if not est.mtbf_is_lower_bound:
        return f"backtest of {est.job} ({replayed} interruption(s))"
    return (
        f"backtest of {est.job} ({replayed} of {est.n_failures} interruptions replayed: the "
        "timed running time only)"
    )


@click.command(
    epilog=examples(
        "ckpt-advisor plot --job llama-70b -o waste.png --config config.toml",
    )
)
@click.option("--job", required=True, help="The job to draw.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="PNG file to draw (needed unless --json: then the curve alone is printed).",
)
@db_option
@config_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help=(
        "Print the curve as JSON (x_s: intervals in seconds, axis_unit: the unit of the"
        " picture's axis, waste: fractions; output: the PNG drawn, null without -o)."
    ),
)
def plot(
    job: str, output: str | None, db: str | None, config_path: str | None, as_json: bool
) -> None:
    """Draw JOB's waste curve with its current and recommended intervals and the optimum's
    confidence band (from its latest stored estimate); a job with insufficient data is marked
    so on the plot. With --json and no -o, print the curve without drawing it. A job with no
    estimate stored yet exits 1; with --json it first prints the object, its curve empty and
    insufficient_data saying so, and exits 0 unless -o asked for a PNG."""
    from ckpt_advisor.agent.contracts import plot_json
    from ckpt_advisor.agent.plot import curve, empty_curve, plot_waste_curve

    if output is None and not as_json:
        raise click.UsageError(
            "-o/--output names the PNG file to draw (or --json prints the curve)"
        )
    store = read_store(db, config_path)
    rows = store.estimate_history(job=job, latest_only=True)
    if not rows:
        require_job(job, store.jobs())
        why = f"no estimate stored for job {job!r}"
        if as_json:  # what a JSON consumer can parse, as goodput --json with no wall time
            click.echo(json.dumps(plot_json(None, empty_curve(job, why))))
            if output is None:
                return
        fail(why)  # nothing drawn
    if output is None:
        click.echo(json.dumps(plot_json(None, curve(rows[-1]))))
        return
    try:
        path, drawn = plot_waste_curve(rows[-1], output)
    except OSError as exc:
        fail(f"{output}: {exc.strerror}")
    if as_json:
        click.echo(json.dumps(plot_json(path, drawn)))
    else:
        note = f" ({drawn.insufficient})" if drawn.insufficient else ""
        click.echo(f"{job}: waste curve written to {path}{note}")


COMMANDS = (interval, simulate, plot)
