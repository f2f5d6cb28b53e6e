"""One estimate cycle for one job: gather from the store, decide with the rules, act.

The three steps are kept apart (cosmicpython's service layer): :class:`agent.estimate.Estimator`
gathers and estimates; :func:`rules.drift.decide` decides (pure); :class:`Advisor` stores the
estimate, records the decision with its message in the outbox in one transaction, then delivers
what is queued.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ckpt_advisor.agent.contracts import estimate_json, iso
from ckpt_advisor.agent.estimate import Estimator
from ckpt_advisor.rules.drift import decide
from ckpt_advisor.rules.model import Action, AlertState, Decision, JobEstimate
from ckpt_advisor.rules.policy import EstimationPolicy

if TYPE_CHECKING:  # slack-sdk is imported only where a message is made or sent (fast ingest)
    from ckpt_advisor.agent.notifier import Notifier, NotifyError
    from ckpt_advisor.agent.store import Store

log = logging.getLogger(__name__)

Rule = Callable[[JobEstimate, AlertState, float, EstimationPolicy], Decision]
"""The decision step (:func:`rules.drift.decide`): estimate, alert state, now, policy."""


class Advisor:
    """Runs estimate → decide → notify for jobs, with every adapter passed in.

    Args:
        store: the event store.
        notifier: where messages go (Slack, or the log when there is no token).
        estimator: the policy and the jobs' sizes the estimates are made and judged with.
        clock: returns the current aware UTC datetime.
        currency: the symbol put before money amounts in messages.
        rule: the decision step (:func:`rules.drift.decide`; tests pass a scripted one).
        send_deadline_s: the longest one send may take; a call still running then is left
            behind (its message counts as maybe sent) so later runs are not held up.
    """

    def __init__(
        self,
        store: Store,
        notifier: Notifier,
        *,
        estimator: Estimator,
        clock: Callable[[], datetime],
        currency: str = "$",
        rule: Rule = decide,
        send_deadline_s: float = 120.0,
    ) -> None:
        self.rule = rule
        self.store = store
        self.notifier = notifier
        self.estimator = estimator
        self.currency = currency
        self._clock = clock
        self.send_deadline_s = send_deadline_s
        self.blocked: str | None = None  # a configuration error that stops delivery until restart
        self._deciding = threading.Lock()  # one read-decide-record at a time (see run_job)
        self._delivering = threading.Lock()
        self._inflight: threading.Thread | None = None

    def take_over(self, previous: Advisor) -> None:
        """Replace ``previous`` (a config reload): share its decision and delivery locks and
        its send still in flight, so runs and deliveries never overlap across the swap."""
        self._deciding = previous._deciding
        self._delivering = previous._delivering
        self._inflight = previous._inflight

    def run(self, jobs: Sequence[str], *, deliver: bool = True) -> list[JobEstimate]:
        """Estimate and decide for each job, then (unless ``deliver`` is False: the daemon has
        its own delivery job, so a slow Slack never holds up estimating) deliver queued
        messages. Never raises for one job's failure: it is logged and the next job goes on."""
        out = []
        for job in jobs:
            try:
                out.append(self.run_job(job))
            except Exception:
                log.exception("estimate for job %r failed", job)
        if deliver:
            self.deliver()
        return out

    def run_job(self, job: str) -> JobEstimate:
        """Estimate one job, store the estimate, and queue a message if the rule says so.

        Runs one at a time (the interval ``estimate`` job and the ``after-failure`` job are
        distinct scheduler jobs and may overlap): the alert state is read, decided on and
        recorded under one lock, so two runs never both queue the same notification.
        """
        with self._deciding:
            return self._run_job(job)

    def _run_job(self, job: str) -> JobEstimate:
        now_s = self._clock().timestamp()
        estimator = self.estimator
        est = estimator.estimate(self.store, job, now_s)
        self.store.save_estimate(job, now_s, str(est.status), estimate_json(est))
        state = self.store.alert_state(job)
        decision = self.rule(est, state, now_s, estimator.policy)
        silenced_until_s = self.store.silenced_until(job, now_s)
        if decision.action is not Action.NONE and silenced_until_s is not None:
            log.info(
                "%s: %s suppressed: silenced until %s",
                job,
                decision.action,
                iso(silenced_until_s),
            )
            return est  # state unchanged: once the silence ends the same decision is posted
        if decision.action is Action.NONE:
            if decision.next_state != state:
                self.store.record_decision(
                    job, decision.next_state, message=None, action=str(decision.action), now_s=now_s
                )
            return est
        from ckpt_advisor.agent.notifier import format_message

        message = format_message(est, decision, currency=self.currency)
        log.info("%s: %s (%s)", job, decision.action, decision.reason)
        self.store.record_decision(
            job, decision.next_state, message=message, action=str(decision.action), now_s=now_s
        )
        return est

    def deliver(self) -> int:
        """Send queued messages in order, each at most once; returns how many were sent.

        The outbox record was written before sending (:meth:`Store.record_decision`), so a
        crash loses nothing. A send that may have landed (timeout, 5xx, deadline) is marked
        ``unsure``; before it is sent again, :meth:`Notifier.find` looks for its key in the
        channel, and if that cannot be checked the message is marked ``failed`` rather than
        risk a second copy. Delivery stops at the first transient error (order is kept) and,
        after ``invalid_auth``/``channel_not_found``-like errors, until the daemon restarts
        with a fixed config (one error logged; messages stay queued). Runs one at a time; a
        call while another delivery runs returns 0.
        """
        if self.blocked is not None or not self._delivering.acquire(blocking=False):
            return 0
        try:
            if self._inflight is not None and self._inflight.is_alive():
                return 0  # a send that outlived its deadline may still land: wait for it
            return self._deliver_queued()
        finally:
            self._delivering.release()

    def _deliver_queued(self) -> int:
        from ckpt_advisor.agent.notifier import NotifyError

        sent = 0
        for item in self.store.queued_messages():
            key = f"ckpt-advisor:{item.id}:{item.created_s:.6f}"
            try:
                ts = self._find(key, item.created_s) if item.state == "unsure" else None
                if ts is None:
                    ts = self._send(item.payload, key)
            except NotifyError as exc:
                if not self._failed(item.id, item.job, item.state, exc):
                    break
                continue
            self.store.mark_message(item.id, state="sent", now_s=self._now_s(), ts=ts)
            sent += 1
        return sent

    def _now_s(self) -> float:
        return self._clock().timestamp()

    def _find(self, key: str, created_s: float) -> str | None:
        from ckpt_advisor.agent.notifier import NotifyError, NotifyErrorKind

        try:
            return self.notifier.find(key, created_s - 60.0)
        except NotifyError as exc:
            if exc.transient:
                raise
            raise NotifyError(
                NotifyErrorKind.PERMANENT,
                f"an earlier send may have been delivered and it cannot be checked "
                f"({exc.message}); not sending again, to never post twice",
            ) from None

    def _send(self, payload: dict[str, Any], key: str) -> str:
        """``notifier.send`` on its own thread, waiting at most ``send_deadline_s``."""
        from ckpt_advisor.agent.notifier import NotifyError, NotifyErrorKind

        answer: queue.Queue[str | NotifyError] = queue.Queue(maxsize=1)

        def call() -> None:
            try:
                answer.put(self.notifier.send(payload, key=key))
            except NotifyError as exc:
                answer.put(exc)
            except Exception as exc:  # a notifier bug must not kill delivery
                answer.put(NotifyError(NotifyErrorKind.TRANSIENT, repr(exc), maybe_sent=True))

        self._inflight = threading.Thread(target=call, name="notifier-send", daemon=True)
        self._inflight.start()
        try:
            result = answer.get(timeout=self.send_deadline_s)
        except queue.Empty:
            raise NotifyError(
                NotifyErrorKind.TRANSIENT,
                f"no answer within {self.send_deadline_s:g} s",
                maybe_sent=True,
            ) from None
        if isinstance(result, NotifyError):
            raise result
        return result

    def _failed(self, item_id: int, job: str, state: str, exc: NotifyError) -> bool:
        """Record a failed attempt; True when delivery may go on with the next message."""
        from ckpt_advisor.agent.notifier import CONFIG_SLACK_ERRORS

        now_s = self._now_s()
        if exc.maybe_sent:
            self.store.mark_message(item_id, state="unsure", now_s=now_s, error=exc.message)
            log.warning("message for %s may not have been delivered: %s", job, exc.message)
            return False
        if exc.transient:
            self.store.mark_message(item_id, state=state, now_s=now_s, error=exc.message)
            log.warning("message for %s not delivered yet: %s", job, exc.message)
            return False
        if exc.slack_error in CONFIG_SLACK_ERRORS:
            self.blocked = exc.message
            log.error(
                "Slack delivery stopped until restart: %s (messages stay queued)", exc.message
            )
            return False
        self.store.mark_message(item_id, state="failed", now_s=now_s, error=exc.message)
        log.error("message for %s not delivered: %s", job, exc.message)
        return True
