"""When to tell people that a job's checkpoint interval has drifted from the optimum.

Whether an interval has drifted is the estimate's ``status`` (judged once, by
:meth:`rules.policy.EstimationPolicy.judge`, with its reason); this module decides what to say
about it over time: one message per episode, repeats, a resolve notice, no flapping; and
:func:`hold_if_silenced` holds back what would be posted while a job is silenced. Every
decision carries its :class:`~rules.model.Reason`, so a user can see why nothing was posted.
"""

from __future__ import annotations

from ckpt_advisor.rules.model import (
    Action,
    AlertState,
    Decision,
    JobEstimate,
    Reason,
    ReasonCode,
    Status,
)
from ckpt_advisor.rules.policy import DEFAULT_POLICY, EstimationPolicy


def decide(
    estimate: JobEstimate,
    state: AlertState,
    now_s: float,
    policy: EstimationPolicy = DEFAULT_POLICY,
) -> Decision:
    """Decide whether to notify, repeat, resolve or stay quiet about one job, and why.

    With ``r = current / recommended`` (``estimate.drift_ratio``):

    - an estimate without a verdict (``insufficient_data``, or no ratio) neither opens nor
      resolves an episode (the verdict's reason: what is missing);
    - an episode opens with one NOTIFY when the status is ``drift``; outside an episode an
      ``ok`` status gives NONE with the verdict's reason (within the band, within the
      optimum's confidence band, below the GPU-hour threshold);
    - while it stays open the rule REPEATs only after ``policy.repeat_after_s`` since the last
      message (``repeat_due``), or sooner when the recommendation moved by more than
      ``policy.change_fraction`` from the one last sent (``advice_moved``); else NONE
      (``already_posted``);
    - it RESOLVEs once ``r`` is back inside the tighter band
      ``[1/policy.resolve_ratio, policy.resolve_ratio]``; between that band and drift nothing
      changes (``hysteresis``), so a job hovering at the threshold does not flap;
    - an open episode whose ``r`` is still beyond drift but whose status is ``ok`` stays open
      and gives NONE with the verdict's reason (within the optimum's confidence band, below
      the GPU-hour threshold): that, not hysteresis, is what holds the message.

    Args:
        estimate: the job's latest estimate (``status``, ``reason``, ``drift_ratio`` and
            ``recommended_interval_s`` are read), made with ``policy``.
        state: what was last told about this job.
        now_s: epoch seconds of this decision (never read from a clock here).
        policy: the thresholds the estimate was judged with.

    Returns:
        The action, its reason and the state to persist (unchanged for ``NONE``).
    """
    ratio = estimate.drift_ratio
    recommended_s = estimate.recommended_interval_s
    verdict = estimate.reason
    if estimate.status is Status.INSUFFICIENT_DATA or ratio is None or recommended_s is None:
        return Decision(Action.NONE, verdict, state)
    sent = AlertState(in_drift=True, last_sent_s=now_s, last_recommended_s=recommended_s)
    drifting = estimate.status is Status.DRIFT
    if not state.in_drift:
        if drifting:
            return Decision(Action.NOTIFY, verdict, sent)
        return Decision(Action.NONE, verdict, state)
    if policy.resolved(ratio):
        values = {"ratio": ratio, "resolve_ratio": policy.resolve_ratio}
        return Decision(Action.RESOLVE, Reason(ReasonCode.RESOLVED, values), AlertState())
    if not drifting:
        if not policy.within_band(ratio):  # still off, but the verdict's reason holds it
            return Decision(Action.NONE, verdict, state)
        values = {
            "ratio": ratio,
            "resolve_ratio": policy.resolve_ratio,
            "drift_ratio": policy.drift_ratio,
        }
        return Decision(Action.NONE, Reason(ReasonCode.HYSTERESIS, values), state)
    return _while_drifting(ratio, recommended_s, state, now_s, policy, sent)


def hold_if_silenced(
    decision: Decision, state: AlertState, now_s: float, silenced_until_s: float | None
) -> Decision:
    """``decision``, or NONE when it would post while the job is silenced: a NOTIFY, REPEAT or
    RESOLVE due before ``silenced_until_s`` becomes NONE with a ``silenced`` reason (the held
    action in :attr:`Reason.held`) and keeps ``state``, so the same decision is made once the
    silence ends (docs/RELIABILITY.md, scenario 22)."""
    if silenced_until_s is None or silenced_until_s <= now_s:
        return decision
    return _hold(decision, state, ReasonCode.SILENCED, {"until_s": silenced_until_s})


def hold_while_reading(
    decision: Decision, state: AlertState, files: int, bytes_behind: int
) -> Decision:
    """``decision``, or NONE when it would post while ``files`` (> 0) of the job are still
    catching up with their backlog (``bytes_behind`` of it not yet stored, or their last lines
    not settled: ``agent/tail/backlog.py``): a NOTIFY, REPEAT or RESOLVE becomes NONE with a
    ``reading_backlog`` reason (the held action in :attr:`Reason.held`) and keeps ``state``, so
    the decision is made afresh on the whole backlog once it is read (docs/RELIABILITY.md,
    scenario 34). ``files`` 0: nothing is behind."""
    if files == 0:
        return decision
    values = {"files": float(files), "bytes_behind": float(bytes_behind)}
    return _hold(decision, state, ReasonCode.READING_BACKLOG, values)


def _hold(
    decision: Decision, state: AlertState, code: ReasonCode, values: dict[str, float]
) -> Decision:
    """NONE for ``code`` with ``values``, holding back ``decision``'s action and keeping
    ``state``; ``decision`` itself when it posts nothing."""
    if decision.action is Action.NONE:
        return decision
    return Decision(Action.NONE, Reason(code, values, held=decision.action), state)


def _while_drifting(
    ratio: float,
    recommended_s: float,
    state: AlertState,
    now_s: float,
    policy: EstimationPolicy,
    sent: AlertState,
) -> Decision:
    """An open episode that still drifts: repeat when due or when the advice moved."""
    last_sent_s = state.last_sent_s
    if last_sent_s is None or now_s - last_sent_s >= policy.repeat_after_s:
        values = {"ratio": ratio}
        if last_sent_s is not None:
            values["last_sent_s"] = last_sent_s
        return Decision(Action.REPEAT, Reason(ReasonCode.REPEAT_DUE, values), sent)
    last_s = state.last_recommended_s
    if last_s is None or abs(recommended_s / last_s - 1.0) > policy.change_fraction:
        values = {"recommended_s": recommended_s}
        if last_s is not None:
            values["previous_s"] = last_s
        return Decision(Action.REPEAT, Reason(ReasonCode.ADVICE_MOVED, values), sent)
    values = {
        "last_sent_s": last_sent_s,
        "next_repeat_s": last_sent_s + policy.repeat_after_s,
        "change_fraction": policy.change_fraction,
    }
    return Decision(Action.NONE, Reason(ReasonCode.ALREADY_POSTED, values), state)
