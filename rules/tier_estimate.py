"""C and M per tier, and the pair of intervals, for a job that saves to two tiers.

A job whose timing records name a fast tier (``memory`` or ``local``) and the ``persistent``
one is estimated twice over (:func:`rules.job.estimate_job`): its single-tier numbers (C, the
current and recommended interval, the drift verdict) come from its persistent saves alone,
the baseline of a job without the fast tier; and :func:`estimate_tiers` adds:

* C per tier: the median of each tier's recent blocking durations, with its interval
  (:func:`rules.cost.estimate_checkpoint_cost` over that tier's saves:
  :class:`rules.saves.TimedSaves`);
* M per tier: the counted interruptions split by whether a copy in the fast tier survives their
  class (:func:`rules.tiers.tier_rates`, the survival table of ``rules/tiers.py`` or the job's
  overrides), over the same running time;
* the current pair: ``k`` the saves per persistent save (the median spacing of persistent
  saves over that of all saves, rounded) and ``T1`` the compute between saves, from one
  pattern (``(spacing of persistent saves − C2 − (k − 1)·C1) / k``), ``T2 = k·T1``;
* the recommended pair: :func:`rules.two_level.optimal_plan` (the exact renewal model of
  ``rules/two_level.py``, after Benoit et al. 2017 and Di et al. 2017), and the waste of the
  current pair in the same model.

The pair is left out (None) when an MTBF is unknown (no interruption of that kind yet: with no
failure that needs the persistent copy the model would never persist, which is not advice) or
when the fast save costs no less than the persistent one (the fast tier saves nothing).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from ckpt_advisor.rules.cost import estimate_checkpoint_cost
from ckpt_advisor.rules.model import JobEstimate, Note, NoteCode
from ckpt_advisor.rules.policy import EstimationPolicy
from ckpt_advisor.rules.progress import current_interval_s
from ckpt_advisor.rules.saves import TimedSaves
from ckpt_advisor.rules.tiers import DEFAULT_SURVIVAL, Survival, Tier, tier_rates
from ckpt_advisor.rules.timeline import TIER_CODES, BoolArray, IntArray, Kind, Timeline
from ckpt_advisor.rules.two_level import TwoTierJob, optimal_plan, two_tier_waste_fraction

PERSISTENT_CODE = TIER_CODES["persistent"]
FAST_TIERS = ("memory", "local")


@dataclass(frozen=True, slots=True)
class TierEstimate:
    """A two-tier job's costs, MTBFs and intervals per tier (seconds; None when unknown).

    Attributes:
        fast_tier: ``memory`` or ``local``: the tier of the job's fast saves.
        fast_cost_s, fast_cost_ci_s, n_fast_saves: C1, its interval, the fast saves behind it.
        persistent_cost_s, persistent_cost_ci_s, n_persistent_saves: the same for C2.
        mtbf_recoverable_s, mtbf_recoverable_ci_s, n_recoverable: M1, over the interruptions a
            fast copy survives, and how many there were.
        mtbf_persistent_s, mtbf_persistent_ci_s, n_unrecoverable: M2, over the others.
        current_fast_interval_s, current_saves_per_persistent: the job's T1 and k now.
        fast_interval_s, saves_per_persistent: the recommended T1 and k (T2 = k·T1).
        fast_interval_steps, persistent_interval_steps: the recommended T1 in steps, and k
            times that.
        waste_fraction_current, waste_fraction_recommended: the exact model's waste of the
            current and of the recommended pair.
    """

    fast_tier: str
    fast_cost_s: float | None
    fast_cost_ci_s: tuple[float, float] | None
    n_fast_saves: int
    persistent_cost_s: float | None
    persistent_cost_ci_s: tuple[float, float] | None
    n_persistent_saves: int
    mtbf_recoverable_s: float | None
    mtbf_recoverable_ci_s: tuple[float, float] | None
    n_recoverable: int
    mtbf_persistent_s: float | None
    mtbf_persistent_ci_s: tuple[float, float] | None
    n_unrecoverable: int
    current_fast_interval_s: float | None = None
    current_saves_per_persistent: int | None = None
    fast_interval_s: float | None = None
    saves_per_persistent: int | None = None
    fast_interval_steps: int | None = None
    persistent_interval_steps: int | None = None
    waste_fraction_current: float | None = None
    waste_fraction_recommended: float | None = None

    @property
    def current_persistent_interval_s(self) -> float | None:
        """The job's T2 now: ``k·T1``."""
        if self.current_fast_interval_s is None or self.current_saves_per_persistent is None:
            return None
        return self.current_fast_interval_s * self.current_saves_per_persistent

    @property
    def persistent_interval_s(self) -> float | None:
        """The recommended T2: ``k·T1``."""
        if self.fast_interval_s is None or self.saves_per_persistent is None:
            return None
        return self.fast_interval_s * self.saves_per_persistent


def fast_save_rows(timeline: Timeline) -> tuple[Tier | None, BoolArray]:
    """The fast tier of a job whose saves name both a fast tier and the persistent one (the more
    frequent of memory and local), and which observations are its saves (shape (n,)); None and
    no rows for a single-tier job."""
    saving = timeline.is_kind(Kind.CHECKPOINT_START, Kind.CHECKPOINT_END)
    codes = np.where(saving, timeline.tier, -1)
    none = np.zeros(len(timeline), np.bool_)
    if not (codes == PERSISTENT_CODE).any():
        return None, none
    count, name = max((int(np.count_nonzero(codes == TIER_CODES[t])), t) for t in FAST_TIERS)
    if not count:
        return None, none
    return Tier(name), codes == TIER_CODES[name]


def estimate_tiers(
    timeline: Timeline,
    run_id: IntArray,
    saves: IntArray,
    *,
    fast_tier: Tier,
    failure_classes: Mapping[str, int],
    exposure_s: float,
    restart_s: float | None,
    step_time_s: float | None,
    window: int,
    confidence: float,
    table: Mapping[str, Survival] = DEFAULT_SURVIVAL,
) -> TierEstimate:
    """C and M per tier and the current and recommended pair (module docstring).

    Args:
        timeline: the job's observations, saves of both tiers included.
        run_id: shape (n,), from :func:`rules.runs.split_runs` on ``timeline``.
        saves: the saves that measure the interval now (:func:`rules.progress.save_index`,
            then :func:`rules.progress.saves_since_change`).
        fast_tier: from :func:`fast_save_rows`.
        failure_classes: counted (unplanned) interruptions per class, in the MTBF window.
        exposure_s: the running time they happened in, seconds.
        restart_s: R, seconds, or None (taken as 0 for both tiers).
        step_time_s: seconds per step, or None (no intervals in steps).
        window: saves per median (``cost_window_saves``).
        confidence: of every interval.
        table: the survival table.

    Returns:
        The estimate; its pair fields None when the module docstring says so.
    """
    code = timeline.tier[saves]
    fast_saves = saves[code == TIER_CODES[fast_tier]]
    persistent_saves = saves[code == PERSISTENT_CODE]
    grouped = TimedSaves.of(timeline, run_id)

    def cost(of: IntArray) -> tuple[float | None, tuple[float, float] | None, int]:
        durations = grouped.blocking_s[np.isin(grouped.index, of)]
        found = estimate_checkpoint_cost(durations, [], window=window, confidence=confidence)
        return (None, None, 0) if found is None else (found.cost_s, found.ci_s, found.n)

    c1, c1_ci, n1 = cost(fast_saves)
    c2, c2_ci, n2 = cost(persistent_saves)
    rates = tier_rates(
        failure_classes, exposure_s, fast_tier=fast_tier, table=table, confidence=confidence
    )
    m1, m2 = rates.recoverable, rates.persistent
    out = TierEstimate(
        str(fast_tier), c1, c1_ci, n1, c2, c2_ci, n2,
        m1.mtbf_s, m1.ci_s, m1.n_failures, m2.mtbf_s, m2.ci_s, m2.n_failures,
    )  # fmt: skip
    if c1 is None or c2 is None:
        return out
    t1_now = current_interval_s(timeline, run_id, saves, window=window, cost_s=c1)
    # a step's fast and persistent saves are two saves, but one place in the pattern
    steps, runs = timeline.step[saves], run_id[saves]
    moved = np.concatenate(([True], (steps[1:] != steps[:-1]) | (runs[1:] != runs[:-1])))
    all_spacing = current_interval_s(timeline, run_id, saves[moved], window=window)
    persistent_spacing = current_interval_s(timeline, run_id, persistent_saves, window=window)
    k_now = None
    if all_spacing and persistent_spacing:
        k_now = max(1, round(persistent_spacing / all_spacing))
        # one pattern: k·T1 of compute, k − 1 fast saves and one persistent save
        pattern_t1 = (persistent_spacing - c2 - (k_now - 1) * c1) / k_now
        t1_now = pattern_t1 if pattern_t1 > 0 else t1_now
    if m1.mtbf_s is None or m2.mtbf_s is None or c2 <= c1:
        return replace(out, current_fast_interval_s=t1_now, current_saves_per_persistent=k_now)
    r = restart_s or 0.0
    job = TwoTierJob(c1, c2, m1.mtbf_s, m2.mtbf_s, r, r)
    plan = optimal_plan(job)
    waste_now = None
    if t1_now is not None and k_now is not None:
        waste_now = two_tier_waste_fraction(job, t1_now, k_now)
    fast_steps = None if step_time_s is None else max(1, round(plan.fast_interval_s / step_time_s))
    return replace(
        out,
        current_fast_interval_s=t1_now,
        current_saves_per_persistent=k_now,
        fast_interval_s=plan.fast_interval_s,
        saves_per_persistent=plan.saves_per_persistent,
        fast_interval_steps=fast_steps,
        persistent_interval_steps=None
        if fast_steps is None
        else fast_steps * plan.saves_per_persistent,
        waste_fraction_current=waste_now,
        waste_fraction_recommended=plan.waste_fraction,
    )


def judged_by_pair(est: JobEstimate, policy: EstimationPolicy) -> JobEstimate:
    """A two-tier job's estimate with its single interval read as the persistent one (T2).

    Persistent-only advice (Daly over C2 and the whole M) would tell a job with a fast tier to
    persist far more often than it should. So when the pair is known, the estimate's current
    and recommended interval are T2 (``k·T1``), the waste fractions and the excess GPU-hours
    the two-level model's, the ratio the pair's interval farther from 1 (of T1 and T2), judged
    by :meth:`EstimationPolicy.judge` as any interval is; the single-tier confidence band and
    range, which rest on the persistent-only model, are dropped, and so is the setting in the
    job's own units (one setting cannot say both intervals). A ``two_tiers`` note says so (or
    that no pair is advised yet). Else ``est`` unchanged.
    """
    tiers = est.tiers
    if tiers is None:
        return est
    fast = {tiers.fast_tier: tiers.n_fast_saves}
    if tiers.persistent_interval_s is None or tiers.fast_interval_s is None:
        return replace(est, notes=(*est.notes, Note(NoteCode.TWO_TIERS, by_name=fast)))
    pair = {"fast_interval_s": tiers.fast_interval_s}
    pair["saves_per_persistent"] = float(tiers.saves_per_persistent or 1)
    note = Note(NoteCode.TWO_TIERS, pair, fast)
    now_fast, now_persistent = tiers.current_fast_interval_s, tiers.current_persistent_interval_s
    ratio = excess = None
    if now_fast is not None and now_persistent is not None:
        ratios = (now_fast / tiers.fast_interval_s, now_persistent / tiers.persistent_interval_s)
        ratio = max(ratios, key=lambda r: abs(math.log(r)))
    if est.gpus is not None and tiers.waste_fraction_current is not None:
        assert tiers.waste_fraction_recommended is not None
        excess = (tiers.waste_fraction_current - tiers.waste_fraction_recommended) * est.gpus * 24
    verdict = policy.judge(
        ratio=ratio,
        n_saves=est.n_checkpoints,
        n_failures=est.n_failures,
        cost_s=est.checkpoint_cost_s,
        mtbf_s=est.mtbf_s,
        current_s=now_persistent,
        excess_gpu_hours_per_day=excess,
    )
    return replace(
        est,
        current_interval_s=now_persistent,
        current_interval_is_upper_bound=False,  # the timing records' pattern, not a log's C
        recommended_interval_s=tiers.persistent_interval_s,
        recommended_interval_steps=tiers.persistent_interval_steps,
        recommended_interval_ci_s=None,
        recommended_interval_range_s=None,
        waste_fraction_current=tiers.waste_fraction_current,
        waste_fraction_recommended=tiers.waste_fraction_recommended,
        drift_ratio=ratio,
        excess_gpu_hours_per_day=excess,
        excess_cost_per_day=None
        if excess is None or policy.price_per_gpu_hour is None
        else excess * policy.price_per_gpu_hour,
        excess_gpu_hours_per_day_range=None,
        recommended_setting=None,
        recommended_interval_steps_range=None,
        status=verdict.status,
        reason=verdict.reason,
        notes=(*est.notes, note),
    )
