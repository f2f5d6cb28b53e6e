"""Which interruption each failure line was counted in, for ``parse`` and ``events`` (table
and ``--json``).

A user who reads N interruptions in an estimate wants to see which lines made each one: every
failure row gets the id of its interruption and the ``source:line`` of every failure line
merged into it, from the estimate's own clustering (:func:`rules.job_runs.job_runs`, the
part of :func:`rules.job.estimate_job` that counts them; the rest of an estimate is not
computed), so the numbers agree with what ``estimates`` counts: ``parse`` numbers the files
it reads; ``events`` the stored job, as the daemon estimates it (the policy of its
:class:`agent.estimate.Estimator`, the config's when given one).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from ckpt_advisor import parsers
from ckpt_advisor.agent.estimate import (
    ESTIMATE_KINDS,
    Estimator,
    clock_findings,
    stack_of,
    timeline_from,
)
from ckpt_advisor.rules.job_runs import job_runs
from ckpt_advisor.rules.model import Observation
from ckpt_advisor.rules.policy import DEFAULT_POLICY

if TYPE_CHECKING:
    from ckpt_advisor.agent.store import StoreReader


def number_interruptions(rows: list[dict[str, Any]]) -> None:
    """Add ``interruption`` (its id, or None for a failure the timeline cannot place: no time)
    and ``interruption_lines`` (``source:line`` of each failure line merged into it, in time
    order) to every ``failure`` row, in place; ``rows`` are ``parse --json`` objects of one
    job, any order."""
    placed = [
        i for i, r in enumerate(rows) if r["time"] is not None and r["kind"] in ESTIMATE_KINDS
    ]
    observations = [
        Observation(
            rows[i]["kind"],
            datetime.fromisoformat(rows[i]["time"]).timestamp(),
            rows[i]["step"],
            rows[i]["duration_s"],
            rows[i]["failure_class"],
            rows[i]["planned"],
            from_timing_file=rows[i]["parser"] in parsers.TIMING_FORMATS,
            source=rows[i]["source"],
        )
        for i in placed
    ]
    for row in rows:
        if row["kind"] == "failure":
            row["interruption"], row["interruption_lines"] = None, []
    if not any(o.kind == "failure" for o in observations):
        return
    for interruption in job_runs(observations, policy=DEFAULT_POLICY, stack=None).interruptions:
        members = [rows[placed[r]] for r in interruption.rows if r >= 0]
        lines = [f"{m['source']}:{m['line']}" for m in members]
        for member in members:
            member["interruption"], member["interruption_lines"] = interruption.id, lines


def number_stored_interruptions(
    store: StoreReader, rows: list[dict[str, Any]], estimator: Estimator
) -> None:
    """Add ``interruption`` and ``interruption_lines`` (as :func:`number_interruptions`) to
    every ``failure`` row of ``rows`` (``events --json`` objects), in place, from each job's
    interruptions as its estimate over all its stored events counts them (``estimator``'s
    policy, the stack of the job's logs): the estimate's timeline rows are the job's timed
    events in store order, so its k-th failure row is the job's k-th timed failure event."""
    for job in sorted({r["job"] for r in rows if r["kind"] == "failure"}):
        columns = store.event_columns(job, ESTIMATE_KINDS)
        split = job_runs(
            timeline_from(columns),
            policy=estimator.policy,
            stack=stack_of(columns),
            clock_findings=clock_findings(store, job),
        )
        failure_rows = np.flatnonzero(columns.kind == columns.kinds.index("failure"))
        ordinal = {int(row): k for k, row in enumerate(failure_rows)}
        stored = [e for e in store.events(job=job, kinds=["failure"]) if e.event.time is not None]
        # a failure is its line and its time: a file rewritten in place (copytruncate) prints
        # another failure at the same source:line
        places = [
            (e.source, e.event.line, e.event.time.isoformat()) for e in stored if e.event.time
        ]
        numbered: dict[tuple[str, int, str], tuple[int, list[str]]] = {}
        for interruption in split.interruptions:
            found = (ordinal.get(r) for r in interruption.rows)  # None: an inferred failure
            members = [places[k] for k in found if k is not None and k < len(places)]
            lines = [f"{source}:{line}" for source, line, _ in members]
            for place in members:
                numbered[place] = (interruption.id, lines)
        for row in rows:
            if row["job"] == job and row["kind"] == "failure":
                place = (row["source"], row["line"], row["time"])
                number, lines = numbered.get(place, (None, []))
                row["interruption"], row["interruption_lines"] = number, lines


def interruption_cell(row: dict[str, Any]) -> str:
    """The table cell of a row: ``#3`` for the third interruption, with ``+2`` when two other
    lines were merged into it; ``-`` for rows that are no failure or have no time."""
    number = row.get("interruption")
    if number is None:
        return "-"
    others = len(row["interruption_lines"]) - 1
    return f"#{number}" + (f" +{others}" if others > 0 else "")
