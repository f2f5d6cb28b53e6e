"""Every ``--json`` shape of the command line, in one module (docs/DESIGN.md, "Contracts").

These dicts are public interface: keys are added, never renamed or removed, and an unknown
number is ``null``, never 0. The numbers are computed in :mod:`rules` (or read from the store);
here they are only put in shape. The stored estimate *is* the ``estimates --json`` object
(:func:`estimate_json`), so what the daemon stored and what ``estimates`` prints cannot differ.
Light on purpose: the read-only commands import it. One module on purpose too, though over
400 lines: a change to any contract is then read beside all the others (issue 13, item 7).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckpt_advisor.agent.marks import setting_is_lower_bound
from ckpt_advisor.agent.notes import render_note
from ckpt_advisor.agent.reasons import render_reason
from ckpt_advisor.rules.model import Action, Decision, JobEstimate, Note, NoteCode, Reason

if TYPE_CHECKING:
    from ckpt_advisor.agent.daemon.heartbeat import Heartbeat, Verdict
    from ckpt_advisor.agent.plot import Curve
    from ckpt_advisor.agent.store import OutboxItem, StoredEvent
    from ckpt_advisor.parsers.events import Event
    from ckpt_advisor.rules.goodput import Goodput
    from ckpt_advisor.rules.simulate import Replay
    from ckpt_advisor.rules.two_level import TwoTierJob, TwoTierPlan


def iso(epoch_s: float | None) -> str | None:
    """Unix seconds as ISO 8601 with offset (UTC), or None."""
    return None if epoch_s is None else datetime.fromtimestamp(epoch_s, UTC).isoformat()


def _pair(value: tuple[float, float | None] | tuple[int, int | None] | None) -> list[Any] | None:
    return None if value is None else list(value)


def event_json(event: Event, source: str) -> dict[str, Any]:
    """One ``parse --json`` line: the event's keys, its ``line`` (1-based) and ``source``."""
    return {
        "kind": str(event.kind),
        "time": event.time.isoformat() if event.time else None,
        "time_estimated": event.time_estimated,
        "step": event.step,
        "duration_s": event.duration_s,
        "failure_class": event.failure_class,
        "planned": event.planned,
        "persist_s": event.persist_s,
        "detail": event.detail,
        "line": event.line,
        "source": source,
        "parser": event.parser,
        "tier": event.tier,
    }


def stored_event_json(stored: StoredEvent) -> dict[str, Any]:
    """One ``events --json`` line: the ``parse --json`` keys plus ``job``."""
    return {"job": stored.job, **event_json(stored.event, stored.source)}


def decision_json(reason: Reason, action: Action | None) -> dict[str, Any]:
    """The ``decision`` object: why the job is in its state (:class:`rules.model.Reason`,
    ``{"code": …, **numbers}``) and the ``action`` taken on it (``notify``, ``repeat``,
    ``resolve``, ``none``; null when no drift rule ran, as in ``ingest``)."""
    return {"action": None if action is None else str(action), **reason.to_json()}


def estimate_json(est: JobEstimate, decision: Decision | None = None) -> dict[str, Any]:
    """The ``estimates --json`` object of one estimate (also what the store keeps).

    ``notes`` are the rendered sentences (:func:`agent.notes.render_note`); ``note_data`` the
    same notes as typed values (``{"code": …, **numbers}``) for machines. ``decision`` is the
    drift rule's decision on it when one was made (the daemon), else the estimate's own
    verdict (:func:`decision_json`); ``decision_text`` says it in a sentence
    (:func:`agent.reasons.render_reason`).
    """
    reason = est.reason if decision is None else decision.reason
    return {
        "job": est.job,
        "computed_at": iso(est.computed_at_s),
        "status": str(est.status),
        "checkpoint_cost_s": est.checkpoint_cost_s,
        "checkpoint_cost_ci_s": _pair(est.checkpoint_cost_ci_s),
        "checkpoint_cost_source": est.checkpoint_cost_source,
        "n_checkpoints": est.n_checkpoints,
        "mtbf_s": est.mtbf_s,
        "mtbf_ci_s": _pair(est.mtbf_ci_s),
        "n_failures": est.n_failures,
        "failure_classes": dict(est.failure_classes),
        "exposure_s": est.exposure_s,
        "restart_cost_s": est.restart_cost_s,
        "current_interval_s": est.current_interval_s,
        "young_interval_s": est.young_interval_s,
        "daly_interval_s": est.daly_interval_s,
        "recommended_interval_s": est.recommended_interval_s,
        "recommended_interval_ci_s": _pair(est.recommended_interval_ci_s),
        "step_time_s": est.step_time_s,
        "current_interval_steps": est.current_interval_steps,
        "recommended_interval_steps": est.recommended_interval_steps,
        "recommended_setting": est.recommended_setting,
        "waste_fraction_current": est.waste_fraction_current,
        "waste_fraction_recommended": est.waste_fraction_recommended,
        "drift_ratio": est.drift_ratio,
        "newest_event": iso(est.newest_event_s),
        "notes": [render_note(note) for note in est.notes],
        "checkpoint_cost_previous_s": est.checkpoint_cost_previous_s,
        "persist_latency_s": est.persist_latency_s,
        "mtbf_source": est.mtbf_source,
        "mtbf_n_failures": est.mtbf_n_failures,
        "mtbf_by_class": {
            name: {
                "mtbf_s": value,
                "mtbf_ci_s": _pair(est.mtbf_by_class_ci_s.get(name)),
                "n_failures": est.failure_classes.get(name, 0),
            }
            for name, value in est.mtbf_by_class_s.items()
        },
        "weibull_shape": est.weibull_shape,
        "weibull_shape_ci": _pair(est.weibull_shape_ci),
        "units": est.units,
        "mtbf_per_unit_s": est.mtbf_per_unit_s,
        "gpus": est.gpus,
        "excess_gpu_hours_per_day": est.excess_gpu_hours_per_day,
        "excess_cost_per_day": est.excess_cost_per_day,
        "checkpoint_cost_is_lower_bound": est.checkpoint_cost_is_lower_bound,
        "mtbf_is_lower_bound": est.mtbf_is_lower_bound,
        "current_interval_is_upper_bound": est.current_interval_is_upper_bound,
        "checkpoint_cost_range_s": _pair(est.checkpoint_cost_range_s),
        "recommended_interval_range_s": _pair(est.recommended_interval_range_s),
        "excess_gpu_hours_per_day_range": _pair(est.excess_gpu_hours_per_day_range),
        "note_data": [note.to_json() for note in est.notes],
        "tiers": None
        if (t := est.tiers) is None
        else {  # rules.tier_estimate.TierEstimate
            **dataclasses.asdict(t),
            "current_persistent_interval_s": t.current_persistent_interval_s,
            "persistent_interval_s": t.persistent_interval_s,
        },
        "goodput_current": est.goodput_current,
        "goodput_recommended": est.goodput_recommended,
        "recommended_interval_steps_range": _pair(est.recommended_interval_steps_range),
        "confidence": est.confidence,
        "decision": decision_json(reason, None if decision is None else decision.action),
        "decision_text": render_reason(reason),
    }


def goodput_json(
    est: JobEstimate,
    g: Goodput | None,
    *,
    since_s: float | None,
    by_day: Sequence[dict[str, Any]],
    insufficient: str | None = None,
) -> dict[str, Any]:
    """The ``goodput --json`` object: the window (``window_start``, ``window_end``, the asked
    ``since_s``), ``wall_s`` split into ``productive_s``, ``checkpoint_s``, ``lost_s``,
    ``restart_s``, ``idle_s`` (they sum to it), ``goodput`` = productive / wall with its
    ``goodput_range`` (``[low, high]``: log saves may hide part of their cost), how each bucket
    was measured (``measured_by``: :func:`agent.goodput.measured_by`), the counts, GPU-hours per
    bucket when the job's ``gpus`` is known, the simulated goodput at the current and the
    recommended interval (as in ``estimates``), the files with no timestamps (``untimed_files``:
    :func:`untimed_files`), the estimate's notes about the split's clock (``notes`` and
    ``note_data``, as in ``estimates``, of :func:`split_notes`), the same split per UTC
    day (``by_day``) and ``insufficient_data``: null, or, with no split (``g`` None: no wall
    time, as when every event is dated when read), why; every figure of the split is then null
    (``goodput_range`` ``[null, null]``, ``measured_by`` and ``gpu_hours`` too) and ``by_day``
    empty, the estimate's own figures as ever."""
    from ckpt_advisor.agent.goodput import measured_by
    from ckpt_advisor.rules.goodput import BUCKETS

    split = None  # seconds by bucket name, and wall
    if g is not None:
        split = {"wall": g.wall_s, **dict(zip(BUCKETS, map(float, g.seconds), strict=True))}
    gpus = est.gpus
    return {
        "job": est.job,
        "window_start": None if g is None else iso(g.since_s),
        "window_end": None if g is None else iso(g.until_s),
        "since_s": since_s,
        **{f"{name}_s": None if split is None else split[name] for name in ("wall", *BUCKETS)},
        "goodput": None if g is None else g.goodput,
        "goodput_range": [None, None] if g is None else list(g.goodput_range),
        "checkpoint_is_lower_bound": None if g is None else g.checkpoint_is_lower_bound,
        "measured_by": None if g is None else measured_by(g),
        "n_saves": None if g is None else g.n_saves,
        "n_interruptions": None if g is None else g.n_interruptions,
        "gpus": gpus,
        "gpu_hours": None
        if gpus is None or split is None
        else {name: split[name] * gpus / 3600.0 for name in (*BUCKETS, "wall")},
        "goodput_current": est.goodput_current,
        "goodput_recommended": est.goodput_recommended,
        "untimed_files": untimed_files(est),
        "notes": [render_note(note) for note in split_notes(est)],
        "note_data": [note.to_json() for note in split_notes(est)],
        "by_day": list(by_day),
        "insufficient_data": insufficient,
    }


def estimates_json(
    rows: Sequence[dict[str, Any]], silences: dict[str, float]
) -> list[dict[str, Any]]:
    """The ``estimates --json`` list: each stored estimate as stored, plus
    ``recommended_setting_is_lower_bound`` (the setting is to be read ``or more``, as the table
    prints it: :func:`agent.marks.setting_is_lower_bound`, from the row's own bounds, so an
    estimate stored before the key was added has it too), ``current_interval_is_upper_bound``
    (as stored; null in an estimate stored before it was recorded: how its interval was
    measured is not in it) and ``silenced_until`` (when the job's running silence ends,
    ISO 8601, or null: ``silence --job``)."""
    return [
        {
            **row,
            "current_interval_is_upper_bound": row.get("current_interval_is_upper_bound"),
            "recommended_setting_is_lower_bound": setting_is_lower_bound(row),
            "silenced_until": iso(silences.get(row["job"])),
        }
        for row in rows
    ]


def untimed_files(est: JobEstimate) -> dict[str, int]:
    """Each of the job's files that prints no timestamps, and its first event's line: its
    events are dated when read, so they hold no wall time to split (``goodput --json``)."""
    from ckpt_advisor.rules.model import NoteCode

    return next((dict(n.by_name) for n in est.notes if n.code is NoteCode.NO_TIMESTAMPS), {})


def split_notes(est: JobEstimate) -> tuple[Note, ...]:
    """The estimate's notes about the goodput split's clock: a log read in the wrong time zone
    beside its timing file (``zone_offset``: its times were moved onto the timing file's clock
    for the split, :func:`rules.sources.log_zone_offset`), files read in the hour repeated
    when clocks fell back (``ambiguous_stamp_placed``: moved onto its second pass by the timing
    file; ``ambiguous_stamp``: left in its first, which may be wrong;
    :func:`rules.repeated_hour.place_repeated_hours`)."""
    return tuple(n for n in est.notes if n.code in _SPLIT_NOTES)


_SPLIT_NOTES = (NoteCode.ZONE_OFFSET, NoteCode.AMBIGUOUS_STAMP_PLACED, NoteCode.AMBIGUOUS_STAMP)


def interval_json(
    mtbf_s: float, cost_s: float, restart_s: float, current_s: float | None
) -> dict[str, Any]:
    """The ``interval --json`` calculator object: Young's and Daly's intervals, the waste of
    Daly's exponential model at each (and at ``current_s`` when given), and ``warnings``
    (rendered :func:`rules.interval.high_cost_note`)."""
    from ckpt_advisor.rules.interval import (
        daly_interval_s,
        exponential_waste_fraction,
        high_cost_note,
        young_interval_s,
    )

    young = young_interval_s(mtbf_s, cost_s)
    daly = daly_interval_s(mtbf_s, cost_s)
    out: dict[str, Any] = {
        "mtbf_s": mtbf_s,
        "cost_s": cost_s,
        "restart_s": restart_s,
        "young_interval_s": young,
        "daly_interval_s": daly,
        "waste_fraction_young": exponential_waste_fraction(young, mtbf_s, cost_s, restart_s),
        "waste_fraction_daly": exponential_waste_fraction(daly, mtbf_s, cost_s, restart_s),
    }
    if current_s is not None:
        out["current_interval_s"] = current_s
        out["waste_fraction_current"] = exponential_waste_fraction(
            current_s, mtbf_s, cost_s, restart_s
        )
    warning = high_cost_note(cost_s, mtbf_s, out["waste_fraction_daly"])
    out["warnings"] = [] if warning is None else [render_note(warning)]
    return out


def two_tier_json(
    job: TwoTierJob, best: TwoTierPlan, first: TwoTierPlan, single: TwoTierPlan
) -> dict[str, Any]:
    """The two-tier ``interval --json`` object: the job's tiers, the exact optimum pair
    (top level), the first-order pair and the persistent-only baseline (rules/two_level.py).
    ``mtbf_memory_s`` is null when no interruption is recoverable."""

    def plan_json(plan: TwoTierPlan) -> dict[str, Any]:
        return {
            "memory_interval_s": plan.fast_interval_s,
            "persistent_interval_s": plan.persistent_interval_s,
            "saves_per_persistent": plan.saves_per_persistent,
            "waste_fraction": plan.waste_fraction,
        }

    m1, m2 = job.mtbf_recoverable_s, job.mtbf_persistent_s
    return {
        "memory_cost_s": job.fast_cost_s,
        "persistent_cost_s": job.persistent_cost_s,
        "mtbf_memory_s": None if math.isinf(m1) else m1,
        "mtbf_persistent_s": m2,
        "recoverable_fraction": m2 / (m1 + m2) if not math.isinf(m1) else 0.0,
        "memory_restart_s": job.fast_restart_s,
        "persistent_restart_s": job.persistent_restart_s,
        **plan_json(best),
        "first_order": plan_json(first),
        "persistent_only": {
            "interval_s": single.fast_interval_s,
            "waste_fraction": single.waste_fraction,
        },
    }


def backtest_json(
    est: JobEstimate, *, tried_s: Sequence[float], grid_s: Sequence[float]
) -> dict[str, Any]:
    """The ``simulate --job --json`` object: the job's recorded lives replayed
    (:func:`rules.simulate.replay`) with its C and R at each tried interval (``intervals``,
    in order) and, with a grid, the ``best`` of all the intervals replayed, tried and on the grid
    (a current interval beyond the grid's span may be it); whether the C and the M it ran at are
    lower bounds and the current interval an upper bound (``checkpoint_cost_is_lower_bound``,
    ``mtbf_is_lower_bound``, ``current_interval_is_upper_bound``, as in ``estimates``). Needs
    C and M known."""
    from ckpt_advisor.rules.simulate import replay

    assert est.mtbf_s is not None and est.checkpoint_cost_s is not None
    restart_s = est.restart_cost_s or 0.0
    rows = [
        _replay_row(
            replay(
                est.lives_s,
                interval_s=t,
                cost_s=est.checkpoint_cost_s,
                restart_s=restart_s,
                tail_s=est.lives_tail_s,
            )
        )
        for t in [*tried_s, *grid_s]
    ]
    out = _simulation("backtest", est.mtbf_s, est.checkpoint_cost_s, restart_s, rows, tried_s)
    out.update(
        job=est.job,
        n_failures=len(est.lives_s),
        current_interval_s=est.current_interval_s,
        checkpoint_cost_is_lower_bound=est.checkpoint_cost_is_lower_bound,
        mtbf_is_lower_bound=est.mtbf_is_lower_bound,
        current_interval_is_upper_bound=est.current_interval_is_upper_bound,
    )
    return out


def monte_carlo_json(
    *,
    mtbf_s: float,
    cost_s: float,
    restart_s: float,
    tried_s: Sequence[float],
    grid_s: Sequence[float],
    shape: float,
    days: float,
    replicates: int,
    seed: int,
) -> dict[str, Any]:
    """The ``simulate --json`` object: ``replicates`` simulated jobs of ``days``
    (:func:`rules.simulate.simulate_intervals`) at each tried interval and on the grid."""
    from ckpt_advisor.rules.simulate import simulate_intervals

    sims = simulate_intervals(
        [*tried_s, *grid_s],
        mtbf_s=mtbf_s,
        cost_s=cost_s,
        restart_s=restart_s,
        shape=shape,
        horizon_s=days * 86400.0,
        replicates=replicates,
        seed=seed,
    )
    rows = [
        {
            "interval_s": r.interval_s,
            "waste_fraction": r.waste_fraction,
            "waste_stderr": r.waste_stderr,
            "goodput": r.goodput,
        }
        for r in sims
    ]
    out = _simulation("monte_carlo", mtbf_s, cost_s, restart_s, rows, tried_s)
    out.update(shape=shape, days=days, replicates=replicates, seed=seed)
    return out


def _replay_row(result: Replay) -> dict[str, Any]:
    return {
        "interval_s": result.interval_s,
        "waste_fraction": result.waste_fraction,
        "waste_stderr": None,  # one recorded history: no spread to give
        "goodput": result.goodput,
    }


def _simulation(
    mode: str,
    mtbf_s: float,
    cost_s: float,
    restart_s: float,
    rows: list[dict[str, Any]],
    tried_s: Sequence[float],
) -> dict[str, Any]:
    """The shape both modes share; each row also gets the first-order formula's waste."""
    from ckpt_advisor.rules.interval import daly_interval_s, waste_fraction

    for r in rows:
        r["waste_fraction_formula"] = waste_fraction(r["interval_s"], mtbf_s, cost_s, restart_s)
    out: dict[str, Any] = {
        "mode": mode,
        "mtbf_s": mtbf_s,
        "cost_s": cost_s,
        "restart_s": restart_s,
        "daly_interval_s": daly_interval_s(mtbf_s, cost_s),
        "intervals": rows[: len(tried_s)],
    }
    if len(rows) > len(tried_s):
        out["best"] = min(rows, key=lambda r: float(r["waste_fraction"]))
    return out


def plot_json(path: Path | None, drawn: Curve) -> dict[str, Any]:
    """The ``plot --json`` object: the job, the PNG written (``output``, null when none was
    drawn) and the curve (:meth:`agent.plot.Curve.to_json`: ``x_s`` in seconds, ``axis_unit``
    the axis' label, ``waste`` as fractions, ``waste_upper`` over the plausible C,
    ``insufficient_data``; ``x`` and ``unit`` their kept first names)."""
    return {**drawn.to_json(), "output": None if path is None else str(path)}


def status_json(
    verdict: Verdict,
    heartbeat: Heartbeat | None,
    queued: Sequence[OutboxItem],
    silences: dict[str, float],
    latest: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """The ``status --json`` object: the health verdict, whether the daemon's process is
    running, its heartbeat file as it is (its ``waiting``: the jobs whose messages wait for
    their backlog, ``files`` and ``bytes_behind`` each), the lagging files, the files that look
    binary (``binary``: ``job``, ``path``, ``why``), what waits in the outbox, the running
    silences (job → when each ends, ISO 8601), and each job's state with the decision
    behind it (``jobs``: ``job``, ``status``, ``computed_at``, ``decision``,
    ``decision_text``, from the latest stored estimates)."""
    return {
        "healthy": verdict.healthy,
        "problems": verdict.problems,
        "running": verdict.running,
        "daemon": heartbeat.to_json() if heartbeat else None,
        "lagging": [f.path for f in verdict.lagging],
        "binary": [{"job": f.job, "path": f.path, "why": f.binary} for f in verdict.binary],
        "queued": [
            {
                "id": q.id,
                "job": q.job,
                "action": q.action,
                "created_s": q.created_s,
                "attempts": q.attempts,
            }
            for q in queued
        ],
        "silenced": {job: iso(until_s) for job, until_s in silences.items()},
        "jobs": [
            {
                "job": row["job"],
                "status": row.get("status"),
                "computed_at": row.get("computed_at"),
                "decision": row.get("decision"),
                "decision_text": row.get("decision_text"),
            }
            for row in latest
        ],
    }
