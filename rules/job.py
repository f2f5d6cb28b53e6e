"""One job's estimate: C, M, R, the current and recommended intervals, waste and status."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from ckpt_advisor.rules.advice import interval_steps, setting_for
from ckpt_advisor.rules.bounds import daly_ci_s, excess_range, interval_range_s, steps_range
from ckpt_advisor.rules.cost import persist_latency_s
from ckpt_advisor.rules.goodput_spans import goodput_spans
from ckpt_advisor.rules.interruptions import placed_interruptions
from ckpt_advisor.rules.interval import (
    daly_interval_s,
    excess_gpu_hours_per_day,
    exponential_waste_fraction,
    young_interval_s,
)
from ckpt_advisor.rules.job_runs import clustered_runs, job_runs
from ckpt_advisor.rules.model import ClockFinding, JobEstimate, Observation
from ckpt_advisor.rules.mtbf import (
    estimate_mtbf,
    fit_weibull,
    mtbf_by_class,
    scale_mtbf,
    widen_mtbf_ci,
)
from ckpt_advisor.rules.notes import (
    cost_notes,
    evidence_notes,
    inferred_notes,
    model_notes,
    timing_notes,
)
from ckpt_advisor.rules.policy import DEFAULT_POLICY, NO_FACTS, EstimationPolicy, JobFacts
from ckpt_advisor.rules.progress import (
    current_interval_s,
    current_interval_steps,
    every_save_index,
    interval_steps_across_runs,
    restart_cost_s,
    saves_since_change,
)
from ckpt_advisor.rules.runs import exposure_s, lives_s, measured_runs, stepped_exposure_s
from ckpt_advisor.rules.simulate import simulated_goodput
from ckpt_advisor.rules.sources import (
    clock_notes,
    host_dated_notes,
    untimed_sources,
)
from ckpt_advisor.rules.tier_estimate import estimate_tiers, judged_by_pair
from ckpt_advisor.rules.timeline import Timeline


def estimate_job(
    job: str,
    observations: Iterable[Observation] | Timeline,
    *,
    now_s: float,
    policy: EstimationPolicy = DEFAULT_POLICY,
    facts: JobFacts = NO_FACTS,
    clock_findings: Sequence[ClockFinding] = (),
) -> JobEstimate:
    """Estimate everything about one job's checkpointing from its observations.

    Windows are measured back from the job's newest observation (the newest not host-dated,
    when there is one: a host's date is no time of the log's), not from ``now_s``, so a
    backfill of old logs gives the estimate a live run would have given: C is the median of the
    last ``policy.cost_window_saves`` save durations; M counts the unplanned interruptions that
    began, and the exposure run, within ``policy.mtbf_window_s`` before the newest observation.
    The recommendation is Daly's interval (FGCS 22(3), 2006, eq. 37); its confidence interval is
    Daly evaluated at the corners of the M and C confidence intervals. The current interval is
    the compute time between saves (the measured spacing minus C, as Daly's T;
    :func:`rules.progress.current_interval_s`), over the saves since the job's last logged
    interval change (an adopted advice: :func:`rules.progress.saves_since_change`), or the
    interval that change declared until two saves measure it. Waste fractions and the excess
    GPU-hours use Daly's exponential model (:func:`rules.interval.exponential_waste_fraction`)
    with R included when known; it never exceeds 1. When C/M exceeds ``policy.high_cost_ratio``
    a note says that the job mostly writes checkpoints.

    Failure lines often carry no time of their own and arrive stamped with the last stamped
    line's time; once the step time is known, each interruption is moved to where its steps say
    the run had got (:func:`rules.progress.redated_failures`), so exposure and R are not cut
    short. A run that stopped with no failure line and no clean end before a new run started
    counts as an interruption of class ``unknown``
    (:meth:`rules.timeline.Timeline.with_unseen_interruptions`). ``n_checkpoints`` counts the
    job's saves (each once, see :func:`rules.progress.save_index`), whether or not their
    duration is known; the verdict counts only those not host-dated.

    No span with an end at a host-dated observation (:attr:`Timeline.host_dated`: a log that
    printed no time, dated at the read time live or its mtime in a backfill) is measured: C,
    the current interval, the step time from spans, R, the exposure, the lives and the goodput
    spans are measured between the other observations, within the runs the whole timeline
    splits. Interruptions in such files still count in M, and their runs' running time is
    their steps times the rate the file printed (:func:`rules.runs.stepped_exposure_s`); a note
    says so (:func:`rules.sources.host_dated_notes`). The status is
    :meth:`EstimationPolicy.judge`'s verdict (the one place drift is judged).

    M is the exponential MLE (:func:`rules.mtbf.estimate_mtbf`) unless one of these holds:

    - with ``facts.units`` (the job's nodes, or GPUs) and a ``facts.fleet`` rate, and fewer than
      ``policy.min_failures`` failures of its own, M is the pooled per-unit MTBF of the job and
      the fleet divided by ``units`` (:func:`rules.mtbf.scale_mtbf`): a new job starts from
      its fleet's rate;
    - with at least ``policy.min_weibull_failures`` failures, the running time between them is
      fitted with a Weibull (:func:`rules.mtbf.fit_weibull`); when its shape is clearly not
      1 (likelihood-ratio test at 1%), M's interval (and so the optimum's band) is stretched by
      the fit's coefficient of variation (:func:`rules.mtbf.widen_mtbf_ci`). M itself stays
      ``E / n``, which estimates the mean life of any renewal process without leaning on the
      fitted tail, and Daly's formula is kept: the best fixed interval of a renewal process
      depends on the lives' mean far more than on their shape (``ckpt-advisor simulate
      --shape 0.7 --sweep`` finds it within Monte Carlo noise of Daly's).

    The excess waste is ``(W(current) − W(recommended)) × gpus × 24`` GPU-hours per day, times
    ``policy.price_per_gpu_hour`` for money, when ``facts.gpus`` (and the price) are given. With
    ``facts.stack`` the recommendation is also given as the job's own setting
    (:func:`rules.advice.setting_for`).

    ``clock_findings`` (what the parsers found about the files' clocks: steps back, bar clocks
    ignored, files without stamps) become notes naming file and line
    (:func:`rules.sources.clock_notes`); a missing current interval or C is then put down to
    the files without stamps, its real cause. When C from log lines is only a lower bound, the
    drift verdict judges the current interval against Daly's interval over the plausible C
    (:func:`rules.bounds.interval_range_s`), not the narrower band of C's point value.

    Args:
        job: the job's name.
        observations: the job's observations, any order, any kinds (see :class:`Observation`),
            or a :class:`Timeline` of them already built (:meth:`Timeline.from_columns`).
        now_s: epoch seconds of this computation (stored as ``computed_at_s`` only).
        policy: the windows, confidence and thresholds (validated when it was made).
        facts: the job's size, fleet rate and stack.
        clock_findings: the parsers' findings about the job's log files, any order.

    Returns:
        The estimate; unknown numbers are None.

    Raises:
        ValueError: an observation time is not finite.
    """
    gpus, units, fleet = facts.gpus, facts.units, facts.fleet
    window = policy.cost_window_saves
    confidence = policy.confidence

    split = job_runs(observations, policy=policy, stack=facts.stack, clock_findings=clock_findings)
    full, fast_tier, n_unseen = split.full, split.fast_tier, split.n_unseen
    timeline, newest_s, since_s = split.timeline, split.newest_s, split.since_s
    cost, step_s = split.cost, split.step_s
    interruptions, run_id, saves = split.interruptions, split.run_id, split.saves
    n_moved, n_clamped = split.n_moved, split.n_clamped
    cost_s = None if cost is None else cost.cost_s
    recent = [i for i in interruptions if i.start_s >= since_s]
    counted = [i for i in recent if not (i.planned or i.after_end)]
    classes = dict(Counter(i.failure_class for i in counted))
    # spans are measured between observations the host did not date: the runs stay as the
    # whole timeline splits them (a failure read live still ends its run)
    measured, run_measured = timeline.measured, measured_runs(timeline, run_id)
    placed_all = placed_interruptions(
        timeline, interruptions, gap_s=policy.burst_gap_s, silent_gap_s=policy.silent_gap_s
    )
    placed = [i for i in placed_all if i.start_s >= since_s and not (i.planned or i.after_end)]
    stepped_s, n_stepped = stepped_exposure_s(timeline, run_id, since_s=since_s)
    exposure = exposure_s(measured, run_measured, since_s=since_s) + stepped_s
    # running time of files without stamps is steps x the printed step time at most, or not
    # measured: the exposure, and M with it, is then a lower bound (host_dated_notes says so)
    n_host_dated = sum(i.host_dated for i in counted)
    exposure_is_lower_bound = bool(n_host_dated or n_stepped)
    own = estimate_mtbf(exposure, len(counted), confidence=confidence)
    mtbf = own
    mtbf_source: str | None = "exponential"
    gaps_s, tail_s = lives_s(measured, run_measured, placed, since_s=since_s)
    weibull = fit_weibull(
        gaps_s, tail_s, confidence=confidence, min_failures=policy.min_weibull_failures
    )
    if units is not None and fleet is not None and own.n_failures < policy.min_failures:
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
    saves_now, declared_s = saves_since_change(timeline, run_id, saves)
    spacing_now_s = current_interval_s(timeline, run_id, saves_now, window=window)
    # saves that each stall training for C follow each other C apart at the least: a spacing
    # no longer than C (or than its lower bound) is no time the job spent; refused, not measured
    too_close = (
        (spacing_now_s, cost_s)
        if spacing_now_s is not None and cost_s is not None and spacing_now_s <= cost_s
        else None
    )
    current_s = (
        None
        if too_close is not None
        else current_interval_s(timeline, run_id, saves_now, window=window, cost_s=cost_s)
    )
    # the spacing less C: the more C, the less compute between saves, so at a lower-bound C
    # an upper bound (an interval declared or counted in steps below rests on no C)
    current_is_upper_bound = current_s is not None and cost is not None and cost.is_lower_bound
    across_steps = None  # no run timed two saves: the save steps times the step time
    if current_s is None and declared_s is None and step_s is not None:
        across_steps = interval_steps_across_runs(timeline, saves_now, window=window)
        declared_s = None if across_steps is None else across_steps * step_s
    if current_s is None:
        current_s = declared_s
    # R and the goodput split end each restart alike (rules/recovery.py), on the same spans and
    # every save, from either source (a timing file may miss some)
    every_save = every_save_index(measured, run_measured)
    restart_s = restart_cost_s(measured, placed, run_measured, every_save, step_time_s=step_s)

    young_s = daly_s = ci_s = waste_current = waste_recommended = ratio = None
    excess_gpu_h = excess_money = excess_gpu_h_range = None
    mtbf_is_lower_bound = exposure_is_lower_bound and mtbf.mtbf_s is not None
    range_s = interval_range_s(mtbf, cost)
    if mtbf_is_lower_bound and range_s is not None:
        range_s = (range_s[0], None)  # Daly's interval grows with M: open above
    band_s = ci_s
    if cost_s is not None and mtbf.mtbf_s is not None:
        young_s = young_interval_s(mtbf.mtbf_s, cost_s)
        daly_s = daly_interval_s(mtbf.mtbf_s, cost_s)
        ci_s = band_s = daly_ci_s(mtbf, cost)
        cost_is_lower_bound = cost is not None and cost.is_lower_bound
        if range_s is not None and (mtbf_is_lower_bound or cost_is_lower_bound):
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
                if policy.price_per_gpu_hour is not None:
                    excess_money = excess_gpu_h * policy.price_per_gpu_hour
                spacing_s = None if too_close is not None else spacing_now_s
                if spacing_s is None and declared_s is not None:
                    spacing_s = declared_s + cost_s
                if cost is not None and spacing_s is not None:
                    excess_gpu_h_range = excess_range(
                        mtbf.mtbf_s, cost, spacing_s, restart_s or 0.0, gpus
                    )
    goodput_now = goodput_best = None
    if daly_s is not None and mtbf.mtbf_s is not None and cost_s is not None:
        shape = weibull.shape if mtbf_source == "weibull" and weibull is not None else 1.0
        tried_s = [daly_s] if current_s is None else [daly_s, current_s]
        simulated = simulated_goodput(
            tried_s, mtbf_s=mtbf.mtbf_s, cost_s=cost_s, restart_s=restart_s or 0.0, shape=shape
        )
        goodput_best = simulated[0]
        goodput_now = simulated[1] if current_s is not None else None
    n_checkpoints = int(saves.size)
    verdict = policy.judge(
        ratio=ratio,
        n_saves=int(np.count_nonzero(~timeline.host_dated[saves])),  # the ones C can rest on
        n_failures=mtbf.n_failures,
        cost_s=cost_s,
        mtbf_s=mtbf.mtbf_s,
        current_s=current_s,
        band_s=band_s,
        excess_gpu_hours_per_day=excess_gpu_h,
    )
    persist_s = persist_latency_s(timeline, run_id, window=window)
    by_class = mtbf_by_class(exposure, classes, confidence=confidence)
    steps_now = current_interval_steps(timeline, run_id, saves_now)
    if steps_now is None and current_s is not None and step_s is not None:
        steps_now = interval_steps(current_s, step_s)
    recommended_steps = None if daly_s is None or step_s is None else interval_steps(daly_s, step_s)
    n_untimed = len(untimed_sources(clock_findings))
    tiers = None
    if fast_tier is not None:
        both, _ = full.with_unseen_interruptions()
        _, both_runs, both_saves = clustered_runs(both, policy)
        tiers = estimate_tiers(
            both,
            both_runs,
            saves_since_change(both, both_runs, both_saves)[0],
            fast_tier=fast_tier,
            failure_classes=classes,
            exposure_s=exposure,
            restart_s=restart_s,
            step_time_s=step_s,
            window=window,
            confidence=confidence,
            table=facts.survival,
        )
    return judged_by_pair(
        JobEstimate(
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
            recommended_interval_steps=recommended_steps,
            waste_fraction_current=waste_current,
            waste_fraction_recommended=waste_recommended,
            drift_ratio=ratio,
            status=verdict.status,
            reason=verdict.reason,
            newest_event_s=newest_s,
            failure_classes=classes,
            notes=evidence_notes(cost, own, recent, policy, n_untimed)
            + timing_notes(
                n_moved,
                current_s,
                step_s,
                n_untimed,
                across_steps,
                too_close,
            )
            + clock_notes(clock_findings)
            + split.repeated_hours.notes()
            + (() if split.zone_offset is None else (split.zone_offset.note(),))
            + inferred_notes(n_clamped, n_unseen)
            + host_dated_notes(n_host_dated, stepped_s, n_stepped, clock_findings)
            + model_notes(
                cost,
                persist_s,
                current_s,
                weibull,
                fleet if mtbf_source == "fleet" else None,
                units,
            )
            + cost_notes(cost_s, mtbf.mtbf_s, waste_recommended, policy),
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
            recommended_setting=(
                setting_for(facts.stack, recommended_steps)
                if facts.stack is not None and recommended_steps is not None
                else None
            ),
            checkpoint_cost_is_lower_bound=cost is not None and cost.is_lower_bound,
            mtbf_is_lower_bound=mtbf_is_lower_bound,
            checkpoint_cost_range_s=None if cost is None else cost.range_s,
            recommended_interval_range_s=range_s if daly_s is not None else None,
            excess_gpu_hours_per_day_range=excess_gpu_h_range,
            interruptions=tuple(interruptions),
            goodput_current=goodput_now,
            goodput_recommended=goodput_best,
            tiers=tiers,
            confidence=confidence,
            goodput_spans=goodput_spans(
                measured,
                placed_all,
                run_measured,
                every_save,
                step_time_s=step_s,
                save_bounds=split.save_bounds,
                stack=facts.stack,
            ),
            recommended_interval_steps_range=(
                None if daly_s is None or range_s is None else steps_range(range_s, step_s)
            ),
            current_interval_is_upper_bound=current_is_upper_bound,
        ),
        policy,
    )
