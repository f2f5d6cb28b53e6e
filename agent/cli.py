"""The ``ckpt-advisor`` command line: one function per subcommand.

Each command parses its arguments, calls into the agent, formats and prints: readable tables by
default, ``--json`` for machines (the shapes in DESIGN.md, "Contracts"). Bad input exits non-zero
with a message that names the file, line or key. Heavy libraries are imported inside the commands
that need them, so ``--help`` stays fast.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click
from click.core import ParameterSource

from ckpt_advisor.agent.logfmt import FORMATS, setup_logging
from ckpt_advisor.agent.units import format_duration, parse_duration_s
from ckpt_advisor.parsers.events import EventKind

if TYPE_CHECKING:
    from ckpt_advisor.agent.config import Config
    from ckpt_advisor.agent.daemon.heartbeat import Heartbeat, Verdict
    from ckpt_advisor.agent.store import OutboxItem, Store, StoreReader

EXIT_CONFIG = 2
MAX_SIMULATED_FAILURES = 2_000_000
"""``simulate`` refuses runs larger than this (memory and minutes on a shared head node)."""


def _fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"ckpt-advisor: {message}", err=True)
    sys.exit(code)


def _load_config(path: str) -> Config:
    from ckpt_advisor.agent.config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as exc:
        _fail(str(exc), EXIT_CONFIG)


def _db_path(db: str | None, config: str | None) -> Path:
    if db:
        return Path(db)  # no config module (pydantic) on the read commands' path
    if config:
        return _load_config(config).store.path
    from ckpt_advisor.agent.config import default_db_path

    return default_db_path()


def _slack_token(config: Config) -> str | None:
    from ckpt_advisor.agent.config import ConfigError

    try:
        return config.slack_token()
    except ConfigError as exc:
        _fail(str(exc), EXIT_CONFIG)


def _open_store(db: str | None, config: str | None) -> Store:
    from ckpt_advisor.agent.store import StoreError, open_store

    try:
        return open_store(_db_path(db, config))
    except StoreError as exc:
        _fail(str(exc))


def _lock_for(db_path: Path, command: str) -> int:
    """Take the store's reader lock (``agent/store/lock.py``) and return its descriptor (the lock is
    held until it is closed or the process exits), or fail: two readers of one log file would
    store its events twice."""
    from ckpt_advisor.agent.store.lock import LockedError, lock_store

    try:
        return lock_store(db_path, command)
    except LockedError as exc:
        _fail(
            f"{exc}; wait for it to end, or let the daemon read these files (add them to a "
            "job's `logs` in its config)"
        )
    except OSError as exc:
        _fail(f"{db_path}.lock: cannot create: {exc.strerror}")


def _read_store(db: str | None, config: str | None) -> StoreReader:
    """The store opened read-only through sqlite3 alone (no SQLAlchemy: fast start)."""
    from ckpt_advisor.agent.store import StoreError, open_reader

    try:
        return open_reader(_db_path(db, config))
    except StoreError as exc:
        _fail(str(exc))


def _duration(_ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return parse_duration_s(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param=param) from None


def _zone(_ctx: click.Context, param: click.Parameter, value: str) -> tzinfo:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise click.BadParameter(
            f"unknown time zone {value!r} (use an IANA name such as UTC or Europe/Paris)",
            param=param,
        ) from None


def _parser_format(_ctx: click.Context, param: click.Parameter, value: str) -> str:
    from ckpt_advisor import parsers

    if value not in parsers.available_formats():
        known = ", ".join(parsers.available_formats())
        raise click.BadParameter(f"unknown format {value!r}; known: {known}", param=param)
    return value


def _job_name(_ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not value.strip():
        raise click.BadParameter("must not be empty", param=param)
    return value


tz_option = click.option(
    "--tz", default="UTC", show_default=True, callback=_zone,
    help="IANA zone of timestamps printed without an offset.",
)  # fmt: skip
format_option = click.option(
    "--format", "fmt", default="auto", show_default=True, callback=_parser_format,
    help="Parser: auto (detected per file) or a stack: hf_trainer, lightning, deepspeed, "
    "megatron, nemo, torchtitan, … (an unknown name lists them all).",
)  # fmt: skip


def _print_json_lines(rows: Iterable[dict[str, Any]]) -> None:
    for row in rows:
        click.echo(json.dumps(row, ensure_ascii=False))


def _table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD)
    for col in columns:
        table.add_column(col, no_wrap=True)
    for row in rows:
        table.add_row(*row)
    console = Console()
    if not console.is_terminal:  # piped: never fold a row; let the reader's tools cut
        console.width = 10_000
    console.print(table, crop=False)


def _short_time(iso: str | None) -> str:
    """``2026-11-23T03:15:48.123+00:00`` → ``2026-11-23 03:15:48`` (tables say UTC)."""
    return "-" if iso is None else iso[:19].replace("T", " ")


def _num(value: float | None, fmt: str = "{:.3g}") -> str:
    return "-" if value is None else fmt.format(value)


db_option = click.option("--db", type=click.Path(dir_okay=False), help="Store file (SQLite).")
config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="The daemon's config: take the store path from it (unless --db).",
)
estimating_config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="The daemon's config: its store (unless --db), [estimation] policy and job sizes.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ckpt-advisor")
def main() -> None:
    """Learn checkpoint cost and MTBF from training logs; recommend the checkpoint interval."""


@main.command()
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False))
@click.option("--log-level", default="INFO", show_default=True)
@click.option(
    "--log-format",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="text: one line per event for journald; json: one JSON object per line.",
)
def run(config_path: str, log_level: str, log_format: str) -> None:
    """Run the daemon: tail the configured logs, estimate on a schedule, notify.

    Under systemd it reports readiness and pings the watchdog (Type=notify). SIGHUP re-reads
    the config; SIGTERM stops it cleanly.
    """
    import signal

    # Until the daemon installs its own handlers, SIGTERM ends start-up cleanly (exit 0).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    config = _load_config(config_path)
    token = _slack_token(config)
    setup_logging(log_level, log_format, secrets=[token] if token else [])
    from ckpt_advisor.agent.app import build_daemon
    from ckpt_advisor.agent.store import StoreError

    _lock_for(config.store.path, "run")
    try:
        daemon = build_daemon(config, config_path=config_path)
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
    if problem := _store_problem(config.store.path):
        _fail(
            f"{config_path}: store.path: cannot create {config.store.path}: {problem}", EXIT_CONFIG
        )
    click.echo(f"{config_path}: OK")
    click.echo(f"store: {config.store.path}")
    if not config.jobs:
        click.echo("warning: no [[jobs]]: the daemon will watch nothing", err=True)
    for job in config.jobs:
        for kind, patterns in (("logs", job.logs), ("timings", job.timings)):
            for pattern in patterns:
                n = len(glob.glob(pattern, recursive=True))
                click.echo(f"job {job.name}: {kind} {pattern}: {n} file(s) now")
    token = _slack_token(config)
    where = f"Slack {config.slack.channel}" if token and config.slack.channel else "the daemon log"
    click.echo(f"recommendations go to {where}")
    listen = config.metrics.address()
    click.echo(f"metrics at http://{listen[0]}:{listen[1]}/metrics" if listen else "metrics: off")


def _store_problem(db_path: Path) -> str | None:
    """Why the store at ``db_path`` could not be created or written, or None: tries for real
    (creating its directory and a scratch file there), since permission bits lie to root."""
    import tempfile

    if db_path.exists():
        return None if os.access(db_path, os.R_OK | os.W_OK) else "not readable and writable"
    try:
        db_path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=db_path.parent):
            return None
    except OSError as exc:
        return exc.strerror or str(exc)


@main.command("slack-test")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False))
@click.option("--text", default=None, help="Message text (default: a short test message).")
def slack_test(config_path: str, text: str | None) -> None:
    """Post a test message to the configured Slack channel, to check token and channel.

    Exits 2 when no token or channel is configured, 1 when Slack refuses the message.
    """
    import socket

    from ckpt_advisor.agent.notify.base import NotifyError
    from ckpt_advisor.agent.notify.message import escape_slack
    from ckpt_advisor.agent.notify.slack import SlackNotifier

    config = _load_config(config_path)
    token = _slack_token(config)
    if not token:
        _fail(
            f"{config_path}: no Slack token: set ${config.slack.token_env} or the credential "
            f"file $CREDENTIALS_DIRECTORY/{config.slack.token_env}",
            EXIT_CONFIG,
        )
    if not config.slack.channel:
        _fail(f"{config_path}: slack.channel is not set", EXIT_CONFIG)
    body = escape_slack(text or f"ckpt-advisor test message from {socket.gethostname()}")
    notifier = SlackNotifier(
        token, config.slack.channel, base_url=config.slack.base_url, timeout_s=config.slack.timeout
    )
    try:
        ts = notifier.send({"text": body, "blocks": None})
    except NotifyError as exc:
        _fail(exc.message)
    click.echo(f"posted to {config.slack.channel} (ts {ts})")


@main.command()
@db_option
@config_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@click.option(
    "--max-queue-age",
    default="1h",
    show_default=True,
    callback=_duration,
    help="Unhealthy when a Slack message has waited longer.",
)
def status(db: str | None, config_path: str | None, as_json: bool, max_queue_age: float) -> None:
    """Is the daemon alive and current? Exits 1 when unhealthy (usable as a check).

    Shows the last scan and estimate, files that lag, and what is queued for Slack.
    """
    from ckpt_advisor.agent.daemon.heartbeat import assess, heartbeat_path, read_heartbeat

    store = _read_store(db, config_path)
    hb = read_heartbeat(heartbeat_path(_db_path(db, config_path)))
    queued = store.queued_messages()
    now_s = datetime.now(UTC).timestamp()
    verdict = assess(hb, queued, now_s=now_s, max_queue_age_s=max_queue_age)
    if as_json:
        from ckpt_advisor.agent.contracts import status_json

        click.echo(json.dumps(status_json(verdict, hb, queued), indent=2))
    else:
        _print_status(hb, verdict, queued, now_s)
    sys.exit(0 if verdict.healthy else 1)


def _ago(epoch_s: float | None, now_s: float) -> str:
    return "never" if epoch_s is None else f"{format_duration(max(0.0, now_s - epoch_s))} ago"


def _print_status(
    hb: Heartbeat | None, verdict: Verdict, queued: list[OutboxItem], now_s: float
) -> None:
    click.echo("healthy" if verdict.healthy else "UNHEALTHY")
    for problem in verdict.problems:
        click.echo(f"  problem: {problem}")
    if hb is not None:
        click.echo(
            f"daemon pid {hb.pid}, up since {_ago(hb.started_s, now_s)}, jobs: "
            + (", ".join(hb.jobs) or "none")
        )
        click.echo(
            f"last scan {_ago(hb.last_scan_s, now_s)}; last estimate "
            f"{_ago(hb.last_estimate_s, now_s)}; {len(hb.files)} file(s) followed"
        )
    for f in verdict.lagging:
        click.echo(
            f"  lagging: {f.path} ({f.job}): {f.lag_bytes:,} bytes behind, last read "
            f"{_ago(f.last_read_s, now_s)}"
        )
    click.echo(f"{len(queued)} message(s) queued for Slack")
    for q in queued:
        click.echo(
            f"  #{q.id} {q.job} {q.action}, queued {_ago(q.created_s, now_s)}, "
            f"{q.attempts} attempt(s)"
        )


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@format_option
@tz_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object per event.")
@click.option(
    "--misses",
    is_flag=True,
    help="Instead of events, list the lines that look like errors but matched no pattern.",
)
def parse(files: tuple[str, ...], fmt: str, tz: tzinfo, as_json: bool, misses: bool) -> None:
    """Show the events recognised in FILES (nothing is stored).

    Lines that looked like data but could not be read (a bad timing record, an impossible
    timestamp) are counted on stderr with their reasons.
    """
    from ckpt_advisor import parsers
    from ckpt_advisor.agent.contracts import parsed_event_json

    rows: list[dict[str, Any]] = []
    for path in files:
        try:
            parser = parsers.make_parser(fmt, tz=tz)  # auto: a timing file by its content
        except ValueError as exc:
            _fail(str(exc), EXIT_CONFIG)
        try:
            with open(path, "rb") as fh:
                for lineno, raw in enumerate(fh, 1):
                    text = raw.rstrip(b"\n").decode("utf-8", "replace")
                    rows.extend(parsed_event_json(e, path) for e in parser.feed(text, lineno))
        except OSError as exc:
            _fail(f"{path}: {exc.strerror}")
        rows.extend(parsed_event_json(e, path) for e in parser.finish())
        if parser.misses:
            click.echo(f"{path}: {parser.misses} line(s) could not be read:", err=True)
            for lineno, reason in list(parser.errors)[:10]:
                click.echo(f"  {path}:{lineno}: {reason}", err=True)
        if misses:
            for lineno, text in parser.unmatched:
                click.echo(f"{path}:{lineno}: {text}")
    if misses:
        return
    from ckpt_advisor.agent.interruptions import interruption_cell, number_interruptions

    number_interruptions(rows, datetime.now(UTC).timestamp())
    if as_json:
        _print_json_lines(rows)
        return
    _table(
        f"{len(rows)} event(s); times UTC; interruption: #id +lines merged into it",
        ["source:line", "kind", "time", "step", "duration", "class", "interruption", "parser"],
        [
            [
                f"{Path(r['source']).name}:{r['line']}",
                r["kind"],
                _short_time(r["time"]),
                _num(r["step"], "{}"),
                format_duration(r["duration_s"]) if r["duration_s"] is not None else "-",
                r["failure_class"] or "-",
                interruption_cell(r),
                r["parser"],
            ]
            for r in rows
        ],
    )


@contextmanager
def _progress_bar(what: str, total: int) -> Iterator[Callable[[int], None]]:
    """A transient rich progress bar on a terminal, yielding ``advance(n)``; nothing (and no
    import of rich, ~0.1 s) when stderr is not a terminal."""
    if not sys.stderr.isatty():
        yield lambda _n: None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(what, total=total)
        yield lambda n: progress.advance(task, n)


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--job", required=True, callback=_job_name, help="Job to store the events under.")
@db_option
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="The daemon's config: its store (unless --db), [estimation] policy, [parse] timezone "
    "(unless --tz) and the job's gpus, nodes and patterns.",
)
@format_option
@tz_option
@click.pass_context
def ingest(
    ctx: click.Context,
    files: tuple[str, ...],
    job: str,
    db: str | None,
    config_path: str | None,
    fmt: str,
    tz: tzinfo,
) -> None:
    """Backfill FILES into the store as JOB, then estimate that job.

    A file is read as a checkpoint timing file by its content (JSONL or CSV records, Megatron's
    progress.txt), whatever its name. With --config the estimate uses the config's policy and
    the job's size, as the daemon would. Ingesting a file twice stores nothing twice: its offset
    is remembered like the daemon's.
    """
    from zoneinfo import ZoneInfo

    from ckpt_advisor.agent.app import backfill_specs, estimator_of, utc_now
    from ckpt_advisor.agent.contracts import estimate_json
    from ckpt_advisor.agent.store import StoreError
    from ckpt_advisor.agent.tail import Tailer

    config = _load_config(config_path) if config_path else None
    if config is not None and ctx.get_parameter_source("tz") is ParameterSource.DEFAULT:
        tz = ZoneInfo(config.parse.timezone)
    specs = backfill_specs(job, files, fmt=fmt, config=config)
    estimator = estimator_of(config)
    total = sum(Path(f).stat().st_size for f in files)
    db_path = _db_path(db, config_path)
    lock_fd = _lock_for(db_path, "ingest")  # before the store: it may upgrade it
    try:
        try:
            store = _open_store(str(db_path), None)
            with _progress_bar("ingesting", total) as advance:
                tailer = Tailer(
                    store, specs, clock=utc_now, tz=tz, backfill=True, on_progress=advance
                )
                stats = tailer.scan()
                tailer.close()
        finally:
            os.close(lock_fd)  # what follows only reads the files' events
        now_s = utc_now().timestamp()
        est = estimator.estimate(store, job, now_s)
        store.save_estimate(job, now_s, str(est.status), estimate_json(est))
    except StoreError as exc:  # e.g. a store file this user may read but not write
        _fail(str(exc))
    click.echo(
        f"{job}: {stats.lines} line(s) read, {stats.events} event(s) stored from "
        f"{len(files)} file(s); {est.n_checkpoints} checkpoint(s), {est.n_failures} failure(s), "
        f"status {est.status}",
        err=True,
    )
    if stats.parse_misses:
        click.echo(
            f"{job}: {stats.parse_misses} record(s) looked like data but could not be read; "
            "`ckpt-advisor parse FILE` names each one's line and why",
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
    """Send no Slack message about JOB for a while; estimates go on, and a recommendation still
    due when the silence ends is posted then."""
    if for_s > 366 * 86400:
        _fail("--for: at most a year (silence a job for longer by removing it)", EXIT_CONFIG)
    known = (
        [j.name for j in _load_config(config_path).jobs]
        if config_path
        else _read_store(db, None).jobs()
    )
    if job not in known:
        _fail(f"no job {job!r} here; known: {', '.join(known) or 'none'}", EXIT_CONFIG)
    store = _open_store(db, config_path)
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
    store = _read_store(db, config_path)
    since_s = None if since is None else datetime.now(UTC).timestamp() - since
    rows = store.estimate_history(job=job, since_s=since_s, latest_only=since is None)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        _fail("no estimates stored yet" + (f" for job {job!r}" if job else ""))
    newest = max(str(r["computed_at"]) for r in rows)[:19].replace("T", " ")
    _table(
        f"estimates (computed up to {newest} UTC)",
        ["job", "status", "C", "MTBF", "90% CI", "fails", "saves", "now", "best", "setting"],
        [_estimate_row(r) for r in rows],
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
    ]


@main.command()
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

    store = _read_store(db, config_path)
    found = store.events(job=job, kinds=kinds or None, limit=limit)
    rows = [stored_event_json(e) for e in found]
    if as_json:
        _print_json_lines(rows)
        return
    _table(
        f"{len(rows)} event(s); times UTC, ~ = inferred",
        ["job", "time", "kind", "step", "duration", "class", "source:line"],
        [
            [
                r["job"],
                _short_time(r["time"]) + ("~" if r["time_estimated"] else ""),
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
@click.option("--mtbf", callback=_duration, help="Mean time between failures (all of them).")
@click.option("--cost", callback=_duration, help="Checkpoint cost (blocking).")
@click.option("--restart", default="0", callback=_duration, help="Restart cost after a failure.")
@click.option("--current", callback=_duration, help="Current interval, to compare.")
@click.option("--memory-cost", callback=_duration, help="Two tiers: cost of a fast save.")
@click.option("--persistent-cost", callback=_duration, help="Two tiers: cost of a persistent save.")
@click.option(
    "--recoverable-fraction",
    type=click.FloatRange(0.0, 1.0, max_open=True),
    help="Two tiers: share of the interruptions a fast copy survives (with --mtbf).",
)
@click.option(
    "--memory-mtbf", callback=_duration, help="Two tiers: MTBF of the interruptions it survives."
)
@click.option(
    "--persistent-mtbf", callback=_duration, help="Two tiers: MTBF of those it does not survive."
)
@click.option(
    "--memory-restart", callback=_duration, help="Two tiers: restart from a fast copy [--restart]."
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
    if mtbf is None or cost is None:
        _fail("give --mtbf and --cost (or --memory-cost and --persistent-cost)", EXIT_CONFIG)
    from ckpt_advisor.agent.notes import render_note
    from ckpt_advisor.rules.interval import (
        daly_interval_s,
        exponential_waste_fraction,
        high_cost_note,
        young_interval_s,
    )

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
        "waste_fraction_young": exponential_waste_fraction(young, mtbf, cost, restart),
        "waste_fraction_daly": exponential_waste_fraction(daly, mtbf, cost, restart),
    }
    if current is not None:
        out["current_interval_s"] = current
        out["waste_fraction_current"] = exponential_waste_fraction(current, mtbf, cost, restart)
    warning = high_cost_note(cost, mtbf, out["waste_fraction_daly"])
    out["warnings"] = [] if warning is None else [render_note(warning)]
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
    from ckpt_advisor.rules.two_level import (
        TwoTierJob,
        first_order_plan,
        optimal_plan,
        single_tier_plan,
    )

    if memory_cost is None or persistent_cost is None:
        _fail("two tiers need both --memory-cost and --persistent-cost", EXIT_CONFIG)
    try:
        if fraction is not None:
            if mtbf is None:
                _fail("--recoverable-fraction needs --mtbf (the MTBF of all of them)", EXIT_CONFIG)
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
                    _fail("--memory-mtbf must exceed --mtbf (it counts fewer)", EXIT_CONFIG)
                persistent_mtbf = 1.0 / (1.0 / mtbf - 1.0 / memory_mtbf)
            job = TwoTierJob(memory_cost, persistent_cost, memory_mtbf, persistent_mtbf, *restarts)
        else:
            _fail(
                "two tiers need --recoverable-fraction with --mtbf, or --memory-mtbf with "
                "--persistent-mtbf or --mtbf",
                EXIT_CONFIG,
            )
    except ValueError as exc:
        _fail(str(exc), EXIT_CONFIG)
    m1, m2 = job.mtbf_recoverable_s, job.mtbf_persistent_s
    best, first, single = optimal_plan(job), first_order_plan(job), single_tier_plan(job)

    def plan_json(plan: Any) -> dict[str, Any]:
        return {
            "memory_interval_s": plan.fast_interval_s,
            "persistent_interval_s": plan.persistent_interval_s,
            "saves_per_persistent": plan.saves_per_persistent,
            "waste_fraction": plan.waste_fraction,
        }

    out: dict[str, Any] = {
        "memory_cost_s": memory_cost,
        "persistent_cost_s": persistent_cost,
        "mtbf_memory_s": None if math.isinf(m1) else m1,
        "mtbf_persistent_s": m2,
        "recoverable_fraction": m2 / (m1 + m2) if not math.isinf(m1) else 0.0,
        "memory_restart_s": restarts[0],
        "persistent_restart_s": restarts[1],
        **plan_json(best),
        "first_order": plan_json(first),
        "persistent_only": {
            "interval_s": single.fast_interval_s,
            "waste_fraction": single.waste_fraction,
        },
    }
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


@main.command()
@click.option(
    "--days", default=7.0, show_default=True, type=click.FloatRange(min=1, max=365),
    help="Simulated training time.",
)  # fmt: skip
@click.option(
    "--seconds",
    "replay_s",
    default=15.0,
    show_default=True,
    type=click.FloatRange(min=1),
    help="Replay it in this long.",
)
@click.option("--dir", "workdir", type=click.Path(file_okay=False), help="Keep the files here.")
def demo(days: float, replay_s: float, workdir: str | None) -> None:
    """Replay captured training output into a watched directory; show the recommendation."""
    from ckpt_advisor.agent.demo import run_demo

    setup_logging("WARNING")
    sys.exit(run_demo(days=days, replay_s=replay_s, workdir=workdir, echo=click.echo))


@main.command()
@click.option("--mtbf", callback=_duration, help="Mean time between failures (not with --job).")
@click.option("--cost", callback=_duration, help="Checkpoint cost, blocking (not with --job).")
@click.option("--restart", default="0", callback=_duration, help="Restart cost after a failure.")
@click.option("--shape", default=1.0, show_default=True, help="Weibull shape (1: exponential).")
@click.option(
    "--interval",
    "intervals",
    multiple=True,
    callback=lambda c, p, v: [_duration(c, p, x) for x in v],
    help="Interval to try (repeatable); Daly's is always tried.",
)
@click.option("--sweep", is_flag=True, help="Also find the best fixed interval on a grid.")
@click.option("--days", default=30.0, show_default=True, help="Simulated job length.")
@click.option("--replicates", default=200, show_default=True, help="Simulated jobs.")
@click.option("--seed", default=0, show_default=True)
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
    C and R against its current, recommended and given intervals.
    """
    from ckpt_advisor.rules.interval import daly_interval_s, waste_fraction
    from ckpt_advisor.rules.simulate import interval_grid_s, replay, simulate_intervals

    if job is not None:
        from ckpt_advisor.agent.app import estimator_of
        from ckpt_advisor.agent.store import StoreError

        estimator = estimator_of(_load_config(config_path) if config_path else None)
        store = _read_store(db, config_path)
        try:
            now_s = datetime.now(UTC).timestamp()
            est = estimator.estimate(store, job, now_s)
        except StoreError as exc:  # a store of an older schema, never opened for writing since
            _fail(str(exc))
        if est.checkpoint_cost_s is None or est.mtbf_s is None:
            _fail(f"job {job!r}: C or M is unknown, nothing to backtest")
        mtbf, cost = est.mtbf_s, est.checkpoint_cost_s
        restart = est.restart_cost_s or 0.0
    elif mtbf is None or cost is None or mtbf <= 0 or cost <= 0:
        _fail("--mtbf and --cost (> 0) are needed without --job", EXIT_CONFIG)
    if shape < 0.2 or replicates < 2 or days <= 0:
        _fail("--shape must be >= 0.2, --days > 0 and --replicates >= 2", EXIT_CONFIG)
    if any(t <= 0 for t in intervals):
        _fail("--interval must be greater than zero", EXIT_CONFIG)
    if cost >= mtbf:
        _fail(
            f"C ({format_duration(cost)}) is not below M ({format_duration(mtbf)}): the job "
            "would mostly write checkpoints; see `ckpt-advisor interval` for the numbers",
            EXIT_CONFIG,
        )
    if (failures := days * 86400 / mtbf * replicates) > MAX_SIMULATED_FAILURES:
        _fail(
            f"that is ~{failures:,.0f} simulated failures (limit {MAX_SIMULATED_FAILURES:,}): "
            "use fewer --days or --replicates",
            EXIT_CONFIG,
        )
    daly = daly_interval_s(mtbf, cost)
    tried = [daly, *intervals]
    if job is not None:
        tried += [t for t in (est.current_interval_s,) if t]
    grid = interval_grid_s(mtbf, cost) if sweep else []
    out: dict[str, Any] = {
        "mode": "backtest" if job else "monte_carlo",
        "mtbf_s": mtbf,
        "cost_s": cost,
        "restart_s": restart,
        "daly_interval_s": daly,
    }
    results: list[dict[str, Any]]
    if job is not None:
        results = [
            _replay_json(
                replay(
                    est.lives_s,
                    interval_s=t,
                    cost_s=cost,
                    restart_s=restart,
                    tail_s=est.lives_tail_s,
                )
            )
            for t in [*tried, *grid]
        ]
        out.update(job=job, n_failures=len(est.lives_s), current_interval_s=est.current_interval_s)
    else:
        sims = simulate_intervals(
            [*tried, *grid],
            mtbf_s=mtbf,
            cost_s=cost,
            restart_s=restart,
            shape=shape,
            horizon_s=days * 86400.0,
            replicates=replicates,
            seed=seed,
        )
        results = [
            {
                "interval_s": r.interval_s,
                "waste_fraction": r.waste_fraction,
                "waste_stderr": r.waste_stderr,
                "goodput": r.goodput,
            }
            for r in sims
        ]
        out.update(shape=shape, days=days, replicates=replicates, seed=seed)
    for r in results:
        r["waste_fraction_formula"] = waste_fraction(r["interval_s"], mtbf, cost, restart)
    out["intervals"] = results[: len(tried)]
    if grid:
        out["best"] = min(results[len(tried) :], key=lambda r: float(r["waste_fraction"]))
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    head = (
        f"backtest of {job} ({len(est.lives_s)} interruptions)"
        if job
        else f"{replicates} simulated jobs of {days:g} days, lives "
        + ("exponential" if shape == 1.0 else f"Weibull of shape {shape:g}")
    )
    click.echo(
        f"{head}; M {format_duration(mtbf)}, C {format_duration(cost)}, "
        f"R {format_duration(restart)}"
    )
    labels = [
        "Daly",
        *(["given"] * len(intervals)),
        *(["current"] * (len(tried) - 1 - len(intervals))),
    ]
    rows = list(zip(labels, results, strict=False))
    if grid:
        rows.append(("best", out["best"]))
    for label, r in rows:
        err = f" ± {r['waste_stderr']:.2%}" if r["waste_stderr"] is not None else ""
        click.echo(
            f"{label:8} {format_duration(r['interval_s']):>10}  waste {r['waste_fraction']:.2%}"
            f"{err} (first-order formula {r['waste_fraction_formula']:.2%}), "
            f"goodput {r['goodput']:.2%}"
        )


def _replay_json(r: Any) -> dict[str, Any]:
    return {
        "interval_s": r.interval_s,
        "waste_fraction": r.waste_fraction,
        "waste_stderr": None,
        "goodput": r.goodput,
    }


@main.command()
@click.option("--job", required=True, help="The job to draw.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="PNG file.")
@db_option
@config_option
@click.option("--json", "as_json", is_flag=True, help="Print what was drawn as JSON.")
def plot(job: str, output: str, db: str | None, config_path: str | None, as_json: bool) -> None:
    """Draw JOB's waste curve with its current and recommended intervals and the optimum's
    confidence band (from its latest stored estimate)."""
    from ckpt_advisor.agent.plot import plot_waste_curve

    store = _read_store(db, config_path)
    rows = store.estimate_history(job=job, latest_only=True)
    if not rows:
        _fail(f"no estimate stored for job {job!r}")
    try:
        path = plot_waste_curve(rows[-1], output)
    except ValueError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"{output}: {exc.strerror}")
    if as_json:
        click.echo(json.dumps({"job": job, "output": str(path)}))
    else:
        click.echo(f"{job}: waste curve written to {path}", err=True)
