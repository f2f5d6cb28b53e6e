"""The daemon's health, and what it tells about it after every scan.

Under systemd (``Type=notify``) the daemon says ``READY=1`` after its first scan, pings
``WATCHDOG=1`` only while the main loop runs and the scheduler is healthy (a hung scan, a dead
scheduler thread or an estimate run past ``estimate_timeout`` stop the pings, and systemd
restarts the service), shows a ``STATUS=`` line, and extends its start timeout while a long
first scan (a backfill) reads. After every scan it updates the Prometheus gauges and the
heartbeat file that ``ckpt-advisor status`` reads (rewritten when its content changed, else
every :data:`HEARTBEAT_EVERY_S`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ckpt_advisor.agent.daemon.heartbeat import FileLag, Heartbeat, write_heartbeat
from ckpt_advisor.agent.daemon.jobs import Scheduler
from ckpt_advisor.agent.daemon.metrics import Metrics
from ckpt_advisor.agent.daemon.systemd import SystemdNotifier
from ckpt_advisor.agent.tail import FilePosition, ScanStats
from ckpt_advisor.agent.tail.backlog import Behind

if TYPE_CHECKING:
    from ckpt_advisor.agent.config import ScheduleConfig

log = logging.getLogger(__name__)

START_EXTEND_S = 60.0
"""While the first scan reads a long history, the start timeout is pushed this far ahead."""
HEARTBEAT_EVERY_S = 15.0
"""An unchanged heartbeat is rewritten this often (well within ``status``'s 60 s staleness)."""


class Health:
    """Judges the scheduler's health and reports the daemon's state after each scan.

    Args:
        scheduler: the scheduler whose thread and estimate runs are judged.
        systemd: the service manager's notification socket.
        metrics: the gauges to update.
        heartbeat_file: where ``ckpt-advisor status`` reads the heartbeat.
        clock: the current aware UTC datetime.
        schedule: the ``[schedule]`` in force (an estimate run longer than its
            ``estimate_timeout`` is stuck); ``schedule`` and ``jobs`` follow config reloads.
        jobs: the configured job names (for the heartbeat).
        waiting: the jobs whose messages wait for their backlog, and how far behind they are
            (for the heartbeat; :meth:`~ckpt_advisor.agent.tail.backlog.Backlog.behind`).
    """

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        systemd: SystemdNotifier,
        metrics: Metrics,
        heartbeat_file: Path,
        clock: Callable[[], datetime],
        schedule: ScheduleConfig,
        jobs: list[str],
        waiting: Callable[[], dict[str, Behind]] = dict,
    ) -> None:
        self.scheduler = scheduler
        self.systemd = systemd
        self.metrics = metrics
        self.heartbeat_file = heartbeat_file
        self.schedule = schedule
        self.jobs = jobs
        self._waiting = waiting
        self._clock = clock
        self.started_s = clock().timestamp()
        self.ready = False
        """True once the first scan is done and the scheduler runs (``READY=1`` was sent)."""
        self.last_scan_s: float | None = None
        self._problem: str | None = None  # the last one reported
        self._extended_at_s = float("-inf")
        self._heartbeat: Heartbeat | None = None  # the last one written
        self._heartbeat_warned = False
        self._lags: list[FileLag] | None = None  # the followed files after the last scan
        self.store_error: str | None = None
        """The store's error (the main loop's last scan could not write or reach it)."""

    def problem(self) -> str | None:
        """Why the daemon is unhealthy, or None: the store cannot be written or reached (scenarios
        24 and 31), or the scheduler is unhealthy. The main loop's own health is implied: it
        is the caller. A dead file watcher is not a problem: it is restarted, and polling goes
        on meanwhile."""
        if self.store_error is not None:
            return f"store unreachable or not writable: {self.store_error}"
        if self.ready and not self.scheduler.running:
            return "scheduler is not running"
        if self.ready and not self.scheduler.alive():
            return "scheduler thread died"
        started = self.scheduler.jobs.estimate_started
        if started is not None:
            running_s = time.monotonic() - started
            if running_s > self.schedule.estimate_timeout:
                return f"estimate run stuck for {running_s:.0f}s"
        return None

    def on_progress(self, _nbytes: int) -> None:
        """Called by the tailer while it reads: a long scan is progress, not a hang."""
        if not self.ready:
            now_s = time.monotonic()
            if now_s - self._extended_at_s >= START_EXTEND_S / 4:
                self._extended_at_s = now_s
                self.systemd.extend_timeout(START_EXTEND_S)
        elif self.problem() is None:
            self.systemd.watchdog()

    def became_ready(self, status: str) -> None:
        """The first scan is done and the scheduler runs: ``READY=1``."""
        self.ready = True
        self.systemd.ready(status)

    def after_scan(
        self,
        stats: ScanStats,
        duration_s: float,
        *,
        positions: list[FilePosition] | None,
        status: str,
    ) -> None:
        """Metrics, heartbeat file, STATUS and the watchdog ping, once per loop.

        ``positions``: the followed files now, or None when none moved since the last scan;
        ``status``: the ``STATUS=`` line while healthy.
        """
        now_s = self._clock().timestamp()
        self.last_scan_s = now_s
        self.metrics.observe_scan(stats, duration_s, now_s)
        if positions is not None or self._lags is None:
            positions = positions or []
            self.metrics.set_files(positions)
            self._lags = [
                FileLag(p.job, p.path, p.lag_bytes, p.last_read_s, p.binary) for p in positions
            ]
        problem = self.problem()
        self.metrics.healthy.set(0 if problem else 1)
        self.write_heartbeat(problem, self._lags)
        if problem != self._problem:
            if problem is not None:
                log.error("unhealthy, withholding watchdog pings: %s", problem)
            else:
                log.info("healthy again: %s", self._problem)
            self._problem = problem
        if problem is not None:
            self.systemd.status(f"unhealthy: {problem}")
            return
        if stats.lines or not self.ready:
            self.systemd.status(status)
        self.systemd.watchdog()

    def write_stopped(self) -> None:
        """The clean stop's heartbeat: the files followed until then, with their last lags
        (``ckpt-advisor status`` names them as what the daemon followed)."""
        self.write_heartbeat(None, self._lags or [], stopped=True)

    def write_heartbeat(
        self, problem: str | None, files: list[FileLag], *, stopped: bool = False
    ) -> None:
        """Write the heartbeat, unless it says nothing new and the last one is recent
        (rewriting 1,000 files' lags every poll costs CPU); a stop is always written."""
        now_s = self._clock().timestamp()
        heartbeat = Heartbeat(
            pid=os.getpid(),
            started_s=self.started_s,
            updated_s=now_s,
            poll_every_s=self.schedule.poll_every,
            estimate_every_s=self.schedule.estimate_every,
            jobs=list(self.jobs),
            last_scan_s=self.last_scan_s,
            last_estimate_s=self.scheduler.jobs.last_estimate_s,
            problem=problem,
            stopped_s=now_s if stopped else None,
            files=files,
            waiting={
                job: {"files": b.files, "bytes_behind": b.bytes_behind}
                for job, b in self._waiting().items()
            },
        )
        last = self._heartbeat
        if (
            last is not None
            and not stopped
            and now_s - last.updated_s < HEARTBEAT_EVERY_S
            and replace(last, updated_s=now_s, last_scan_s=self.last_scan_s) == heartbeat
        ):
            return
        self._heartbeat = heartbeat
        try:
            write_heartbeat(self.heartbeat_file, heartbeat)
        except OSError as exc:
            if not self._heartbeat_warned:
                self._heartbeat_warned = True
                log.warning("cannot write the heartbeat for `ckpt-advisor status`: %s", exc)
