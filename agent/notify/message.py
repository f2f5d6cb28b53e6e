"""Tell people about a job's checkpoint interval: the message, built without I/O.

``format_message`` turns a :class:`~rules.model.JobEstimate` and the drift rule's
:class:`~rules.model.Decision` into a Slack Block Kit message; ``format_log_line`` gives the same
facts as one plain line (the log notifier's text and the message's notification fallback). Every
number comes computed from the rules; here it is only written for people (durations by
:func:`agent.units.format_duration`, notes by :func:`agent.notes.render_note`).

Slack references:

- Block Kit limits (50 blocks per message, 3,000 characters per section text, 150 per header):
  https://api.slack.com/reference/block-kit/blocks
- mrkdwn escaping of ``&``, ``<``, ``>``: https://api.slack.com/reference/surfaces/formatting#escaping
"""

from __future__ import annotations

from typing import Any, Final

from ckpt_advisor.agent.notes import render_note
from ckpt_advisor.agent.units import format_duration
from ckpt_advisor.rules.model import Action, Decision, JobEstimate

MAX_BLOCKS: Final = 50
MAX_SECTION_CHARS: Final = 3000
MAX_HEADER_CHARS: Final = 150
MAX_FALLBACK_CHARS: Final = 4000  # Slack truncates ``text`` at 40,000; notifications show far less
ELLIPSIS: Final = "…"

_ESCAPES: Final = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"))


def escape_slack(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` as ``&amp;``, ``&lt;``, ``&gt;`` for Slack text.

    After this, ``<!channel>``, ``<!here>``, ``<@U123>`` and ``<http://x|y>`` show literally
    instead of notifying people or rendering links. Nothing else is entity-encoded: Slack decodes
    only these three (https://api.slack.com/reference/surfaces/formatting#escaping).
    """
    for raw, entity in _ESCAPES:
        text = text.replace(raw, entity)
    return text


def unescape_slack(text: str) -> str:
    """Invert :func:`escape_slack` exactly (``&amp;`` last, so ``&amp;lt;`` becomes ``&lt;``)."""
    for raw, entity in reversed(_ESCAPES):
        text = text.replace(entity, raw)
    return text


def truncate_slack(text: str, max_chars: int) -> str:
    """Shorten escaped Slack text to at most ``max_chars`` characters, ending in ``…`` if cut.

    A cut never splits an entity: if it would fall inside ``&amp;``, ``&lt;`` or ``&gt;``, the
    whole entity is dropped. ``max_chars`` must be at least 1.
    """
    if len(text) <= max_chars:
        return text
    head = text[: max_chars - len(ELLIPSIS)]
    amp = head.rfind("&")
    if amp != -1 and ";" not in head[amp:]:
        head = head[:amp]
    return head + ELLIPSIS


def _one_line(text: str) -> str:
    """Collapse whitespace (newlines included) so log-derived text cannot forge extra lines."""
    return " ".join(text.split())


def _seconds(value_s: float) -> str:
    return f"{value_s:,.0f} s"


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.1f}%"


def _interval(value_s: float | None, steps: int | None, step_time_s: float | None) -> str:
    """``4h 00m (14,400 s, 1,800 steps of 8s)`` or ``unknown``."""
    if value_s is None:
        return "unknown"
    parts = [_seconds(value_s)]
    if steps is not None:
        parts.append(
            f"{steps:,} steps" + (f" of {format_duration(step_time_s)}" if step_time_s else "")
        )
    return f"{format_duration(value_s)} ({', '.join(parts)})"


def _range(ci_s: tuple[float, float] | None, label: str) -> str:
    if ci_s is None:
        return ""
    return f"; {label} {format_duration(ci_s[0])} to {format_duration(ci_s[1])}"


def _cost_fact(e: JobEstimate) -> str:
    if e.checkpoint_cost_s is None:
        return f"unknown ({e.n_checkpoints} saves seen)"
    source = {"timing_file": "timing file", "log": "log lines"}.get(
        e.checkpoint_cost_source or "", e.checkpoint_cost_source or "unknown source"
    )
    return (
        f"{format_duration(e.checkpoint_cost_s)} ({_seconds(e.checkpoint_cost_s)}"
        f"{_range(e.checkpoint_cost_ci_s, 'CI')}; from {source}, {e.n_checkpoints} saves)"
    )


def _mtbf_fact(e: JobEstimate) -> str:
    exposure = f"{e.n_failures} failures in {format_duration(e.exposure_s)} of run time"
    if e.mtbf_s is None:
        return f"unknown ({exposure})"
    return (
        f"{format_duration(e.mtbf_s)} ({_seconds(e.mtbf_s)}"
        f"{_range(e.mtbf_ci_s, '90% CI')}; {exposure})"
    )


def _waste_fact(e: JobEstimate, currency: str) -> str:
    now, best = e.waste_fraction_current, e.waste_fraction_recommended
    if now is None or best is None:
        return "unknown"
    saved = now - best
    text = f"{_percent(now)} of run time now, {_percent(best)} at the recommended interval"
    if saved > 0:
        text += f"; saves {_percent(saved)} of run time"
        if e.excess_gpu_hours_per_day is not None and e.gpus is not None:
            text += f" = {e.excess_gpu_hours_per_day:,.1f} GPU-hours/day on {e.gpus:,} GPUs"
            if e.excess_cost_per_day is not None:
                text += f" ≈ {currency}{e.excess_cost_per_day:,.0f}/day"
    return text


def _class_mtbf(mtbf_s: float | None) -> str:
    """`` (M 9h 27m)`` for a failure class whose own MTBF is known, else nothing."""
    return "" if mtbf_s is None else f" (M {format_duration(mtbf_s)})"


def _mtbf_detail(e: JobEstimate) -> list[tuple[str, str]]:
    """The Weibull shape, the per-unit M and where M comes from."""
    facts: list[tuple[str, str]] = []
    if e.weibull_shape is not None and e.weibull_shape_ci is not None:
        low, high = e.weibull_shape_ci
        used = "; widens M's interval" if e.mtbf_source == "weibull" else "; near 1 (exponential)"
        facts.append(("Weibull shape", f"{e.weibull_shape:.2f} ({low:.2f} to {high:.2f}){used}"))
    if e.mtbf_per_unit_s is not None and e.units is not None:
        # units are the job's nodes when configured, else its GPUs (agent.app.job_sizes)
        unit = "GPU" if e.gpus is not None and e.units == e.gpus else "node"
        source = "; from the fleet's rate" if e.mtbf_source == "fleet" else ""
        per = f"{format_duration(e.mtbf_per_unit_s)} ({e.units:,} {unit}s in the job{source})"
        facts.append((f"M per {unit}", per))
    return facts


def _save_detail(e: JobEstimate) -> list[tuple[str, str]]:
    """A recent change of C and the background persist time of asynchronous saves."""
    facts: list[tuple[str, str]] = []
    if e.checkpoint_cost_previous_s is not None and e.checkpoint_cost_s is not None:
        facts.append(
            (
                "C changed",
                f"from {format_duration(e.checkpoint_cost_previous_s)} to "
                f"{format_duration(e.checkpoint_cost_s)} recently",
            )
        )
    if e.persist_latency_s is not None:
        text = f"{format_duration(e.persist_latency_s)} in the background (not in C)"
        if e.current_interval_s is not None and e.persist_latency_s > e.current_interval_s:
            text += "; WARNING: longer than the interval, saves queue up"
        facts.append(("Persist latency", text))
    return facts


def _recommended_fact(e: JobEstimate) -> str:
    text = _interval(e.recommended_interval_s, e.recommended_interval_steps, e.step_time_s)
    if e.recommended_setting:
        text += f"; set {_one_line(e.recommended_setting)}"
    return text + _range(e.recommended_interval_ci_s, "range")


def _title(e: JobEstimate, action: Action) -> str:
    job = _one_line(e.job)
    return {
        Action.NOTIFY: f"Checkpoint interval off for {job}",
        Action.REPEAT: f"Checkpoint interval still off for {job}",
        Action.RESOLVE: f"Checkpoint interval back within range for {job}",
        Action.NONE: f"Checkpoint interval for {job}",
    }[action]


def _fact_groups(
    e: JobEstimate, decision: Decision, currency: str = "$"
) -> list[list[tuple[str, str]]]:
    """The message's facts as (label, plain text) pairs, grouped into Slack sections."""
    intervals = [
        ("Current interval", _interval(e.current_interval_s, e.current_interval_steps, None)),
        ("Recommended interval", _recommended_fact(e)),
    ]
    waste = [("Waste", _waste_fact(e, currency))]
    why = [("Why", _one_line(decision.reason))] if decision.reason else []
    if decision.action is Action.RESOLVE:
        return [intervals + waste + why]
    inputs = [
        ("Checkpoint cost C", _cost_fact(e)),
        *_save_detail(e),
        ("MTBF M", _mtbf_fact(e)),
        *_mtbf_detail(e),
    ]
    if e.failure_classes:
        classes = ", ".join(
            f"{_one_line(name)} ×{count}" + _class_mtbf(e.mtbf_by_class_s.get(name))
            for name, count in sorted(e.failure_classes.items())
        )
        inputs.append(("Failures by class", classes))
    if e.restart_cost_s is not None:
        inputs.append(("Restart cost R", format_duration(e.restart_cost_s)))
    model = [
        (
            "Model",
            f"Young (1974) {format_duration(e.young_interval_s)}, "
            f"Daly (2006) {format_duration(e.daly_interval_s)}"
            + (f"; current/recommended {e.drift_ratio:.2f}×" if e.drift_ratio is not None else ""),
        )
    ]
    return [intervals, inputs, waste + model + why]


def format_log_line(estimate: JobEstimate, decision: Decision, *, currency: str = "$") -> str:
    """The facts of :func:`format_message` as one plain-text line (no Slack escaping).

    Used for the daemon's log when no Slack token is configured, and (escaped) as the message's
    notification fallback. Newlines in log-derived text are collapsed, so the result is one line.
    """
    facts = [
        f"{label}: {value}"
        for group in _fact_groups(estimate, decision, currency)
        for label, value in group
    ]
    facts += [f"Note: {_one_line(render_note(note))}" for note in estimate.notes]
    return f"{_title(estimate, decision.action)}. " + ". ".join(facts)


def _mrkdwn_section(text: str) -> dict[str, Any]:
    return {
        "type": "section",
        "text": {"type": "mrkdwn", "text": truncate_slack(text, MAX_SECTION_CHARS)},
    }


def _note_sections(notes: list[str], max_blocks: int) -> list[dict[str, Any]]:
    """Pack notes, one bulleted escaped line each, into at most ``max_blocks`` sections of at most
    3,000 characters; when they do not fit, the last section counts the notes left out."""
    lines = [
        truncate_slack("• " + escape_slack(_one_line(note)), MAX_SECTION_CHARS) for note in notes
    ]
    texts: list[str] = []
    for line in lines:
        if texts and len(texts[-1]) + 1 + len(line) <= MAX_SECTION_CHARS:
            texts[-1] += "\n" + line
        else:
            texts.append(line)
    if len(texts) > max_blocks:
        shown = texts[: max_blocks - 1]
        hidden = len(lines) - sum(text.count("\n") + 1 for text in shown)
        texts = [*shown, f"_…and {hidden} more notes not shown_"]
    return [_mrkdwn_section(text) for text in texts]


def format_message(
    estimate: JobEstimate, decision: Decision, *, currency: str = "$"
) -> dict[str, Any]:
    """Build the Slack message for one decision: ``{"text": str, "blocks": list[dict]}``.

    Args:
        estimate: the job's estimate; seconds throughout, unknown numbers None. Its
            ``recommended_setting`` (``save_steps=450``) is shown with the recommendation; its
            ``excess_gpu_hours_per_day`` (a job with ``gpus``) and ``excess_cost_per_day`` (a
            price per GPU-hour configured) with the saving: computed once, in the rules.
        decision: the drift rule's verdict; ``Action.RESOLVE`` gives a short "back within range"
            message, the other actions the full drift report.
        currency: the symbol or code put before money amounts.

    Returns:
        ``text``: the escaped one-line fallback (``format_log_line``) for notifications, at most
        4,000 characters. ``blocks``: a header (≤150 characters) and mrkdwn sections (each
        ≤3,000 characters), at most 50 blocks, as ``chat.postMessage`` takes them. All text from
        logs or config (job, notes, failure classes, setting, reason) is escaped with
        :func:`escape_slack`, so it cannot mention anyone or render a link.
    """
    header = {
        "type": "header",
        "text": {
            "type": "plain_text",
            "text": truncate_slack(
                escape_slack(_title(estimate, decision.action)), MAX_HEADER_CHARS
            ),
        },
    }
    sections = [
        _mrkdwn_section("\n".join(f"*{label}:* {escape_slack(value)}" for label, value in group))
        for group in _fact_groups(estimate, decision, currency)
    ]
    blocks = [header, *sections]
    notes = [render_note(note) for note in estimate.notes]
    blocks += _note_sections(notes, MAX_BLOCKS - len(blocks))
    fallback = format_log_line(estimate, decision, currency=currency)
    return {"text": truncate_slack(escape_slack(fallback), MAX_FALLBACK_CHARS), "blocks": blocks}
