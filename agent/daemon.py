"""The daemon: the composition root and the main loop.

:func:`build_daemon` wires config to adapters, taking each adapter (store, notifier, clock) as a
keyword argument so tests pass real-but-local ones. :class:`Daemon` runs three threads:

* the main loop scans files (woken by watchdog, and at least every ``poll_every``) and is the
  only place that writes events and offsets;
* watchdog's observer thread only sets a wake-up flag;
* APScheduler runs the estimate job every ``estimate_every`` (UTC, coalesced, one instance at a
  time) and once more soon after a new failure is stored; the outbox delivery every
  ``DELIVER_EVERY_S`` (each send bounded by a deadline); retention daily.

The main loop supervises the other threads: a dead watchdog observer is restarted (polling goes
on meanwhile); a dead scheduler thread ends the daemon with exit code 1, for systemd to restart.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import FrameType
from zoneinfo import ZoneInfo

from apscheduler.schedulers.background import BackgroundScheduler
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from agent.advisor import Advisor, EstimateSettings
from agent.config import Config
from agent.mounts import MOUNT_TABLE, filesystem_type, is_shared
from agent.notifier import LogNotifier, Notifier, SlackNotifier
from agent.store import Store, StoreError
from agent.tailer import Tailer, WatchSpec
from rules.drift import DriftRule

log = logging.getLogger(__name__)

DELIVER_EVERY_S = 15.0
"""How often queued Slack messages are retried (Slack back after an outage)."""
RETENTION_EVERY_S = 86400.0
EXIT_THREAD_DIED = 1


def utc_now() -> datetime:
    """The default clock: the current aware UTC datetime."""
    return datetime.now(UTC)


def watch_specs(config: Config) -> list[WatchSpec]:
    """The tailer's globs for every configured job: logs, then timing files."""
    specs = []
    for job in config.jobs:
        if job.logs:
            specs.append(WatchSpec(job.name, tuple(job.logs), timing=False, fmt=job.format))
        if job.timings:
            specs.append(WatchSpec(job.name, tuple(job.timings), timing=True))
    return specs


def make_notifier(config: Config) -> Notifier:
    """Slack when a token and a channel are configured; otherwise the daemon's own log."""
    token = config.slack_token()
    if token and config.slack.channel:
        return SlackNotifier(
            token,
            config.slack.channel,
            base_url=config.slack.base_url,
            timeout_s=config.slack.timeout,
        )
    if token and not config.slack.channel:
        log.warning(
            "slack token found but [slack] channel is not set: recommendations go to the log"
        )
    return LogNotifier(logging.getLogger("ckpt_advisor.recommendations"))


def make_advisor(
    config: Config, store: Store, notifier: Notifier, clock: Callable[[], datetime]
) -> Advisor:
    """The estimate → decide → notify cycle configured from ``[estimation]``."""
    est = config.estimation
    return Advisor(
        store,
        notifier,
        rule=DriftRule(
            ratio=est.drift_ratio,
            resolve_ratio=est.resolve_ratio,
            min_failures=est.min_failures,
            min_saves=est.min_saves,
            repeat_after_s=est.repeat_after,
        ),
        settings=EstimateSettings(
            confidence=est.confidence,
            cost_window_saves=est.cost_window_saves,
            mtbf_window_s=est.mtbf_window,
            min_failures=est.min_failures,
            min_saves=est.min_saves,
            drift_ratio=est.drift_ratio,
        ),
        clock=clock,
        gpus={j.name: j.gpus for j in config.jobs if j.gpus},
        # three attempts (429 retry, connect retry) plus the longest Retry-After slept through
        send_deadline_s=3 * config.slack.timeout + 30.0,
    )


class _Wake(FileSystemEventHandler):
    def __init__(self, flag: threading.Event) -> None:
        self._flag = flag

    def on_any_event(self, event: FileSystemEvent) -> None:
        self._flag.set()


class Daemon:
    """Tails, estimates and notifies until :meth:`stop` (or SIGTERM/SIGINT)."""

    def __init__(
        self,
        config: Config,
        *,
        store: Store,
        notifier: Notifier,
        clock: Callable[[], datetime],
        mount_table: str = MOUNT_TABLE,
    ) -> None:
        self.config = config
        self.mount_table = mount_table
        self.store = store
        self.clock = clock
        self.tailer = Tailer(
            store, watch_specs(config), clock=clock, tz=ZoneInfo(config.parse.timezone)
        )
        self.advisor = make_advisor(config, store, notifier, clock)
        self.jobs = [j.name for j in config.jobs]
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.scheduler = BackgroundScheduler(
            timezone=UTC,
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        )
        self._observer: BaseObserver | None = None
        self._observer_restarts = 0
        self._store_error: str | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def stop(self, *_args: object) -> None:
        """Ask the main loop to finish its current scan and return (signal-handler safe)."""
        self._stop.set()
        self._wake.set()

    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT stop the daemon cleanly."""

        def handler(signum: int, _frame: FrameType | None) -> None:
            log.info("received %s, stopping", signal.Signals(signum).name)
            self.stop()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def _start_observer(self) -> None:
        """Watch the local directories with inotify (a wake-up only: polling is always on).

        Directories on shared filesystems get no inotify watch: other hosts' writes raise no
        event there. If inotify fails (watch limit, instance limit), one warning, then polling.
        """
        observer = Observer()
        handler = _Wake(self._wake)
        watched = 0
        try:
            for d in sorted(self.tailer.watched_dirs()):
                fstype = filesystem_type(d, self.mount_table)
                if fstype is not None and is_shared(fstype):
                    log.info("%s is on %s: polling it every %gs", d, fstype, self.poll_every_s)
                    continue
                observer.schedule(handler, d, recursive=True)
                watched += 1
            if watched:
                observer.start()
        except OSError as exc:
            log.warning(
                "file notifications unavailable (%s); polling every %gs only",
                exc,
                self.poll_every_s,
            )
            return
        self._observer = observer if watched else None

    @property
    def poll_every_s(self) -> float:
        """Seconds between two polls of every known file."""
        return self.config.schedule.poll_every

    def _supervise(self) -> int | None:
        """Check the other threads; returns an exit code when the daemon must stop."""
        if self.scheduler.running and not _scheduler_alive(self.scheduler):
            log.error("the scheduler thread died; exiting for the service manager to restart")
            return EXIT_THREAD_DIED
        if self._observer is not None and not self._observer.is_alive():
            self._observer = None
            self._observer_restarts += 1
            log.warning(
                "the file watcher thread died; restarting it (polling every %gs meanwhile)",
                self.poll_every_s,
            )
            self._start_observer()
        return None

    def _scan(self) -> None:
        """One scan; a store that cannot be written is reported once per distinct error and
        retried every poll (offsets stay where they were, so nothing is lost)."""
        try:
            stats = self.tailer.scan()
        except StoreError as exc:
            if str(exc) != self._store_error:
                log.error("%s; retrying every %gs", exc, self.poll_every_s)
            self._store_error = str(exc)
            return
        if self._store_error is not None:
            log.info("store writable again: %s", self.store.path)
            self._store_error = None
        if stats.events:
            log.info("read %d line(s), stored %d event(s)", stats.lines, stats.events)
        if stats.failure_jobs and self.scheduler.running:
            self._after_failure(stats.failure_jobs)

    def prune(self) -> None:
        """The retention job: drop events older than ``[store] retention_days``."""
        cutoff_s = self.clock().timestamp() - self.config.store.retention_days * 86400.0
        n = self.store.prune_events(cutoff_s)
        if n:
            log.info("retention: pruned %d event(s) older than %g days", n, cutoff_s)

    def _start_scheduler(self) -> None:
        self.scheduler.add_job(
            self.estimate_now,
            "interval",
            seconds=self.config.schedule.estimate_every,
            id="estimate",
            next_run_time=self.clock(),
        )
        self.scheduler.add_job(
            self.advisor.deliver, "interval", seconds=DELIVER_EVERY_S, id="deliver"
        )
        self.scheduler.add_job(
            self.prune,
            "interval",
            seconds=RETENTION_EVERY_S,
            id="retention",
            next_run_time=self.clock() + timedelta(seconds=60),
        )
        self.scheduler.start()

    def estimate_now(self) -> None:
        """The scheduled job: estimate every configured job, then deliver queued messages."""
        self.advisor.run(self.jobs)

    def _after_failure(self, jobs: set[str]) -> None:
        when = self.clock() + timedelta(seconds=self.config.schedule.after_failure)
        log.info("new failure in %s: estimating at %s", ", ".join(sorted(jobs)), when.isoformat())
        self.scheduler.add_job(
            self.estimate_now, "date", run_date=when, id="after-failure", replace_existing=True
        )

    def run(self) -> int:
        """Run until stopped; returns the process exit code."""
        log.info("ckpt-advisor starting: %d job(s), store %s", len(self.jobs), self.store.path)
        self._start_observer()
        code = 0
        try:
            while not self._stop.is_set():
                self._scan()
                if not self.scheduler.running:
                    self._start_scheduler()
                exit_code = self._supervise()
                if exit_code is not None:
                    code = exit_code
                    break
                self._wake.wait(self.poll_every_s)
                self._wake.clear()
        finally:
            if self._observer is not None:
                self._observer.stop()
                self._observer.join(timeout=5)
            if self.scheduler.running:
                self.scheduler.shutdown(wait=code == 0)
            self.tailer.close()
            log.info("ckpt-advisor stopped")
        return code


def _scheduler_alive(scheduler: BackgroundScheduler) -> bool:
    """APScheduler 3 keeps its loop thread in ``_thread`` (no public accessor)."""
    thread = getattr(scheduler, "_thread", None)
    return thread is None or bool(thread.is_alive())


def build_daemon(
    config: Config,
    *,
    store: Store | None = None,
    notifier: Notifier | None = None,
    clock: Callable[[], datetime] | None = None,
) -> Daemon:
    """The composition root: a :class:`Daemon` from config, each adapter overridable."""
    store = store or Store(config.store.path)
    return Daemon(
        config,
        store=store,
        notifier=notifier or make_notifier(config),
        clock=clock or utc_now,
    )
