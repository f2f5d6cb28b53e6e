"""Tell people about a job's checkpoint interval: the Slack messages, built without I/O.

One decision gives up to three posts (:mod:`agent.notify.wording` has their words):

- the message (:func:`format_message`): a header, the action line, the lower bound of C and
  how to get the exact value (when C is one), the evidence (C and M) and a context line;
- its detail (:func:`format_details`), a reply in the message's thread: intervals in seconds
  and steps, per-class M, the Weibull shape, the reason, the notes;
- the waste-curve plot (:func:`plot_upload`), uploaded into that thread when the token may
  upload files. A resolve is one short reply in the thread of the episode's last message
  (:func:`format_resolve`).

Every block is built with slack-sdk's Block Kit models, whose ``to_dict`` checks Slack's
limits (header ≤ 150 characters, section text ≤ 3,000); a message has at most 50 blocks
(:func:`check_limits`). The header is plain text, shown as written (no entity escaping, no
emoji codes); every mrkdwn text from logs or config (job, notes, failure classes, setting) is
escaped with :func:`escape_slack`, so it cannot mention anyone or render a link. The ``text``
of each post is its plain-text fallback (notifications, the log notifier): the same words,
starting with the same action.

Slack references:

- Block Kit limits: https://api.slack.com/reference/block-kit/blocks
- mrkdwn escaping of ``&``, ``<``, ``>``: https://api.slack.com/reference/surfaces/formatting#escaping
- Dates shown in the reader's time zone (``<!date^…>``):
  https://api.slack.com/reference/surfaces/formatting#date-formatting
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import (
    Block,
    ContextBlock,
    HeaderBlock,
    MarkdownTextObject,
    PlainTextObject,
    SectionBlock,
)

from ckpt_advisor.agent.notify.detail import detail_facts, detail_notes, resolve_line
from ckpt_advisor.agent.notify.wording import (
    Sent,
    action_line,
    as_of,
    changes,
    cost_evidence,
    lower_bound_line,
    main_lines,
    mtbf_evidence,
    one_line,
    silence_command,
    title,
    utc,
)
from ckpt_advisor.rules.model import Decision, JobEstimate

MAX_BLOCKS: Final = 50
MAX_SECTION_CHARS: Final = 3000
MAX_HEADER_CHARS: Final = 150
MAX_FALLBACK_CHARS: Final = 4000  # Slack truncates ``text`` at 40,000; notifications show far less
ELLIPSIS: Final = "…"

_ESCAPES: Final = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"))


def escape_slack(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` as ``&amp;``, ``&lt;``, ``&gt;`` for Slack mrkdwn text.

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


def _plain(text: str, max_chars: int) -> str:
    """Plain text (no entities) cut to ``max_chars``, ending in ``…`` if cut."""
    text = one_line(text)
    return text if len(text) <= max_chars else text[: max_chars - len(ELLIPSIS)] + ELLIPSIS


def _code(text: str) -> str:
    """``text`` as mrkdwn inline code, escaped (a backtick inside would end the span)."""
    inner = escape_slack(one_line(text).replace("`", "'"))
    return f"`{inner}`"


def _date(epoch_s: float) -> str:
    """A time Slack shows in the reader's zone, with the UTC text as its fallback."""
    return f"<!date^{int(epoch_s)}^{{date_short_pretty}} at {{time}}|{utc(epoch_s)}>"


def _section(mrkdwn: str) -> Block:
    return SectionBlock(text=MarkdownTextObject(text=truncate_slack(mrkdwn, MAX_SECTION_CHARS)))


def _header(text: str) -> Block:
    return HeaderBlock(text=PlainTextObject(text=_plain(text, MAX_HEADER_CHARS), emoji=False))


def _context(mrkdwn: str) -> Block:
    return ContextBlock(
        elements=[MarkdownTextObject(text=truncate_slack(mrkdwn, MAX_SECTION_CHARS))]
    )


def _payload(blocks: list[Block], fallback: str) -> dict[str, Any]:
    """``{"text", "blocks"}``; each block's ``to_dict`` checks its own limits."""
    payload = {
        "text": truncate_slack(escape_slack(one_line(fallback)), MAX_FALLBACK_CHARS),
        "blocks": [block.to_dict() for block in blocks],
    }
    check_limits(payload)
    return payload


def check_limits(payload: dict[str, Any]) -> None:
    """Raise ValueError when ``payload`` breaks a limit of Block Kit: more than 50 blocks, or a
    block that slack-sdk's models reject (``Block.parse(...).validate_json()``: header over 150
    characters, section text over 3,000, …), or a fallback over 4,000 characters."""
    blocks = payload.get("blocks") or []
    if len(blocks) > MAX_BLOCKS:
        raise ValueError(f"{len(blocks)} blocks: Slack takes at most {MAX_BLOCKS}")
    if len(payload.get("text") or "") > MAX_FALLBACK_CHARS:
        raise ValueError(f"fallback text over {MAX_FALLBACK_CHARS} characters")
    for block in blocks:
        parsed = Block.parse(block)
        if parsed is None:
            raise ValueError(f"not a Block Kit block: {block!r}")
        try:
            parsed.validate_json()
        except SlackObjectFormationError as exc:
            raise ValueError(f"{block.get('type')} block: {exc}") from None


def format_message(
    estimate: JobEstimate,
    decision: Decision,
    *,
    previous: Sent | None = None,
    currency: str = "$",
    config: Path | None = None,
) -> dict[str, Any]:
    """The message for a NOTIFY or REPEAT: ``{"text": str, "blocks": list[dict]}``.

    Blocks, in order: the header (plain text); the action (``*Set* `save_steps=610` (now
    1,440): goodput +3.8 points ≈ 49 GPU-h/day``); when C is only a lower bound, that and how
    to add a timing file; the evidence (C, then M, with ranges and counts); a context line (as
    of the job's newest event, in the reader's time zone; what changed since ``previous``, the
    last message about the job; the ``silence`` command). ``text`` is the same, on one line.

    Args:
        estimate: the job's estimate (seconds, unknown numbers None).
        decision: the drift rule's decision (its action names the header).
        previous: what the job's last message said, or None for a first message.
        currency: the symbol put before money amounts.
        config: the daemon's config file, given to the ``silence`` command as ``--config``.
    """
    e = estimate
    lead, what, rest = action_line(e, currency)
    shown = (
        f"*{lead.strip()}* {_code(what)}" if lead == "Set " else f"*{escape_slack(lead + what)}*"
    )
    blocks = [_header(title(e, decision.action)), _section(shown + escape_slack(rest))]
    if (bound := lower_bound_line(e)) is not None:
        blocks.append(_section(":warning: " + escape_slack(one_line(bound))))
    evidence = [cost_evidence(e), mtbf_evidence(e)]
    blocks.append(_section("\n".join(f"*{t[0]}*{escape_slack(t[1:])}" for t in evidence)))
    blocks.append(
        _context(
            f"As of {_date(as_of(e))} · {escape_slack(changes(e, previous))} · silence: "
            + _code(silence_command(e.job, config))
        )
    )
    return _payload(blocks, _joined(main_lines(e, decision, previous, currency, config)))


def _joined(lines: Sequence[str]) -> str:
    """``Title: line. line. …`` (the fallback and the log line)."""
    first, *others = lines
    return f"{first}: " + ". ".join(others)


def format_details(estimate: JobEstimate, decision: Decision) -> dict[str, Any]:
    """The detail of a message, posted as a reply in its thread: ``{"text", "blocks"}``.

    One section per group of facts (intervals with seconds, steps and the recommended range;
    C with its change and persist time, R; M with per-class M, the Weibull shape, M per node;
    Young's and Daly's intervals and why), then the notes, one bulleted line each, packed into
    the remaining blocks (the last says how many did not fit).
    """
    groups = detail_facts(estimate, decision)
    sections = [
        _section("\n".join(f"*{f.label}:* {escape_slack(f.text)}" for f in group))
        for group in groups
    ]
    notes = detail_notes(estimate)
    sections += _note_sections(notes, MAX_BLOCKS - len(sections))
    fallback = f"Details for {estimate.job}: " + ". ".join(
        [f"{f.label}: {f.text}" for group in groups for f in group]
        + [f"Note: {note}" for note in notes]
    )
    return _payload(sections, fallback)


def format_resolve(estimate: JobEstimate, decision: Decision) -> dict[str, Any]:
    """The short reply that closes an episode in its thread: ``{"text", "blocks"}``."""
    line = resolve_line(estimate, decision)
    blocks = [_section(f":white_check_mark: *{escape_slack(title(estimate, decision.action))}*")]
    blocks.append(_section(escape_slack(line)))
    blocks.append(_context(f"As of {_date(as_of(estimate))}"))
    return _payload(blocks, f"{title(estimate, decision.action)}: {line}")


def plot_upload(job: str, png: bytes) -> dict[str, Any]:
    """The outbox payload of a waste-curve plot: ``{"upload": {"filename", "title",
    "png_base64"}, "text"}`` (``text``: what the log notifier writes instead)."""
    return {
        "upload": {
            "filename": "waste-curve.png",
            "title": _plain(f"Waste curve of {job}", 200),
            "png_base64": base64.b64encode(png).decode("ascii"),
        },
        "text": escape_slack(one_line(f"Waste curve of {job} (a plot, not shown in a log)")),
    }


def _note_sections(notes: list[str], max_blocks: int) -> list[Block]:
    """Pack notes, one bulleted escaped line each, into at most ``max_blocks`` sections of at most
    3,000 characters; when they do not fit, the last section counts the notes left out."""
    lines = [
        truncate_slack("• " + escape_slack(one_line(note)), MAX_SECTION_CHARS) for note in notes
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
    return [_section(text) for text in texts]
