"""Commands that read log files: ``parse`` (what is recognised; stores nothing) and ``ingest``
(a backfill into the store, then an estimate)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from ckpt_advisor.agent.cli.common import (
    EXIT_CONFIG,
    db_option,
    db_path,
    event_table,
    fail,
    format_option,
    job_name,
    load_config,
    lock_for,
    open_store,
    print_json_lines,
    progress_bar,
    tz_option,
)


@click.command()
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
            fail(str(exc), EXIT_CONFIG)
        try:
            with open(path, "rb") as fh:
                for lineno, raw in enumerate(fh, 1):
                    text = raw.rstrip(b"\n").decode("utf-8", "replace")
                    rows.extend(parsed_event_json(e, path) for e in parser.feed(text, lineno))
        except OSError as exc:
            fail(f"{path}: {exc.strerror}")
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
        print_json_lines(rows)
        return
    columns = ["source:line", "kind", "time", "step", "duration", "class", "interruption", "parser"]
    event_table(
        f"{len(rows)} event(s); times UTC; interruption: #id +lines merged into it",
        columns,
        rows,
        extra={"interruption": interruption_cell},
    )


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--job", required=True, callback=job_name, help="Job to store the events under.")
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

    config = load_config(config_path) if config_path else None
    if config is not None and ctx.get_parameter_source("tz") is ParameterSource.DEFAULT:
        tz = ZoneInfo(config.parse.timezone)
    specs = backfill_specs(job, files, fmt=fmt, config=config)
    estimator = estimator_of(config)
    total = sum(Path(f).stat().st_size for f in files)
    db_file = db_path(db, config_path)
    lock_fd = lock_for(db_file, "ingest")  # before the store: it may upgrade it
    try:
        try:
            store = open_store(str(db_file), None)
            with progress_bar("ingesting", total) as advance:
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
        fail(str(exc))
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


COMMANDS = (parse, ingest)
