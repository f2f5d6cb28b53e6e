"""One estimate cycle for one job: gather from the store, decide with the rules, act.

The three steps are kept apart (cosmicpython's service layer): :class:`agent.estimate.Estimator`
gathers and estimates; :func:`rules.drift.decide` decides (pure); :class:`Advisor` stores the
estimate and records the decision with its message in the outbox, in one transaction. Sending
is the outbox's (:class:`agent.notify.outbox.Outbox`), on its own schedule.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from ckpt_advisor.agent.contracts import estimate_json, iso
from ckpt_advisor.agent.estimate import Estimator
from ckpt_advisor.agent.notify.message import format_message
from ckpt_advisor.agent.store.records import LeaseLost, StoreError
from ckpt_advisor.rules.drift import decide
from ckpt_advisor.rules.model import Action, AlertState, Decision, JobEstimate
from ckpt_advisor.rules.policy import EstimationPolicy

if TYPE_CHECKING:
    from ckpt_advisor.agent.store import Store

log = logging.getLogger(__name__)

Rule = Callable[[JobEstimate, AlertState, float, EstimationPolicy], Decision]
"""The decision step (:func:`rules.drift.decide`): estimate, alert state, now, policy."""


class Advisor:
    """Runs estimate → decide → record for jobs, with every part passed in.

    Args:
        store: the event store.
        estimator: the policy and the jobs' sizes the estimates are made and judged with.
        clock: returns the current aware UTC datetime.
        currency: the symbol put before money amounts in messages.
        rule: the decision step (:func:`rules.drift.decide`; tests pass a scripted one).

    A config reload calls :meth:`configure`: the same object (and its lock) goes on with the
    new estimator, so a run in progress and the next one never overlap.
    """

    def __init__(
        self,
        store: Store,
        *,
        estimator: Estimator,
        clock: Callable[[], datetime],
        currency: str = "$",
        rule: Rule = decide,
    ) -> None:
        self.store = store
        self.estimator = estimator
        self.currency = currency
        self.rule = rule
        self._clock = clock
        self._deciding = threading.Lock()  # one read-decide-record at a time (see run_job)

    def configure(self, estimator: Estimator, *, currency: str) -> None:
        """Estimate and write messages with these from the next job on (a config reload)."""
        self.estimator = estimator
        self.currency = currency

    def run(self, jobs: Sequence[str]) -> list[JobEstimate]:
        """Estimate and decide for each job. Never raises for one job's failure: it is logged
        and the next job goes on."""
        out = []
        for job in jobs:
            try:
                out.append(self.run_job(job))
            except LeaseLost as exc:  # fleet mode: another agent took the job over meanwhile
                log.info("%s: not recorded: %s", job, exc)
            except StoreError as exc:  # the store is away: the main loop reports it
                log.warning("estimate for job %r not made: %s", job, exc)
            except Exception:
                log.exception("estimate for job %r failed", job)
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
        estimator, currency = self.estimator, self.currency  # one config for the whole job
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
        message = format_message(est, decision, currency=currency)
        log.info("%s: %s (%s)", job, decision.action, decision.reason)
        self.store.record_decision(
            job, decision.next_state, message=message, action=str(decision.action), now_s=now_s
        )
        return est
