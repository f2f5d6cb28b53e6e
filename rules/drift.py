"""When to tell people that a job's checkpoint interval has drifted from the optimum."""

from __future__ import annotations

from ckpt_advisor.rules._checks import require_count, require_non_negative, require_positive
from ckpt_advisor.rules.model import Action, AlertState, Decision, JobEstimate


def off_optimum(
    ratio: float,
    *,
    ratio_limit: float,
    current_s: float | None = None,
    band_s: tuple[float, float] | None = None,
    excess_gpu_hours_per_day: float | None = None,
    min_excess_gpu_hours_per_day: float = 0.0,
) -> bool:
    """Whether a job's interval is far enough from the optimum to be worth a message.

    All three must hold:

    - ``ratio`` (current / recommended) lies outside ``[1/ratio_limit, ratio_limit]``: by the
      flatness of the waste curve, k× off costs ``(k + 1/k)/2`` of the optimal waste, so the
      default 1.5 means at least +8% waste (2×: +25%);
    - the current interval lies outside ``band_s``, the optimum's confidence band from the
      intervals of M and C (when known): inside it the data cannot tell it is wrong;
    - the excess waste is at least ``min_excess_gpu_hours_per_day`` (when known): a tiny job
      8% off its optimum is not worth anyone's time.
    """
    if 1.0 / ratio_limit <= ratio <= ratio_limit:
        return False
    if current_s is not None and band_s is not None and band_s[0] <= current_s <= band_s[1]:
        return False
    return excess_gpu_hours_per_day is None or (
        excess_gpu_hours_per_day >= min_excess_gpu_hours_per_day
    )


class DriftRule:
    """Decide whether to notify, repeat, resolve or stay quiet about a job's drift.

    A policy object (settings checked once, data per call). With ``r = current / recommended``:

    - drift: :func:`off_optimum`: ``r`` outside ``[1/ratio, ratio]``, the current interval
      outside the optimum's confidence band, and an excess of at least
      ``min_excess_gpu_hours_per_day`` (when the job's GPU count is known); judged only with at
      least ``min_failures`` failures behind M (the job's own, or pooled with the fleet's) and
      ``min_saves`` saves;
    - an episode opens with one NOTIFY; while it stays open the rule REPEATs only after
      ``repeat_after_s`` since the last message, or sooner when the recommendation moved by more
      than ``change_fraction`` from the one last sent;
    - it RESOLVEs once ``r`` is back inside the tighter band ``[1/resolve_ratio, resolve_ratio]``
      (hysteresis); between the two bands nothing changes, so a job hovering at the threshold
      does not flap;
    - an estimate that stops being judgeable (too little data, unknown ratio) neither opens nor
      resolves an episode.

    The waste curve is flat (k× off the optimum costs ``(k + 1/k)/2`` of the optimal waste:
    +8% at 1.5×), so the default threshold keeps quiet about differences that cost little.
    """

    def __init__(
        self,
        ratio: float = 1.5,
        *,
        min_failures: int = 2,
        min_saves: int = 3,
        repeat_after_s: float = 24 * 3600.0,
        resolve_ratio: float = 1.3,
        change_fraction: float = 0.25,
        min_excess_gpu_hours_per_day: float = 1.0,
    ) -> None:
        """Check and keep the settings.

        Args:
            ratio: drift threshold on current/recommended (and its inverse), > 1.
            min_failures: interruptions needed before judging, >= 0.
            min_saves: checkpoints needed before judging, >= 0.
            repeat_after_s: seconds before an open episode is repeated, > 0.
            resolve_ratio: the resolve band's edge, > 1 and <= ``ratio``.
            change_fraction: relative change of the recommendation that warrants an early
                repeat, > 0.
            min_excess_gpu_hours_per_day: GPU-hours a day the change must save, >= 0. One
                GPU-hour a day (a few dollars) is the default: below it nobody should spend the
                time to change a job's configuration.

        Raises:
            ValueError: a setting out of range, naming it.
        """
        self.ratio = require_positive("ratio", ratio)
        if self.ratio <= 1.0:
            raise ValueError(f"ratio must be > 1, got {ratio!r}")
        self.min_failures = require_count("min_failures", min_failures)
        self.min_saves = require_count("min_saves", min_saves)
        self.repeat_after_s = require_positive("repeat_after_s", repeat_after_s)
        self.resolve_ratio = require_positive("resolve_ratio", resolve_ratio)
        if not 1.0 < self.resolve_ratio <= self.ratio:
            raise ValueError(
                f"resolve_ratio must be > 1 and <= ratio ({ratio!r}), got {resolve_ratio!r}"
            )
        self.change_fraction = require_positive("change_fraction", change_fraction)
        self.min_excess_gpu_hours_per_day = require_non_negative(
            "min_excess_gpu_hours_per_day", min_excess_gpu_hours_per_day
        )

    def __repr__(self) -> str:
        return (
            f"DriftRule(ratio={self.ratio}, min_failures={self.min_failures}, "
            f"min_saves={self.min_saves}, repeat_after_s={self.repeat_after_s}, "
            f"resolve_ratio={self.resolve_ratio}, change_fraction={self.change_fraction}, "
            f"min_excess_gpu_hours_per_day={self.min_excess_gpu_hours_per_day})"
        )

    def __call__(self, estimate: JobEstimate, state: AlertState, now_s: float) -> Decision:
        """Decide for one job.

        Args:
            estimate: the job's latest estimate (``drift_ratio``, ``recommended_interval_s``,
                ``n_failures``, ``n_checkpoints`` are read).
            state: what was last told about this job.
            now_s: epoch seconds of this decision (never read from a clock here).

        Returns:
            The action and the state to persist (unchanged for ``NONE``).
        """
        ratio = estimate.drift_ratio
        recommended_s = estimate.recommended_interval_s
        if (
            ratio is None
            or recommended_s is None
            or _failures_behind_mtbf(estimate) < self.min_failures
            or estimate.n_checkpoints < self.min_saves
        ):
            return Decision(Action.NONE, "not enough data to judge drift", state)
        sent = AlertState(in_drift=True, last_sent_s=now_s, last_recommended_s=recommended_s)
        drifting = off_optimum(
            ratio,
            ratio_limit=self.ratio,
            current_s=estimate.current_interval_s,
            band_s=estimate.recommended_interval_ci_s,
            excess_gpu_hours_per_day=estimate.excess_gpu_hours_per_day,
            min_excess_gpu_hours_per_day=self.min_excess_gpu_hours_per_day,
        )
        if not state.in_drift:
            if drifting:
                return Decision(Action.NOTIFY, f"interval is {ratio:.2f}x the optimum", sent)
            return Decision(Action.NONE, f"interval is {ratio:.2f}x the optimum: fine", state)
        if 1.0 / self.resolve_ratio <= ratio <= self.resolve_ratio:
            return Decision(
                Action.RESOLVE, f"interval back to {ratio:.2f}x the optimum", AlertState()
            )
        if not drifting:
            return Decision(Action.NONE, f"interval at {ratio:.2f}x: between the bands", state)
        if state.last_sent_s is None or now_s - state.last_sent_s >= self.repeat_after_s:
            return Decision(Action.REPEAT, f"still {ratio:.2f}x the optimum", sent)
        last_s = state.last_recommended_s
        if last_s is None or abs(recommended_s / last_s - 1.0) > self.change_fraction:
            return Decision(Action.REPEAT, "the recommended interval changed", sent)
        return Decision(Action.NONE, "already told; waiting before repeating", state)


def _failures_behind_mtbf(estimate: JobEstimate) -> int:
    """Failures M rests on: the job's own, or those pooled with the fleet's."""
    pooled = estimate.mtbf_n_failures
    return estimate.n_failures if pooled is None else pooled
