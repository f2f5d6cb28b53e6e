"""One estimate cycle for one job: gather from the store, decide with the rules, act.

The three steps are kept apart (cosmicpython's service layer): :class:`agent.estimate.Estimator`
gathers and estimates; :func:`rules.drift.decide` decides and :func:`rules.drift.hold_if_silenced`
holds back what a silence forbids (pure); :class:`Advisor` stores the estimate with its decision
(the ``decision`` of ``estimates --json``), logs each change of a job's decision once, and
records the decision with its messages in the outbox, in one transaction. A job whose files are
still catching up with their backlog (``agent/tail/backlog.py``) is estimated, but its messages
wait (:func:`rules.drift.hold_while_reading`). Sending is the outbox's
(:class:`agent.notify.outbox.Outbox`), on its own schedule.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckpt_advisor.agent.contracts import estimate_json
from ckpt_advisor.agent.estimate import Estimator
from ckpt_advisor.agent.notify.message import (
    format_details,
    format_message,
    format_resolve,
    plot_upload,
)
from ckpt_advisor.agent.notify.wording import Sent
from ckpt_advisor.agent.plot import render_waste_curve
from ckpt_advisor.agent.reasons import render_reason
from ckpt_advisor.agent.store.records import LeaseLost, StoreError
from ckpt_advisor.agent.tail.backlog import Behind, waits
from ckpt_advisor.rules.drift import decide, hold_if_silenced, hold_while_reading
from ckpt_advisor.rules.model import Action, AlertState, Decision, JobEstimate
from ckpt_advisor.rules.policy import EstimationPolicy

if TYPE_CHECKING:
    from ckpt_advisor.agent.store import Store

log = logging.getLogger(__name__)

Rule = Callable[[JobEstimate, AlertState, float, EstimationPolicy], Decision]
"""The decision step (:func:`rules.drift.decide`): estimate, alert state, now, policy."""


@dataclass(frozen=True, slots=True)
class Advice:
    """One job's estimate and the decision made on it (what the metrics and logs show);
    ``waiting``: the job's files still catching up with their backlog when it was estimated
    (None: none; the estimate then rests on all the job's files)."""

    estimate: JobEstimate
    decision: Decision
    waiting: Behind | None = None


class Advisor:
    """Runs estimate → decide → record for jobs, with every part passed in.

    Args:
        store: the event store.
        estimator: the policy and the jobs' sizes the estimates are made and judged with.
        clock: returns the current aware UTC datetime.
        currency: the symbol put before money amounts in messages.
        rule: the decision step (:func:`rules.drift.decide`; tests pass a scripted one).
        plots: attach the waste-curve plot to messages (the notifier uploads files: Slack).
        config_path: the daemon's config file, named (``--config``) in the commands the
            messages suggest.
        backlog: how far a job's files are behind now (the tailer's
            :meth:`~ckpt_advisor.agent.tail.backlog.Backlog.of`); None: never behind.

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
        plots: bool = False,
        config_path: Path | None = None,
        backlog: Callable[[str], Behind] | None = None,
    ) -> None:
        self.store = store
        self._backlog = backlog or (lambda _job: Behind(0, 0))
        self.estimator = estimator
        self.currency = currency
        self.rule = rule
        self.plots = plots
        self.config_path = config_path
        self._clock = clock
        self._deciding = threading.Lock()  # one read-decide-record at a time (see run_job)
        self._said: dict[str, tuple[object, ...]] = {}  # the decision last logged per job

    def configure(self, estimator: Estimator, *, currency: str, plots: bool = False) -> None:
        """Estimate and write messages with these from the next job on (a config reload)."""
        self.estimator = estimator
        self.currency = currency
        self.plots = plots

    def run(self, jobs: Sequence[str]) -> list[Advice]:
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

    def run_job(self, job: str) -> Advice:
        """Estimate one job, decide, store the estimate with its decision, and queue the
        messages the decision calls for.

        Runs one at a time (the interval ``estimate`` job and the ``after-failure`` job are
        distinct scheduler jobs and may overlap): the alert state is read, decided on and
        recorded under one lock, so two runs never both queue the same notification.
        """
        with self._deciding:
            return self._run_job(job)

    def _run_job(self, job: str) -> Advice:
        now_s = self._clock().timestamp()
        estimator, currency = self.estimator, self.currency  # one config for the whole job
        before = self._backlog(job)
        est = estimator.estimate(self.store, job, now_s)
        waiting = waits(before, self._backlog(job))
        state = self.store.alert_state(job)
        decision = hold_if_silenced(
            self.rule(est, state, now_s, estimator.policy),
            state,
            now_s,
            self.store.silenced_until(job, now_s),
        )
        if waiting is not None:
            decision = hold_while_reading(decision, state, waiting.files, waiting.bytes_behind)
        self.store.save_estimate(job, now_s, str(est.status), estimate_json(est, decision))
        self._log_change(job, decision)
        if decision.action is Action.NONE:
            if decision.next_state != state:
                self.store.record_decision(
                    job, decision.next_state, message=None, action=str(decision.action), now_s=now_s
                )
            return Advice(est, decision, waiting)
        message, replies, reply_to = self._compose(est, decision, currency)
        self.store.record_decision(
            job,
            decision.next_state,
            message=message,
            action=str(decision.action),
            now_s=now_s,
            replies=replies,
            reply_to=reply_to,
        )
        return Advice(est, decision, waiting)

    def _compose(
        self, est: JobEstimate, decision: Decision, currency: str
    ) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]], int | None]:
        """The message, its replies and the outbox id it replies to: a NOTIFY or REPEAT is the
        message with its detail (and plot) in its thread; a RESOLVE is a reply in the thread of
        the episode's last message."""
        last = _last_message(self.store.messages(est.job))
        if decision.action is Action.RESOLVE:
            return format_resolve(est, decision), [], None if last is None else int(last["id"])
        previous = _sent(last) if decision.action is Action.REPEAT else None
        message = format_message(
            est, decision, previous=previous, currency=currency, config=self.config_path
        )
        message["facts"] = Sent.of(est).to_json()
        replies: list[tuple[str, dict[str, Any]]] = [("detail", format_details(est, decision))]
        if self.plots:
            try:
                png = render_waste_curve(estimate_json(est, decision))
            except (ValueError, OSError) as exc:  # no curve to draw: the message goes alone
                log.info("%s: no plot attached: %s", est.job, exc)
            else:
                replies.append(("plot", plot_upload(est.job, png)))
        return message, replies, None

    def _log_change(self, job: str, decision: Decision) -> None:
        """Log a job's decision when it differs from the last one logged (once per change)."""
        reason = decision.reason
        key = (
            decision.action,
            reason.code,
            reason.missing,
            reason.held,
            reason.values.get("until_s"),
        )
        if self._said.get(job) == key:
            return
        self._said[job] = key
        if decision.action is Action.NONE:
            log.info("%s: no message: %s", job, render_reason(reason))
        else:
            log.info("%s: %s: %s", job, decision.action, render_reason(reason))


def _last_message(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The newest drift message of a job's outbox records (a NOTIFY or REPEAT, not a reply)."""
    drift = [
        m
        for m in messages
        if m["action"] in ("notify", "repeat") and "thread_of" not in m["payload"]
    ]
    return drift[-1] if drift else None


def _sent(message: dict[str, Any] | None) -> Sent | None:
    """What an outbox record's message said (its ``facts``), or None for one without them."""
    facts = None if message is None else message["payload"].get("facts")
    return None if facts is None else Sent.from_json(facts)
