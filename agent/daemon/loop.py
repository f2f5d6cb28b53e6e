"""The daemon's main loop: scan, report, supervise, reload, stop.

:class:`Daemon` runs three threads:

* the main loop scans files (``scan.py``; woken by the watcher, and at least every
  ``poll_every``) and is the only place that writes events and offsets;
* watchdog's observer thread only sets a wake-up flag and a discover flag (``watcher.py``);
* the scheduler's thread runs the estimate, delivery and retention jobs (``jobs.py``).

Files opened with bytes in them (a backlog) hold their job's messages until they are read and
their last lines settled (``agent/tail/backlog.py``); the scan that settles them asks for an
estimate at once. After every scan the loop reports (``health.py``: metrics, heartbeat,
systemd), restarts a dead watcher (polling goes on meanwhile), and ends with exit code 1 when
the scheduler's thread died, for systemd to restart the daemon. SIGHUP re-reads the config
file: the composition root (``agent/app.py``) makes new :class:`Parts` from it and the running
components take them in place; SIGTERM and SIGINT finish the current scan and stop.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any
from zoneinfo import ZoneInfo

from ckpt_advisor.agent.advice import AdviceBoard
from ckpt_advisor.agent.advisor import Advisor
from ckpt_advisor.agent.config import Config, ConfigError, load_config
from ckpt_advisor.agent.daemon.health import Health
from ckpt_advisor.agent.daemon.heartbeat import heartbeat_path
from ckpt_advisor.agent.daemon.jobs import Jobs, Scheduler
from ckpt_advisor.agent.daemon.metrics import CountingNotifier, Metrics
from ckpt_advisor.agent.daemon.scan import Scanner
from ckpt_advisor.agent.daemon.systemd import SystemdNotifier
from ckpt_advisor.agent.daemon.voice import Voice
from ckpt_advisor.agent.daemon.watcher import Watcher
from ckpt_advisor.agent.estimate import Estimator
from ckpt_advisor.agent.mounts import MOUNT_TABLE
from ckpt_advisor.agent.notify.base import Notifier
from ckpt_advisor.agent.notify.outbox import Outbox
from ckpt_advisor.agent.store import RegisteredJob, Store
from ckpt_advisor.agent.tail import ScanStats, Tailer, WatchSpec
from ckpt_advisor.agent.tail.backlog import Backlog

log = logging.getLogger(__name__)

EXIT_THREAD_DIED = 1
RESTART_ONLY = ("store.path", "metrics.listen", "parse.timezone")
"""Keys a reload cannot apply (the open store, the bound port, the parsers' zone)."""


@dataclass(frozen=True)
class Parts:
    """What the daemon runs with, made from one config by the composition root."""

    config: Config
    specs: list[WatchSpec]
    """The tailer's globs."""
    estimator: Estimator
    """The estimation policy and the jobs' sizes."""
    notifier: Notifier
    """Where messages go."""
    send_deadline_s: float
    """The longest one send may take."""
    registered: list[RegisteredJob]
    """The configured jobs and their sizes, as the store's fleet registry keeps them."""
    plots: bool = False
    """Attach waste-curve plots to messages (the notifier uploads files: Slack)."""


class Daemon:
    """Tails, estimates and notifies until :meth:`stop` (or SIGTERM/SIGINT).

    Args:
        parts: the parts of the config it starts with.
        store, clock, systemd, metrics: the adapters.
        config_path: the file SIGHUP re-reads (None: no reload).
        rewire: makes the parts of a reloaded config (the composition root's).
        mount_table: where filesystems are looked up (to poll, not watch, shared ones).
    """

    def __init__(
        self,
        parts: Parts,
        *,
        store: Store,
        clock: Callable[[], datetime],
        systemd: SystemdNotifier,
        metrics: Metrics,
        config_path: Path | None = None,
        rewire: Callable[[Config], Parts] | None = None,
        mount_table: str = MOUNT_TABLE,
    ) -> None:
        config = self.config = parts.config
        self.config_path = config_path
        self.store = store
        self.metrics = metrics
        self._rewire = rewire
        self.watcher = Watcher(mount_table=mount_table, poll_every_s=config.schedule.poll_every)
        backlog = Backlog()
        self.advisor = Advisor(
            store,
            estimator=parts.estimator,
            clock=clock,
            currency=config.estimation.currency,
            plots=parts.plots,
            config_path=config_path,
            backlog=backlog.of,
        )
        self.outbox = Outbox(
            store,
            CountingNotifier(parts.notifier, metrics),
            clock=clock,
            send_deadline_s=parts.send_deadline_s,
        )
        jobs = [j.name for j in config.jobs]
        self.voice = Voice(store, parts.registered)
        self.advice = AdviceBoard(config.advice.dir, endpoint=config.advice.endpoint)
        self.jobs = Jobs(
            store=store,
            advisor=self.advisor,
            outbox=self.outbox,
            metrics=metrics,
            advice=self.advice,
            clock=clock,
            jobs=jobs,
            retention_days=config.store.retention_days,
            voice=self.voice,
        )
        self.scheduler = Scheduler(
            self.jobs, metrics=metrics, clock=clock, estimate_every_s=config.schedule.estimate_every
        )
        self.health = Health(
            self.scheduler,
            systemd=systemd,
            metrics=metrics,
            heartbeat_file=heartbeat_path(config.store.path),
            clock=clock,
            schedule=config.schedule,
            jobs=jobs,
            waiting=backlog.behind,
        )
        self.tailer = Tailer(
            store,
            parts.specs,
            clock=clock,
            tz=ZoneInfo(config.parse.timezone),
            on_progress=self.health.on_progress,
            idle_flush_s=config.schedule.poll_every,
            rotated_idle_s=config.schedule.rotated_idle,
            backlog=backlog,
        )
        self.scanner = Scanner(
            self.tailer,
            discover=self.watcher.discover,
            clock=clock,
            discover_every_s=config.schedule.discover_every,
            location=store.location,
            poll_every_s=config.schedule.poll_every,
        )
        self._stop = threading.Event()
        self._reload = threading.Event()
        self._http: Any = None

    # -- signals and reload ---------------------------------------------------------------

    def stop(self, *_args: object) -> None:
        """Ask the main loop to finish its current scan and return (signal-handler safe)."""
        self._stop.set()
        self.watcher.wake.set()

    def request_reload(self) -> None:
        """Ask the main loop to re-read the config file before its next scan (signal-safe)."""
        self._reload.set()
        self.watcher.wake.set()

    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT stop the daemon cleanly; SIGHUP reloads the config."""

        def handler(signum: int, _frame: FrameType | None) -> None:
            log.info("received %s, stopping", signal.Signals(signum).name)
            self.stop()

        def hup(_signum: int, _frame: FrameType | None) -> None:
            log.info("received SIGHUP, reloading %s", self.config_path)
            self.request_reload()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGHUP, hup)

    def reload(self) -> bool:
        """Re-read the config file and apply it; returns True if applied.

        New and removed jobs and globs, the schedule, the estimation policy and Slack take
        effect at once (:meth:`apply`); :data:`RESTART_ONLY` keys need a restart (a warning
        says so). A config that does not load is rejected with an error naming the file and
        key, and the running config is kept.
        """
        if self.config_path is None or self._rewire is None:
            log.warning("reload asked, but the daemon was not started from a config file")
            return False
        try:
            new = load_config(self.config_path)
        except ConfigError as exc:
            self.metrics.reloads.labels("rejected").inc()
            log.error("config reload rejected, keeping the running config: %s", exc)
            return False
        old = self.config
        for key in RESTART_ONLY:
            section, name = key.split(".")
            if getattr(getattr(old, section), name) != getattr(getattr(new, section), name):
                log.warning("%s changed in %s: takes effect after a restart", key, self.config_path)
        self.apply(self._rewire(new))
        self.metrics.reloads.labels("ok").inc()
        log.info("config reloaded from %s: %d job(s)", self.config_path, len(new.jobs))
        return True

    def apply(self, parts: Parts) -> None:
        """Run with ``parts`` from now on: each component takes its share in place (no lock or
        thread changes hands)."""
        config = self.config = parts.config
        jobs = [j.name for j in config.jobs]
        self.tailer.set_specs(parts.specs)
        self.advisor.configure(
            parts.estimator, currency=config.estimation.currency, plots=parts.plots
        )
        notifier = CountingNotifier(parts.notifier, self.metrics)
        self.outbox.use(notifier, send_deadline_s=parts.send_deadline_s)
        self.jobs.jobs, self.health.jobs = jobs, jobs
        self.voice.configure(parts.registered)
        self.advice.configure(config.advice.dir, endpoint=config.advice.endpoint)
        self.advice.retain(jobs)
        self.jobs.retention_days = config.store.retention_days
        self.health.schedule = config.schedule
        self.scanner.discover_every_s = config.schedule.discover_every
        self.scanner.poll_every_s = config.schedule.poll_every
        self.watcher.poll_every_s = config.schedule.poll_every
        self.scheduler.reschedule(config.schedule.estimate_every)
        self.watcher.restart(self.tailer.watched_dirs(), enabled=config.schedule.file_events)

    # -- the loop -------------------------------------------------------------------------

    def problem(self) -> str | None:
        """Why the daemon is unhealthy, or None (:meth:`Health.problem`)."""
        return self.health.problem()

    def _status_line(self, stats: ScanStats) -> str:
        files = self.tailer.n_followed  # each scan: positions() would fstat and sort every file
        text = f"{len(self.jobs.jobs)} job(s), {files} file(s); last scan {stats.lines} line(s)"
        if (last_s := self.jobs.last_estimate_s) is not None:
            text += f"; last estimate {datetime.fromtimestamp(last_s, UTC):%H:%M:%S} UTC"
        return text

    def _step(self) -> int | None:
        """One scan and what follows it; an exit code when the daemon must stop."""
        started = time.monotonic()
        stats = self.scanner.scan()
        self.health.store_error = self.scanner.store_error
        if stats.failure_jobs:
            self.scheduler.after_failure(stats.failure_jobs, self.config.schedule.after_failure)
        if stats.caught_up:
            self.scheduler.caught_up(stats.caught_up)
        if not self.health.ready:
            self.scheduler.start()
            self.health.became_ready(self._status_line(stats))
        moved = stats.files_read or stats.discovered or self.scanner.store_error
        self.health.after_scan(
            stats,
            time.monotonic() - started,
            positions=self.tailer.positions() if moved else None,
            status=self._status_line(stats),
        )
        if self.scheduler.running and not self.scheduler.alive():
            log.error("the scheduler thread died; exiting for the service manager to restart")
            return EXIT_THREAD_DIED
        self.watcher.supervise(self.tailer.watched_dirs)
        return None

    def run(self) -> int:
        """Run until stopped; returns the process exit code: 1 if metrics cannot be served or
        the scheduler thread died."""
        log.info(
            "ckpt-advisor starting: %d job(s), store %s", len(self.jobs.jobs), self.store.location
        )
        if (address := self.config.metrics.address()) is not None:
            try:
                self._http = self.metrics.serve(*address, advice=self.advice)
            except OSError as exc:
                log.error("cannot serve metrics at %s: %s", self.config.metrics.listen, exc)
                return 1
            log.info("metrics at http://%s:%d/metrics", *address)
            if self.config.advice.endpoint:
                log.info("advice at http://%s:%d/advice/JOB", *address)
        if self.config.schedule.file_events:
            self.watcher.start(self.tailer.watched_dirs())
        code = 0
        try:
            while not self._stop.is_set():
                if self._reload.is_set():
                    self._reload.clear()
                    self.reload()
                exit_code = self._step()
                if exit_code is not None:
                    code = exit_code
                    break
                self.watcher.wake.wait(self.config.schedule.poll_every)
                self.watcher.wake.clear()
        finally:
            self.health.systemd.stopping()
            if self._http is not None:
                self._http.shutdown()
                self._http.server_close()
            self.watcher.stop()
            self.scheduler.shutdown(wait=code == 0)
            self.health.write_stopped()
            self.tailer.drain()  # renamed or deleted files: to their end, nothing reads them later
            self.tailer.close()
            self.voice.stop()
            log.info("ckpt-advisor stopped")
        return code
