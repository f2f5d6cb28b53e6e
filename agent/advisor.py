"""One estimate cycle for one job: gather from the store, decide with the rules, act.

The three steps are kept apart (cosmicpython's service layer): :func:`observations_from`
turns stored events into the rules' input values; :mod:`rules` computes the estimate and the drift
decision (pure); :class:`Advisor` stores the estimate, records the decision with its message in
the outbox in one transaction, then delivers what is queued.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from agent.store_read import EventColumns, StoredEvent, StoreReader
from rules.advice import setting_for
from rules.drift import DriftRule
from rules.job import estimate_job
from rules.model import Action, FleetRate, JobEstimate, Observation
from rules.timeline import Timeline, kind_code

if TYPE_CHECKING:  # slack-sdk is imported only where a message is made or sent (fast ingest)
    from agent.notifier import Notifier
    from agent.store import Store

log = logging.getLogger(__name__)

_ESTIMATE_KINDS = (
    "checkpoint_start",
    "checkpoint_end",
    "failure",
    "restart",
    "resume",
    "run_start",
    "run_end",
    "step",
)


def observations_from(events: Sequence[StoredEvent]) -> list[Observation]:
    """Reduce stored events to rules input; events with no time are left out (the reference
    for :func:`timeline_from`, which the estimate cycle uses)."""
    return [
        Observation(
            kind=str(se.event.kind),
            time_s=se.event.time.timestamp(),
            step=se.event.step,
            duration_s=se.event.duration_s,
            failure_class=se.event.failure_class,
            planned=se.event.planned,
            from_timing_file=se.from_timing_file,
            persist_s=se.event.persist_s,
            source=se.source,
        )
        for se in events
        if se.event.time is not None
    ]


def timeline_from(columns: EventColumns) -> Timeline:
    """The rules' timeline of stored event columns: the same as
    ``Timeline.of(observations_from(events))`` without an object per event."""
    codes = np.array([kind_code(k) for k in columns.kinds], np.int8)
    return Timeline.from_columns(
        time_s=columns.time_s,
        kind=codes[columns.kind],
        step=columns.step,
        duration_s=columns.duration_s,
        persist_s=columns.persist_s,
        from_timing_file=columns.from_timing_file,
        first_of_source=columns.first_of_source,
        failure_class=columns.failure_class,
        failure_planned=columns.failure_planned,
    )


def _iso(epoch_s: float | None) -> str | None:
    return None if epoch_s is None else datetime.fromtimestamp(epoch_s, UTC).isoformat()


def estimate_to_json(est: JobEstimate, *, setting: str | None = None) -> dict[str, Any]:
    """The ``estimates --json`` object (DESIGN.md contract); unknown numbers stay null."""
    return {
        "job": est.job,
        "computed_at": _iso(est.computed_at_s),
        "status": str(est.status),
        "checkpoint_cost_s": est.checkpoint_cost_s,
        "checkpoint_cost_ci_s": list(est.checkpoint_cost_ci_s)
        if est.checkpoint_cost_ci_s
        else None,
        "checkpoint_cost_source": est.checkpoint_cost_source,
        "n_checkpoints": est.n_checkpoints,
        "mtbf_s": est.mtbf_s,
        "mtbf_ci_s": list(est.mtbf_ci_s) if est.mtbf_ci_s else None,
        "n_failures": est.n_failures,
        "failure_classes": dict(est.failure_classes),
        "exposure_s": est.exposure_s,
        "restart_cost_s": est.restart_cost_s,
        "current_interval_s": est.current_interval_s,
        "young_interval_s": est.young_interval_s,
        "daly_interval_s": est.daly_interval_s,
        "recommended_interval_s": est.recommended_interval_s,
        "recommended_interval_ci_s": (
            list(est.recommended_interval_ci_s) if est.recommended_interval_ci_s else None
        ),
        "step_time_s": est.step_time_s,
        "current_interval_steps": est.current_interval_steps,
        "recommended_interval_steps": est.recommended_interval_steps,
        "recommended_setting": setting,
        "waste_fraction_current": est.waste_fraction_current,
        "waste_fraction_recommended": est.waste_fraction_recommended,
        "drift_ratio": est.drift_ratio,
        "newest_event": _iso(est.newest_event_s),
        "notes": list(est.notes),
        "checkpoint_cost_previous_s": est.checkpoint_cost_previous_s,
        "persist_latency_s": est.persist_latency_s,
        "mtbf_source": est.mtbf_source,
        "mtbf_n_failures": est.mtbf_n_failures,
        "mtbf_by_class": {
            name: {
                "mtbf_s": value,
                "mtbf_ci_s": list(ci) if (ci := est.mtbf_by_class_ci_s.get(name)) else None,
                "n_failures": est.failure_classes.get(name, 0),
            }
            for name, value in est.mtbf_by_class_s.items()
        },
        "weibull_shape": est.weibull_shape,
        "weibull_shape_ci": list(est.weibull_shape_ci) if est.weibull_shape_ci else None,
        "units": est.units,
        "mtbf_per_unit_s": est.mtbf_per_unit_s,
        "gpus": est.gpus,
        "excess_gpu_hours_per_day": est.excess_gpu_hours_per_day,
        "excess_cost_per_day": est.excess_cost_per_day,
    }


@dataclass(frozen=True, slots=True)
class EstimateSettings:
    """Estimation knobs from ``[estimation]`` (seconds, counts, probabilities)."""

    confidence: float = 0.9
    cost_window_saves: int = 20
    mtbf_window_s: float = 30 * 86400.0
    min_failures: int = 2
    min_saves: int = 3
    drift_ratio: float = 1.5
    min_weibull_failures: int = 10
    min_excess_gpu_hours_per_day: float = 1.0
    price_per_gpu_hour: float | None = None
    currency: str = "$"


def fleet_rate(rows: Sequence[dict[str, Any]], units: dict[str, int], job: str) -> FleetRate | None:
    """The per-unit failure rate of the other jobs, from their latest ``estimates --json`` rows.

    Sums ``exposure_s × units`` and ``n_failures`` over every job but ``job`` whose size is
    configured; None when there is no such job with running time.
    """
    exposure_s, failures = 0.0, 0
    for row in rows:
        size = units.get(row["job"])
        if row["job"] == job or size is None or not row.get("exposure_s"):
            continue
        exposure_s += float(row["exposure_s"]) * size
        failures += int(row["n_failures"])
    return FleetRate(exposure_s, failures) if exposure_s > 0 else None


def compute_estimate(
    store: StoreReader,
    job: str,
    settings: EstimateSettings,
    now_s: float,
    *,
    gpus: int | None = None,
    units: int | None = None,
    fleet: FleetRate | None = None,
) -> tuple[JobEstimate, str | None]:
    """Gather the job's events and estimate; returns the estimate and the job's setting text.

    ``gpus`` gives the excess waste in GPU-hours (and money with a configured price); ``units``
    (nodes, else GPUs) with ``fleet`` lets a job without failures of its own start from the
    fleet's per-unit rate (:func:`rules.job.estimate_job`)."""
    columns = store.event_columns(job, _ESTIMATE_KINDS)
    est = estimate_job(
        job,
        timeline_from(columns),
        now_s=now_s,
        confidence=settings.confidence,
        cost_window_saves=settings.cost_window_saves,
        mtbf_window_s=settings.mtbf_window_s,
        min_failures=settings.min_failures,
        min_saves=settings.min_saves,
        drift_ratio_limit=settings.drift_ratio,
        min_weibull_failures=settings.min_weibull_failures,
        min_excess_gpu_hours_per_day=settings.min_excess_gpu_hours_per_day,
        price_per_gpu_hour=settings.price_per_gpu_hour,
        gpus=gpus,
        units=units,
        fleet=fleet,
    )
    stack = next(iter(columns.parser_counts), None)
    setting = (
        setting_for(stack, est.recommended_interval_steps)
        if stack and est.recommended_interval_steps
        else None
    )
    return est, setting


class Advisor:
    """Runs estimate → decide → notify for jobs, with every adapter passed in.

    Args:
        store: the event store.
        notifier: where messages go (Slack, or the log when there is no token).
        rule: the drift policy.
        settings: estimation knobs.
        clock: returns the current aware UTC datetime.
        gpus: job name → GPU count, for GPU-hours in messages.
        units: job name → size (nodes, else GPUs) for per-unit rates and the fleet's rate.
    """

    def __init__(
        self,
        store: Store,
        notifier: Notifier,
        *,
        rule: DriftRule,
        settings: EstimateSettings,
        clock: Callable[[], datetime],
        gpus: dict[str, int] | None = None,
        units: dict[str, int] | None = None,
    ) -> None:
        self.store = store
        self.notifier = notifier
        self.rule = rule
        self.settings = settings
        self._clock = clock
        self._gpus = gpus or {}
        self._units = units or {}

    def run(self, jobs: Sequence[str]) -> list[JobEstimate]:
        """Estimate and decide for each job, then deliver queued messages. Never raises for
        one job's failure: it is logged and the next job goes on."""
        out = []
        for job in jobs:
            try:
                out.append(self.run_job(job))
            except Exception:
                log.exception("estimate for job %r failed", job)
        self.deliver()
        return out

    def run_job(self, job: str) -> JobEstimate:
        """Estimate one job, store the estimate, and queue a message if the rule says so."""
        now_s = self._clock().timestamp()
        units = self._units.get(job)
        fleet = None
        if units is not None and len(self._units) > 1:
            fleet = fleet_rate(self.store.estimate_history(latest_only=True), self._units, job)
        est, setting = compute_estimate(
            self.store,
            job,
            self.settings,
            now_s,
            gpus=self._gpus.get(job),
            units=units,
            fleet=fleet,
        )
        self.store.save_estimate(
            job, now_s, str(est.status), estimate_to_json(est, setting=setting)
        )
        state = self.store.alert_state(job)
        decision = self.rule(est, state, now_s)
        if decision.action is Action.NONE:
            if decision.next_state != state:
                self.store.record_decision(
                    job, decision.next_state, message=None, action=str(decision.action), now_s=now_s
                )
            return est
        from agent.notifier import format_message

        message = format_message(
            est,
            decision,
            setting=setting,
            gpus=self._gpus.get(job),
            currency=self.settings.currency,
        )
        log.info("%s: %s (%s)", job, decision.action, decision.reason)
        self.store.record_decision(
            job, decision.next_state, message=message, action=str(decision.action), now_s=now_s
        )
        return est

    def deliver(self) -> int:
        """Send queued messages in order; stop at the first transient error. Returns sent."""
        from agent.notifier import NotifyError

        sent = 0
        for item in self.store.queued_messages():
            now_s = self._clock().timestamp()
            try:
                ts = self.notifier.send(item.payload)
            except NotifyError as exc:
                state = "queued" if exc.transient else "failed"
                self.store.mark_message(item.id, state=state, now_s=now_s, error=str(exc))
                log.error("message for %s not delivered: %s", item.job, exc)
                if exc.transient:
                    break
                continue
            self.store.mark_message(item.id, state="sent", now_s=now_s, ts=ts)
            sent += 1
        return sent
