"""The ``ckpt-advisor`` command line: one function per subcommand.

Each command parses its arguments, calls into the agent, formats and prints: readable tables by
default, ``--json`` for machines (the shapes in DESIGN.md, "Contracts"). Bad input exits non-zero
with a message that names the file, line or key. Heavy libraries are imported inside the commands
that need them, so ``--help`` stays fast.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from agent.units import format_duration, parse_duration_s

if TYPE_CHECKING:
    from agent.config import Config
    from agent.store import Store

EXIT_CONFIG = 2


def _fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"ckpt-advisor: {message}", err=True)
    sys.exit(code)


def setup_logging(level: str = "INFO") -> None:
    """One event per line on stderr (journald adds the time): ``LEVEL logger: message``."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
        force=True,
    )
    for noisy in ("apscheduler", "watchdog", "slack_sdk", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _load_config(path: str) -> Config:
    from agent.config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as exc:
        _fail(str(exc), EXIT_CONFIG)


def _open_store(db: str | None, config: str | None, *, readonly: bool) -> Store:
    from agent.config import default_db_path
    from agent.store import Store, StoreError

    path = Path(db) if db else _load_config(config).store.path if config else default_db_path()
    try:
        return Store(path, readonly=readonly)
    except StoreError as exc:
        _fail(str(exc))


def _duration(_ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return parse_duration_s(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param=param) from None


def _print_json_lines(rows: Iterable[dict[str, Any]]) -> None:
    for row in rows:
        click.echo(json.dumps(row, ensure_ascii=False))


def _table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left", header_style="bold")
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*row)
    Console().print(table)


def _num(value: float | None, fmt: str = "{:.3g}") -> str:
    return "-" if value is None else fmt.format(value)


db_option = click.option("--db", type=click.Path(dir_okay=False), help="Store file (SQLite).")
config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="Take the store path from this config.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ckpt-advisor")
def main() -> None:
    """Learn checkpoint cost and MTBF from training logs; recommend the checkpoint interval."""


@main.command()
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False))
@click.option("--log-level", default="INFO", show_default=True)
def run(config_path: str, log_level: str) -> None:
    """Run the daemon: tail the configured logs, estimate on a schedule, notify."""
    config = _load_config(config_path)
    setup_logging(log_level)
    from agent.daemon import build_daemon
    from agent.store import StoreError

    try:
        daemon = build_daemon(config)
    except StoreError as exc:
        _fail(str(exc))
    daemon.install_signal_handlers()
    sys.exit(daemon.run())


@main.command("check-config")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False))
def check_config(config_path: str) -> None:
    """Validate a config file and show what each job's globs match now."""
    import glob

    config = _load_config(config_path)
    click.echo(f"{config_path}: OK")
    click.echo(f"store: {config.store.path}")
    for job in config.jobs:
        for kind, patterns in (("logs", job.logs), ("timings", job.timings)):
            for pattern in patterns:
                n = len(glob.glob(pattern, recursive=True))
                click.echo(f"job {job.name}: {kind} {pattern}: {n} file(s) now")
    token = config.slack_token()
    where = f"Slack {config.slack.channel}" if token and config.slack.channel else "the daemon log"
    click.echo(f"recommendations go to {where}")


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--format", "fmt", default="auto", show_default=True, help="Parser, or auto.")
@click.option("--tz", default="UTC", show_default=True, help="Zone of naive timestamps.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per event.")
def parse(files: tuple[str, ...], fmt: str, tz: str, as_json: bool) -> None:
    """Show the events recognised in FILES (nothing is stored)."""
    from zoneinfo import ZoneInfo

    import parsers

    rows: list[dict[str, Any]] = []
    for path in files:
        try:
            parser = parsers.make_parser(_file_format(path, fmt), tz=ZoneInfo(tz))
        except ValueError as exc:
            _fail(str(exc), EXIT_CONFIG)
        try:
            with open(path, "rb") as fh:
                for lineno, raw in enumerate(fh, 1):
                    text = raw.rstrip(b"\n").decode("utf-8", "replace")
                    rows.extend(_event_json(e, path) for e in parser.feed(text, lineno))
        except OSError as exc:
            _fail(f"{path}: {exc.strerror}")
        rows.extend(_event_json(e, path) for e in parser.finish())
    if as_json:
        _print_json_lines(rows)
        return
    _table(
        f"{len(rows)} event(s)",
        ["source:line", "kind", "time", "step", "duration", "class", "parser"],
        [
            [
                f"{Path(r['source']).name}:{r['line']}",
                r["kind"],
                r["time"] or "-",
                _num(r["step"], "{}"),
                format_duration(r["duration_s"]) if r["duration_s"] is not None else "-",
                r["failure_class"] or "-",
                r["parser"],
            ]
            for r in rows
        ],
    )


def _file_format(path: str, fmt: str) -> str:
    if fmt != "auto":
        return fmt
    lower = path.lower()
    if lower.endswith(".jsonl") or lower.endswith(".ndjson"):
        return "timing_jsonl"
    if lower.endswith(".csv"):
        return "timing_csv"
    return "auto"


def _event_json(event: Any, source: str) -> dict[str, Any]:
    from agent.store import StoredEvent

    stored = StoredEvent(job="", source=source, event=event)
    row = stored.to_json()
    del row["job"]
    return row


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--job", required=True, help="Job name to store the events under.")
@db_option
@click.option("--format", "fmt", default="auto", show_default=True, help="Parser, or auto.")
@click.option("--tz", default="UTC", show_default=True, help="Zone of naive timestamps.")
def ingest(files: tuple[str, ...], job: str, db: str | None, fmt: str, tz: str) -> None:
    """Backfill FILES into the store as JOB, then estimate that job.

    Files ending in .jsonl or .csv are read as checkpoint timing files. Ingesting a file twice
    stores nothing twice: its offset is remembered like the daemon's.
    """
    from zoneinfo import ZoneInfo

    from rich.progress import Progress

    from agent.advisor import EstimateSettings, compute_estimate, estimate_to_json
    from agent.daemon import utc_now
    from agent.tailer import Tailer, WatchSpec

    store = _open_store(db, None, readonly=False)
    specs = [
        WatchSpec(
            job,
            (str(Path(f).resolve()),),
            timing=_file_format(f, fmt).startswith("timing"),
            fmt=_file_format(f, fmt),
        )
        for f in files
    ]
    total = sum(Path(f).stat().st_size for f in files)
    with Progress(disable=not sys.stderr.isatty(), transient=True) as progress:
        task = progress.add_task("ingesting", total=total)
        tailer = Tailer(
            store,
            specs,
            clock=utc_now,
            tz=ZoneInfo(tz),
            backfill=True,
            on_progress=lambda n: progress.advance(task, n),
        )
        stats = tailer.scan()
        tailer.close()
    now_s = utc_now().timestamp()
    est, setting = compute_estimate(store, job, EstimateSettings(), now_s)
    store.save_estimate(job, now_s, str(est.status), estimate_to_json(est, setting=setting))
    click.echo(
        f"{job}: {stats.lines} line(s) read, {stats.events} event(s) stored from "
        f"{len(files)} file(s); {est.n_checkpoints} checkpoint(s), {est.n_failures} failure(s), "
        f"status {est.status}",
        err=True,
    )


@main.command()
@click.option("--job", required=True, help="The job to keep quiet about.")
@click.option(
    "--for",
    "for_s",
    required=True,
    callback=_duration,
    help="How long (e.g. 24h); 0 ends a silence now.",
)
@db_option
@config_option
def silence(job: str, for_s: float, db: str | None, config_path: str | None) -> None:
    """Send no Slack message about JOB for a while; estimates and decisions go on."""
    store = _open_store(db, config_path, readonly=False)
    until_s = datetime.now(UTC).timestamp() + for_s
    store.silence(job, until_s)
    until = datetime.fromtimestamp(until_s, UTC).isoformat(timespec="seconds")
    click.echo(f"{job}: silenced until {until}", err=True)


@main.command()
@click.option("--job", help="Only this job.")
@db_option
@config_option
@click.option(
    "--since", callback=_duration, help="History over this long (e.g. 7d), not only the latest."
)
@click.option("--json", "as_json", is_flag=True, help="A JSON list, one object per estimate.")
def estimates(
    job: str | None, db: str | None, config_path: str | None, since: float | None, as_json: bool
) -> None:
    """The latest estimate of each job (or their history with --since)."""
    store = _open_store(db, config_path, readonly=True)
    since_s = None if since is None else datetime.now(UTC).timestamp() - since
    rows = store.estimate_history(job=job, since_s=since_s, latest_only=since is None)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        _fail("no estimates stored yet" + (f" for job {job!r}" if job else ""))
    _table(
        "estimates",
        [
            "job",
            "computed",
            "status",
            "C",
            "MTBF (90% CI)",
            "fail",
            "ckpt",
            "current",
            "recommended",
            "setting",
        ],
        [_estimate_row(r) for r in rows],
    )


def _estimate_row(r: dict[str, Any]) -> list[str]:
    ci = r.get("mtbf_ci_s")
    mtbf = format_duration(r["mtbf_s"])
    if ci:
        mtbf += f" ({format_duration(ci[0])}–{format_duration(ci[1])})"
    return [
        r["job"],
        (r["computed_at"] or "-")[:19],
        r["status"],
        format_duration(r["checkpoint_cost_s"]),
        mtbf,
        str(r["n_failures"]),
        str(r["n_checkpoints"]),
        format_duration(r["current_interval_s"]),
        format_duration(r["recommended_interval_s"]),
        r.get("recommended_setting") or "-",
    ]


@main.command()
@click.option("--job", help="Only this job.")
@click.option("--kind", "kinds", multiple=True, help="Only this kind (repeatable).")
@db_option
@config_option
@click.option("--limit", type=int, help="At most this many.")
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
    store = _open_store(db, config_path, readonly=True)
    rows = [e.to_json() for e in store.events(job=job, kinds=kinds or None, limit=limit)]
    if as_json:
        _print_json_lines(rows)
        return
    _table(
        f"{len(rows)} event(s)",
        ["job", "time", "kind", "step", "duration", "class", "source:line"],
        [
            [
                r["job"],
                (r["time"] or "-")[:23] + ("~" if r["time_estimated"] else ""),
                r["kind"],
                _num(r["step"], "{}"),
                format_duration(r["duration_s"]) if r["duration_s"] is not None else "-",
                r["failure_class"] or "-",
                f"{Path(r['source']).name}:{r['line']}",
            ]
            for r in rows
        ],
    )


@main.command()
@click.option("--mtbf", required=True, callback=_duration, help="Mean time between failures.")
@click.option("--cost", required=True, callback=_duration, help="Checkpoint cost (blocking).")
@click.option("--restart", default="0", callback=_duration, help="Restart cost after a failure.")
@click.option("--current", callback=_duration, help="Current interval, to compare.")
@click.option("--json", "as_json", is_flag=True)
def interval(
    mtbf: float, cost: float, restart: float, current: float | None, as_json: bool
) -> None:
    """Young and Daly checkpoint intervals and the waste at each (a calculator)."""
    from rules.interval import daly_interval_s, waste_fraction, young_interval_s

    if mtbf <= 0 or cost <= 0:
        _fail("--mtbf and --cost must be greater than zero", EXIT_CONFIG)
    young = young_interval_s(mtbf, cost)
    daly = daly_interval_s(mtbf, cost)
    out: dict[str, Any] = {
        "mtbf_s": mtbf,
        "cost_s": cost,
        "restart_s": restart,
        "young_interval_s": young,
        "daly_interval_s": daly,
        "waste_fraction_young": waste_fraction(young, mtbf, cost, restart),
        "waste_fraction_daly": waste_fraction(daly, mtbf, cost, restart),
    }
    if current is not None:
        out["current_interval_s"] = current
        out["waste_fraction_current"] = waste_fraction(current, mtbf, cost, restart)
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


@main.command()
@click.option("--days", default=7.0, show_default=True, help="Simulated training time.")
@click.option(
    "--seconds", "replay_s", default=15.0, show_default=True, help="Replay it in this long."
)
@click.option("--dir", "workdir", type=click.Path(file_okay=False), help="Keep the files here.")
def demo(days: float, replay_s: float, workdir: str | None) -> None:
    """Replay captured training output into a watched directory; show the recommendation."""
    from agent.demo import run_demo

    setup_logging("WARNING")
    sys.exit(run_demo(days=days, replay_s=replay_s, workdir=workdir, echo=click.echo))
