"""One job's estimate: C, M, R, the current and recommended intervals, waste and status."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from ckpt_advisor.rules._checks import require_count, require_positive, require_probability
from ckpt_advisor.rules.advice import interval_steps
from ckpt_advisor.rules.bounds import checkpoint_upper_bounds_s, excess_range, interval_range_s
from ckpt_advisor.rules.drift import off_optimum
from ckpt_advisor.rules.estimates import (
    CheckpointCost,
    MtbfEstimate,
    WeibullFit,
    checkpoint_durations_s,
    current_interval_s,
    current_interval_steps,
    estimate_checkpoint_cost,
    estimate_mtbf,
    fit_weibull,
    mtbf_by_class,
    persist_latency_s,
    redated_failures,
    restart_cost_s,
    save_index,
    scale_mtbf,
    step_time_s,
    widen_mtbf_ci,
)
from ckpt_advisor.rules.interval import (
    HIGH_COST_RATIO,
    daly_interval_s,
    excess_gpu_hours_per_day,
    exponential_waste_fraction,
    high_cost_warning,
    young_interval_s,
)
from ckpt_advisor.rules.model import ClockFinding, FleetRate, JobEstimate, Observation, Status
from ckpt_advisor.rules.sources import clock_notes, untimed_sources
from ckpt_advisor.rules.timeline import (
    IntArray,
    Interruption,
    Timeline,
    cluster_interruptions,
    exposure_s,
    lives_s,
    split_runs,
)

DAY_S = 86400.0
MATERIAL_SHIFT_S = 60.0
"""A failure re-dated by more than this is worth a note (less is the bar clock's rounding)."""


def estimate_job(
    job: str,
    observations: Iterable[Observation] | Timeline,
    *,
    now_s: float,
    cost_window_saves: int = 20,
    mtbf_window_s: float = 30 * DAY_S,
    idle_gap_s: float = 6 * 3600.0,
    burst_gap_s: float = 60.0,
    silent_gap_s: float = 1800.0,
    confidence: float = 0.9,
    min_saves: int = 3,
    min_failures: int = 2,
    drift_ratio_limit: float = 1.5,
    min_weibull_failures: int = 10,
    units: int | None = None,
    fleet: FleetRate | None = None,
    gpus: int | None = None,
    price_per_gpu_hour: float | None = None,
    min_excess_gpu_hours_per_day: float = 1.0,
    high_cost_ratio: float = HIGH_COST_RATIO,
    clock_findings: Sequence[ClockFinding] = (),
) -> JobEstimate:
    """Estimate everything about one job's checkpointing from its observations.

    Windows are measured back from the job's newest observation, not from ``now_s``, so a
    backfill of old logs gives the estimate a live run would have given: C is the median of the
    last ``cost_window_saves`` save durations; M counts the unplanned interruptions that began,
    and the exposure run, within ``mtbf_window_s`` before the newest observation. The
    recommendation is Daly's interval (FGCS 22(3), 2006, eq. 37); its confidence interval is
    Daly evaluated at the corners of the M and C confidence intervals. The current interval is
    the compute time between saves (the measured spacing minus C, as Daly's T;
    :func:`rules.estimates.current_interval_s`). Waste fractions and the excess GPU-hours use
    Daly's exponential model (:func:`rules.interval.exponential_waste_fraction`) with R
    included when known; it never exceeds 1. When C/M exceeds ``high_cost_ratio`` a note says
    that the job mostly writes checkpoints.

    Failure lines often carry no time of their own and arrive stamped with the last stamped
    line's time; once the step time is known, each interruption is moved to where its steps say
    the run had got (:func:`rules.estimates.redated_failures`), so exposure and R are not cut
    short. A run that stopped with no failure line and no clean end before a new run started
    counts as an interruption of class ``unknown``
    (:meth:`rules.timeline.Timeline.with_unseen_interruptions`). ``n_checkpoints`` counts the
    job's saves (each once, see :func:`rules.estimates.save_index`), whether or not their
    duration is known. Status is
    ``insufficient_data`` when C, M or the current interval is unknown, or there are fewer than
    ``min_saves`` saves or ``min_failures`` interruptions behind M;
    ``drift`` when :func:`rules.drift.off_optimum` says so (current/recommended outside
    ``[1/drift_ratio_limit, drift_ratio_limit]``, the current interval outside the optimum's
    confidence band, and an excess of at least ``min_excess_gpu_hours_per_day`` when ``gpus`` is
    known); else ``ok``.

    M is the exponential MLE (:func:`rules.estimates.estimate_mtbf`) unless one of these holds:

    - with ``units`` (the job's nodes, or GPUs) and a ``fleet`` rate, and fewer than
      ``min_failures`` failures of its own, M is the pooled per-unit MTBF of the job and the
      fleet divided by ``units`` (:func:`rules.estimates.scale_mtbf`): a new job starts from its
      fleet's rate;
    - with at least ``min_weibull_failures`` failures, the running time between them is fitted
      with a Weibull (:func:`rules.estimates.fit_weibull`); when its shape is clearly not 1
      (likelihood-ratio test at 1%), M's interval (and so the optimum's band) is stretched by
      the fit's coefficient of variation (:func:`rules.estimates.widen_mtbf_ci`). M itself stays
      ``E / n``, which estimates the mean life of any renewal process without leaning on the
      fitted tail, and Daly's formula is kept: the best fixed interval of a renewal process
      depends on the lives' mean far more than on their shape (``ckpt-advisor simulate
      --shape 0.7 --sweep`` finds it within Monte Carlo noise of Daly's).

    The excess waste is ``(W(current) − W(recommended)) × gpus × 24`` GPU-hours per day, times
    ``price_per_gpu_hour`` for money, when those are given.

    ``clock_findings`` (what the parsers found about the files' clocks: steps back, bar clocks
    ignored, files without stamps) become notes naming file and line
    (:func:`rules.sources.clock_notes`); a missing current interval or C is then put down to
    the files without stamps, its real cause.

    Args:
        job: the job's name.
        observations: the job's observations, any order, any kinds (see :class:`Observation`),
            or a :class:`Timeline` of them already built (:meth:`Timeline.from_columns`).
        now_s: epoch seconds of this computation (stored as ``computed_at_s`` only).
        cost_window_saves: recent saves used for C and the current interval, >= 1.
        mtbf_window_s: seconds of history used for M, step time and R, > 0.
        idle_gap_s: silence after which the job is taken to have stopped, seconds, > 0.
        burst_gap_s: failures this close always form one interruption, seconds, >= 0.
        silent_gap_s: failures this close with no progress between form one interruption.
        confidence: level of every confidence interval, in (0, 1).
        min_saves: saves needed to judge, >= 0.
        min_failures: interruptions needed behind M to judge, >= 0.
        drift_ratio_limit: the drift threshold on current/recommended, > 1.
        min_weibull_failures: failures needed for a Weibull fit, >= 2.
        units: the job's size in nodes (or GPUs) for the per-unit rate, >= 1, or None.
        fleet: per-unit running time and failures of the job's fleet, or None.
        gpus: the job's GPU count, for GPU-hours, >= 1, or None.
        price_per_gpu_hour: money per GPU-hour, >= 0, or None.
        min_excess_gpu_hours_per_day: see :func:`rules.drift.off_optimum`, >= 0.
        high_cost_ratio: C/M above which the estimate notes that checkpointing barely helps, > 0.
        clock_findings: the parsers' findings about the job's log files, any order.

    Returns:
        The estimate; unknown numbers are None.

    Raises:
        ValueError: a setting is out of range, or an observation time is not finite.
    """
    require_count("min_saves", min_saves)
    require_count("min_failures", min_failures)
    require_positive("mtbf_window_s", mtbf_window_s)
    require_probability("confidence", confidence)
    if require_positive("drift_ratio_limit", drift_ratio_limit) <= 1.0:
        raise ValueError(f"drift_ratio_limit must be > 1, got {drift_ratio_limit!r}")

    def runs(timeline: Timeline) -> tuple[list[Interruption], IntArray, IntArray]:
        interruptions = cluster_interruptions(
            timeline, gap_s=burst_gap_s, silent_gap_s=silent_gap_s
        )
        run_id = split_runs(timeline, interruptions, idle_gap_s=idle_gap_s)
        return interruptions, run_id, save_index(timeline, run_id)

    base = observations if isinstance(observations, Timeline) else Timeline.of(observations)
    timeline, n_unseen = base.with_unseen_interruptions()
    newest_s = timeline.newest_s
    since_s = -float("inf") if newest_s is None else newest_s - mtbf_window_s
    interruptions, run_id, saves = runs(timeline)
    cost = estimate_checkpoint_cost(
        *checkpoint_durations_s(timeline, run_id),
        logged_upper_s=checkpoint_upper_bounds_s(timeline, run_id),
        window=cost_window_saves,
        confidence=confidence,
    )
    cost_s = None if cost is None else cost.cost_s
    step_s = step_time_s(timeline, run_id, saves, cost_s=cost_s, since_s=since_s)
    n_moved = n_clamped = 0
    if step_s is not None and interruptions:
        moved_s, n_clamped = redated_failures(timeline, interruptions, step_time_s=step_s)
        shifted_s = moved_s - timeline.time_s[timeline.failure_index]
        n_moved = int(np.count_nonzero(shifted_s > MATERIAL_SHIFT_S))
        timeline = timeline.with_failure_times(moved_s)
        interruptions, run_id, saves = runs(timeline)
    recent = [i for i in interruptions if i.start_s >= since_s]
    counted = [i for i in recent if not i.planned]
    exposure = exposure_s(timeline, run_id, since_s=since_s)
    own = estimate_mtbf(exposure, len(counted), confidence=confidence)
    mtbf = own
    mtbf_source: str | None = "exponential"
    gaps_s, tail_s = lives_s(timeline, run_id, counted, since_s=since_s)
    weibull = fit_weibull(gaps_s, tail_s, confidence=confidence, min_failures=min_weibull_failures)
    if units is not None and fleet is not None and own.n_failures < min_failures:
        pooled = estimate_mtbf(
            exposure * units + fleet.unit_exposure_s,
            own.n_failures + fleet.n_failures,
            confidence=confidence,
        )
        mtbf, mtbf_source = scale_mtbf(pooled, 1.0 / units), "fleet"
    elif weibull is not None and weibull.not_exponential:
        mtbf, mtbf_source = widen_mtbf_ci(own, weibull.cv), "weibull"
    if mtbf.mtbf_s is None:
        mtbf_source = None
    current_s = current_interval_s(timeline, run_id, saves, window=cost_window_saves, cost_s=cost_s)
    restart_s = restart_cost_s(timeline, counted)

    young_s = daly_s = ci_s = waste_current = waste_recommended = ratio = None
    excess_gpu_h = excess_money = excess_gpu_h_range = None
    range_s = interval_range_s(mtbf, cost)
    band_s = ci_s
    if cost_s is not None and mtbf.mtbf_s is not None:
        young_s = young_interval_s(mtbf.mtbf_s, cost_s)
        daly_s = daly_interval_s(mtbf.mtbf_s, cost_s)
        ci_s = band_s = _daly_ci_s(mtbf, cost)
        if cost is not None and cost.is_lower_bound and range_s is not None:
            band_s = (range_s[0], float("inf") if range_s[1] is None else range_s[1])
        waste_recommended = exponential_waste_fraction(
            daly_s, mtbf.mtbf_s, cost_s, restart_s or 0.0
        )
        if current_s is not None:
            waste_current = exponential_waste_fraction(
                current_s, mtbf.mtbf_s, cost_s, restart_s or 0.0
            )
            ratio = current_s / daly_s
            if gpus is not None:
                excess_gpu_h = excess_gpu_hours_per_day(waste_current, waste_recommended, gpus)
                if price_per_gpu_hour is not None:
                    excess_money = excess_gpu_h * price_per_gpu_hour
                spacing_s = current_interval_s(timeline, run_id, saves, window=cost_window_saves)
                if cost is not None and spacing_s is not None:
                    excess_gpu_h_range = excess_range(
                        mtbf.mtbf_s, cost, spacing_s, restart_s or 0.0, gpus
                    )
    n_checkpoints = int(saves.size)
    if ratio is None or n_checkpoints < min_saves or mtbf.n_failures < min_failures:
        status = Status.INSUFFICIENT_DATA
    elif off_optimum(
        ratio,
        ratio_limit=drift_ratio_limit,
        current_s=current_s,
        band_s=band_s,
        excess_gpu_hours_per_day=excess_gpu_h,
        min_excess_gpu_hours_per_day=min_excess_gpu_hours_per_day,
    ):
        status = Status.DRIFT
    else:
        status = Status.OK
    persist_s = persist_latency_s(timeline, window=cost_window_saves)
    by_class = mtbf_by_class(
        exposure, dict(Counter(i.failure_class for i in counted)), confidence=confidence
    )
    steps_now = current_interval_steps(timeline, run_id, saves)
    if steps_now is None and current_s is not None and step_s is not None:
        steps_now = interval_steps(current_s, step_s)
    return JobEstimate(
        job=job,
        computed_at_s=now_s,
        checkpoint_cost_s=cost_s,
        checkpoint_cost_ci_s=None if cost is None else cost.ci_s,
        checkpoint_cost_source=None if cost is None else cost.source,
        n_checkpoints=n_checkpoints,
        mtbf_s=mtbf.mtbf_s,
        mtbf_ci_s=mtbf.ci_s,
        n_failures=own.n_failures,
        exposure_s=exposure,
        restart_cost_s=restart_s,
        current_interval_s=current_s,
        young_interval_s=young_s,
        daly_interval_s=daly_s,
        recommended_interval_s=daly_s,
        recommended_interval_ci_s=ci_s,
        step_time_s=step_s,
        current_interval_steps=steps_now,
        recommended_interval_steps=(
            None if daly_s is None or step_s is None else interval_steps(daly_s, step_s)
        ),
        waste_fraction_current=waste_current,
        waste_fraction_recommended=waste_recommended,
        drift_ratio=ratio,
        status=status,
        newest_event_s=newest_s,
        failure_classes=dict(Counter(i.failure_class for i in counted)),
        notes=_notes(
            cost,
            own,
            recent,
            current_s,
            step_s,
            n_moved,
            mtbf_window_s,
            min_failures,
            untimed_sources(clock_findings),
        )
        + clock_notes(clock_findings)
        + _inferred_notes(n_clamped, n_unseen)
        + _more_notes(cost, persist_s, current_s, weibull, mtbf_source, fleet, units)
        + _cost_notes(cost_s, mtbf.mtbf_s, waste_recommended, high_cost_ratio),
        checkpoint_cost_previous_s=None if cost is None else cost.previous_cost_s,
        persist_latency_s=persist_s,
        mtbf_source=mtbf_source,
        mtbf_n_failures=mtbf.n_failures,
        mtbf_by_class_s={name: m.mtbf_s for name, m in by_class.items()},
        mtbf_by_class_ci_s={name: m.ci_s for name, m in by_class.items()},
        weibull_shape=None if weibull is None else weibull.shape,
        weibull_shape_ci=None if weibull is None else weibull.shape_ci,
        units=units,
        mtbf_per_unit_s=(None if units is None or mtbf.mtbf_s is None else mtbf.mtbf_s * units),
        gpus=gpus,
        excess_gpu_hours_per_day=excess_gpu_h,
        excess_cost_per_day=excess_money,
        lives_s=tuple(float(g) for g in gaps_s),
        lives_tail_s=tail_s,
        checkpoint_cost_is_lower_bound=cost is not None and cost.is_lower_bound,
        checkpoint_cost_range_s=None if cost is None else cost.range_s,
        recommended_interval_range_s=range_s if daly_s is not None else None,
        excess_gpu_hours_per_day_range=excess_gpu_h_range,
        interruptions=tuple(interruptions),
    )


def _more_notes(
    cost: CheckpointCost | None,
    persist_s: float | None,
    current_s: float | None,
    weibull: WeibullFit | None,
    mtbf_source: str | None,
    fleet: FleetRate | None,
    units: int | None,
) -> tuple[str, ...]:
    """Caveats about a changed C, slow asynchronous persists and where M comes from."""
    notes: list[str] = []
    if cost is not None and cost.previous_cost_s is not None:
        notes.append(
            f"checkpoint cost changed from {_duration(cost.previous_cost_s)} to "
            f"{_duration(cost.cost_s)} over the last {cost.n} saves: C uses those only"
        )
    if persist_s is not None and current_s is not None and persist_s > current_s:
        notes.append(
            f"asynchronous saves take {_duration(persist_s)} to persist, longer than the "
            f"{_duration(current_s)} interval: saves queue up, and a failure can lose more than "
            "one interval"
        )
    if weibull is not None and weibull.not_exponential:
        low, high = weibull.shape_ci
        trend, change = (
            ("cluster soon after restarts", "widened")
            if weibull.shape < 1
            else ("grow with running time", "narrowed")
        )
        notes.append(
            f"times between failures fit a Weibull of shape {weibull.shape:.2f} "
            f"({low:.2f}–{high:.2f}): failures {trend}; M's interval is {change} to match"
        )
    if mtbf_source == "fleet" and fleet is not None and units is not None:
        notes.append(
            f"too few failures of its own: M is the fleet's per-unit rate "
            f"({fleet.n_failures} failures in {_duration(fleet.unit_exposure_s)} of unit time) "
            f"for {units} units"
        )
    return tuple(notes)


def _inferred_notes(n_clamped: int, n_unseen: int) -> tuple[str, ...]:
    """Caveats about failures the timeline had to infer: times clamped, runs killed silently."""
    notes: list[str] = []
    if n_clamped:
        notes.append(
            f"{n_clamped} failure time(s) that the run's steps would put after the next line "
            "of the log were clamped to that line: the step time, or the step a failure line "
            "reports, is off for them"
        )
    if n_unseen:
        notes.append(
            f"{n_unseen} run(s) stopped with no failure line and no clean end before a new run "
            "started (a kill or a lost node prints nothing): counted as interruptions of "
            "unknown cause"
        )
    return tuple(notes)


def _cost_notes(
    cost_s: float | None, mtbf_s: float | None, waste_recommended: float | None, ratio: float
) -> tuple[str, ...]:
    if cost_s is None or mtbf_s is None or waste_recommended is None:
        return ()
    warning = high_cost_warning(cost_s, mtbf_s, waste_recommended, ratio=ratio)
    return () if warning is None else (warning,)


def _daly_ci_s(mtbf: MtbfEstimate, cost: CheckpointCost | None) -> tuple[float, float] | None:
    """Daly's interval over the corners of the M and C confidence intervals (C's point value
    stands in for its interval when that is unknown)."""
    if mtbf.ci_s is None or cost is None:
        return None
    costs_s = cost.ci_s or (cost.cost_s, cost.cost_s)
    corners = [daly_interval_s(m, c) for m, c in itertools.product(mtbf.ci_s, costs_s)]
    return min(corners), max(corners)


def _notes(
    cost: CheckpointCost | None,
    mtbf: MtbfEstimate,
    recent: list[Interruption],
    current_s: float | None,
    step_s: float | None,
    n_moved: int,
    mtbf_window_s: float,
    min_failures: int,
    untimed: Sequence[str] = (),
) -> tuple[str, ...]:
    """Human-readable caveats about the estimate, most important first; ``untimed``: the log
    files that print no timestamps (the cause of a C or an interval that cannot be measured)."""
    notes: list[str] = []
    window = _duration(mtbf_window_s)
    cause = f"{len(untimed)} log file(s) print no timestamps" if untimed else ""
    if cost is None:
        notes.append(
            f"no checkpoint duration seen{': ' + cause if cause else ''}; C is unknown (a "
            "timing file gives it exactly)"
        )
    elif cost.source == "log":
        notes.append(
            "C from log lines is a lower bound: logs may not mark the end of every part of a "
            "save (HF Trainer logs no end of the optimizer-state write); a timing file is exact"
        )
    if mtbf.n_failures == 0 and mtbf.lower_s is not None:
        notes.append(
            f"no failure in {_duration(mtbf.exposure_s)} of running time (last {window}): "
            f"M is at least {_duration(mtbf.lower_s)}"
        )
    elif 0 < mtbf.n_failures < min_failures:
        notes.append(f"only {mtbf.n_failures} interruption(s) in the last {window}: M is rough")
    planned = Counter(i.failure_class for i in recent if i.planned)
    if planned:
        listed = ", ".join(f"{name}: {count}" for name, count in sorted(planned.items()))
        notes.append(f"planned ends ({listed}) censor the running time; they are not failures")
    preempted = sum(count for name, count in planned.items() if "preempt" in name)
    if preempted and cost is not None and mtbf.exposure_s > 0:
        combined_s = mtbf.exposure_s / (mtbf.n_failures + preempted)
        notes.append(
            f"{preempted} preemption(s) also lose the work since the last checkpoint; counting "
            f"them as failures, M would be {_duration(combined_s)} and the interval "
            f"{_duration(daly_interval_s(combined_s, cost.cost_s))}"
        )
    if n_moved:
        notes.append(
            f"{n_moved} failure line(s) carried an earlier line's time; their time was inferred "
            "from the steps the run had reached"
        )
    if current_s is None and untimed:
        notes.append(f"no two saves at different times: {cause}; the current interval is unknown")
    elif current_s is None:
        notes.append("no run with two saves: the current interval is unknown")
    if step_s is None:
        notes.append("no step timing: the interval cannot be given in steps")
    return tuple(notes)


def _duration(seconds: float) -> str:
    """A short human duration: ``45 s``, ``12.5 min``, ``3.2 h``, ``30 d``."""
    for unit_s, unit in ((DAY_S, "d"), (3600.0, "h"), (60.0, "min")):
        if seconds >= unit_s:
            return f"{seconds / unit_s:.3g} {unit}"
    return f"{seconds:.3g} s"
