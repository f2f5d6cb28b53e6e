"""``status``: is the daemon alive and current, and each job's state with the decision behind
it; in fleet mode the agents and which one speaks for each job."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from ckpt_advisor.agent.cli.common import (
    best_cell,
    config_option,
    db_option,
    db_path,
    duration,
    examples,
    read_store,
    read_store_or_raise,
    table,
    until_cell,
)
from ckpt_advisor.agent.marks import cost_text
from ckpt_advisor.agent.reasons import render_reason
from ckpt_advisor.agent.units import format_ago
from ckpt_advisor.rules.model import Reason, ReasonCode

if TYPE_CHECKING:
    from ckpt_advisor.agent.daemon.heartbeat import Heartbeat, Verdict
    from ckpt_advisor.agent.store import OutboxItem


@click.command(
    epilog=examples(
        "ckpt-advisor status --config config.toml",
        "ckpt-advisor status --db /var/lib/ckpt-advisor/ckpt-advisor.db --json | jq .problems",
        "ckpt-advisor status --config config.toml --max-queue-age 30m || page-oncall",
    )
)
@db_option
@config_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@click.option(
    "--max-queue-age",
    default="1h",
    show_default=True,
    callback=duration,
    help="Unhealthy when a Slack message has waited longer.",
)
def status(db: str | None, config_path: str | None, as_json: bool, max_queue_age: float) -> None:
    """Is the daemon alive and current? Exits 1 when unhealthy (usable as a check).

    Shows the last scan and estimate, the jobs whose messages wait for their backlog to be
    read, files that lag, what is queued for Slack, the jobs
    silenced (until when), and each job's state with the decision behind it (why a message
    was, or was not, posted). A daemon that is not running is said to be so, with when it was
    last heard of.
    """
    from ckpt_advisor.agent.daemon.heartbeat import assess, heartbeat_path, read_heartbeat

    hb = read_heartbeat(heartbeat_path(db_path(db, config_path)))
    now_s = datetime.now(UTC).timestamp()
    queued, silences, latest, fleet, unreachable = _outbox_and_fleet(db, config_path, now_s)
    verdict = assess(hb, queued, now_s=now_s, max_queue_age_s=max_queue_age)
    if unreachable:
        verdict = replace(verdict, healthy=False, problems=[*verdict.problems, unreachable])
    if as_json:
        from ckpt_advisor.agent.contracts import status_json

        out = status_json(verdict, hb, queued, silences, latest) | fleet
        click.echo(json.dumps(out, indent=2))
    else:
        _print_status(hb, verdict, queued, now_s)
        for job, until_s in silences.items():
            click.echo(f"silenced: {job} until {until_cell(until_s, now_s)}")
        _print_fleet(fleet, now_s)
        _print_jobs(latest, now_s)
    sys.exit(0 if verdict.healthy else 1)


def _outbox_and_fleet(
    db: str | None, config_path: str | None, now_s: float
) -> tuple[list[OutboxItem], dict[str, float], list[dict[str, Any]], dict[str, Any], str | None]:
    """What waits in the outbox, the silences running at ``now_s``, the latest estimates (each
    job's state and why) and, in fleet mode, the
    agents and who speaks for each job; a fleet store that cannot be reached is a problem to
    report (the last item), not a failure of `status`."""
    from ckpt_advisor.agent.cli.common import store_target
    from ckpt_advisor.agent.store import StoreError, is_url

    target, _ = store_target(db, config_path)
    if not is_url(target):
        store = read_store(db, config_path)
        latest = store.estimate_history(latest_only=True)
        return store.queued_messages(), store.silences(now_s), latest, {}, None
    try:
        store = read_store_or_raise(db, config_path)
        agents = [
            {
                "name": a.name,
                "host": a.host,
                "pid": a.pid,
                "seen_s": a.seen_s,
                "stopped_s": a.stopped_s,
            }
            for a in store.agents()
        ]
        leases = {job: {"agent": a, "expires_s": e} for job, (a, e) in store.leases().items()}
        fleet = {"agents": agents, "leases": leases}
        latest = store.estimate_history(latest_only=True)
        return store.queued_messages(), store.silences(now_s), latest, fleet, None
    except StoreError as exc:
        return [], {}, [], {}, f"store unreachable: {exc}"


def _print_status(
    hb: Heartbeat | None, verdict: Verdict, queued: list[OutboxItem], now_s: float
) -> None:
    click.echo("healthy" if verdict.healthy else "UNHEALTHY")
    for problem in verdict.problems:
        click.echo(f"  problem: {problem}")
    if hb is not None:
        jobs = ", ".join(hb.jobs) or "none"
        if verdict.running:
            click.echo(
                f"daemon pid {hb.pid}, up since {format_ago(hb.started_s, now_s)}, jobs: {jobs}"
            )
        else:  # what it said of itself is history: say when it was last heard of
            end_s = hb.stopped_s if hb.stopped_s is not None else hb.updated_s
            click.echo(
                f"daemon pid {hb.pid} not running: started {format_ago(hb.started_s, now_s)}, "
                f"last heard of {format_ago(end_s, now_s)}; jobs then: {jobs}"
            )
        click.echo(
            f"last scan {format_ago(hb.last_scan_s, now_s)}; last estimate "
            f"{format_ago(hb.last_estimate_s, now_s)}; {len(hb.files)} file(s) followed"
            + ("" if verdict.running else " then")
        )
    if hb is not None and verdict.running:
        for job, behind in sorted(hb.waiting.items()):
            reason = Reason(ReasonCode.READING_BACKLOG, {k: float(v) for k, v in behind.items()})
            click.echo(f"  {job}: {render_reason(reason)}")
    for f in verdict.lagging:
        click.echo(
            f"  lagging: {f.path} ({f.job}): {f.lag_bytes:,} bytes behind, last read "
            f"{format_ago(f.last_read_s, now_s)}"
        )
    for f in verdict.binary:
        click.echo(
            f"  looks binary: {f.path} ({f.job}): {f.binary}; no events expected, no lag "
            "counted; narrow the glob"
        )
    click.echo(f"{len(queued)} message(s) queued for Slack")
    for q in queued:
        click.echo(
            f"  #{q.id} {q.job} {q.action}, queued {format_ago(q.created_s, now_s)}, "
            f"{q.attempts} attempt(s)"
        )


def _print_fleet(fleet: dict[str, Any], now_s: float) -> None:
    for agent in fleet.get("agents", []):
        state = "stopped" if agent["stopped_s"] else f"seen {format_ago(agent['seen_s'], now_s)}"
        jobs = sorted(j for j, lease in fleet["leases"].items() if lease["agent"] == agent["name"])
        click.echo(
            f"agent {agent['name']} on {agent['host']} (pid {agent['pid']}), {state}; "
            f"speaks for: {', '.join(jobs) or 'none'}"
        )


def _print_jobs(latest: list[dict[str, Any]], now_s: float) -> None:
    """Each job's state and the decision behind it (why a message was, or was not, posted)."""
    if not latest:
        return
    rows, reasons = [], []
    for row in latest:
        computed = row.get("computed_at")
        when = datetime.fromisoformat(computed).timestamp() if computed else None
        why = row.get("decision_text") or "-"
        cost = cost_text(row) if "checkpoint_cost_s" in row else "-"
        best = best_cell(row) if "recommended_interval_s" in row else "-"
        rows.append([row["job"], row.get("status") or "-", format_ago(when, now_s), cost, best])
        reasons.append((row["job"], why))
    title = "jobs (latest estimate; ≥: a lower bound, C from log lines or M)"
    table(title, ["job", "status", "estimated", "C", "best"], rows, why=reasons)


COMMANDS = (status,)
