"""The daemon: the composition root and the main loop.

:func:`build_daemon` wires config to adapters, taking each adapter (store, notifier, clock) as a
keyword argument so tests pass real-but-local ones. :class:`Daemon` runs three threads:

* the main loop scans files (woken by watchdog, and at least every ``poll_every``) and is the
  only place that writes events and offsets; a scan stats the known files, and searches the
  globs for new ones every ``discover_every`` or at once after watchdog saw a file or directory
  created, moved or deleted;
* watchdog's observer thread only sets a wake-up flag (and a discover flag);
* APScheduler runs the estimate job every ``estimate_every`` (UTC, coalesced, one instance at a
  time) and once more soon after a new failure is stored; the outbox delivery every
  ``DELIVER_EVERY_S`` (each send bounded by a deadline); retention daily.

The main loop supervises the other threads: a dead watchdog observer is restarted (polling goes
on meanwhile); a dead scheduler thread is reported by :meth:`Daemon.problem` and ends the daemon
with exit code 1, for systemd to restart.

Under systemd (``Type=notify``) the main loop says ``READY=1`` after the first scan, pings
``WATCHDOG=1`` only while the tailer and the scheduler are healthy, and says ``STOPPING=1`` on
shutdown; after every scan it updates the Prometheus metrics and the heartbeat file that
``ckpt-advisor status`` reads (rewritten when its content changed, else every
``HEARTBEAT_EVERY_S``). SIGHUP re-reads the config file.

Logs: what each scan read is logged at DEBUG; at INFO, a summary of what was read at most every
``SUMMARY_EVERY_S`` (lines, events and files, by job), so a busy cluster does not flood journald.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any
from zoneinfo import ZoneInfo

from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED
from apscheduler.schedulers.background import BackgroundScheduler
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from ckpt_advisor.agent.advisor import Advisor
from ckpt_advisor.agent.app import estimator_of
from ckpt_advisor.agent.config import Config, ConfigError, load_config
from ckpt_advisor.agent.metrics import CountingNotifier, Metrics
from ckpt_advisor.agent.mounts import MOUNT_TABLE, filesystem_type, is_shared
from ckpt_advisor.agent.notify.base import Notifier
from ckpt_advisor.agent.notify.log import LogNotifier
from ckpt_advisor.agent.notify.outbox import Outbox
from ckpt_advisor.agent.notify.slack import SlackNotifier
from ckpt_advisor.agent.sdnotify import SystemdNotifier
from ckpt_advisor.agent.status import FileLag, Heartbeat, heartbeat_path, write_heartbeat
from ckpt_advisor.agent.store import Store, StoreError, open_store
from ckpt_advisor.agent.store.sqlite.schema import UPGRADE_S_PER_MILLION_EVENTS
from ckpt_advisor.agent.tail import ScanStats, Tailer, WatchSpec
from ckpt_advisor.agent.units import format_duration

log = logging.getLogger(__name__)

START_EXTEND_S = 60.0
"""While the first scan reads a long history, the start timeout is pushed this far ahead."""
DELIVER_EVERY_S = 15.0
"""How often queued Slack messages are retried (Slack back after an outage)."""
RETENTION_EVERY_S = 86400.0
HEARTBEAT_EVERY_S = 15.0
"""An unchanged heartbeat is rewritten this often (well within ``status``'s 60 s staleness)."""
SUMMARY_EVERY_S = 60.0
"""At most one INFO summary of what was read per this many seconds."""
SUMMARY_JOBS = 5
"""Jobs named in a summary (those with the most lines); the others are counted."""
IGNORED_EVENTS = frozenset(("opened", "closed_no_write"))
"""File notifications that are only reads (ours or another reader's): no wake-up."""
DISCOVER_EVENTS = frozenset(("created", "moved", "deleted"))
"""File notifications after which the globs are searched again at once."""
EXIT_THREAD_DIED = 1


def utc_now() -> datetime:
    """The default clock: the current aware UTC datetime."""
    return datetime.now(UTC)


def watch_specs(config: Config) -> list[WatchSpec]:
    """The tailer's globs for every configured job: logs, then timing files."""
    specs = []
    for job in config.jobs:
        if job.logs:
            custom = tuple(pattern.compiled() for pattern in job.patterns)
            specs.append(
                WatchSpec(job.name, tuple(job.logs), timing=False, fmt=job.format, custom=custom)
            )
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


def send_deadline_s(config: Config) -> float:
    """The longest one send may take: three attempts (429 retry, connect retry) plus the
    longest Retry-After slept through."""
    return 3 * config.slack.timeout + 30.0


class _Wake(FileSystemEventHandler):
    def __init__(self, flag: threading.Event, discover: threading.Event) -> None:
        self._flag = flag
        self._discover = discover

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in IGNORED_EVENTS:
            return
        if event.event_type in DISCOVER_EVENTS:
            self._discover.set()
        self._flag.set()


@dataclass
class _ReadSummary:
    """What scans read since the last INFO summary."""

    since_s: float
    lines: Counter[str] = field(default_factory=Counter)
    events: Counter[str] = field(default_factory=Counter)
    files: dict[str, set[str]] = field(default_factory=dict)

    def add(self, stats: ScanStats) -> None:
        self.lines.update(stats.job_lines)
        self.events.update(stats.job_events)
        for job, paths in stats.job_files.items():
            self.files.setdefault(job, set()).update(paths)

    def text(self, now_s: float) -> str:
        """One line: totals, then the busiest jobs."""
        jobs = sorted(self.lines.keys() | self.events.keys(), key=lambda j: (-self.lines[j], j))
        files = sum(len(paths) for paths in self.files.values())
        head = (
            f"read in the last {format_duration(now_s - self.since_s)}: "
            f"{self.lines.total():,} line(s), {self.events.total():,} event(s) stored, "
            f"{files} file(s), {len(jobs)} job(s)"
        )
        parts = [
            f"{job} {self.lines[job]:,}/{self.events[job]:,}/{len(self.files.get(job, ()))}"
            for job in jobs[:SUMMARY_JOBS]
        ]
        if len(jobs) > SUMMARY_JOBS:
            parts.append(f"+{len(jobs) - SUMMARY_JOBS} more")
        return f"{head} (job lines/events/files: {', '.join(parts)})"


class Daemon:
    """Tails, estimates and notifies until :meth:`stop` (or SIGTERM/SIGINT)."""

    def __init__(
        self,
        config: Config,
        *,
        store: Store,
        notifier: Notifier,
        clock: Callable[[], datetime],
        systemd: SystemdNotifier | None = None,
        metrics: Metrics | None = None,
        config_path: Path | None = None,
        notifier_fixed: bool = True,
        mount_table: str = MOUNT_TABLE,
    ) -> None:
        self.config = config
        self.config_path = config_path
        self.mount_table = mount_table
        self.store = store
        self.clock = clock
        self.systemd = systemd or SystemdNotifier()
        self.metrics = metrics or Metrics()
        self._notifier_fixed = notifier_fixed
        self.tailer = Tailer(
            store,
            watch_specs(config),
            clock=clock,
            tz=ZoneInfo(config.parse.timezone),
            on_progress=self._on_progress,
            idle_flush_s=config.schedule.poll_every,
            rotated_idle_s=config.schedule.rotated_idle,
        )
        self.advisor = Advisor(
            store, estimator=estimator_of(config), clock=clock, currency=config.estimation.currency
        )
        self.outbox = Outbox(
            store,
            CountingNotifier(notifier, self.metrics),
            clock=clock,
            send_deadline_s=send_deadline_s(config),
        )
        self.jobs = [j.name for j in config.jobs]
        self._wake = threading.Event()
        self._discover = threading.Event()
        self._discovered_at = float("-inf")  # time.monotonic() of the last glob search
        self._summary = _ReadSummary(clock().timestamp())
        self._heartbeat: Heartbeat | None = None  # the last one written
        self._lags: list[FileLag] | None = None  # the followed files after the last scan
        self._stop = threading.Event()
        self.scheduler = BackgroundScheduler(
            timezone=UTC,
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        )
        self._observer: BaseObserver | None = None
        self._observer_restarts = 0
        self._store_error: str | None = None
        self._reload = threading.Event()
        self._ready = False
        self._extended_at_s = float("-inf")
        self._started_s = clock().timestamp()
        self._last_scan_s: float | None = None
        self._last_estimate_s: float | None = None
        self._estimate_started: float | None = None  # time.monotonic() of a run in progress
        self._heartbeat_warned = False
        self._problem: str | None = None
        self._http: Any = None

    # -- lifecycle ------------------------------------------------------------------------

    def stop(self, *_args: object) -> None:
        """Ask the main loop to finish its current scan and return (signal-handler safe)."""
        self._stop.set()
        self._wake.set()

    def request_reload(self) -> None:
        """Ask the main loop to re-read the config file before its next scan (signal-safe)."""
        self._reload.set()
        self._wake.set()

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

        New and removed jobs and globs, the schedule, the estimation settings and Slack take
        effect at once. ``store.path``, ``metrics.listen`` and ``parse.timezone`` need a
        restart (a warning says so). A config that does not load is rejected with an error
        naming the file and key, and the running config is kept.
        """
        if self.config_path is None:
            log.warning("reload asked, but the daemon was not started from a config file")
            return False
        try:
            new = load_config(self.config_path)
        except ConfigError as exc:
            self.metrics.reloads.labels("rejected").inc()
            log.error("config reload rejected, keeping the running config: %s", exc)
            return False
        old = self.config
        for key, before, after in (
            ("store.path", old.store.path, new.store.path),
            ("metrics.listen", old.metrics.listen, new.metrics.listen),
            ("parse.timezone", old.parse.timezone, new.parse.timezone),
        ):
            if before != after:
                log.warning("%s changed in %s: takes effect after a restart", key, self.config_path)
        self.config = new
        self.jobs = [j.name for j in new.jobs]
        self.tailer.set_specs(watch_specs(new))
        notifier = self.outbox.notifier
        if not self._notifier_fixed:
            notifier = CountingNotifier(make_notifier(new), self.metrics)
        self.advisor.configure(estimator_of(new), currency=new.estimation.currency)
        self.outbox.use(notifier, send_deadline_s=send_deadline_s(new))
        if self.scheduler.running:
            self.scheduler.reschedule_job(
                "estimate", trigger="interval", seconds=new.schedule.estimate_every
            )
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None
        if new.schedule.file_events:
            self._start_observer()
        self.metrics.reloads.labels("ok").inc()
        log.info("config reloaded from %s: %d job(s)", self.config_path, len(self.jobs))
        return True

    # -- health ---------------------------------------------------------------------------

    def problem(self) -> str | None:
        """Why the scheduler is unhealthy, or None. The main loop's own health is implied: it
        is the caller. A run longer than ``schedule.estimate_timeout`` counts as stuck. A dead
        scheduler thread is also what :meth:`_supervise` exits on; a dead file watcher is not
        a problem (it is restarted, and polling goes on meanwhile)."""
        if self._ready and not self.scheduler.running:
            return "scheduler is not running"
        if self._ready and not _scheduler_alive(self.scheduler):
            return "scheduler thread died"
        started = self._estimate_started
        if started is not None:
            running_s = time.monotonic() - started
            if running_s > self.config.schedule.estimate_timeout:
                return f"estimate run stuck for {running_s:.0f}s"
        return None

    def _on_progress(self, _nbytes: int) -> None:
        """Called by the tailer while it reads: a long scan is progress, not a hang."""
        if not self._ready:
            now_s = time.monotonic()
            if now_s - self._extended_at_s >= START_EXTEND_S / 4:
                self._extended_at_s = now_s
                self.systemd.extend_timeout(START_EXTEND_S)
        elif self.problem() is None:
            self.systemd.watchdog()

    def _status_line(self, stats: ScanStats) -> str:
        files = len(self.tailer.positions())
        text = f"{len(self.jobs)} job(s), {files} file(s); last scan {stats.lines} line(s)"
        if self._last_estimate_s is not None:
            at = datetime.fromtimestamp(self._last_estimate_s, UTC).strftime("%H:%M:%S")
            text += f"; last estimate {at} UTC"
        return text

    def _after_scan(self, stats: ScanStats, duration_s: float) -> None:
        """Metrics, heartbeat file, STATUS and the watchdog ping, once per loop."""
        now_s = self.clock().timestamp()
        self._last_scan_s = now_s
        self.metrics.observe_scan(stats, duration_s, now_s)
        if self._lags is None or stats.files_read or stats.discovered or self._store_error:
            positions = self.tailer.positions()  # else the same as after the last scan
            self.metrics.set_files(positions)
            self._lags = [FileLag(p.job, p.path, p.lag_bytes, p.last_read_s) for p in positions]
        problem = self.problem()
        self.metrics.healthy.set(0 if problem else 1)
        self._write_heartbeat(problem, self._lags)
        if problem != self._problem:
            if problem is not None:
                log.error("unhealthy, withholding watchdog pings: %s", problem)
            else:
                log.info("healthy again: %s", self._problem)
            self._problem = problem
        if problem is not None:
            self.systemd.status(f"unhealthy: {problem}")
            return
        if stats.lines or not self._ready:
            self.systemd.status(self._status_line(stats))
        self.systemd.watchdog()

    def _write_heartbeat(
        self, problem: str | None, files: list[FileLag], *, stopped: bool = False
    ) -> None:
        now_s = self.clock().timestamp()
        hb = Heartbeat(
            pid=os.getpid(),
            started_s=self._started_s,
            updated_s=now_s,
            poll_every_s=self.config.schedule.poll_every,
            estimate_every_s=self.config.schedule.estimate_every,
            jobs=list(self.jobs),
            last_scan_s=self._last_scan_s,
            last_estimate_s=self._last_estimate_s,
            problem=problem,
            stopped_s=now_s if stopped else None,
            files=files,
        )
        last = self._heartbeat
        if (
            last is not None
            and not stopped
            and now_s - last.updated_s < HEARTBEAT_EVERY_S
            and replace(last, updated_s=now_s, last_scan_s=self._last_scan_s) == hb
        ):
            return  # nothing new to say yet: rewriting 1,000 files' lags every poll costs CPU
        self._heartbeat = hb
        try:
            write_heartbeat(heartbeat_path(self.config.store.path), hb)
        except OSError as exc:
            if not self._heartbeat_warned:
                self._heartbeat_warned = True
                log.warning("cannot write the heartbeat for `ckpt-advisor status`: %s", exc)

    def _start_metrics(self) -> None:
        address = self.config.metrics.address()
        if address is None:
            return
        host, port = address
        self._http = self.metrics.serve(host, port)
        log.info("metrics at http://%s:%d/metrics", host, port)

    def _start_observer(self) -> None:
        """Watch the local directories with inotify (a wake-up only: polling is always on).

        Directories on shared filesystems get no inotify watch: other hosts' writes raise no
        event there. If inotify fails (watch limit, instance limit), one warning, then polling.
        """
        observer = Observer()
        handler = _Wake(self._wake, self._discover)
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
        if self._ready and self.scheduler.running and not _scheduler_alive(self.scheduler):
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

    def _scan(self) -> ScanStats:
        """One scan (a glob search when due, see the module docstring); a store that cannot
        be written is reported once per distinct error and retried every poll (offsets stay
        where they were, so nothing is lost)."""
        started = time.monotonic()
        discover = (
            self._discover.is_set()
            or started - self._discovered_at >= self.config.schedule.discover_every
        )
        self._discover.clear()  # a notification during the scan asks for the next one
        try:
            stats = self.tailer.scan(discover=discover)
            if stats.discovered:
                self._discovered_at = started
        except StoreError as exc:
            if str(exc) != self._store_error:
                log.error("%s; retrying every %gs", exc, self.poll_every_s)
            self._store_error = str(exc)
            return ScanStats()
        if self._store_error is not None:
            log.info("store writable again: %s", self.store.location)
            self._store_error = None
        self._log_reads(stats)
        if stats.failure_jobs and self.scheduler.running:
            self._after_failure(stats.failure_jobs)
        return stats

    def _log_reads(self, stats: ScanStats) -> None:
        """What this scan read at DEBUG; a summary at INFO at most every SUMMARY_EVERY_S."""
        if stats.lines or stats.events:
            log.debug(
                "read %d line(s) from %d file(s), stored %d event(s)",
                stats.lines,
                sum(len(paths) for paths in stats.job_files.values()),
                stats.events,
            )
        self._summary.add(stats)
        now_s = self.clock().timestamp()
        if now_s - self._summary.since_s < SUMMARY_EVERY_S:
            return
        if self._summary.lines or self._summary.events:
            log.info("%s", self._summary.text(now_s))
        self._summary = _ReadSummary(now_s)

    def prune(self) -> None:
        """The retention job: drop events older than ``[store] retention_days``."""
        cutoff_s = self.clock().timestamp() - self.config.store.retention_days * 86400.0
        n = self.store.prune_events(cutoff_s)
        if n:
            log.info("retention: pruned %d event(s) older than %g days", n, cutoff_s)

    def deliver(self) -> None:
        """The delivery job."""
        self.outbox.deliver()
        self.metrics.queued.set(len(self.store.queued_messages()))

    def _start_scheduler(self) -> None:
        """One scheduler for every job (estimate, deliver, retention; ``after-failure`` is
        added by :meth:`_after_failure`), with the metrics listener for errors and misses."""
        self.scheduler.add_listener(
            self._on_scheduler_event, EVENT_JOB_ERROR | EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES
        )
        self.scheduler.add_job(
            self.estimate_now,
            "interval",
            seconds=self.config.schedule.estimate_every,
            id="estimate",
            next_run_time=self.clock(),
        )
        self.scheduler.add_job(self.deliver, "interval", seconds=DELIVER_EVERY_S, id="deliver")
        self.scheduler.add_job(
            self.prune,
            "interval",
            seconds=RETENTION_EVERY_S,
            id="retention",
            next_run_time=self.clock() + timedelta(seconds=60),
        )
        self.scheduler.start()

    def estimate_now(self) -> None:
        """The scheduled job: estimate every configured job; new messages wake the delivery job
        (which runs on its own, so a slow Slack never holds up estimating)."""
        self._estimate_started = start = time.monotonic()
        try:
            estimates = self.advisor.run(self.jobs)
        finally:
            self._estimate_started = None
            self.metrics.estimate_seconds.observe(time.monotonic() - start)
        self._last_estimate_s = self.clock().timestamp()
        self.metrics.last_estimate.set(self._last_estimate_s)
        self.metrics.set_estimates(estimates)
        queued = len(self.store.queued_messages())
        self.metrics.queued.set(queued)
        if queued and self.scheduler.get_job("deliver") is not None:
            self.scheduler.modify_job("deliver", next_run_time=self.clock())  # on its own thread

    def _on_scheduler_event(self, event: Any) -> None:
        if event.code == EVENT_JOB_ERROR:
            self.metrics.scheduler_errors.inc()
        else:
            self.metrics.scheduler_misses.inc()

    def _after_failure(self, jobs: set[str]) -> None:
        when = self.clock() + timedelta(seconds=self.config.schedule.after_failure)
        log.info("new failure in %s: estimating at %s", ", ".join(sorted(jobs)), when.isoformat())
        self.scheduler.add_job(
            self.estimate_now, "date", run_date=when, id="after-failure", replace_existing=True
        )

    def run(self) -> int:
        """Run until stopped; returns the process exit code: 1 if metrics cannot be served or
        the scheduler thread died."""
        log.info("ckpt-advisor starting: %d job(s), store %s", len(self.jobs), self.store.location)
        try:
            self._start_metrics()
        except OSError as exc:
            log.error("cannot serve metrics at %s: %s", self.config.metrics.listen, exc)
            return 1
        if self.config.schedule.file_events:
            self._start_observer()
        code = 0
        try:
            while not self._stop.is_set():
                if self._reload.is_set():
                    self._reload.clear()
                    self.reload()
                started = time.monotonic()
                stats = self._scan()
                if not self._ready:
                    self._start_scheduler()
                    self._ready = True
                    self.systemd.ready(self._status_line(stats))
                self._after_scan(stats, time.monotonic() - started)
                exit_code = self._supervise()
                if exit_code is not None:
                    code = exit_code
                    break
                self._wake.wait(self.poll_every_s)
                self._wake.clear()
        finally:
            self.systemd.stopping()
            if self._http is not None:
                self._http.shutdown()
                self._http.server_close()
            if self._observer is not None:
                self._observer.stop()
                self._observer.join(timeout=5)
            if self.scheduler.running:
                self.scheduler.shutdown(wait=code == 0)
            self._write_heartbeat(None, [], stopped=True)
            self.tailer.drain()  # renamed or deleted files: to their end, nothing reads them later
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
    systemd: SystemdNotifier | None = None,
    metrics: Metrics | None = None,
    config_path: str | Path | None = None,
) -> Daemon:
    """The composition root: a :class:`Daemon` from config, each adapter overridable.

    ``config_path`` is the file SIGHUP re-reads. A ``notifier`` passed in is kept across
    reloads; the default one is rebuilt from the reloaded ``[slack]``.
    """
    systemd = systemd or SystemdNotifier()

    def upgrading(n_events: int) -> None:  # systemd must wait for the rewrite of the events
        systemd.status(f"upgrading the store: {n_events} events")
        systemd.extend_timeout(START_EXTEND_S + n_events * UPGRADE_S_PER_MILLION_EVENTS / 1e6)

    store = store or open_store(config.store.path, on_upgrade=upgrading)
    return Daemon(
        config,
        store=store,
        notifier=notifier or make_notifier(config),
        clock=clock or utc_now,
        systemd=systemd,
        metrics=metrics,
        config_path=Path(config_path) if config_path is not None else None,
        notifier_fixed=notifier is not None,
    )
