"""How estimates are made and judged (one policy), and what a job is (its facts).

A policy is a small frozen value in the style of tenacity's ``wait``/``stop`` objects: every
setting is checked once, in ``__post_init__``, in the units the math uses (seconds, counts,
fractions; the agent converts config text such as ``"30d"`` once, where it is read), and the
estimator (:func:`rules.job.estimate_job`) and the alerting (:func:`rules.drift.decide`) read
the same object. Whether an interval has drifted is judged in one place,
:meth:`EstimationPolicy.judge`; the alerting reads that verdict from the estimate.

:class:`JobFacts` holds what no policy decides: the job's size and its fleet's failure rate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from ckpt_advisor.rules._checks import (
    require_count,
    require_non_negative,
    require_positive,
    require_probability,
)
from ckpt_advisor.rules.interval import HIGH_COST_RATIO
from ckpt_advisor.rules.model import FleetRate, Reason, ReasonCode, Status, Verdict
from ckpt_advisor.rules.tiers import DEFAULT_SURVIVAL, Survival

DAY_S = 86400.0


@dataclass(frozen=True, slots=True)
class EstimationPolicy:
    """The estimation windows, confidence level and the drift rule's thresholds.

    Attributes:
        confidence: level of every confidence interval, in (0, 1).
        cost_window_saves: recent saves behind C and the current interval, >= 1.
        mtbf_window_s: seconds of history behind M, the step time and R, > 0.
        idle_gap_s: silence after which a run is taken to have stopped, seconds, > 0.
        burst_gap_s: failures this close always form one interruption, seconds, >= 0.
        silent_gap_s: failures this close with no progress between form one interruption,
            seconds, >= 0.
        min_saves: saves needed to judge, >= 0.
        min_failures: interruptions needed behind M to judge, >= 0.
        min_weibull_failures: interruptions needed before a Weibull fit is tried, >= 2.
        high_cost_ratio: C/M above which the estimate notes that checkpointing barely helps, > 0.
        drift_ratio: current/recommended outside ``[1/drift_ratio, drift_ratio]`` may be drift,
            > 1. The waste curve is flat (k× off costs ``(k + 1/k)/2`` of the optimal waste), so
            the default 1.5 means at least +8% waste.
        resolve_ratio: a drift episode ends back inside ``[1/resolve_ratio, resolve_ratio]``,
            > 1 and <= ``drift_ratio`` (hysteresis: no flapping near the threshold).
        repeat_after_s: an unchanged recommendation is repeated after this long, seconds, > 0.
        change_fraction: a recommendation that moved by more than this fraction is repeated
            early, > 0.
        min_excess_gpu_hours_per_day: GPU-hours a day the change must save (when the job's GPUs
            are known), >= 0; one (a few dollars) by default: below it nobody should spend the
            time to change a job's configuration.
        price_per_gpu_hour: money per GPU-hour for the excess in money, >= 0, or None.

    Raises:
        ValueError: a setting out of range, naming it (at construction).
    """

    confidence: float = 0.9
    cost_window_saves: int = 20
    mtbf_window_s: float = 30 * DAY_S
    idle_gap_s: float = 6 * 3600.0
    burst_gap_s: float = 60.0
    silent_gap_s: float = 1800.0
    min_saves: int = 3
    min_failures: int = 2
    min_weibull_failures: int = 10
    high_cost_ratio: float = HIGH_COST_RATIO
    drift_ratio: float = 1.5
    resolve_ratio: float = 1.3
    repeat_after_s: float = DAY_S
    change_fraction: float = 0.25
    min_excess_gpu_hours_per_day: float = 1.0
    price_per_gpu_hour: float | None = None

    def __post_init__(self) -> None:
        require_probability("confidence", self.confidence)
        require_count("cost_window_saves", self.cost_window_saves, minimum=1)
        for name in ("mtbf_window_s", "idle_gap_s", "high_cost_ratio", "repeat_after_s"):
            require_positive(name, getattr(self, name))
        for name in ("burst_gap_s", "silent_gap_s", "min_excess_gpu_hours_per_day"):
            require_non_negative(name, getattr(self, name))
        require_count("min_saves", self.min_saves)
        require_count("min_failures", self.min_failures)
        require_count("min_weibull_failures", self.min_weibull_failures, minimum=2)
        if require_positive("drift_ratio", self.drift_ratio) <= 1.0:
            raise ValueError(f"drift_ratio must be > 1, got {self.drift_ratio!r}")
        if not 1.0 < require_positive("resolve_ratio", self.resolve_ratio) <= self.drift_ratio:
            raise ValueError(
                f"resolve_ratio must be > 1 and <= drift_ratio ({self.drift_ratio!r}), "
                f"got {self.resolve_ratio!r}"
            )
        require_positive("change_fraction", self.change_fraction)
        if self.price_per_gpu_hour is not None:
            require_non_negative("price_per_gpu_hour", self.price_per_gpu_hour)

    def judge(
        self,
        *,
        ratio: float | None,
        n_saves: int,
        n_failures: int,
        cost_s: float | None = None,
        mtbf_s: float | None = None,
        current_s: float | None = None,
        band_s: tuple[float, float] | None = None,
        excess_gpu_hours_per_day: float | None = None,
    ) -> Verdict:
        """The verdict on a job's interval, and why: the one place drift is judged.

        ``insufficient_data`` without a ratio (C, M or the current interval unknown: the
        reason names which of ``cost_s``, ``mtbf_s``, ``current_s`` is None), with fewer than
        ``min_saves`` saves or ``min_failures`` interruptions behind M (the job's own, or
        pooled with its fleet's). Else ``drift`` when all three hold, and ``ok`` with the
        first that fails as the reason:

        - ``ratio`` (current / recommended) lies outside ``[1/drift_ratio, drift_ratio]``
          (else ``within_band``);
        - the current interval lies outside ``band_s``, the optimum's confidence band from the
          intervals of M and C (when known; an infinite upper end is open): inside it the data
          cannot tell it is wrong (else ``within_confidence``);
        - the excess waste is at least ``min_excess_gpu_hours_per_day`` (when known; else
          ``below_threshold``).
        """
        missing = [
            name
            for name, unknown in (
                ("checkpoint_cost", ratio is None and cost_s is None),
                ("mtbf", ratio is None and mtbf_s is None),
                ("current_interval", ratio is None and current_s is None),
                ("saves", n_saves < self.min_saves),
                ("failures", n_failures < self.min_failures),
            )
            if unknown
        ]
        if ratio is None or missing:
            counts: dict[str, float] = {
                "n_saves": n_saves,
                "min_saves": self.min_saves,
                "n_failures": n_failures,
                "min_failures": self.min_failures,
            }
            reason = Reason(ReasonCode.INSUFFICIENT_DATA, counts, missing=tuple(missing))
            return Verdict(Status.INSUFFICIENT_DATA, reason)
        if self.within_band(ratio):
            values = {"ratio": ratio, "drift_ratio": self.drift_ratio}
            return Verdict(Status.OK, Reason(ReasonCode.WITHIN_BAND, values))
        if current_s is not None and band_s is not None and band_s[0] <= current_s <= band_s[1]:
            values = {"ratio": ratio, "current_s": current_s, "band_low_s": band_s[0]}
            if math.isfinite(band_s[1]):
                values["band_high_s"] = band_s[1]
            return Verdict(Status.OK, Reason(ReasonCode.WITHIN_CONFIDENCE, values))
        threshold = self.min_excess_gpu_hours_per_day
        if excess_gpu_hours_per_day is not None and excess_gpu_hours_per_day < threshold:
            values = {
                "ratio": ratio,
                "excess_gpu_hours_per_day": excess_gpu_hours_per_day,
                "min_excess_gpu_hours_per_day": threshold,
            }
            return Verdict(Status.OK, Reason(ReasonCode.BELOW_THRESHOLD, values))
        values = {"ratio": ratio, "drift_ratio": self.drift_ratio}
        if excess_gpu_hours_per_day is not None:
            values["excess_gpu_hours_per_day"] = excess_gpu_hours_per_day
        return Verdict(Status.DRIFT, Reason(ReasonCode.DRIFT, values))

    def within_band(self, ratio: float) -> bool:
        """True when ``ratio`` is inside ``[1/drift_ratio, drift_ratio]``: not drift by ratio."""
        return 1.0 / self.drift_ratio <= ratio <= self.drift_ratio

    def resolved(self, ratio: float) -> bool:
        """True when ``ratio`` is back inside ``[1/resolve_ratio, resolve_ratio]``."""
        return 1.0 / self.resolve_ratio <= ratio <= self.resolve_ratio


DEFAULT_POLICY = EstimationPolicy()


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What a job is, as opposed to how it is judged.

    Attributes:
        gpus: GPUs the job runs on (excess waste in GPU-hours), >= 1, or None.
        units: the job's size in nodes (or GPUs) for M per unit, >= 1, or None.
        fleet: per-unit running time and failures of the job's fleet (its other jobs), or None.
        stack: the training stack that wrote most of its logs (the parser's name), for the
            recommended interval in the job's own setting (:func:`rules.advice.setting_for`).
        survival: which tier survives each failure class, for a job that saves to two tiers
            (:data:`rules.tiers.DEFAULT_SURVIVAL`, or the job's :func:`rules.tiers.with_overrides`).

    Raises:
        ValueError: ``gpus`` or ``units`` below 1.
    """

    gpus: int | None = None
    units: int | None = None
    fleet: FleetRate | None = None
    stack: str | None = None
    survival: Mapping[str, Survival] = field(default_factory=lambda: DEFAULT_SURVIVAL)

    def __post_init__(self) -> None:
        for name in ("gpus", "units"):
            if getattr(self, name) is not None:
                require_count(name, getattr(self, name), minimum=1)


NO_FACTS = JobFacts()
