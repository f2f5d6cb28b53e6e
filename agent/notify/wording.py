"""What a message about a job's interval says, in plain words (no Slack markup, no I/O).

A busy engineer reads the first line and acts: the action (what to set, in the job's setting
and in seconds, from what, and what it buys), then the evidence in two short lines (C and M with
their ranges and counts), then the context (as of when, what changed since the last message,
how to silence). Everything else (intervals in seconds and steps, per-class M, the Weibull
shape, notes) is the detail, posted as a reply in the message's thread
(:mod:`agent.notify.detail`). :mod:`agent.notify.message` puts these words into Block Kit; the
log notifier writes them as lines. Every number is the rules'; here it is only written
(durations by :func:`agent.units.format_duration`, notes by :func:`agent.notes.render_note`,
reasons by :func:`agent.reasons.render_reason`).

What the change buys: the goodput (kept work over wall time) simulated with the job's own C, M
and R at the current and the recommended interval (``goodput_current``,
``goodput_recommended``: :func:`rules.simulate.simulated_goodput`), or without them the waste
Daly's model says the change saves, in percentage points
(``waste_fraction_current − waste_fraction_recommended``); the GPU-hours at stake are
``excess_gpu_hours_per_day`` (that waste × GPUs × 24 h), the figure the GPU-hour threshold
judges.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ckpt_advisor.agent.marks import (
    at_bounds,
    bound_mark,
    current_text,
    estimate_row,
    interval_is_bounded,
    interval_is_open_above,
)
from ckpt_advisor.agent.notes import render_note
from ckpt_advisor.agent.units import ci_label
from ckpt_advisor.agent.units import format_duration as d
from ckpt_advisor.rules.model import Action, Decision, JobEstimate, NoteCode

MATERIAL_CHANGE = 0.05
"""A number that moved by less than this fraction since the last message is not news."""


@dataclass(frozen=True, slots=True)
class Sent:
    """What the last message of a job said (kept in its outbox payload as ``facts``): the
    numbers its successor compares against, and the moment it spoke of (``as_of_s``: its
    estimate's newest event, as its context line said, so "since" reads on the job's clock).
    Unknown numbers are None."""

    as_of_s: float
    recommended_interval_s: float | None
    recommended_interval_steps: int | None
    checkpoint_cost_s: float | None
    mtbf_s: float | None

    def to_json(self) -> dict[str, Any]:
        """The ``facts`` object of an outbox payload."""
        return {
            "as_of_s": self.as_of_s,
            "recommended_interval_s": self.recommended_interval_s,
            "recommended_interval_steps": self.recommended_interval_steps,
            "checkpoint_cost_s": self.checkpoint_cost_s,
            "mtbf_s": self.mtbf_s,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Sent:
        """Read a ``facts`` object back (:meth:`to_json`). Raises KeyError on a missing key."""
        return cls(
            float(data["as_of_s"]),
            data["recommended_interval_s"],
            data["recommended_interval_steps"],
            data["checkpoint_cost_s"],
            data["mtbf_s"],
        )

    @classmethod
    def of(cls, estimate: JobEstimate) -> Sent:
        """What a message about ``estimate`` says."""
        return cls(
            as_of(estimate),
            estimate.recommended_interval_s,
            estimate.recommended_interval_steps,
            estimate.checkpoint_cost_s,
            estimate.mtbf_s,
        )


def one_line(text: str) -> str:
    """Collapse whitespace (newlines included) so log-derived text cannot forge extra lines."""
    return " ".join(text.split())


def utc(epoch_s: float) -> str:
    """``2026-11-23 14:03 UTC``."""
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _count(n: float) -> str:
    return f"{n:,.0f}"


def _gpu_h(value: float) -> str:
    return f"{value:,.1f}" if abs(value) < 10 else f"{value:,.0f}"


def title(e: JobEstimate, action: Action) -> str:
    """The header: what happened to which job (plain text)."""
    job = one_line(e.job)
    return {
        Action.NOTIFY: f"Checkpoint interval off for {job}",
        Action.REPEAT: f"Checkpoint interval still off for {job}",
        Action.RESOLVE: f"Checkpoint interval back within range for {job}",
        Action.NONE: f"Checkpoint interval for {job}",
    }[action]


def _setting(e: JobEstimate, steps: str) -> str | None:
    """The job's own setting with ``steps`` in place of its number (``save_steps=570``)."""
    if e.recommended_setting is None or e.recommended_interval_steps is None:
        return None
    return one_line(e.recommended_setting).replace(str(e.recommended_interval_steps), steps, 1)


def _what_to_set(e: JobEstimate) -> tuple[str, bool]:
    """``(what to set, code?)``: the setting (code: shown as code in Slack) or the interval;
    a range in steps, or ``or more``, when C or M is a lower bound (agent/marks.py)."""
    row = estimate_row(e)
    steps_range = e.recommended_interval_steps_range if interval_is_bounded(row) else None
    open_above = interval_is_open_above(row)
    if e.recommended_interval_steps is not None:
        steps = _count(e.recommended_interval_steps).replace(",", "")
        if steps_range is not None and steps_range[1] is not None:
            steps = f"{steps_range[0]}–{steps_range[1]}"
        setting = _setting(e, steps)
        if setting is not None:
            return setting + (" or more" if open_above else ""), True
        return f"every {steps} steps" + (" or more" if open_above else ""), False
    best = _best_time(e)
    return ("", False) if best is None else (f"every {best} of compute", False)


def _best_time(e: JobEstimate) -> str | None:
    """The recommended interval as time, ``1h 00m = 3,600 s``; when C or M is a lower bound,
    the range over the plausible C and M's interval, or ``≥`` the interval at the bound when it
    has no upper end (as the setting's "or more"); None when unknown."""
    if e.recommended_interval_s is None:
        return None
    bounds = e.recommended_interval_range_s
    if interval_is_bounded(estimate_row(e)) and bounds is not None:
        low_s, high_s = bounds  # open above: at least Daly's interval at the bound of C
        return (
            f"≥ {_seconds(e.recommended_interval_s)}"
            if high_s is None
            else f"{d(low_s)}–{d(high_s)}"
        )
    return _seconds(e.recommended_interval_s)


def _now(e: JobEstimate) -> str:
    """``now 1,800 steps = 4h 00m``, ``now 4h 00m`` or ``now unknown``; the time ``≤`` when it
    is an upper bound (the save spacing less a lower-bound C; the steps are counted):
    ``now 25 steps, ≤ 3.74s``."""
    if e.current_interval_s is None:
        return "now unknown"
    shown = current_text(estimate_row(e))
    if e.current_interval_steps is None:
        return f"now {shown}"
    steps = f"now {_count(e.current_interval_steps)} steps"
    return f"{steps}, {shown}" if e.current_interval_is_upper_bound else f"{steps} = {shown}"


def _seconds(value_s: float) -> str:
    """``1h 00m = 3,600 s`` (seconds alone below a minute: ``43s``)."""
    return d(value_s) if value_s < 60 else f"{d(value_s)} = {value_s:,.0f} s"


def _goodput(e: JobEstimate) -> tuple[str, str] | None:
    """``(figure, the bounds it is at)``: ``("goodput 65.0% → 85.0%", "")``, simulated with the
    job's own C, M and R at the current and the recommended interval (``goodput_current``,
    ``goodput_recommended``), each marked as the bound it is at a lower-bound C or M
    (``goodput ≤ 69.6% → ≤ 72.6%``; None at both: no bound either way,
    :func:`agent.marks.bound_mark`); without them, the points of waste the change saves in
    Daly's model, a difference that is no bound, with the bounds it is computed at
    (``("goodput +20.0 points", " if C is 43s")``, :func:`agent.marks.at_bounds`)."""
    now, best = e.goodput_current, e.goodput_recommended
    row = estimate_row(e)
    if now is not None and best is not None:
        mark = bound_mark(row, grows_with_cost=False)
        if mark is None or best <= now:
            return None
        return f"goodput {mark}{now:.1%} → {mark}{best:.1%}", ""
    waste_now, waste_best = e.waste_fraction_current, e.waste_fraction_recommended
    if waste_now is None or waste_best is None or waste_now <= waste_best:
        return None
    return f"goodput +{100.0 * (waste_now - waste_best):.1f} points", at_bounds(row)


def _stake(e: JobEstimate, currency: str) -> tuple[str, str] | None:
    """``(figure, the bounds it is at)``: ``("307 GPU-h/day ($768/day) at stake", "")``, a range
    over the plausible C when C is a lower bound with one (then at M's bound alone, if M is
    one), else at the lower bounds of C and M (:func:`agent.marks.at_bounds`); None without
    ``gpus`` or when nothing is gained."""
    excess, excess_range = e.excess_gpu_hours_per_day, e.excess_gpu_hours_per_day_range
    row = estimate_row(e)
    if e.checkpoint_cost_is_lower_bound and excess_range is not None:
        low_h, high_h = excess_range
        if high_h > 0:
            over_c = at_bounds({**row, "checkpoint_cost_is_lower_bound": False})
            return f"{_gpu_h(max(low_h, 0.0))}–{_gpu_h(high_h)} GPU-h/day at stake", over_c
    if excess is None or excess <= 0:
        return None
    money = (
        "" if e.excess_cost_per_day is None else f" ({currency}{e.excess_cost_per_day:,.0f}/day)"
    )
    return f"{_gpu_h(excess)} GPU-h/day{money} at stake", at_bounds(row)


def gain(e: JobEstimate, currency: str = "$") -> str | None:
    """What the recommended interval buys: ``goodput 65.0% → 85.0%, 307 GPU-h/day at stake``;
    at a lower-bound C or M the goodput marked as a bound (``goodput ≥ 61.5% → ≥ 71.1%``), and
    a figure that is no bound (the points of waste, the GPU-hours) said at the bounds it is
    computed at (``if C is 43s``, ``if M is 1m 05s``), once after both when they share them;
    the GPU-hours a range over the plausible C when C has an upper one. None when nothing is
    known to be gained."""
    parts = [part for part in (_goodput(e), _stake(e, currency)) if part is not None]
    if not parts:
        return None
    if len({at for _, at in parts}) == 1:
        return ", ".join(text for text, _ in parts) + parts[0][1]
    return "; ".join(text + at for text, at in parts)


def action_line(e: JobEstimate, currency: str = "$") -> tuple[str, str, str]:
    """The first line as ``(lead, what, rest)``: ``("Set ", "save_steps=610", " (1h 00m =
    3,600 s; now 1,440 steps = 2h 24m): goodput 72.4% → 76.2%, 49 GPU-h/day at stake")``;
    ``what`` is code (the setting) when the lead is ``Set ``, else plain words. Concatenated
    they are the plain line."""
    what, is_code = _what_to_set(e)
    buys = gain(e, currency)
    best = _best_time(e) if e.recommended_interval_steps is not None else None
    rest = f" ({best}; {_now(e)})" if best else f" ({_now(e)})"
    rest += f": {buys}" if buys else ""
    if not what:
        return "", "Recommended interval unknown", rest
    return ("Set ", what, rest) if is_code else ("Checkpoint ", what, rest)


def lower_bound_line(e: JobEstimate) -> str | None:
    """When C is only a lower bound: that, and how to get the exact value (said first)."""
    note = next((n for n in e.notes if n.code is NoteCode.COST_LOWER_BOUND), None)
    return None if note is None else render_note(note)


def cost_evidence(e: JobEstimate) -> str:
    """``C 4m 00s (90% CI 3m 58s–4m 02s) from the timing file, 21 saves``; ``from log lines
    that end each save`` for C measured from a stack's own save-end lines (Megatron-LM, NeMo,
    torchtitan, DeepSpeed: ``rules/cost.py`` ``SAVE_END_STACKS``); the CI left out when both
    its ends read as C."""
    if e.checkpoint_cost_s is None:
        return f"C unknown ({_count(e.n_checkpoints)} saves seen)"
    saves = f"{_count(e.n_checkpoints)} saves"
    if e.checkpoint_cost_is_lower_bound:
        high = None if e.checkpoint_cost_range_s is None else e.checkpoint_cost_range_s[1]
        if high is None:
            return f"C ≥ {d(e.checkpoint_cost_s)} from log lines (a lower bound), {saves}"
        return f"C {d(e.checkpoint_cost_s)}–{d(high)} from log lines and progress bars, {saves}"
    ci, shown = e.checkpoint_cost_ci_s, d(e.checkpoint_cost_s)
    band = ""
    if ci is not None and not d(ci[0]) == d(ci[1]) == shown:  # a CI that reads as C says nothing
        band = f" ({ci_label(e.confidence)} {d(ci[0])}–{d(ci[1])})"
    source = (
        "the timing file"
        if e.checkpoint_cost_source == "timing_file"
        else ("log lines that end each save")
    )
    return f"C {shown}{band} from {source}, {saves}"


def mtbf_evidence(e: JobEstimate) -> str:
    """``M 7h 20m (90% CI 3h 54m–15h 38m) from 7 failures in 2d 3h of run time``; ``M ≥ …``
    and ``at least … of run time`` when files without timestamps leave running time unmeasured
    (:attr:`JobEstimate.mtbf_is_lower_bound`)."""
    lower = e.mtbf_is_lower_bound
    seen = f"{_count(e.n_failures)} failures in {'at least ' if lower else ''}"
    seen += f"{d(e.exposure_s)} of run time"
    if e.mtbf_s is None:
        return f"M unknown ({seen})"
    ci = e.mtbf_ci_s
    band = f" ({ci_label(e.confidence)} {d(ci[0])}–{d(ci[1])})" if ci is not None else ""
    fleet = "; with its fleet's rate" if e.mtbf_source == "fleet" else ""
    return f"M {'≥ ' if lower else ''}{d(e.mtbf_s)}{band} from {seen}{fleet}"


def _moved(before: float | None, after: float | None) -> bool:
    return before is not None and after is not None and abs(after / before - 1) > MATERIAL_CHANGE


def changes(e: JobEstimate, previous: Sent | None) -> str:
    """What changed since the last message: ``since the message as of …: advice from 440 to 630
    steps, C rose from 40s to 60s``; ``first message`` without one."""
    if previous is None:
        return "first message about this job"
    moves: list[str] = []
    steps, old_steps = e.recommended_interval_steps, previous.recommended_interval_steps
    if steps is not None and old_steps is not None and _moved(old_steps, steps):
        moves.append(f"advice from {_count(old_steps)} to {_count(steps)} steps")
    elif _moved(previous.recommended_interval_s, e.recommended_interval_s):
        moves.append(
            f"advice from {d(previous.recommended_interval_s)} to {d(e.recommended_interval_s)}"
        )
    for name, before, after in (
        ("C", previous.checkpoint_cost_s, e.checkpoint_cost_s),
        ("M", previous.mtbf_s, e.mtbf_s),
    ):
        if _moved(before, after):
            assert before is not None and after is not None
            way = "rose" if after > before else "fell"
            moves.append(f"{name} {way} from {d(before)} to {d(after)}")
    since = f"since the message as of {utc(previous.as_of_s)}"
    return f"{since}: " + ", ".join(moves) if moves else f"unchanged {since}"


def cli_command(*args: str, config: Path | None = None) -> str:
    """``ckpt-advisor ARGS…`` quoted for a shell, ending ``--config PATH`` when ``config`` is
    the daemon's config file: a command copied from a message or the daemon's log then reads
    the daemon's store, not the default one."""
    return shlex.join(["ckpt-advisor", *args, *(["--config", str(config)] if config else [])])


def silence_command(job: str, config: Path | None = None) -> str:
    """The command that keeps a job quiet for a day (:func:`cli_command`)."""
    return cli_command("silence", "--job", one_line(job), "--for", "24h", config=config)


def as_of(e: JobEstimate) -> float:
    """The moment the message speaks of: the job's newest event (else when it was computed)."""
    return e.newest_event_s if e.newest_event_s is not None else e.computed_at_s


def main_lines(
    e: JobEstimate,
    decision: Decision,
    previous: Sent | None,
    currency: str = "$",
    config: Path | None = None,
) -> Sequence[str]:
    """The message's words as plain lines, in order: title, action, the lower bound of C (when
    it is one), C, M, context (its silence command with ``--config config`` when given). The
    log notifier writes them joined; Slack's fallback too."""
    lead, what, rest = action_line(e, currency)
    lines = [title(e, decision.action), lead + what + rest]
    if (bound := lower_bound_line(e)) is not None:
        lines.append(bound)
    silence = silence_command(e.job, config)
    context = f"As of {utc(as_of(e))}; {changes(e, previous)}; silence: {silence}"
    return [*lines, cost_evidence(e), mtbf_evidence(e), context]
