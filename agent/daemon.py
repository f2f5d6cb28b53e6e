"""The daemon: the composition root and the main loop.

:func:`build_daemon` wires config to adapters, taking each adapter (store, notifier, clock) as a
keyword argument so tests pass real-but-local ones. :class:`Daemon` runs three threads:

* the main loop scans files (woken by watchdog, and at least every ``poll_every``) and is the
  only place that writes events and offsets;
* watchdog's observer thread only sets a wake-up flag;
* APScheduler runs the estimate job every ``estimate_every`` (UTC, coalesced, one instance at a
  time) and once more soon after a new failure is stored.
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
from agent.notifier import LogNotifier, Notifier, SlackNotifier
from agent.store import Store
from agent.tailer import Tailer, WatchSpec
from rules.drift import DriftRule

log = logging.getLogger(__name__)


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
            min_excess_gpu_hours_per_day=est.min_excess_gpu_hours_per_day,
        ),
        settings=EstimateSettings(
            confidence=est.confidence,
            cost_window_saves=est.cost_window_saves,
            mtbf_window_s=est.mtbf_window,
            min_failures=est.min_failures,
            min_saves=est.min_saves,
            drift_ratio=est.drift_ratio,
            min_weibull_failures=est.min_weibull_failures,
            min_excess_gpu_hours_per_day=est.min_excess_gpu_hours_per_day,
            price_per_gpu_hour=est.price_per_gpu_hour,
            currency=est.currency,
        ),
        clock=clock,
        gpus={j.name: j.gpus for j in config.jobs if j.gpus},
        units={j.name: n for j in config.jobs if (n := j.nodes or j.gpus)},
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
    ) -> None:
        self.config = config
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
        observer = Observer()
        handler = _Wake(self._wake)
        try:
            for d in sorted(self.tailer.watched_dirs()):
                observer.schedule(handler, d, recursive=True)
            observer.start()
        except OSError as exc:
            log.warning(
                "file notifications unavailable (%s); polling every %.3gs only",
                exc,
                self.config.schedule.poll_every,
            )
            return
        self._observer = observer

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
        first = True
        try:
            while not self._stop.is_set():
                stats = self.tailer.scan()
                if stats.events:
                    log.info("read %d line(s), stored %d event(s)", stats.lines, stats.events)
                if first:
                    first = False
                    self.scheduler.add_job(
                        self.estimate_now,
                        "interval",
                        seconds=self.config.schedule.estimate_every,
                        id="estimate",
                        next_run_time=self.clock(),
                    )
                    self.scheduler.start()
                elif stats.failure_jobs:
                    self._after_failure(stats.failure_jobs)
                self._wake.wait(self.config.schedule.poll_every)
                self._wake.clear()
        finally:
            if self._observer is not None:
                self._observer.stop()
                self._observer.join(timeout=5)
            if self.scheduler.running:
                self.scheduler.shutdown(wait=True)
            self.tailer.close()
            log.info("ckpt-advisor stopped")
        return 0


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
