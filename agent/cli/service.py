"""Commands about the daemon: ``run`` it, ``migrate`` its store, ``check-config``, ``slack-test``,
and the ``demo`` that runs it on a replayed week (its ``status``: ``status.py``)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ckpt_advisor.agent.cli.common import (
    EXIT_CONFIG,
    config_option,
    db_option,
    db_path,
    examples,
    fail,
    fail_store,
    load_config,
    lock_for,
    read_store,
    slack_token,
    store_creation,
    warn,
)
from ckpt_advisor.agent.logfmt import FORMATS, setup_logging
from ckpt_advisor.agent.store.url import redact

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ckpt_advisor.agent.config_jobs import JobConfig


@click.command(
    epilog=examples(
        "ckpt-advisor run --config /etc/ckpt-advisor/config.toml",
        "ckpt-advisor run --config config.toml --log-format json --log-level DEBUG",
    )
)
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
    config = load_config(config_path)
    token = slack_token(config)
    setup_logging(log_level, log_format, secrets=[token] if token else [])
    from ckpt_advisor.agent.app import build_daemon
    from ckpt_advisor.agent.store import StoreError

    created = None if config.store.url is not None else store_creation(config.store.path)
    lock_for(config.store.path, "run")
    try:
        daemon = build_daemon(config, config_path=config_path)
    except StoreError as exc:
        fail_store(exc)
    if created is not None:
        logging.getLogger(__name__).info("new store %s: %s", config.store.path, created)
    daemon.install_signal_handlers()
    sys.exit(daemon.run())


@click.command(
    epilog=examples(
        "ckpt-advisor migrate --config owner.toml      # a fleet's PostgreSQL store, as owner",
        "ckpt-advisor migrate --db ~/ckpt-advisor.db",
    ),
)
@db_option
@config_option
def migrate(db: str | None, config_path: str | None) -> None:
    """Create the store or bring its schema to this version's (what the daemon does at
    start): for a fleet's PostgreSQL store, run it as the database's owner role before
    starting agents whose role may only read and write rows."""
    from ckpt_advisor.agent.store.schema import SCHEMA_VERSION

    def upgrading(n_events: int) -> None:
        click.echo(f"upgrading the store ({n_events:,} events) ...", err=True)

    from ckpt_advisor.agent.app import open_configured_store
    from ckpt_advisor.agent.store import StoreError, open_store

    try:
        if db or not config_path:
            store = open_store(db_path(db, None), on_upgrade=upgrading)
        else:
            store = open_configured_store(load_config(config_path), on_upgrade=upgrading)
        store.count_events()  # a server that was away at open is reached here
    except StoreError as exc:
        fail_store(exc)
    click.echo(f"{store.location}: schema version {SCHEMA_VERSION}")
    store.close()


@click.command(
    "check-config",
    epilog=examples(
        "ckpt-advisor check-config --config /etc/ckpt-advisor/config.toml",
    ),
)
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False))
def check_config(config_path: str) -> None:
    """Validate a config file, check its store, and show what each job's globs match now.

    Each glob's matches are counted by type: only regular files are read, and every other match
    (a FIFO, a directory, a dangling symlink, a symlink loop) is named in a warning, as is a
    file that looks binary. A store that exists is checked (SQLite ``PRAGMA quick_check``):
    a corrupt one exits 1 with how to recover. A ``[store] url`` is connected to and its schema
    version shown: a server that refuses the role exits 2, one that cannot be reached exits 1.
    Exits 2 on a bad config.
    """
    config = load_config(config_path)
    url = config.store.url
    if url is None and (problem := _store_problem(config.store.path)):
        fail(
            f"{config_path}: store.path: cannot create {config.store.path}: {problem}", EXIT_CONFIG
        )
    if url is None:
        _check_store(config.store.path)
        store = _new_store(config.store.path)
    else:
        store = f"{redact(url)} ({_check_url(url, config.store.password())})"
    click.echo(f"{config_path}: OK")
    click.echo(f"store: {store}")
    if not config.jobs:
        warn("warning: no [[jobs]]: the daemon will watch nothing")
    for job in config.jobs:
        if not job.logs and not job.timings:
            warn(
                f"warning: job {job.name}: no logs and no timings: the daemon reads nothing for it"
            )
        for pattern in sorted(set(job.logs) & set(job.timings)):
            warn(
                f"warning: job {job.name}: {pattern} is given as both logs and timings: its files "
                f"are read once, as logs (format {job.format})"
            )
        for kind, patterns in (("logs", job.logs), ("timings", job.timings)):
            for pattern in patterns:
                click.echo(f"job {job.name}: {kind} {pattern}: {_matches(job.name, pattern)}")
    _warn_shared(config.jobs)
    token = slack_token(config)
    if token and not config.slack.channel:
        warn(
            f"warning: a Slack token is set (${config.slack.token_env}) but slack.channel is "
            "not: recommendations go to the daemon log"
        )
    where = f"Slack {config.slack.channel}" if token and config.slack.channel else "the daemon log"
    click.echo(f"recommendations go to {where}")
    listen = config.metrics.address()
    click.echo(f"metrics at http://{listen[0]}:{listen[1]}/metrics" if listen else "metrics: off")


def _matches(job: str, pattern: str) -> str:
    """What ``pattern`` matches now, by type (``3 file(s) now; also 1 FIFO, 2 directory(ies),
    skipped``), warning on stderr about each match the daemon skips or finds binary."""
    import glob
    from collections import Counter

    from ckpt_advisor.agent.tail import inputs

    kinds: Counter[str] = Counter()
    for path in sorted(glob.glob(pattern, recursive=True)):
        kind = inputs.path_kind(path)
        kinds[kind] += 1
        if kind != inputs.REGULAR:
            warn(f"warning: job {job}: {path}: {inputs.describe(kind)}: the daemon skips it")
            continue
        try:
            fd = inputs.open_regular(path)
            try:
                why = inputs.binary_reason(os.pread(fd, inputs.BINARY_SNIFF_BYTES, 0))
            finally:
                os.close(fd)
        except OSError as exc:
            warn(f"warning: job {job}: {path}: cannot be read: {exc.strerror}")
            continue
        if why:
            warn(
                f"warning: job {job}: {path}: looks binary ({why}): it holds no log lines; "
                "narrow the glob"
            )
    text = f"{kinds.pop(inputs.REGULAR, 0)} file(s) now"
    if kinds:
        text += "; also " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) + ", skipped"
    return text


def _warn_shared(jobs: Sequence[JobConfig]) -> None:
    """Warn about each file that the globs of several jobs match now: the daemon reads it once,
    as the first of them in the config (``agent/tail/discovery.py``), the others get nothing
    from it."""
    import glob

    first: dict[str, str] = {}
    also: dict[str, list[str]] = {}
    for job in jobs:
        for pattern in (*job.logs, *job.timings):
            for path in glob.glob(pattern, recursive=True):
                taken = first.setdefault(path, job.name)
                if taken != job.name and job.name not in also.setdefault(path, []):
                    also[path].append(job.name)
    for path, others in sorted(also.items()):
        warn(
            f"warning: {path}: matched by the globs of jobs {first[path]} and "
            f"{', '.join(others)}: it is read once, as job {first[path]} (the first in the "
            "config); narrow the other globs"
        )


def _check_store(db_path: Path) -> None:
    """Exit 1 naming the damage and the way to recover when the store at ``db_path`` exists and
    fails its integrity check (or cannot be opened); nothing when there is none yet."""
    if not db_path.exists():
        return
    store = read_store(str(db_path), None)
    try:
        if problem := store.check():
            fail(f"store.path: {problem}")
    finally:
        store.close()


def _check_url(url: str, password: str | None) -> str:
    """What the PostgreSQL server at ``url`` holds for the daemon (its schema version, or that
    ``migrate`` is to make or upgrade it; an agent whose role may do so does it itself at its
    start), or exit naming the URL without its password: 2 when the server refuses the role
    for good (a wrong password, a missing database or grant), 1 when it cannot be reached or
    holds a newer schema."""
    from sqlalchemy.exc import DBAPIError

    from ckpt_advisor.agent.store import StoreError
    from ckpt_advisor.agent.store.postgres.access import describe, refused
    from ckpt_advisor.agent.store.postgres.store import make_engine
    from ckpt_advisor.agent.store.schema import SCHEMA_VERSION, check_schema
    from ckpt_advisor.agent.store.sql.migrate import stored_version

    engine = make_engine(url, password, "ckpt-advisor check-config")
    try:
        with engine.connect() as conn:
            version = stored_version(conn)
        check_schema(redact(url), version)
    except DBAPIError as exc:
        code = EXIT_CONFIG if refused(exc) else 1
        fail(f"store.url: {redact(url)}: cannot connect: {describe(exc)}", code)
    except StoreError as exc:
        fail(f"store.url: {exc}")
    finally:
        engine.dispose()
    if version is None:
        return "no ckpt-advisor tables yet: `ckpt-advisor migrate` as the owner role makes them"
    if version < SCHEMA_VERSION:
        return f"schema version {version}: `ckpt-advisor migrate` brings it to {SCHEMA_VERSION}"
    return f"schema version {version}"


def _store_problem(db_path: Path) -> str | None:
    """Why the store at ``db_path`` could not be created or written, or None: tries for real
    (a scratch file in the nearest directory that exists, since permission bits lie to root),
    and creates nothing: a check does not change the disk."""
    import tempfile

    if db_path.exists():
        return None if os.access(db_path, os.R_OK | os.W_OK) else "not readable and writable"
    parent = db_path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is not a directory"
    try:
        with tempfile.TemporaryFile(dir=parent):
            return None
    except OSError as exc:
        return exc.strerror or str(exc)


def _new_store(db_path: Path) -> str:
    """How ``check-config`` shows a store path: with what the daemon's first start creates."""
    created = store_creation(db_path)
    return str(db_path) if created is None else f"{db_path} ({created} at the daemon's first start)"


@click.command(
    "slack-test",
    epilog=examples(
        "SLACK_BOT_TOKEN=xoxb-... ckpt-advisor slack-test --config config.toml",
        "ckpt-advisor slack-test --config config.toml --text 'hello from the head node'",
    ),
)
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False))
@click.option("--text", default=None, help="Message text (default: a short test message).")
def slack_test(config_path: str, text: str | None) -> None:
    """Post a test message to the configured Slack channel, to check token and channel, and
    say which of the scopes ckpt-advisor uses the token lacks (files:write: the plots).

    Exits 2 when no token or channel is configured, 1 when Slack refuses the message.
    """
    import socket

    from ckpt_advisor.agent.notify.base import NotifyError
    from ckpt_advisor.agent.notify.message import escape_slack
    from ckpt_advisor.agent.notify.slack import SCOPES, SlackNotifier

    config = load_config(config_path)
    token = slack_token(config)
    if not token:
        fail(
            f"{config_path}: no Slack token: set ${config.slack.token_env} or the credential "
            f"file $CREDENTIALS_DIRECTORY/{config.slack.token_env}",
            EXIT_CONFIG,
        )
    if not config.slack.channel:
        fail(f"{config_path}: slack.channel is not set", EXIT_CONFIG)
    body = escape_slack(text or f"ckpt-advisor test message from {socket.gethostname()}")
    notifier = SlackNotifier(
        token, config.slack.channel, base_url=config.slack.base_url, timeout_s=config.slack.timeout
    )
    try:
        ts = notifier.send({"text": body, "blocks": None})
        scopes = notifier.scopes()
    except NotifyError as exc:
        fail(exc.message)
    click.echo(f"posted to {config.slack.channel} (ts {ts})")
    if scopes is None:
        click.echo("Slack did not say which scopes the token has (no x-oauth-scopes)")
        return
    click.echo("token scopes: " + (", ".join(sorted(scopes)) or "none"))
    for scope, lost in SCOPES.items():
        if scope not in scopes:
            click.echo(
                f"missing scope {scope}: {lost}; add it under the Slack app's OAuth & "
                "Permissions and reinstall the app"
            )


@click.command(
    epilog=examples(
        "ckpt-advisor demo",
        "ckpt-advisor demo --days 3 --seconds 10 --dir /tmp/ckpt-demo   # keep its files",
    )
)
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


COMMANDS = (run, check_config, slack_test, demo, migrate)
