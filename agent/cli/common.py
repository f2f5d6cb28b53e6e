"""What every command shares: failing with a message, the common options, opening the store
and the config, tables and JSON lines.

Heavy libraries (pydantic for the config, SQLAlchemy for a PostgreSQL store, rich for tables)
are imported inside the helpers that need them, so ``--help`` and the read-only commands stay
fast (``python -m bench --only cli``).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from ckpt_advisor.agent.marks import at_least, interval_is_bounded, setting_is_lower_bound
from ckpt_advisor.agent.units import format_duration, format_in, parse_duration_s

if TYPE_CHECKING:
    from ckpt_advisor.agent.config import Config
    from ckpt_advisor.agent.store import Store, StoreReader

EXIT_CONFIG = 2
"""The exit code of bad input (a config, an option); 1 is any other failure."""


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``ckpt-advisor: message`` on stderr (:func:`warn`) and exit with ``code`` (2: bad
    input)."""
    warn(message)
    sys.exit(code)


def examples(*commands: str) -> str:
    """A command's ``--help`` epilog: ``Examples:`` and each command line as written (``\b``
    keeps click from re-wrapping them; a line starting with ``#`` is a comment)."""
    return "\b\nExamples:\n" + "\n".join(f"  {c}" for c in commands)


def warn(message: str) -> None:
    """Print ``ckpt-advisor: message`` on stderr (a diagnostic; the command goes on), each line
    of a message of several (one per config error) prefixed alike."""
    click.echo("\n".join(f"ckpt-advisor: {line}" for line in message.splitlines()), err=True)


def load_config(path: str) -> Config:
    """The validated config at ``path``, or exit 2 with the message naming file and key."""
    from ckpt_advisor.agent import config

    try:
        return config.load_config(path)
    except config.ConfigError as exc:
        fail(str(exc), EXIT_CONFIG)


def db_path(db: str | None, config: str | None) -> Path:
    """The local state file: ``--db``, else the config's ``[store] path``, else the default
    (in fleet mode its directory keeps the heartbeat and lock files)."""
    if db:
        return Path(db)  # no config module (pydantic) on the read commands' path
    if config:
        return load_config(config).store.path
    from ckpt_advisor.agent.config import default_db_path

    return default_db_path()


def store_creation(db_path: Path) -> str | None:
    """What opening a SQLite store at ``db_path`` for writing creates, in words, or None when
    it exists: ``created`` or ``created with its directory DIR`` (the daemon, ``ingest`` and
    ``migrate`` create a missing store file and its missing directories alike; ``check-config``
    says so beforehand, and the commands that create say so after)."""
    if db_path.exists():
        return None
    if db_path.parent.exists():
        return "created"
    return f"created with its directory {db_path.parent}"


def store_target(db: str | None, config: str | None) -> tuple[str | Path, str | None]:
    """The store to open and its password: ``--db`` (SQLite), else the config's ``[store]``
    (``url``, else ``path``), else the default SQLite file."""
    if db or not config:
        return db_path(db, None), None
    store = load_config(config).store
    return store.target(), store.password()


def slack_token(config: Config) -> str | None:
    """The config's Slack token (None without one), or exit 2 when it is malformed."""
    from ckpt_advisor.agent.config import ConfigError

    try:
        return config.slack_token()
    except ConfigError as exc:
        fail(str(exc), EXIT_CONFIG)


def open_store(db: str | None, config: str | None) -> Store:
    """The store opened for writing (created or upgraded) as the config's agent, or exit
    with its error (:func:`fail_store`)."""
    from ckpt_advisor.agent import store

    try:
        if config and not db:
            from ckpt_advisor.agent.app import open_configured_store

            return open_configured_store(load_config(config))
        return store.open_store(db_path(db, None))
    except store.StoreError as exc:
        fail_store(exc)


def fail_store(exc: Exception) -> NoReturn:
    """Exit with a store's error: 2 when the database refuses for good (a wrong password, a
    missing grant: bad configuration, docs/RELIABILITY.md scenario 31), 1 otherwise."""
    refusal = sys.modules.get("ckpt_advisor.agent.store.postgres.access")
    refused = refusal is not None and isinstance(exc, refusal.StoreAccessError)
    fail(str(exc), EXIT_CONFIG if refused else 1)


def lock_for(db_path: Path, command: str) -> int:
    """Take the store's reader lock (``agent/store/lock.py``) and return its descriptor (the lock is
    held until it is closed or the process exits), or fail: two readers of one log file would
    store its events twice."""
    from ckpt_advisor.agent.store.lock import LockedError, lock_store

    try:
        return lock_store(db_path, command)
    except LockedError as exc:
        fail(
            f"{exc}; wait for it to end, or let the daemon read these files (add them to a "
            "job's `logs` in its config)"
        )
    except OSError as exc:
        fail(f"{db_path}.lock: cannot create: {exc.strerror}")


def read_store(db: str | None, config: str | None) -> StoreReader:
    """The store opened read-only: SQLite through sqlite3 alone (no SQLAlchemy: fast start),
    or the config's PostgreSQL ``url``."""
    from ckpt_advisor.agent.store import StoreError

    try:
        return read_store_or_raise(db, config)
    except StoreError as exc:
        fail_store(exc)


def require_job(job: str | None, known: list[str]) -> None:
    """Exit 1 unless ``job`` (None: every job) is among ``known``, listing them: a typo in a
    job name gets an answer, never an empty table."""
    if job is not None and job not in known:
        fail(f"no job {job!r} here; known: {', '.join(known) or 'none'}")


def read_store_or_raise(db: str | None, config: str | None) -> StoreReader:
    """:func:`read_store` that raises :class:`StoreError` instead of exiting; for a SQLite
    file that is not there, the message says what named it and how to name the right one."""
    from ckpt_advisor.agent.store import NoStoreHere, StoreError, open_reader

    target, password = store_target(db, config)
    try:
        return open_reader(target, password=password)
    except NoStoreHere as exc:
        raise StoreError(
            f"{exc} ({store_origin(db, config)}); has the daemon or ingest run? To read the "
            "daemon's store, give its config (--config FILE), or --db PATH, or set "
            "$CKPT_ADVISOR_DB=PATH"
        ) from None


def store_origin(db: str | None, config: str | None) -> str:
    """What named the SQLite file a command opens, in words: ``--db``, the ``[store] path`` of
    the config, ``$CKPT_ADVISOR_DB`` or ``$STATE_DIRECTORY``, or the built-in default."""
    from ckpt_advisor.agent.config import default_db

    if db:
        return "from --db"
    if config and "path" in load_config(config).store.model_fields_set:
        return f"the [store] path of {config}"
    variable = default_db()[1]
    unset = f"{config} sets no [store] path" if config else "no --db or --config"
    if variable:
        return f"from {variable}: {unset}"
    return f"the default: {unset}, no $CKPT_ADVISOR_DB"


def duration(_ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """Option callback: a duration (``90s``, ``6h``) in seconds, or a usage error naming it."""
    if value is None:
        return None
    try:
        return parse_duration_s(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param=param) from None


def zone(_ctx: click.Context, param: click.Parameter, value: str) -> tzinfo:
    """Option callback: an IANA time zone, or a usage error naming it."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise click.BadParameter(
            f"unknown time zone {value!r} (use an IANA name such as UTC or Europe/Paris)",
            param=param,
        ) from None


def parser_format(_ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Option callback: a known parser format, or a usage error listing the known ones."""
    from ckpt_advisor import parsers

    if value not in parsers.available_formats():
        known = ", ".join(parsers.available_formats())
        raise click.BadParameter(f"unknown format {value!r}; known: {known}", param=param)
    return value


def job_name(_ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Option callback: a job name that is not blank."""
    if not value.strip():
        raise click.BadParameter("must not be empty", param=param)
    return value


tz_option = click.option(
    "--tz", default="UTC", show_default=True, callback=zone,
    help="IANA zone of timestamps printed without an offset.",
)  # fmt: skip
format_option = click.option(
    "--format", "fmt", default="auto", show_default=True, callback=parser_format,
    help="Parser: auto (detected per file) or a stack: hf_trainer, lightning, deepspeed, "
    "megatron, nemo, torchtitan, … (an unknown name lists them all).",
)  # fmt: skip


def print_json_lines(rows: Iterable[dict[str, Any]]) -> None:
    """One JSON object per line on stdout (JSON Lines), :data:`JSON_LINES_BATCH` lines a write
    (``click.echo`` flushes what it writes: a system call per line was ~5 µs of CPU a line,
    a third of ``events --json``'s printing)."""
    found = iter(rows)
    while batch := list(itertools.islice(found, JSON_LINES_BATCH)):
        click.echo("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in batch), nl=False)


JSON_LINES_BATCH = 1000
"""Lines of :func:`print_json_lines` written at once."""


def table(
    title: str,
    columns: list[str],
    rows: list[list[str]],
    *,
    why: list[tuple[str, str]] | None = None,
    notes: list[tuple[str, str]] | None = None,
) -> None:
    """Print a table with rich; each column as wide as its widest cell (a number cut to ``…``
    misleads: a terminal too narrow wraps the lines instead). ``why`` and ``notes``: ``(row
    name, text)`` pairs printed under the table after a ``why:`` and a ``notes:`` heading, one
    per line, where free text folds to any width. Piped, no line is folded (the reader's tools
    cut), unless ``COLUMNS`` is set: the title is printed as a line of its own, since rich folds
    a table's title to the table's width whatever the console's."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    out = Table(header_style="bold", box=box.SIMPLE_HEAD)
    for i, col in enumerate(columns):
        out.add_column(col, no_wrap=True, min_width=max([len(col), *(len(r[i]) for r in rows)]))
    for row in rows:
        out.add_row(*row)
    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = 10_000
    console.print(title, highlight=False, markup=False)
    console.print(out, crop=False)
    for heading, pairs in (("why", why), ("notes", notes)):
        if pairs:
            console.print(f"{heading}:", highlight=False)
            for name, text in pairs:
                console.print(f"  {name}: {text}", highlight=False, markup=False)


def event_table(
    title: str,
    columns: list[str],
    rows: list[dict[str, Any]],
    *,
    extra: Mapping[str, Callable[[dict[str, Any]], str]] | None = None,
) -> None:
    """A table of ``parse``/``events`` JSON rows; ``columns`` among ``job``, ``time`` (``~``:
    inferred), ``kind``, ``step``, ``duration``, ``class``, ``source:line``, ``parser``, and the
    names of ``extra`` (a cell made from the row)."""

    def cells(r: dict[str, Any]) -> dict[str, str]:
        return {
            "job": r.get("job", "-"),
            "time": short_time(r["time"]) + ("~" if r["time_estimated"] else ""),
            "kind": r["kind"],
            "step": num(r["step"], "{}"),
            "duration": format_duration(r["duration_s"]),
            "class": r["failure_class"] or "-",
            "source:line": f"{Path(r['source']).name}:{r['line']}",
            "parser": r["parser"],
            **{name: cell(r) for name, cell in (extra or {}).items()},
        }

    table(title, columns, [[row[c] for c in columns] for row in map(cells, rows)])


def best_cell(r: dict[str, Any]) -> str:
    """The recommended interval; when C or M is a lower bound, the range over the plausible C
    and M's interval, or ``≥`` the interval at the bound when it has no upper end (as the
    message says)."""
    best = format_duration(r["recommended_interval_s"])
    bounds = r.get("recommended_interval_range_s")
    if not interval_is_bounded(r) or not bounds or best == "-":
        return best
    low, high = bounds
    if high is None:
        return at_least(best, True)
    return f"{format_duration(low)}–{format_duration(high)}"


def setting_cell(r: dict[str, Any]) -> str:
    """The recommended setting (``save_steps=500``), with ``or more`` when the interval has no
    upper bound (C or M a lower bound without one: :func:`best_cell` shows ``≥``;
    :func:`agent.marks.setting_is_lower_bound`), ``-`` unknown."""
    setting = r.get("recommended_setting")
    if not setting:
        return "-"
    return f"{setting} or more" if setting_is_lower_bound(r) else str(setting)


def short_time(iso: str | None) -> str:
    """``2026-11-23T03:15:48.123+00:00`` → ``2026-11-23 03:15:48`` (tables say UTC)."""
    return "-" if iso is None else iso[:19].replace("T", " ")


def until_cell(until_s: float | None, now_s: float) -> str:
    """When a silence ends: ``2026-12-02 12:00 UTC (in 23h 59m)``, or ``-``."""
    if until_s is None:
        return "-"
    until = datetime.fromtimestamp(until_s, UTC).isoformat(sep=" ", timespec="minutes")
    return f"{until[:16]} UTC ({format_in(until_s, now_s)})"


def num(value: float | None, fmt: str = "{:.3g}") -> str:
    """``value`` formatted, or ``-`` when unknown."""
    return "-" if value is None else fmt.format(value)


db_option = click.option(
    "--db",
    type=click.Path(dir_okay=False),
    help="Store file (SQLite; a fleet's: --config).",
)
config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="The daemon's config: its store, [store] url or path (unless --db).",
)
estimating_config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="The daemon's config: its store (unless --db), [estimation] policy and job sizes.",
)


BAR_MIN_BYTES = 1 << 20
"""A read of fewer bytes draws no bar: it is over in well under a second (an event-dense log
reads at ~25 MB/s), before a bar could be seen, and importing rich (~0.1 s) would be most of
the command's start-up."""


@contextmanager
def progress_bar(what: str, total: int) -> Iterator[Callable[[int], None]]:
    """A transient rich progress bar on a terminal over ``total`` bytes, yielding
    ``advance(n)``; nothing (and no import of rich) when stderr is not a terminal or ``total``
    is under :data:`BAR_MIN_BYTES`."""
    if total < BAR_MIN_BYTES or not sys.stderr.isatty():
        yield lambda _n: None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(what, total=total)
        yield lambda n: progress.advance(task, n)
