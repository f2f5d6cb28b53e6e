"""The scheduled work and the scheduler that runs it, on threads of their own.

:class:`Jobs` is the work: estimate every configured job (then wake the delivery), deliver the
outbox, prune old events. :class:`Scheduler` runs it with APScheduler: ``estimate`` every
``estimate_every`` (UTC, so daylight saving neither stalls nor repeats a run: docs/RELIABILITY.md,
scenario 27; coalesced, so a suspended process runs a missed job once: scenario 16; one
instance at a time), ``deliver`` every :data:`DELIVER_EVERY_S` (a slow Slack never holds up
estimating), ``leases`` every ``LEASE_EVERY_S`` (one voice per job: ``voice.py``),
``retention`` daily, ``after-failure`` once, soon after a new failure is stored, and
``caught-up`` once, at once when jobs whose messages waited for their backlog caught up.

APScheduler's ``BlockingScheduler`` runs in a thread this module starts and keeps, so whether
that thread is alive is known from our own :class:`threading.Thread` (APScheduler 3 has no
public accessor for the thread of its ``BackgroundScheduler``): a dead scheduler thread ends the
daemon with exit code 1 for systemd to restart it (scenario 15).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    EVENT_SCHEDULER_STARTED,
)
from apscheduler.schedulers.blocking import BlockingScheduler

from ckpt_advisor.agent.daemon.metrics import Metrics
from ckpt_advisor.agent.daemon.voice import LEASE_EVERY_S, Voice
from ckpt_advisor.agent.store import StoreError

if TYPE_CHECKING:
    from ckpt_advisor.agent.advice import AdviceBoard
    from ckpt_advisor.agent.advisor import Advisor
    from ckpt_advisor.agent.notify.outbox import Outbox
    from ckpt_advisor.agent.store import Store

log = logging.getLogger(__name__)

DELIVER_EVERY_S = 15.0
"""How often queued Slack messages are retried (Slack back after an outage)."""
RETENTION_EVERY_S = 86400.0
RETENTION_FIRST_S = 60.0
"""The first retention run waits this long after start (the first scan comes first)."""
START_TIMEOUT_S = 10.0
"""How long :meth:`Scheduler.start` waits for the scheduler's thread to be running."""


class Jobs:
    """What the scheduler runs. ``jobs`` and ``retention_days`` follow config reloads.

    Args:
        store, advisor, outbox, metrics, advice: the daemon's parts.
        clock: the current aware UTC datetime.
        jobs: the configured job names.
        retention_days: events older than this are pruned.
        voice: the jobs this agent speaks for (leases).
    """

    def __init__(
        self,
        *,
        store: Store,
        advisor: Advisor,
        outbox: Outbox,
        metrics: Metrics,
        advice: AdviceBoard,
        clock: Callable[[], datetime],
        jobs: Sequence[str],
        retention_days: float,
        voice: Voice,
    ) -> None:
        self.store = store
        self.voice = voice
        self.advisor = advisor
        self.outbox = outbox
        self.metrics = metrics
        self.advice = advice
        self.jobs = list(jobs)
        self.retention_days = retention_days
        self._clock = clock
        self.wake_delivery: Callable[[], None] = lambda: None
        """Called after an estimate run queued messages (the scheduler sets it)."""
        self.estimate_started: float | None = None
        """``time.monotonic()`` of the estimate run in progress, None between runs."""
        self.last_estimate_s: float | None = None
        """Unix time the last estimate run ended."""

    def estimate(self) -> None:
        """Estimate every job this agent speaks for (its configured jobs, and in fleet mode
        those it took over: ``voice.py``) and publish each one's advice (``agent/advice.py``),
        but not that of a job still catching up with its backlog (its advice file stays as it
        was: training callbacks apply it, and a recommendation from part of the history is
        no better for them than in Slack); new messages wake the delivery job (which runs on
        its own, so a slow Slack never holds up estimating)."""
        self.voice.renew()
        self._estimate(sorted(self.voice.held))

    def speak(self) -> None:
        """Renew the leases; when that took over jobs (a dead agent's), estimate at once every
        job this agent now speaks for (the metrics' per-job snapshot is replaced whole)."""
        if self.voice.renew():
            self._estimate(sorted(self.voice.held))

    def _estimate(self, jobs: list[str]) -> None:
        self.estimate_started = start = time.monotonic()
        try:
            advice = self.advisor.run(jobs)
        finally:
            self.estimate_started = None
            self.metrics.estimate_seconds.observe(time.monotonic() - start)
        self.last_estimate_s = self._clock().timestamp()
        self.metrics.last_estimate.set(self.last_estimate_s)
        self.metrics.set_estimates(advice)
        self.advice.publish([a.estimate for a in advice if a.waiting is None])
        try:
            queued = len(self.store.queued_messages())
        except StoreError:
            return  # the store is away: the main loop reports it
        self.metrics.queued.set(queued)
        if queued:
            self.wake_delivery()

    def deliver(self) -> None:
        """Send what the outbox holds (of the jobs this agent speaks for)."""
        try:
            self.outbox.deliver()
            self.metrics.queued.set(len(self.store.queued_messages()))
        except StoreError:
            pass  # the store is away: the main loop reports it, and the next run retries

    def prune(self) -> None:
        """Drop events older than ``retention_days``."""
        cutoff_s = self._clock().timestamp() - self.retention_days * 86400.0
        try:
            n = self.store.prune_events(cutoff_s)
        except StoreError as exc:
            log.warning("retention: %s; trying again tomorrow", exc)
            return
        if n:
            log.info("retention: pruned %d event(s) older than %g days", n, self.retention_days)


class Scheduler:
    """APScheduler in a thread of its own, running :class:`Jobs`.

    Args:
        jobs: the work.
        metrics: counts the scheduler's errors and misses.
        clock: the current aware UTC datetime (first run times).
        estimate_every_s: seconds between two estimate runs.
    """

    def __init__(
        self,
        jobs: Jobs,
        *,
        metrics: Metrics,
        clock: Callable[[], datetime],
        estimate_every_s: float,
    ) -> None:
        self.jobs = jobs
        self.metrics = metrics
        self.estimate_every_s = estimate_every_s
        self._clock = clock
        self.scheduler = BlockingScheduler(
            timezone=UTC,
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        )
        self._thread: threading.Thread | None = None
        jobs.wake_delivery = self._wake_delivery

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`shutdown`, whether or not its thread lives."""
        return bool(self.scheduler.running)

    def alive(self) -> bool:
        """False once started if its thread has died (the daemon must then exit)."""
        return self._thread is None or self._thread.is_alive()

    def start(self) -> None:
        """Add the jobs and start the scheduler's thread; returns once it runs.

        Raises:
            RuntimeError: the scheduler did not start within :data:`START_TIMEOUT_S`.
        """
        started = threading.Event()
        self.scheduler.add_listener(lambda _event: started.set(), EVENT_SCHEDULER_STARTED)
        self.scheduler.add_listener(
            self._on_event, EVENT_JOB_ERROR | EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES
        )
        now = self._clock()
        self.scheduler.add_job(
            self.jobs.estimate,
            "interval",
            seconds=self.estimate_every_s,
            id="estimate",
            next_run_time=now,
        )
        self.scheduler.add_job(self.jobs.deliver, "interval", seconds=DELIVER_EVERY_S, id="deliver")
        self.scheduler.add_job(self.jobs.speak, "interval", seconds=LEASE_EVERY_S, id="leases")
        self.scheduler.add_job(
            self.jobs.prune,
            "interval",
            seconds=RETENTION_EVERY_S,
            id="retention",
            next_run_time=now + timedelta(seconds=RETENTION_FIRST_S),
        )
        self._thread = threading.Thread(target=self._main, name="scheduler", daemon=True)
        self._thread.start()
        if not started.wait(START_TIMEOUT_S):
            raise RuntimeError("the scheduler did not start")

    def _main(self) -> None:
        try:
            self.scheduler.start()  # returns when shut down
        except Exception:
            log.exception("the scheduler's thread died")

    def shutdown(self, *, wait: bool) -> None:
        """Stop the scheduler (``wait``: for running jobs to finish) and its thread."""
        if self.scheduler.running:
            self.scheduler.shutdown(wait=wait)
        if self._thread is not None and wait:
            self._thread.join(timeout=30)

    def reschedule(self, estimate_every_s: float) -> None:
        """Estimate every ``estimate_every_s`` from now on (a config reload)."""
        self.estimate_every_s = estimate_every_s
        if self.running:
            self.scheduler.reschedule_job("estimate", trigger="interval", seconds=estimate_every_s)

    def after_failure(self, jobs: set[str], delay_s: float) -> None:
        """Estimate once more ``delay_s`` from now: a new failure was stored for ``jobs``."""
        if not self.running:
            return
        self._once("after-failure", "new failure", jobs, delay_s)

    def caught_up(self, jobs: set[str]) -> None:
        """Estimate once more now: ``jobs``' messages waited for their backlog, which is read
        and settled (``agent/tail/backlog.py``)."""
        if self.running:
            self._once("caught-up", "backlog settled", jobs, 0.0)

    def _once(self, job_id: str, why: str, jobs: set[str], delay_s: float) -> None:
        """One more estimate run ``delay_s`` from now, as job ``job_id`` (one pending at a
        time), logged with ``why``."""
        when = self._clock() + timedelta(seconds=delay_s)
        log.info("%s in %s: estimating at %s", why, ", ".join(sorted(jobs)), when.isoformat())
        self.scheduler.add_job(
            self.jobs.estimate, "date", run_date=when, id=job_id, replace_existing=True
        )

    def _wake_delivery(self) -> None:
        if self.scheduler.get_job("deliver") is not None:
            self.scheduler.modify_job("deliver", next_run_time=self._clock())

    def _on_event(self, event: Any) -> None:
        if event.code == EVENT_JOB_ERROR:
            self.metrics.scheduler_errors.inc()
        else:
            self.metrics.scheduler_misses.inc()
