"""The detail of a message about a job's interval, in plain words: what the message leaves out,
posted as a reply in its thread (intervals in seconds and steps with the recommended range, the
waste and the simulated goodput, a two-tier job's C and M per tier and its pair, C's changes and
persist time, R, M per failure class, the Weibull shape, M per node, Young's and Daly's
intervals, why), and the resolve reply.
:mod:`agent.notify.message` puts these words into Block Kit; :mod:`agent.notify.wording` has the
message's own words.
"""

from __future__ import annotations

from dataclasses import dataclass

from ckpt_advisor.agent.marks import (
    NO_BOUND,
    at_least,
    at_most,
    bound_mark,
    estimate_row,
    interval_is_bounded,
    setting_is_lower_bound,
)
from ckpt_advisor.agent.notes import render_note
from ckpt_advisor.agent.notify.wording import cost_evidence, mtbf_evidence, one_line
from ckpt_advisor.agent.reasons import render_reason
from ckpt_advisor.agent.units import format_duration as d
from ckpt_advisor.rules.model import Decision, JobEstimate, NoteCode


@dataclass(frozen=True, slots=True)
class Fact:
    """One line of the detail: a label and its plain text."""

    label: str
    text: str


def _interval(
    value_s: float | None,
    steps: int | None,
    step_time_s: float | None,
    *,
    upper_bound: bool = False,
) -> str:
    """``4h 00m (14,400 s, 1,800 steps of 8s)`` or ``unknown``; with ``upper_bound`` its times
    ``≤`` (``≤ 3.74s (≤ 4 s, 25 steps)``: the steps are counted)."""
    if value_s is None:
        return "unknown"
    parts = [at_most(f"{value_s:,.0f} s", upper_bound)]
    if steps is not None:
        parts.append(f"{steps:,} steps" + (f" of {d(step_time_s)}" if step_time_s else ""))
    return f"{at_most(d(value_s), upper_bound)} ({', '.join(parts)})"


def _current(e: JobEstimate) -> str:
    """The current interval (:func:`_interval`), an upper bound when it is the save spacing
    less a lower-bound C (``current_interval_is_upper_bound``)."""
    upper = e.current_interval_is_upper_bound
    return _interval(e.current_interval_s, e.current_interval_steps, None, upper_bound=upper)


def _range(e: JobEstimate) -> str:
    """``; range 40m 41s–1h 24m`` over M's interval and the plausible C (``≥`` when open)."""
    bounds = e.recommended_interval_range_s or e.recommended_interval_ci_s
    if bounds is None:
        return ""
    low_s, high_s = bounds
    over = " over M's interval and the plausible C" if e.checkpoint_cost_is_lower_bound else ""
    if high_s is None:
        return f"; at least {d(low_s)}{over}"
    return f"; range {d(low_s)}–{d(high_s)}{over}"


def _waste(e: JobEstimate) -> str:
    """``35.0% of run time now, 15.0% at the recommended interval (Daly's model: saves and
    rework; restarts not counted)``, each ``≥`` at a lower-bound C, ``≤`` at a lower-bound M,
    ``-`` at both (:func:`agent.marks.bound_mark`). Beside :func:`_goodput`, a share of wall
    time that counts the restarts too, the two need not add up to 100%."""
    now, best = e.waste_fraction_current, e.waste_fraction_recommended
    if now is None or best is None:
        return "unknown"
    if (mark := bound_mark(estimate_row(e), grows_with_cost=True)) is None:
        return f"- ({NO_BOUND})"
    return (
        f"{mark}{now:.1%} of run time now, {mark}{best:.1%} at the recommended interval "
        "(Daly's model: saves and rework; restarts not counted)"
    )


def _goodput(e: JobEstimate) -> str | None:
    """``64.8% now, 85.1% at the recommended interval (simulated …)``, each ``≤`` at a
    lower-bound C, ``≥`` at a lower-bound M, ``-`` at both; None when unknown."""
    now, best = e.goodput_current, e.goodput_recommended
    if now is None or best is None:
        return None
    if (mark := bound_mark(estimate_row(e), grows_with_cost=False)) is None:
        return f"- ({NO_BOUND})"
    return (
        f"{mark}{now:.1%} now, {mark}{best:.1%} at the recommended interval (of wall time, "
        "restarts included: simulated with the job's own C, M and R)"
    )


def _setting(e: JobEstimate) -> str:
    """``; set save_steps=450``, ``or more`` when the interval has no upper end (as the
    message's setting: :func:`agent.marks.setting_is_lower_bound`); ``""`` without one."""
    if not e.recommended_setting:
        return ""
    more = " or more" if setting_is_lower_bound(estimate_row(e)) else ""
    return f"; set {one_line(e.recommended_setting)}{more}"


def detail_facts(e: JobEstimate, decision: Decision) -> list[list[Fact]]:
    """The detail, grouped (one Slack section each): intervals, C, M, model and why."""
    intervals = [
        Fact("Current interval", _current(e)),
        Fact(
            "Recommended interval",
            _interval(e.recommended_interval_s, e.recommended_interval_steps, e.step_time_s)
            + _setting(e)
            + _range(e),
        ),
        Fact("Waste", _waste(e)),
    ]
    if (simulated := _goodput(e)) is not None:
        intervals.append(Fact("Goodput", simulated))
    intervals += _tier_facts(e)
    cost = [Fact("Checkpoint cost", cost_evidence(e))]
    if e.checkpoint_cost_previous_s is not None and e.checkpoint_cost_s is not None:
        cost.append(
            Fact(
                "C changed",
                f"from {d(e.checkpoint_cost_previous_s)} to {d(e.checkpoint_cost_s)} recently",
            )
        )
    if e.persist_latency_s is not None:
        text = f"{d(e.persist_latency_s)} in the background (not in C)"
        if e.current_interval_s is not None and e.persist_latency_s > e.current_interval_s:
            text += "; WARNING: longer than the interval, saves queue up"
        cost.append(Fact("Persist latency", text))
    if e.restart_cost_s is not None:
        cost.append(Fact("Restart cost R", d(e.restart_cost_s)))
    return [intervals, cost, _mtbf_facts(e), _model_facts(e, decision)]


def _tier_facts(e: JobEstimate) -> list[Fact]:
    """A two-tier job's C and M per tier, and its pair: advised (or none yet: the
    ``two_tiers`` note says why) and now (``rules/tier_estimate.py``)."""
    t = e.tiers
    if t is None:
        return []
    per_tier = (
        f"{t.fast_tier}: C {d(t.fast_cost_s)}, M {d(t.mtbf_recoverable_s)} "
        f"({t.n_recoverable} interruptions it survives); persistent: C "
        f"{d(t.persistent_cost_s)}, M {d(t.mtbf_persistent_s)} ({t.n_unrecoverable} others)"
    )
    if t.fast_interval_s is None or t.saves_per_persistent is None:
        pair = "none advised yet"
    else:
        fast = _interval(t.fast_interval_s, t.fast_interval_steps, e.step_time_s)
        persistent = _interval(t.persistent_interval_s, t.persistent_interval_steps, None)
        pair = (
            f"{t.fast_tier} every {fast}; persistent every {persistent}, one save in "
            f"{t.saves_per_persistent}"
        )
    if t.current_fast_interval_s is not None and t.current_saves_per_persistent is not None:
        pair += (
            f"; now every {d(t.current_fast_interval_s)}, one in {t.current_saves_per_persistent}"
        )
    return [Fact("Two tiers", per_tier), Fact("Tier pair", pair)]


def _mtbf_facts(e: JobEstimate) -> list[Fact]:
    facts = [Fact("MTBF", mtbf_evidence(e))]
    if e.failure_classes:
        facts.append(
            Fact(
                "Failures by class",
                ", ".join(
                    f"{one_line(name)} ×{count}"
                    + (
                        ""
                        if e.mtbf_by_class_s.get(name) is None
                        else f" (M {d(e.mtbf_by_class_s[name])})"
                    )
                    for name, count in sorted(e.failure_classes.items())
                ),
            )
        )
    if e.weibull_shape is not None and e.weibull_shape_ci is not None:
        low, high = e.weibull_shape_ci
        used = "; widens M's interval" if e.mtbf_source == "weibull" else "; near 1 (exponential)"
        facts.append(Fact("Weibull shape", f"{e.weibull_shape:.2f} ({low:.2f}–{high:.2f}){used}"))
    if e.mtbf_per_unit_s is not None and e.units is not None:
        # units are the job's nodes when configured, else its GPUs (agent.app.job_sizes)
        unit = "GPU" if e.gpus is not None and e.units == e.gpus else "node"
        source = "; from the fleet's rate" if e.mtbf_source == "fleet" else ""
        facts.append(
            Fact(
                f"M per {unit}", f"{d(e.mtbf_per_unit_s)} ({e.units:,} {unit}s in the job{source})"
            )
        )
    return facts


def _model_facts(e: JobEstimate, decision: Decision) -> list[Fact]:
    """Young's and Daly's intervals, ``≥`` when C or M is a lower bound (both grow with C and
    with M), and the current/recommended ratio, ``≤`` then or when the current interval is an
    upper bound (the save spacing less a lower-bound C); the decision's reason."""
    bounded = interval_is_bounded(estimate_row(e))
    young, daly = (
        at_least(d(s), bounded and s is not None) for s in (e.young_interval_s, e.daly_interval_s)
    )
    ratio = ""
    if e.drift_ratio is not None:
        upper = bounded or e.current_interval_is_upper_bound
        ratio = f"; current/recommended {at_most(f'{e.drift_ratio:.2f}×', upper)}"
    return [
        Fact("Model", f"Young (1974) {young}, Daly (2006) {daly}{ratio}"),
        Fact("Why", one_line(render_reason(decision.reason))),
    ]


def detail_notes(e: JobEstimate) -> list[str]:
    """The notes as sentences, but the lower bound of C (said first, in the message itself)."""
    return [render_note(n) for n in e.notes if n.code is not NoteCode.COST_LOWER_BOUND]


def resolve_line(e: JobEstimate, decision: Decision) -> str:
    """The resolve reply: ``Back within range: 1.10× the optimum …; the interval is 2h 00m``."""
    now = _current(e)
    return f"{render_reason(decision.reason).capitalize()}; the interval is {now}"
