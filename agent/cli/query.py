"""Commands that query the store: ``estimates``, ``events``, and ``silence`` (the one write)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from ckpt_advisor.agent.cli.common import (
    EXIT_CONFIG,
    best_cell,
    config_option,
    db_option,
    duration,
    event_table,
    examples,
    fail,
    load_config,
    open_store,
    print_json_lines,
    read_store,
    require_job,
    setting_cell,
    short_time,
    table,
    until_cell,
)
from ckpt_advisor.agent.marks import bound_mark, cost_text, current_text, mtbf_text
from ckpt_advisor.agent.units import ci_label, format_duration

if TYPE_CHECKING:
    from ckpt_advisor.agent.store import StoreReader


@click.command(
    epilog=examples(
        "ckpt-advisor silence --job llama-70b --for 24h --config config.toml",
        "ckpt-advisor silence --list --db ckpt.db",
        "ckpt-advisor silence --job llama-70b --clear --db ckpt.db",
    )
)
@click.option("--job", help="The job to keep quiet about.")
@click.option("--for", "for_s", callback=duration, help="How long (e.g. 24h); 0 ends it now.")
@click.option("--clear", is_flag=True, help="End JOB's silence now.")
@click.option("--list", "as_list", is_flag=True, help="List the silences running now.")
@db_option
@config_option
def silence(
    job: str | None,
    for_s: float | None,
    clear: bool,
    as_list: bool,
    db: str | None,
    config_path: str | None,
) -> None:
    """Send no Slack message about JOB for a while; estimates go on, and a recommendation still
    due when the silence ends is posted then. `status` and `estimates` show running silences
    with their end time."""
    now_s = datetime.now(UTC).timestamp()
    if as_list:
        if job or for_s is not None or clear:
            fail("--list takes no --job, --for or --clear", EXIT_CONFIG)
        running = read_store(db, config_path).silences(now_s)
        for name, until_s in running.items():
            click.echo(f"{name}: silenced until {until_cell(until_s, now_s)}")
        if not running:
            click.echo("no job is silenced")
        return
    if job is None or (for_s is not None) == clear:
        fail("give --job with --for DURATION or --clear (or --list)", EXIT_CONFIG)
    if for_s is not None and for_s > 366 * 86400:
        fail("--for: at most a year (silence a job for longer by removing it)", EXIT_CONFIG)
    known = (
        [j.name for j in load_config(config_path).jobs]
        if config_path
        else read_store(db, None).jobs()
    )
    require_job(job, known)
    store = open_store(db, config_path)
    if clear or for_s == 0:
        ended = store.silenced_until(job, now_s) is not None
        store.silence(job, now_s)
        click.echo(f"{job}: silence ended" if ended else f"{job}: was not silenced")
        return
    until_s = now_s + (for_s or 0.0)
    store.silence(job, until_s)
    click.echo(f"{job}: silenced until {until_cell(until_s, now_s)}")


@click.command(
    epilog=examples(
        "ckpt-advisor estimates --config config.toml",
        "ckpt-advisor estimates --job llama-70b --since 7d       # the history, one row each",
        "ckpt-advisor estimates --json | jq '.[] | {job, status, recommended_setting}'",
        "ckpt-advisor estimates --fleet --config fleet.toml   # per-node MTBF, every agent's jobs",
    )
)
@click.option("--job", help="Only this job.")
@db_option
@config_option
@click.option(
    "--since", callback=duration, help="History over this long (e.g. 7d), not only the latest."
)
@click.option(
    "--fleet", is_flag=True, help="The per-node failure rate pooled over every job with nodes."
)
@click.option("--json", "as_json", is_flag=True, help="A JSON list, one object per estimate.")
def estimates(
    job: str | None,
    db: str | None,
    config_path: str | None,
    since: float | None,
    fleet: bool,
    as_json: bool,
) -> None:
    """The latest estimate of each job (or their history with --since, oldest first, each row
    with the time it was computed). A silenced job shows when its silence ends (JSON:
    ``silenced_until``, ISO 8601, or null). Under the table, why each job's message was or was
    not posted, and the notes each estimate rests on (a bound, an inferred time, a log read in
    the wrong zone: --json ``notes``). With --fleet, the fleet's per-node failure rate and the
    jobs it is pooled over."""
    store = read_store(db, config_path)
    if fleet:
        if job or since is not None:
            fail("--fleet: pools every job's latest estimate (no --job, no --since)", EXIT_CONFIG)
        _fleet(store, config_path, as_json)
        return
    now_s = datetime.now(UTC).timestamp()
    since_s = None if since is None else now_s - since
    rows = store.estimate_history(job=job, since_s=since_s, latest_only=since is None)
    if not rows and job is not None:
        require_job(job, store.jobs())  # asked only then: a scan of the job index
    silences = store.silences(now_s)
    if as_json:
        from ckpt_advisor.agent.contracts import estimates_json

        click.echo(json.dumps(estimates_json(rows, silences), indent=2))
        return
    if not rows:
        of_job = f" for job {job!r}" if job else ""
        if since is None:
            fail(f"no estimates stored yet{of_job}")
        fail(f"no estimate computed in the last {format_duration(since)}{of_job}")
    newest = max(str(r["computed_at"]) for r in rows)[:19].replace("T", " ")
    history = since is not None
    levels = {r.get("confidence") for r in rows}  # one level, unless the config changed
    level = levels.pop() if len(levels) == 1 else None
    cells = [
        ([short_time(r["computed_at"])] if history else [])
        + _estimate_row(r, shown_level=level)
        + [until_cell(silences.get(r["job"]), now_s)]
        for r in rows
    ]
    columns = (["computed"] if history else []) + [
        *("job", "status", "C", "MTBF", ci_label(level), "fails", "saves", "now", "best", "tiers"),
        *("setting", "goodput", "silenced until"),
    ]
    shown = [
        i for i, c in enumerate(columns) if c not in _SPARSE or any(r[i] != "-" for r in cells)
    ]
    names = [" ".join(c[: 1 + history][::-1]) for c in cells]  # "job" or "job computed"
    table(
        (
            f"estimates (computed up to {newest} UTC"
            if not history
            else f"estimates over the last {format_duration(since)}, oldest first (times UTC"
        )
        + "; ≥: a lower bound (C from log lines, M with untimed running time); now ≤ at such a"
        + " C (the save spacing less C); goodput ≤ at such a C, ≥ at such an M, - at both"
        + (
            "; tiers: a two-tier job's advised fast interval × saves per persistent save)"
            if columns.index("tiers") in shown
            else ")"
        ),
        [columns[i] for i in shown],
        [[r[i] for i in shown] for r in cells],
        why=[(name, r.get("decision_text") or "-") for name, r in zip(names, rows, strict=True)],
        notes=[(name, note) for name, r in zip(names, rows, strict=True) for note in r["notes"]],
    )


_SPARSE = frozenset(("tiers", "silenced until"))
"""Columns shown only when a row has one: most jobs have neither two tiers nor a silence."""


def _fleet(store: StoreReader, config_path: str | None, as_json: bool) -> None:
    """Print the fleet's per-node MTBF (:func:`fleet_json`)."""
    from ckpt_advisor.rules.policy import DEFAULT_POLICY

    config = load_config(config_path) if config_path else None
    configured = {j.name: j.nodes for j in config.jobs if j.nodes} if config else {}
    confidence = config.estimation.confidence if config else DEFAULT_POLICY.confidence
    own = config.estimation.min_failures if config else DEFAULT_POLICY.min_failures
    out = fleet_json(store, configured, confidence)
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    if not out["jobs"]:
        fail(
            "no job with nodes and an estimate yet: set [[jobs]] nodes (the fleet's rate is "
            "per node)"
        )
    table(
        "jobs pooled (latest estimates)",
        ["job", "nodes", "running", "node-time", "fails"],
        [
            [
                j["job"],
                str(j["nodes"]),
                format_duration(j["exposure_s"]),
                format_duration(j["exposure_s"] * j["nodes"]),
                str(j["n_failures"]),
            ]
            for j in out["jobs"]
        ],
    )
    ci = out["per_node_mtbf_ci_s"]
    level = f"{out['confidence']:.0%}"
    if out["per_node_mtbf_s"] is None:
        bound = format_duration(out["per_node_mtbf_lower_s"])
        click.echo(f"per-node MTBF: no failure yet; at least {bound} ({level} lower bound)")
    else:
        click.echo(
            f"per-node MTBF: {format_duration(out['per_node_mtbf_s'])} ({level} CI "
            f"{format_duration(ci[0])}–{format_duration(ci[1])}) from {out['n_failures']} "
            f"failure(s) in {out['node_exposure_s'] / 3600.0:,.0f} node-hours over "
            f"{len(out['jobs'])} job(s); a job on N nodes with fewer than {own} failure(s) of "
            "its own starts from it divided by N"
        )


def fleet_json(store: StoreReader, configured: dict[str, int], confidence: float) -> dict[str, Any]:
    """The fleet's per-node MTBF as ``estimates --fleet --json`` prints it.

    Pools the latest estimate of every job whose ``nodes`` some agent registered in the store
    or ``configured`` (name → nodes) names: ``node_exposure_s = Σ exposure_s × nodes``,
    ``n_failures = Σ n_failures``, and the censored exponential MLE with its chi-square
    interval at ``confidence`` (:func:`rules.mtbf.estimate_mtbf`; DESIGN.md: a per-node rate
    rescales to another node count). Keys: ``jobs`` (``job``, ``nodes``, ``exposure_s``,
    ``n_failures``), ``node_exposure_s``, ``n_failures``, ``per_node_mtbf_s`` (None with no
    failure), ``per_node_mtbf_lower_s``, ``per_node_mtbf_upper_s``, ``per_node_mtbf_ci_s``
    (both bounds, or None), ``confidence``.
    """
    from ckpt_advisor.agent.estimate import fleet_nodes, fleet_shares
    from ckpt_advisor.rules.mtbf import estimate_mtbf

    nodes = fleet_nodes(store.registered_jobs(), configured)
    shares = fleet_shares(store.estimate_history(latest_only=True), nodes)
    node_s = sum(s.exposure_s * s.units for s in shares)
    failures = sum(s.n_failures for s in shares)
    mtbf = estimate_mtbf(node_s, failures, confidence=confidence)
    return {
        "jobs": [
            {"job": s.job, "nodes": s.units, "exposure_s": s.exposure_s, "n_failures": s.n_failures}
            for s in shares
        ],
        "node_exposure_s": node_s,
        "n_failures": failures,
        "per_node_mtbf_s": mtbf.mtbf_s,
        "per_node_mtbf_lower_s": mtbf.lower_s,
        "per_node_mtbf_upper_s": mtbf.upper_s,
        "per_node_mtbf_ci_s": list(mtbf.ci_s) if mtbf.ci_s else None,
        "confidence": confidence,
    }


def _estimate_row(r: dict[str, Any], *, shown_level: float | None) -> list[str]:
    """A row of the estimates table; M's interval prefixed with its level when that is not
    the column's ``shown_level`` (rows computed at several levels, or at an unrecorded one)."""
    ci, level = r.get("mtbf_ci_s"), r.get("confidence")
    own = f"{level:.0%} " if level is not None and level != shown_level else ""
    return [
        r["job"],
        r["status"],
        cost_text(r),
        mtbf_text(r),
        f"{own}{format_duration(ci[0])}–{format_duration(ci[1])}" if ci else "-",
        str(r["n_failures"]),
        str(r["n_checkpoints"]),
        current_text(r),
        best_cell(r),
        _pair_cell(r.get("tiers")),
        setting_cell(r),
        _goodput_change(r),
    ]


def _pair_cell(tiers: dict[str, Any] | None) -> str:
    """A two-tier job's advised pair: the fast tier's interval × saves per persistent save
    (``7m 53s ×13``), ``-`` when there is none."""
    if not tiers or tiers.get("fast_interval_s") is None:
        return "-"
    return f"{format_duration(tiers['fast_interval_s'])} ×{tiers['saves_per_persistent']}"


def _goodput_change(r: dict[str, Any]) -> str:
    """Simulated goodput now → at the recommended interval (``72.4%→80.1%``), each ``≤`` at a
    lower-bound C (``≤ 69.6%→≤ 72.6%``: the more C, the less goodput) and ``≥`` at a
    lower-bound M (:func:`agent.marks.bound_mark`); ``-`` unknown, or at lower bounds of both
    (no bound either way)."""
    now, best = r.get("goodput_current"), r.get("goodput_recommended")
    mark = bound_mark(r, grows_with_cost=False)
    if best is None or mark is None:
        return "-"
    return f"{'?' if now is None else f'{mark}{now:.1%}'}→{mark}{best:.1%}"


class _EventKinds(click.Choice[str]):
    """The event kinds (``EventKind``'s values) as a choice, read from ``ckpt_advisor.parsers``
    (every parser: about 0.1 s of imports) only when ``--kind`` is parsed, shown or completed,
    so that the commands that read no events start without the parsers."""

    def __init__(self) -> None:
        self.case_sensitive = True

    @property
    def choices(self) -> tuple[str, ...]:  # type: ignore[override]
        from ckpt_advisor.parsers.events import EventKind

        return tuple(k.value for k in EventKind)


@click.command(
    epilog=examples(
        "ckpt-advisor events --job llama-70b --kind failure --config config.toml",
        "ckpt-advisor events --job llama-70b --kind checkpoint_end --limit 20 --json"
        "   # the newest 20 saves",
    )
)
@click.option("--job", help="Only this job.")
@click.option(
    "--kind", "kinds", multiple=True, help="Only this kind (repeatable).",
    type=_EventKinds(),
)  # fmt: skip
@db_option
@config_option
@click.option(
    "--limit",
    type=click.IntRange(min=1, max=2**62),
    metavar="N",
    help="Only the newest N (the last N of the listing, as tail -n), still oldest first.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per event.")
def events(
    job: str | None,
    kinds: tuple[str, ...],
    db: str | None,
    config_path: str | None,
    limit: int | None,
    as_json: bool,
) -> None:
    """Stored events, oldest first (events without a time last); each failure with the
    interruption it was counted in (its id, and the lines merged into it), as the job's
    estimate counts them. With --limit N, the newest N of them."""
    from ckpt_advisor.agent.contracts import stored_event_json

    store = read_store(db, config_path)
    found = store.events(job=job, kinds=kinds or None, newest=limit)
    if not found and job is not None:  # the job index is scanned only then
        require_job(job, store.jobs())
    rows = [stored_event_json(e) for e in found]
    if any(r["kind"] == "failure" for r in rows):
        from ckpt_advisor.agent.app import estimator_of
        from ckpt_advisor.agent.interruptions import number_stored_interruptions

        estimator = estimator_of(load_config(config_path) if config_path else None)
        number_stored_interruptions(store, rows, estimator)
    if as_json:
        print_json_lines(rows)
        return
    from ckpt_advisor.agent.interruptions import interruption_cell

    columns = ["job", "time", "kind", "step", "duration", "class", "interruption", "source:line"]
    event_table(
        f"{len(rows)} event(s); times UTC, ~ = inferred; interruption: #id +lines merged into it",
        columns,
        rows,
        extra={"interruption": interruption_cell},
    )


COMMANDS = (estimates, events, silence)
