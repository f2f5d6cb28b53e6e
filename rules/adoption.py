"""Whether a training job should adopt the advised checkpoint interval, and which one.

The daemon keeps one advice file per job (DESIGN.md, ``[advice] dir``: ``JOB.json``); the
training-side callbacks (``ckpt_advisor.agent.training``) read it between steps. This module is
the pure part: :func:`parse_advice` checks the file's record and :class:`AdoptionPolicy` decides,
within bounds the user set, whether to move the interval and to what. It imports only the
standard library, so the training side stays light.

The rule (:meth:`AdoptionPolicy.__call__`), in order:

1. advice older than ``max_advice_age_s`` (or dated that far in the future) changes nothing:
   a daemon that stopped must not steer a job with an old view of it;
2. only ``status == "drift"`` moves the interval: ``ok`` means the data cannot tell the interval
   is wrong, ``insufficient_data`` that there is no advice yet;
3. no change within ``min_change_gap_s`` of the last one, so the estimate can see the new
   interval's saves before it advises again;
4. the target is the advised interval, first limited to ``[current / f, current · f]`` (``f`` =
   ``max_change_factor``, the largest change per adoption), then to the user's
   ``[min_interval_s, max_interval_s]``; the user's bounds always hold, even when the current
   interval was outside them;
5. a target within ``min_relative_change`` of the current interval changes nothing (the waste
   curve is flat: 10% off costs 0.5% of the optimal waste, Young 1974's ``(k + 1/k)/2``),
   unless the current interval is outside the user's bounds (a step time that changed).

In whole steps (:meth:`AdoptionPolicy.steps`) the target is rounded to the nearest step and
kept within the change factor and the bounds when a whole number of steps can be.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

ADVICE_KEYS = (
    "job",
    "status",
    "recommended_interval_s",
    "recommended_interval_steps",
    "computed_at",
)
"""Keys every advice file holds (DESIGN.md); ``tiers`` is optional."""


@dataclass(frozen=True, slots=True)
class TierAdvice:
    """The advised interval of one tier (``tiers.<name>`` in the advice file).

    Attributes:
        interval_s: compute time between saves of that tier, seconds, or None.
        interval_steps: the same in steps, or None.
    """

    interval_s: float | None
    interval_steps: int | None


@dataclass(frozen=True, slots=True)
class Advice:
    """One advice file's content.

    Attributes:
        job: the job's name.
        status: ``ok``, ``drift`` or ``insufficient_data`` (the estimate's status).
        recommended_interval_s: compute time between checkpoints, seconds, or None.
        recommended_interval_steps: the same in steps, or None.
        computed_at_s: when the estimate was computed, Unix epoch seconds.
        tiers: tier name (``memory``, ``local``, ``persistent``) -> its interval, when known.
    """

    job: str
    status: str
    recommended_interval_s: float | None
    recommended_interval_steps: int | None
    computed_at_s: float
    tiers: Mapping[str, TierAdvice] = field(default_factory=dict)

    def interval_s(self, tier: str | None = None) -> float | None:
        """The advised interval of ``tier``, or the single recommendation when ``tier`` is None."""
        if tier is None:
            return self.recommended_interval_s
        found = self.tiers.get(tier)
        return None if found is None else found.interval_s

    def interval_steps(self, tier: str | None = None) -> int | None:
        """Like :meth:`interval_s`, in steps."""
        if tier is None:
            return self.recommended_interval_steps
        found = self.tiers.get(tier)
        return None if found is None else found.interval_steps


def parse_advice(record: object) -> Advice:
    """Check one advice file's decoded JSON and return its values.

    Shape (DESIGN.md)::

        {"job": "llama-70b", "status": "drift", "recommended_interval_s": 3403.0,
         "recommended_interval_steps": 570, "computed_at": "2026-11-29T22:11:38+00:00",
         "tiers": {"memory": {"interval_s": 520.0, "interval_steps": 87},
                   "persistent": {"interval_s": 6760.0, "interval_steps": 1100}}}

    ``computed_at`` is ISO 8601 (naive means UTC) or Unix seconds; intervals are numbers > 0
    or null; ``tiers`` may be absent. Other keys are ignored (the file may grow).

    Raises:
        ValueError: not an object, a key missing, or a value of the wrong type or range; the
            message names the key.
    """
    if not isinstance(record, dict):
        raise ValueError("advice is not a JSON object")
    missing = [key for key in ADVICE_KEYS if key not in record]
    if missing:
        raise ValueError(f"missing key(s): {', '.join(missing)}")
    job, status = record["job"], record["status"]
    if not isinstance(job, str) or not isinstance(status, str):
        raise ValueError("job and status must be strings")
    tiers_raw = record.get("tiers") or {}
    if not isinstance(tiers_raw, dict):
        raise ValueError("tiers must be an object")
    tiers = {}
    for name, value in tiers_raw.items():
        if not isinstance(value, dict):
            raise ValueError(f"tiers.{name} must be an object")
        tiers[str(name)] = TierAdvice(
            _interval(value.get("interval_s"), f"tiers.{name}.interval_s"),
            _steps(value.get("interval_steps"), f"tiers.{name}.interval_steps"),
        )
    return Advice(
        job,
        status,
        _interval(record["recommended_interval_s"], "recommended_interval_s"),
        _steps(record["recommended_interval_steps"], "recommended_interval_steps"),
        _epoch_s(record["computed_at"]),
        tiers,
    )


def _interval(value: object, key: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} must be a number or null")
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{key} must be > 0, got {number!r}")
    return number


def _steps(value: object, key: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{key} must be an integer >= 1 or null")
    return value


def _epoch_s(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    if not isinstance(value, str):
        raise ValueError("computed_at must be an ISO 8601 string or epoch seconds")
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"computed_at is not ISO 8601: {value[:40]!r}") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


@dataclass(frozen=True, slots=True)
class Adoption:
    """What the policy decided.

    Attributes:
        interval_s: the interval to adopt, seconds; None to keep the current one.
        reason: why, in a few words (for the log).
        stale: True when the advice was too old (or too far in the future) to use: the caller
            warns once.
    """

    interval_s: float | None
    reason: str
    stale: bool = False


@dataclass(frozen=True, slots=True)
class AdoptionPolicy:
    """Bounds within which a job adopts advised intervals (the rule: module docstring).

    Attributes:
        min_interval_s: never checkpoint more often than this, seconds, > 0.
        max_interval_s: never less often than this, seconds, >= ``min_interval_s``.
        max_change_factor: largest change per adoption, as a factor > 1 (2: at most halve or
            double).
        min_change_gap_s: least time between two changes, seconds, >= 0.
        max_advice_age_s: advice older than this is stale, seconds, > 0.
        min_relative_change: smaller relative changes are ignored, in [0, 1).

    Raises:
        ValueError: a setting out of range (named).
    """

    min_interval_s: float
    max_interval_s: float
    max_change_factor: float = 2.0
    min_change_gap_s: float = 3600.0
    max_advice_age_s: float = 3600.0
    min_relative_change: float = 0.1

    def __post_init__(self) -> None:
        for name in ("min_interval_s", "max_interval_s", "max_advice_age_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        if self.max_interval_s < self.min_interval_s:
            raise ValueError("max_interval_s must be >= min_interval_s")
        if not (math.isfinite(self.max_change_factor) and self.max_change_factor > 1.0):
            raise ValueError(f"max_change_factor must be > 1, got {self.max_change_factor!r}")
        if not (math.isfinite(self.min_change_gap_s) and self.min_change_gap_s >= 0):
            raise ValueError(f"min_change_gap_s must be >= 0, got {self.min_change_gap_s!r}")
        if not 0.0 <= self.min_relative_change < 1.0:
            raise ValueError("min_relative_change must be in [0, 1)")

    def __call__(
        self,
        advice: Advice,
        *,
        current_interval_s: float,
        now_s: float,
        last_change_s: float | None = None,
        tier: str | None = None,
    ) -> Adoption:
        """Decide on one reading of the advice.

        Args:
            advice: the parsed advice file.
            current_interval_s: the job's interval now (compute time between saves), > 0.
            now_s: the clock, epoch seconds.
            last_change_s: when the interval was last changed by an adoption, or None.
            tier: follow this tier's interval (``advice.tiers``) instead of the single one.

        Returns:
            The decision.
        """
        age_s = now_s - advice.computed_at_s
        if abs(age_s) > self.max_advice_age_s:
            when = "ago" if age_s > 0 else "in the future"
            reason = f"computed {abs(age_s):.0f} s {when} (max age {self.max_advice_age_s:.0f} s)"
            return Adoption(None, reason, True)
        if advice.status != "drift":
            return Adoption(None, f"status {advice.status}")
        advised = advice.interval_s(tier)
        if advised is None:
            return Adoption(None, "no advised interval" + (f" for tier {tier}" if tier else ""))
        if last_change_s is not None and now_s - last_change_s < self.min_change_gap_s:
            wait_s = self.min_change_gap_s - (now_s - last_change_s)
            return Adoption(
                None, f"last change {now_s - last_change_s:.0f} s ago; wait {wait_s:.0f} s"
            )
        f = self.max_change_factor
        target = min(max(advised, current_interval_s / f), current_interval_s * f)
        target = min(max(target, self.min_interval_s), self.max_interval_s)
        inside = self.min_interval_s <= current_interval_s <= self.max_interval_s
        if inside and abs(target / current_interval_s - 1.0) < self.min_relative_change:
            return Adoption(None, f"advised {advised:.0f} s is within the dead band")
        return Adoption(target, f"advised {advised:.0f} s ({advice.status})")

    def steps(self, interval_s: float, step_time_s: float, current_steps: int | None = None) -> int:
        """``interval_s`` in whole steps of ``step_time_s``, at least 1.

        Rounded to the nearest step, then kept within a factor ``max_change_factor`` of
        ``current_steps`` (when given) and inside ``[min_interval_s, max_interval_s]``, each
        when a whole number of steps can be: rounding never takes a change past its bounds.

        Raises:
            ValueError: a non-positive argument.
        """
        if not (interval_s > 0 and step_time_s > 0):
            raise ValueError("interval_s and step_time_s must be > 0")
        steps = max(1, round(interval_s / step_time_s))
        limits = []
        if current_steps is not None:
            f = self.max_change_factor
            limits.append((math.ceil(current_steps / f), math.floor(current_steps * f)))
        limits.append(
            (
                math.ceil(self.min_interval_s / step_time_s),
                math.floor(self.max_interval_s / step_time_s),
            )
        )
        for low, high in limits:
            if low <= high:
                steps = min(max(steps, low), high)
        return max(1, steps)
