"""Commands that query the store: ``estimates``, ``events``, and ``silence`` (the one write)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click

from ckpt_advisor.agent.cli.common import (
    EXIT_CONFIG,
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
    short_time,
    table,
    until_cell,
)
from ckpt_advisor.agent.units import format_duration
from ckpt_advisor.parsers.events import EventKind


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
            click.echo(f"{name}: silenced until {until_cell(until_s, now_s)} UTC")
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
    click.echo(f"{job}: silenced until {until_cell(until_s, now_s)} UTC")


@click.command(
    epilog=examples(
        "ckpt-advisor estimates --config config.toml",
        "ckpt-advisor estimates --job llama-70b --since 7d       # the history, one row each",
        "ckpt-advisor estimates --json | jq '.[] | {job, status, recommended_setting}'",
    )
)
@click.option("--job", help="Only this job.")
@db_option
@config_option
@click.option(
    "--since", callback=duration, help="History over this long (e.g. 7d), not only the latest."
)
@click.option("--json", "as_json", is_flag=True, help="A JSON list, one object per estimate.")
def estimates(
    job: str | None, db: str | None, config_path: str | None, since: float | None, as_json: bool
) -> None:
    """The latest estimate of each job (or their history with --since, oldest first, each row
    with the time it was computed). A silenced job shows when its silence ends (JSON:
    ``silenced_until``, ISO 8601, or null)."""
    store = read_store(db, config_path)
    now_s = datetime.now(UTC).timestamp()
    since_s = None if since is None else now_s - since
    rows = store.estimate_history(job=job, since_s=since_s, latest_only=since is None)
    if not rows:
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
    columns = ["job", "status", "C", "MTBF", "90% CI", "fails", "saves", "now", "best", "setting"]
    columns += ["goodput", "silenced until"]
    history = since is not None
    table(
        f"estimates (computed up to {newest} UTC)"
        if not history
        else f"estimates over the last {format_duration(since)}, oldest first (times UTC)",
        (["computed"] if history else []) + columns,
        [
            ([short_time(r["computed_at"])] if history else [])
            + _estimate_row(r)
            + [until_cell(silences.get(r["job"]), now_s)]
            for r in rows
        ],
    )


def _estimate_row(r: dict[str, Any]) -> list[str]:
    ci = r.get("mtbf_ci_s")
    return [
        r["job"],
        r["status"],
        format_duration(r["checkpoint_cost_s"]),
        format_duration(r["mtbf_s"]),
        f"{format_duration(ci[0])}–{format_duration(ci[1])}" if ci else "-",
        str(r["n_failures"]),
        str(r["n_checkpoints"]),
        format_duration(r["current_interval_s"]),
        format_duration(r["recommended_interval_s"]),
        r.get("recommended_setting") or "-",
        _goodput_change(r.get("goodput_current"), r.get("goodput_recommended")),
    ]


def _goodput_change(now: float | None, best: float | None) -> str:
    """Simulated goodput now → at the recommended interval (``72.4%→80.1%``), ``-`` unknown."""
    if best is None:
        return "-"
    return f"{'?' if now is None else f'{now:.1%}'}→{best:.1%}"


@click.command(
    epilog=examples(
        "ckpt-advisor events --job llama-70b --kind failure --config config.toml",
        "ckpt-advisor events --job llama-70b --kind checkpoint_end --limit 20 --json",
    )
)
@click.option("--job", help="Only this job.")
@click.option(
    "--kind", "kinds", multiple=True, help="Only this kind (repeatable).",
    type=click.Choice([k.value for k in EventKind]),
)  # fmt: skip
@db_option
@config_option
@click.option("--limit", type=click.IntRange(min=1, max=2**62), help="At most this many.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per event.")
def events(
    job: str | None,
    kinds: tuple[str, ...],
    db: str | None,
    config_path: str | None,
    limit: int | None,
    as_json: bool,
) -> None:
    """Stored events, oldest first."""
    from ckpt_advisor.agent.contracts import stored_event_json

    store = read_store(db, config_path)
    found = store.events(job=job, kinds=kinds or None, limit=limit)
    if not found:
        require_job(job, store.jobs())
    rows = [stored_event_json(e) for e in found]
    if as_json:
        print_json_lines(rows)
        return
    columns = ["job", "time", "kind", "step", "duration", "class", "source:line"]
    event_table(f"{len(rows)} event(s); times UTC, ~ = inferred", columns, rows)


COMMANDS = (estimates, events, silence)
