"""When to tell people that a job's checkpoint interval has drifted from the optimum.

Whether an interval has drifted is the estimate's ``status`` (judged once, by
:meth:`rules.policy.EstimationPolicy.judge`); this module decides what to say about it over
time: one message per episode, repeats, a resolve notice, no flapping.
"""

from __future__ import annotations

from ckpt_advisor.rules.model import Action, AlertState, Decision, JobEstimate, Status
from ckpt_advisor.rules.policy import DEFAULT_POLICY, EstimationPolicy


def decide(
    estimate: JobEstimate,
    state: AlertState,
    now_s: float,
    policy: EstimationPolicy = DEFAULT_POLICY,
) -> Decision:
    """Decide whether to notify, repeat, resolve or stay quiet about one job.

    With ``r = current / recommended`` (``estimate.drift_ratio``):

    - an estimate without a verdict (``insufficient_data``, or no ratio) neither opens nor
      resolves an episode;
    - an episode opens with one NOTIFY when the status is ``drift``; while it stays open the
      rule REPEATs only after ``policy.repeat_after_s`` since the last message, or sooner when
      the recommendation moved by more than ``policy.change_fraction`` from the one last sent;
    - it RESOLVEs once ``r`` is back inside the tighter band
      ``[1/policy.resolve_ratio, policy.resolve_ratio]`` (hysteresis); between that band and
      drift nothing changes, so a job hovering at the threshold does not flap.

    Args:
        estimate: the job's latest estimate (``status``, ``drift_ratio`` and
            ``recommended_interval_s`` are read), made with ``policy``.
        state: what was last told about this job.
        now_s: epoch seconds of this decision (never read from a clock here).
        policy: the thresholds the estimate was judged with.

    Returns:
        The action and the state to persist (unchanged for ``NONE``).
    """
    ratio = estimate.drift_ratio
    recommended_s = estimate.recommended_interval_s
    if estimate.status is Status.INSUFFICIENT_DATA or ratio is None or recommended_s is None:
        return Decision(Action.NONE, "not enough data to judge drift", state)
    sent = AlertState(in_drift=True, last_sent_s=now_s, last_recommended_s=recommended_s)
    drifting = estimate.status is Status.DRIFT
    if not state.in_drift:
        if drifting:
            return Decision(Action.NOTIFY, f"interval is {ratio:.2f}x the optimum", sent)
        return Decision(Action.NONE, f"interval is {ratio:.2f}x the optimum: fine", state)
    if policy.resolved(ratio):
        return Decision(Action.RESOLVE, f"interval back to {ratio:.2f}x the optimum", AlertState())
    if not drifting:
        return Decision(Action.NONE, f"interval at {ratio:.2f}x: between the bands", state)
    if state.last_sent_s is None or now_s - state.last_sent_s >= policy.repeat_after_s:
        return Decision(Action.REPEAT, f"still {ratio:.2f}x the optimum", sent)
    last_s = state.last_recommended_s
    if last_s is None or abs(recommended_s / last_s - 1.0) > policy.change_fraction:
        return Decision(Action.REPEAT, "the recommended interval changed", sent)
    return Decision(Action.NONE, "already told; waiting before repeating", state)
