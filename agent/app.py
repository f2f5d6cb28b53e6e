"""The composition root: config in, the policy and the adapters out.

Everything that turns configuration into working parts is here, once (cosmicpython's
``bootstrap.py`` is the model): the estimation policy from ``[estimation]``, the jobs' sizes from
``[[jobs]]``, the tailer's globs, the notifier from ``[slack]``, the store from ``[store]``, and
:func:`build_daemon`, which takes each adapter (store, notifier, clock, systemd, metrics) as a
keyword argument so tests pass real-but-local ones. The CLI commands that estimate (``ingest``,
``simulate --job``) take their policy from here too, so a job is estimated the same way
whichever command does it.

The daemon's modules are imported inside :func:`build_daemon` only: ``ingest`` and the read-only
commands start without APScheduler, watchdog or slack-sdk.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ckpt_advisor.agent.estimate import Estimator
from ckpt_advisor.rules.policy import EstimationPolicy, JobFacts
from ckpt_advisor.rules.tiers import with_overrides

if TYPE_CHECKING:
    from ckpt_advisor.agent.config import Config, EstimationConfig
    from ckpt_advisor.agent.daemon.loop import Daemon, Parts
    from ckpt_advisor.agent.daemon.metrics import Metrics
    from ckpt_advisor.agent.daemon.systemd import SystemdNotifier
    from ckpt_advisor.agent.notify.base import Notifier
    from ckpt_advisor.agent.store import RegisteredJob, Store
    from ckpt_advisor.agent.tail import WatchSpec

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The default clock: the current aware UTC datetime."""
    return datetime.now(UTC)


def policy_of(estimation: EstimationConfig) -> EstimationPolicy:
    """The estimation policy of an ``[estimation]`` section (durations already in seconds).

    Raises:
        ValueError: a combination the config's own checks let through is out of range (the
            message names the setting).
    """
    return EstimationPolicy(
        confidence=estimation.confidence,
        cost_window_saves=estimation.cost_window_saves,
        mtbf_window_s=estimation.mtbf_window,
        min_saves=estimation.min_saves,
        min_failures=estimation.min_failures,
        min_weibull_failures=estimation.min_weibull_failures,
        drift_ratio=estimation.drift_ratio,
        resolve_ratio=estimation.resolve_ratio,
        repeat_after_s=estimation.repeat_after,
        min_excess_gpu_hours_per_day=estimation.min_excess_gpu_hours_per_day,
        price_per_gpu_hour=estimation.price_per_gpu_hour,
    )


def job_sizes(config: Config) -> dict[str, JobFacts]:
    """Each sized job's facts from ``[[jobs]]``: its GPUs, its units for M per unit and the
    fleet's rate (``nodes``, else ``gpus``), and its tier survival table. Jobs with none of
    these are left out."""
    return {
        job.name: JobFacts(
            gpus=job.gpus, units=job.nodes or job.gpus, survival=with_overrides(job.survival)
        )
        for job in config.jobs
        if job.gpus or job.nodes or job.survival
    }


def estimator_of(config: Config | None) -> Estimator:
    """The estimator of a config (its policy, job sizes and nodes); the defaults without one."""
    if config is None:
        return Estimator()
    nodes = {job.name: job.nodes for job in config.jobs if job.nodes}
    return Estimator(policy_of(config.estimation), job_sizes(config), nodes)


def registered_jobs(config: Config) -> list[RegisteredJob]:
    """The configured jobs as the store's fleet registry keeps them (name, agent, size)."""
    from ckpt_advisor.agent.store import RegisteredJob

    return [RegisteredJob(j.name, config.agent.name, j.gpus, j.nodes) for j in config.jobs]


def open_configured_store(
    config: Config, *, on_upgrade: Callable[[int], None] | None = None, migrate: bool = True
) -> Store:
    """The store ``[store]`` names (``url``, else ``path``), opened as ``[agent] name`` with
    the password of ``[store] password_env``.

    Raises:
        StoreError: see :func:`agent.store.open_store`.
    """
    from ckpt_advisor.agent.store import open_store

    return open_store(
        config.store.target(),
        agent=config.agent.name,
        password=config.store.password(),
        on_upgrade=on_upgrade,
        migrate=migrate,
    )


def backfill_specs(
    job: str, paths: Iterable[str], *, fmt: str, config: Config | None
) -> list[WatchSpec]:
    """The tailer's specs for ``ingest``: each file under ``job``, read with ``fmt`` (``auto``:
    a timing file is known by its content, :func:`parsers.make_parser`), and with the custom
    patterns of the job of that name in ``config``, as the daemon would read it."""
    from ckpt_advisor.agent.tail import WatchSpec

    configured = [j for j in (config.jobs if config else []) if j.name == job]
    custom = tuple(p.compiled() for j in configured for p in j.patterns)
    return [WatchSpec(job, (str(Path(p).resolve()),), fmt=fmt, custom=custom) for p in paths]


def job_zone(config: Config, job: str) -> str:
    """The zone ``job``'s stamps printed without an offset are read in: its ``[[jobs]]
    timezone``, else ``[parse] timezone``."""
    zones = [j.timezone for j in config.jobs if j.name == job and j.timezone is not None]
    return zones[0] if zones else config.parse.timezone


def watch_specs(config: Config) -> list[WatchSpec]:
    """The tailer's globs for every configured job: its logs (with the job's format, custom
    patterns and time zone), then its timing files."""
    from zoneinfo import ZoneInfo

    from ckpt_advisor.agent.tail import WatchSpec

    specs = []
    for job in config.jobs:
        tz = None if job.timezone is None else ZoneInfo(job.timezone)
        if job.logs:
            custom = tuple(pattern.compiled() for pattern in job.patterns)
            specs.append(WatchSpec(job.name, tuple(job.logs), fmt=job.format, custom=custom, tz=tz))
        if job.timings:  # a timing file is known by its records (``auto``), not by its glob
            specs.append(WatchSpec(job.name, tuple(job.timings), tz=tz))
    return specs


def make_notifier(config: Config, config_path: Path | None = None) -> Notifier:
    """Slack when a token and a channel are configured; otherwise the daemon's own log.
    ``config_path`` (the file ``config`` was read from) is named in the commands its warnings
    suggest.

    Raises:
        ConfigError: the token is malformed (:meth:`Config.slack_token`).
    """
    token = config.slack_token()
    if token and config.slack.channel:
        from ckpt_advisor.agent.notify.slack import SlackNotifier

        return SlackNotifier(
            token,
            config.slack.channel,
            base_url=config.slack.base_url,
            timeout_s=config.slack.timeout,
            config_path=config_path,
        )
    if token and not config.slack.channel:
        log.warning(
            "slack token found but [slack] channel is not set: recommendations go to the log"
        )
    from ckpt_advisor.agent.notify.log import LogNotifier

    return LogNotifier(logging.getLogger("ckpt_advisor.recommendations"))


def parts_of(
    config: Config, *, notifier: Notifier | None = None, config_path: Path | None = None
) -> Parts:
    """What the daemon runs with under ``config`` (read from ``config_path``): globs,
    estimator, notifier (``notifier``, or the one ``[slack]`` gives), the send deadline (three
    attempts: 429 retry, connect retry, plus the longest Retry-After slept through), and
    whether messages carry plots (Slack only)."""
    from ckpt_advisor.agent.daemon.loop import Parts
    from ckpt_advisor.agent.notify.slack import SlackNotifier

    notifier = notifier or make_notifier(config, config_path)
    return Parts(
        config=config,
        specs=watch_specs(config),
        estimator=estimator_of(config),
        notifier=notifier,
        send_deadline_s=3 * config.slack.timeout + 30.0,
        registered=registered_jobs(config),
        plots=isinstance(notifier, SlackNotifier),
    )


def build_daemon(
    config: Config,
    *,
    store: Store | None = None,
    notifier: Notifier | None = None,
    clock: Clock | None = None,
    systemd: SystemdNotifier | None = None,
    metrics: Metrics | None = None,
    config_path: str | Path | None = None,
    mount_table: str | None = None,
) -> Daemon:
    """The daemon of ``config``, each adapter overridable (tests pass real-but-local ones).

    ``config_path`` is the file SIGHUP re-reads, and the ``--config`` of the commands that
    messages and warnings suggest (made absolute: they are copied into other shells). A
    ``notifier`` passed in is kept across reloads; the default one is rebuilt from the
    reloaded ``[slack]``. The default store is opened here (:func:`open_configured_store`;
    upgraded if older: systemd is told and given the time; a PostgreSQL server that is away is
    retried by the running daemon).

    Raises:
        StoreError: the store cannot be opened.
        ConfigError: the Slack token is malformed.
    """
    from ckpt_advisor.agent.daemon.health import START_EXTEND_S
    from ckpt_advisor.agent.daemon.loop import Daemon
    from ckpt_advisor.agent.daemon.metrics import Metrics
    from ckpt_advisor.agent.daemon.systemd import SystemdNotifier
    from ckpt_advisor.agent.mounts import MOUNT_TABLE
    from ckpt_advisor.agent.store.schema import UPGRADE_S_PER_MILLION_EVENTS

    notify = systemd or SystemdNotifier()
    path = Path(config_path).absolute() if config_path is not None else None

    def upgrading(n_events: int) -> None:  # systemd must wait for the rewrite of the events
        notify.status(f"upgrading the store: {n_events} events")
        notify.extend_timeout(START_EXTEND_S + n_events * UPGRADE_S_PER_MILLION_EVENTS / 1e6)

    return Daemon(
        parts_of(config, notifier=notifier, config_path=path),
        store=store or open_configured_store(config, on_upgrade=upgrading),
        clock=clock or utc_now,
        systemd=notify,
        metrics=metrics or Metrics(),
        config_path=path,
        rewire=lambda new: parts_of(new, notifier=notifier, config_path=path),
        mount_table=mount_table or MOUNT_TABLE,
    )
