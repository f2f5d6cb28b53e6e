"""Commands that read log files: ``parse`` (what is recognised; stores nothing) and ``ingest``
(a backfill into the store, then an estimate)."""

from __future__ import annotations

import os
from datetime import tzinfo
from pathlib import Path
from typing import Any, BinaryIO

import click
from click.core import ParameterSource

from ckpt_advisor.agent.cli.common import (
    EXIT_CONFIG,
    db_option,
    db_path,
    event_table,
    examples,
    fail,
    format_option,
    job_name,
    load_config,
    lock_for,
    open_store,
    print_json_lines,
    progress_bar,
    store_creation,
    tz_option,
    warn,
)

LOG_FILES = click.Path(readable=False)
"""The files ``parse`` and ``ingest`` read: one this user may not read is named and skipped when
opened (:func:`_open_log`), as one that is not a regular file is, not refused by click (exit 2,
no file read)."""


@click.command(
    epilog=examples(
        "ckpt-advisor parse train.log",
        "ckpt-advisor parse --json logs/*.log | jq -c 'select(.kind == \"failure\")'",
        "ckpt-advisor parse --misses train.log     # error-looking lines nothing recognised",
    )
)
@click.argument("files", nargs=-1, required=True, type=LOG_FILES)
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
    timestamp) are counted on stderr with their reasons, and so are lines longer than the
    line-length limit (1 MiB, skipped as the daemon skips them). A path that is not a regular
    file (a FIFO is never opened), a file this user may not read, or one that looks binary, is
    skipped with a warning; the exit code is then 1, after the other files' events.
    """
    from ckpt_advisor import parsers
    from ckpt_advisor.agent.contracts import event_json
    from ckpt_advisor.agent.tail.inputs import bounded_lines, skipped_line

    rows: list[dict[str, Any]] = []
    skipped = 0
    for path in files:
        try:
            parser = parsers.make_parser(fmt, tz=tz)  # auto: a timing file by its content
        except ValueError as exc:
            fail(str(exc), EXIT_CONFIG)
        if (fh := _open_log(path)) is None:
            skipped += 1
            continue
        try:
            with fh:
                for lineno, data, length in bounded_lines(fh):
                    if data is None:
                        warn(skipped_line(path, lineno, length))
                        continue
                    text = data.decode("utf-8", "replace")
                    rows.extend(event_json(e, path) for e in parser.feed(text, lineno))
        except OSError as exc:
            fail(f"{path}: {exc.strerror}")
        rows.extend(event_json(e, path) for e in parser.finish())
        if parser.misses:
            click.echo(f"{path}: {parser.misses} line(s) could not be read:", err=True)
            for lineno, reason in list(parser.errors)[:10]:
                click.echo(f"  {path}:{lineno}: {reason}", err=True)
        if misses:
            for lineno, text in parser.unmatched:
                click.echo(f"{path}:{lineno}: {text}")
    if skipped < len(files):  # no empty table when no file could be read
        _print_parsed(rows, misses=misses, as_json=as_json)
    if skipped:
        fail(f"{skipped} of {len(files)} file(s) skipped (named above)")


def _open_log(path: str) -> BinaryIO | None:
    """``path`` opened for reading, or None after a warning naming it: not a regular file (a
    FIFO is never opened for reading: ``inputs.open_regular``), not readable, or binary."""
    from ckpt_advisor.agent.tail.inputs import BINARY_SNIFF_BYTES, binary_reason, open_regular

    try:
        fh = os.fdopen(open_regular(path), "rb")
    except OSError as exc:
        warn(f"{path}: {exc.strerror}: skipped")
        return None
    try:
        head = fh.read(BINARY_SNIFF_BYTES)
        fh.seek(0)
    except OSError as exc:  # opened but unreadable (EIO: a bad disk, /proc/self/mem)
        fh.close()
        warn(f"{path}: {exc.strerror}: skipped")
        return None
    if why := binary_reason(head):
        fh.close()
        warn(f"{path}: looks binary ({why}), not a log: skipped")
        return None
    return fh


def _print_parsed(rows: list[dict[str, Any]], *, misses: bool, as_json: bool) -> None:
    """``parse``'s output: the rows numbered by interruption, as JSON lines or a table."""
    if misses:
        return
    from ckpt_advisor.agent.interruptions import interruption_cell, number_interruptions

    number_interruptions(rows)
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


@click.command(
    epilog=examples(
        "ckpt-advisor ingest old/*.log ckpt_timings.jsonl --job llama-70b --db ckpt.db",
        "ckpt-advisor ingest old/*.log --job llama-70b --config config.toml",
        "ckpt-advisor ingest huge.log --job llama-70b --workers 1   # one core only",
    )
)
@click.argument("files", nargs=-1, required=True, type=LOG_FILES)
@click.option("--job", required=True, callback=job_name, help="Job to store the events under.")
@db_option
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="The daemon's config: its store (unless --db), [estimation] policy, the job's "
    "timezone or [parse] timezone (unless --tz), and the job's gpus, nodes and patterns.",
)
@format_option
@tz_option
@click.option(
    "--workers",
    metavar="N",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Processes that parse: 0 uses every core this process may run on (its CPU "
    "affinity) once 64 MB or more are to be read and the biggest file is event-dense (a "
    "sample of its middle: 1,000 or more lines per MB to parse), else one; 1 parses here alone. "
    "Files are spread over them and a big file is cut into ranges; the events stored are the "
    "same.",
)
@click.pass_context
def ingest(
    ctx: click.Context,
    files: tuple[str, ...],
    job: str,
    db: str | None,
    config_path: str | None,
    fmt: str,
    tz: tzinfo,
    workers: int,
) -> None:
    """Backfill FILES into the store as JOB, then estimate that job.

    A file is read as a checkpoint timing file by its content (JSONL or CSV records, Megatron's
    progress.txt), whatever its name. With --config the estimate uses the config's policy and
    the job's size, as the daemon would. Ingesting a file twice stores nothing twice: its offset
    is remembered like the daemon's. A store that does not exist yet is created, with its
    missing directories, as the daemon creates its [store] path, and a line on stderr says so
    before anything is read (a mistyped --db shows at once).

    A last line that no newline ends yet is not read (it may still be being written): a warning
    gives its bytes, and a later ingest reads it once it ends. The summary goes to stdout;
    warnings and the progress bar (on a terminal) to stderr. A path
    that is not a regular file, a file this user may not read, or one that looks binary, is
    skipped with a warning naming it, and the exit code is then 1 (after the others are
    stored).
    """
    from zoneinfo import ZoneInfo

    from ckpt_advisor.agent.app import backfill_specs, estimator_of, job_zone, utc_now
    from ckpt_advisor.agent.contracts import estimate_json
    from ckpt_advisor.agent.store import StoreError
    from ckpt_advisor.agent.tail import Tailer

    config = load_config(config_path) if config_path else None
    if config is not None and ctx.get_parameter_source("tz") is ParameterSource.DEFAULT:
        tz = ZoneInfo(job_zone(config, job))
    readable = [path for path in files if _readable(path)]
    if not readable:
        fail("no file to ingest (each is named above)")
    specs = backfill_specs(job, readable, fmt=fmt, config=config)
    estimator = estimator_of(config)
    total = sum(Path(f).stat().st_size for f in readable)
    db_file = db_path(db, config_path)
    created = store_creation(db_file)
    lock_fd = lock_for(db_file, "ingest")  # before the store: it may upgrade it
    try:
        try:
            store = open_store(str(db_file), None)
            if created is not None:  # before the backfill: a mistyped --db is seen at once
                warn(f"new store {db_file}: {created}")
            advance = [lambda _n: None]  # the bar's, once it runs
            tailer = Tailer(  # its worker processes are forked here, before the bar's thread
                store,
                specs,
                clock=utc_now,
                tz=tz,
                backfill=True,
                on_progress=lambda n: advance[0](n),
                workers=workers or _default_workers(readable, fmt, total),
            )
            try:
                with progress_bar("ingesting", total) as advance[0]:
                    stats = tailer.scan()
                unended = [(p.path, p.unended_bytes) for p in tailer.positions() if p.unended_bytes]
            finally:
                tailer.close()
        finally:
            os.close(lock_fd)  # what follows only reads the files' events
        now_s = utc_now().timestamp()
        est = estimator.estimate(store, job, now_s)
        store.save_estimate(job, now_s, str(est.status), estimate_json(est))
    except StoreError as exc:  # e.g. a store file this user may read but not write
        fail(str(exc))
    too_long = f" ({stats.skipped_lines} too long, skipped)" if stats.skipped_lines else ""
    click.echo(
        f"{job}: {stats.lines} line(s) read{too_long}, {stats.events} event(s) stored from "
        f"{len(readable)} file(s); {est.n_checkpoints} checkpoint(s), {est.n_failures} "
        f"failure(s), status {est.status}"
    )
    for path, lag_bytes in unended:
        warn(
            f"{path}: its last {lag_bytes:,} byte(s) end in no newline, so they were not read: "
            "a line still being written, or cut off when its writer died; they are read once a "
            "newline follows them or the file is 5 minutes old (ingest again, or let the daemon "
            "follow the file)"
        )
    if stats.parse_misses:
        warn(
            f"{job}: {stats.parse_misses} record(s) looked like data but could not be read; "
            "`ckpt-advisor parse FILE` names each one's line and why"
        )
    if len(readable) < len(files):
        fail(f"{len(files) - len(readable)} of {len(files)} file(s) skipped (named above)")


def _default_workers(paths: list[str], fmt: str, total_bytes: int) -> int:
    """``--workers 0``: one per core for a backfill of :data:`parallel.SPLIT_BYTES` or more
    whose biggest file is event-dense enough to pay for them (:func:`parallel.dense_enough`),
    else 1 (below, starting the workers costs more than it saves; a sparse log parses faster
    in one process)."""
    from ckpt_advisor.agent.tail import parallel

    if total_bytes < parallel.SPLIT_BYTES or parallel.default_workers() == 1:
        return 1
    biggest = max(paths, key=lambda path: Path(path).stat().st_size)
    return parallel.default_workers() if parallel.dense_enough(biggest, fmt) else 1


def _readable(path: str) -> bool:
    """Whether ``path`` can be read as a log (else a warning names it: see :func:`_open_log`)."""
    fh = _open_log(path)
    if fh is not None:
        fh.close()
    return fh is not None


COMMANDS = (parse, ingest)
