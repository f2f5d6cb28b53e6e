"""The caveats of one job's estimate, as typed values (:class:`rules.model.Note`).

Each function looks at one part of the estimate and returns its notes, most important first;
:func:`rules.job.estimate_job` concatenates them. No prose here: the agent renders each
:class:`rules.model.NoteCode` with its numbers (``agent/notes.py``).
"""

from __future__ import annotations

from collections import Counter

from ckpt_advisor.rules.cost import CheckpointCost
from ckpt_advisor.rules.interruptions import Interruption
from ckpt_advisor.rules.interval import daly_interval_s, high_cost_note
from ckpt_advisor.rules.model import FleetRate, Note, NoteCode
from ckpt_advisor.rules.mtbf import MtbfEstimate, WeibullFit
from ckpt_advisor.rules.policy import EstimationPolicy


def evidence_notes(
    cost: CheckpointCost | None,
    mtbf: MtbfEstimate,
    recent: list[Interruption],
    policy: EstimationPolicy,
    n_untimed: int = 0,
) -> tuple[Note, ...]:
    """What C and M rest on: C unknown or a lower bound; M without failures (a lower bound) or
    on too few; planned ends and failures after a run's clean end (not failures of M) and what
    preemptions would change if they counted.

    ``mtbf`` is the job's own estimate; ``recent`` the interruptions in the M window;
    ``n_untimed`` the log files that print no timestamps (the cause of an unknown C)."""
    notes: list[Note] = []
    window_s = policy.mtbf_window_s
    if cost is None:
        notes.append(Note(NoteCode.COST_UNKNOWN, {"n_untimed_files": n_untimed}))
    elif cost.is_lower_bound:
        values = {"cost_s": cost.cost_s}
        if cost.upper_s is not None:
            values["upper_s"] = cost.upper_s
        stack = {} if cost.stack is None else {cost.stack: cost.n}  # whose lines, how many saves
        notes.append(Note(NoteCode.COST_LOWER_BOUND, values, stack))
    if mtbf.n_failures == 0 and mtbf.lower_s is not None:
        values = {"exposure_s": mtbf.exposure_s, "window_s": window_s, "mtbf_lower_s": mtbf.lower_s}
        notes.append(Note(NoteCode.NO_FAILURE, values))
    elif 0 < mtbf.n_failures < policy.min_failures:
        values = {"n_failures": mtbf.n_failures, "window_s": window_s}
        notes.append(Note(NoteCode.FEW_FAILURES, values))
    planned = Counter(i.failure_class for i in recent if i.planned)
    if planned:
        notes.append(Note(NoteCode.PLANNED_ENDS, by_name=dict(sorted(planned.items()))))
    after_end = Counter(i.failure_class for i in recent if i.after_end and not i.planned)
    if after_end:
        notes.append(Note(NoteCode.AFTER_RUN_END, by_name=dict(sorted(after_end.items()))))
    preempted = sum(count for name, count in planned.items() if "preempt" in name)
    if preempted and cost is not None and mtbf.exposure_s > 0:
        combined_s = mtbf.exposure_s / (mtbf.n_failures + preempted)
        values = {
            "n_preemptions": preempted,
            "mtbf_s": combined_s,
            "interval_s": daly_interval_s(combined_s, cost.cost_s),
        }
        notes.append(Note(NoteCode.PREEMPTIONS, values))
    return tuple(notes)


def timing_notes(
    n_moved: int,
    current_s: float | None,
    step_s: float | None,
    n_untimed: int = 0,
    across_steps: int | None = None,
    too_close: tuple[float, float] | None = None,
) -> tuple[Note, ...]:
    """Failures re-dated from their steps, a save spacing refused as shorter than C
    (``too_close``: the measured spacing and C, seconds), a current interval read as
    ``across_steps`` save steps times the step time (no run lived to two saves), and an
    unknown current interval (put down to the ``n_untimed`` log files without timestamps when
    there are any) or step time."""
    notes: list[Note] = []
    if n_moved:
        notes.append(Note(NoteCode.FAILURES_REDATED, {"n_failures": n_moved}))
    if too_close is not None:
        spacing_s, cost_s = too_close
        notes.append(Note(NoteCode.SPACING_BELOW_COST, {"spacing_s": spacing_s, "cost_s": cost_s}))
    if across_steps is not None and step_s is not None:
        values = {"interval_steps": across_steps, "step_s": step_s, "n_untimed_files": n_untimed}
        notes.append(Note(NoteCode.CURRENT_INTERVAL_FROM_STEPS, values))
    if current_s is None:
        notes.append(Note(NoteCode.CURRENT_INTERVAL_UNKNOWN, {"n_untimed_files": n_untimed}))
    if step_s is None:
        notes.append(Note(NoteCode.STEP_TIME_UNKNOWN))
    return tuple(notes)


def inferred_notes(n_clamped: int, n_unseen: int) -> tuple[Note, ...]:
    """Failures the timeline had to infer: times clamped to the next line of their log, and
    runs that stopped without a word (counted as interruptions of unknown cause)."""
    notes: list[Note] = []
    if n_clamped:
        notes.append(Note(NoteCode.FAILURES_CLAMPED, {"n_failures": n_clamped}))
    if n_unseen:
        notes.append(Note(NoteCode.UNSEEN_INTERRUPTIONS, {"n_runs": n_unseen}))
    return tuple(notes)


def model_notes(
    cost: CheckpointCost | None,
    persist_s: float | None,
    current_s: float | None,
    weibull: WeibullFit | None,
    fleet: FleetRate | None,
    units: int | None,
) -> tuple[Note, ...]:
    """A recent change of C, asynchronous persists slower than the interval, a Weibull fit that
    changed M's interval, and M taken from the fleet (``fleet`` and ``units`` only when M is
    the fleet's)."""
    notes: list[Note] = []
    if cost is not None and cost.previous_cost_s is not None:
        values = {"previous_s": cost.previous_cost_s, "cost_s": cost.cost_s, "n_saves": cost.n}
        notes.append(Note(NoteCode.COST_CHANGED, values))
    if persist_s is not None and current_s is not None and persist_s > current_s:
        values = {"persist_s": persist_s, "interval_s": current_s}
        notes.append(Note(NoteCode.PERSIST_EXCEEDS_INTERVAL, values))
    if weibull is not None and weibull.not_exponential:
        low, high = weibull.shape_ci
        values = {"shape": weibull.shape, "shape_low": low, "shape_high": high}
        notes.append(Note(NoteCode.WEIBULL, values))
    if fleet is not None and units is not None:
        values = {
            "n_failures": fleet.n_failures,
            "unit_exposure_s": fleet.unit_exposure_s,
            "units": units,
        }
        notes.append(Note(NoteCode.FLEET_RATE, values))
    return tuple(notes)


def cost_notes(
    cost_s: float | None,
    mtbf_s: float | None,
    waste_recommended: float | None,
    policy: EstimationPolicy,
) -> tuple[Note, ...]:
    """A warning when C is large against M (:func:`rules.interval.high_cost_note`)."""
    if cost_s is None or mtbf_s is None or waste_recommended is None:
        return ()
    note = high_cost_note(cost_s, mtbf_s, waste_recommended, ratio=policy.high_cost_ratio)
    return () if note is None else (note,)
