"""Gather one job's events from the store and estimate it with one policy.

The gather step of the estimate cycle (cosmicpython's service layer: gather, decide, act):
:func:`timeline_from` turns the store's event columns into the rules' input, :class:`Estimator`
adds what the store knows about the job (the stack that wrote its logs, its fleet's failure
rate, what the parsers found about its files' clocks) to its configured size and calls
:func:`rules.job.estimate_job`. The daemon, ``ingest``, ``simulate --job`` and the benchmark
all estimate through it, with the policy the composition root (``agent/app.py``) built from
the config.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ckpt_advisor.rules.job import estimate_job
from ckpt_advisor.rules.model import ClockFinding, FleetRate, JobEstimate
from ckpt_advisor.rules.policy import DEFAULT_POLICY, NO_FACTS, EstimationPolicy, JobFacts
from ckpt_advisor.rules.sources import FINDING_KINDS
from ckpt_advisor.rules.timeline import Timeline, kind_code

if TYPE_CHECKING:
    from ckpt_advisor.agent.store import EventColumns, RegisteredJob, StoreReader

ESTIMATE_KINDS = (
    "checkpoint_start",
    "checkpoint_end",
    "failure",
    "restart",
    "resume",
    "run_start",
    "run_end",
    "step",
    "interval_change",
)
"""The event kinds an estimate reads."""


def stack_of(columns: EventColumns) -> str | None:
    """The stack that wrote the job's logs: the parser of most of its log events (None: none)."""
    return next(iter(columns.parser_counts), None)


def timeline_from(columns: EventColumns) -> Timeline:
    """The rules' timeline of stored event columns: the same as ``Timeline.of`` over one
    :class:`rules.model.Observation` per timed event, without an object per event."""
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
        tier=columns.tier,
        host_dated=columns.host_dated,
        source=columns.source.astype(np.intp),
        sources=columns.sources,
    )


@dataclass(frozen=True, slots=True)
class FleetShare:
    """One job's part of a fleet's per-unit failure rate, from its latest estimate.

    Attributes:
        job: the job's name.
        units: its size (nodes, or GPUs), >= 1.
        exposure_s: its running time, seconds (> 0).
        n_failures: its unplanned interruptions in that time.
    """

    job: str
    units: int
    exposure_s: float
    n_failures: int


def fleet_shares(rows: Sequence[Mapping[str, Any]], units: Mapping[str, int]) -> list[FleetShare]:
    """Each job of ``units`` (name → nodes or GPUs) with running time in its latest
    ``estimates --json`` row (``exposure_s``, ``n_failures``), in the rows' order."""
    return [
        FleetShare(row["job"], units[row["job"]], float(row["exposure_s"]), int(row["n_failures"]))
        for row in rows
        if units.get(row["job"]) and row.get("exposure_s")
    ]


def fleet_rate(
    rows: Sequence[Mapping[str, Any]], sizes: Mapping[str, JobFacts], job: str
) -> FleetRate | None:
    """The per-unit failure rate of the other jobs, from their latest ``estimates --json`` rows.

    Sums ``exposure_s × units`` and ``n_failures`` over every job but ``job`` whose size is
    configured (:func:`fleet_shares`); None when there is no such job with running time.
    """
    units = {name: f.units for name, f in sizes.items() if f.units and name != job}
    shares = fleet_shares(rows, units)
    exposure_s = sum(share.exposure_s * share.units for share in shares)
    failures = sum(share.n_failures for share in shares)
    return FleetRate(exposure_s, failures) if exposure_s > 0 else None


def fleet_nodes(
    registry: Mapping[str, RegisteredJob], configured: Mapping[str, int]
) -> dict[str, int]:
    """Job name → nodes of every job with ``nodes`` set: those every agent registered in the
    store, and this agent's configured ones (the config wins)."""
    return {name: job.nodes for name, job in registry.items() if job.nodes} | dict(configured)


def clock_findings(store: StoreReader, job: str) -> list[ClockFinding]:
    """What the parsers found about the job's log files' clocks (the events of
    :data:`rules.sources.FINDING_KINDS`: a few per file), for the estimate's notes."""
    return [
        ClockFinding(
            str(e.event.kind),
            e.source,
            e.event.line,
            e.event.duration_s,
            None if e.event.time is None else e.event.time.timestamp(),
        )
        for e in store.events(job=job, kinds=FINDING_KINDS)
    ]


class Estimator:
    """Estimates jobs from a store with one policy and the jobs' configured sizes.

    Args:
        policy: the estimation policy (from ``[estimation]``).
        sizes: job name → its GPUs and units (nodes, else GPUs), from ``[[jobs]]``; a job
            absent here has the size some agent registered in the store, or none.
        nodes: job name → its nodes, from ``[[jobs]]``: with the jobs every agent registered
            in the store, the jobs the fleet's per-node rate is pooled over.
    """

    def __init__(
        self,
        policy: EstimationPolicy = DEFAULT_POLICY,
        sizes: Mapping[str, JobFacts] | None = None,
        nodes: Mapping[str, int] | None = None,
    ) -> None:
        self.policy = policy
        self.sizes: Mapping[str, JobFacts] = dict(sizes or {})
        self.nodes: Mapping[str, int] = dict(nodes or {})

    def __repr__(self) -> str:
        return f"Estimator({self.policy!r}, {len(self.sizes)} sized job(s))"

    def facts(self, store: StoreReader, job: str, columns: EventColumns) -> JobFacts:
        """The job's size (configured here, else as some agent registered it), with its stack
        (the parser of most of its log events) and, when it and at least one other job have
        nodes, the fleet's per-node rate (:func:`fleet_rate` over every agent's jobs)."""
        registry = store.registered_jobs()
        facts = self.sizes.get(job)
        if facts is None and (known := registry.get(job)) is not None:
            facts = JobFacts(gpus=known.gpus, units=known.nodes or known.gpus)
        facts = facts or NO_FACTS
        nodes = fleet_nodes(registry, self.nodes)
        fleet = None
        if job in nodes and len(nodes) > 1:
            pooled = {name: JobFacts(units=n) for name, n in nodes.items()}
            fleet = fleet_rate(store.estimate_history(latest_only=True), pooled, job)
        return dataclasses.replace(facts, fleet=fleet, stack=stack_of(columns))

    def estimate(
        self, store: StoreReader, job: str, now_s: float, columns: EventColumns | None = None
    ) -> JobEstimate:
        """Read the job's events (or take ``columns``, read with :data:`ESTIMATE_KINDS`) and
        estimate them (:func:`rules.job.estimate_job`).

        Raises:
            StoreError: the store cannot be read (e.g. a schema too old to estimate from).
        """
        if columns is None:
            columns = store.event_columns(job, ESTIMATE_KINDS)
        facts = self.facts(store, job, columns)
        return estimate_job(
            job,
            timeline_from(columns),
            now_s=now_s,
            policy=self.policy,
            facts=facts,
            clock_findings=clock_findings(store, job),
        )
