"""Tell people about a job's checkpoint interval: format (pure) and send (Slack or the log).

``format_message`` turns a :class:`~rules.model.JobEstimate` and the drift rule's
:class:`~rules.model.Decision` into a Slack Block Kit message; ``format_log_line`` gives the same
facts as one plain line. ``SlackNotifier`` posts with slack-sdk (``chat.postMessage``);
``LogNotifier`` writes to a logger when no token is configured. Both raise or return the same
way, so the daemon's outbox does not care which one it holds.

Slack references:

- chat.postMessage: https://api.slack.com/methods/chat.postMessage
- Block Kit limits (50 blocks per message, 3,000 characters per section text, 150 per header):
  https://api.slack.com/reference/block-kit/blocks
- mrkdwn escaping of ``&``, ``<``, ``>``: https://api.slack.com/reference/surfaces/formatting#escaping
- Rate limits and ``Retry-After``: https://api.slack.com/apis/rate-limits
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from enum import StrEnum
from http.client import HTTPException
from typing import Any, Final, Protocol, cast
from urllib.error import URLError

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from ckpt_advisor.agent.notes import render_note
from ckpt_advisor.agent.units import format_duration
from ckpt_advisor.rules.model import Action, Decision, JobEstimate

MAX_BLOCKS: Final = 50
MAX_SECTION_CHARS: Final = 3000
MAX_HEADER_CHARS: Final = 150
MAX_FALLBACK_CHARS: Final = 4000  # Slack truncates ``text`` at 40,000; notifications show far less
ELLIPSIS: Final = "…"
METADATA_EVENT: Final = "ckpt_advisor_outbox"

_ESCAPES: Final = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"))

# Slack error codes worth retrying later; any other ``ok: false`` answer will fail again as sent
# (bad token, missing channel, malformed message), so retrying it would only block the outbox.
# https://api.slack.com/methods/chat.postMessage#errors
_TRANSIENT_SLACK_ERRORS: Final = frozenset(
    {
        "ratelimited",
        "rate_limited",
        "message_limit_exceeded",
        "service_unavailable",
        "fatal_error",
        "internal_error",
        "request_timeout",
        "team_added_to_org",
    }
)
_AUTH_ERRORS: Final = frozenset(
    {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired"}
)
_CHANNEL_ERRORS: Final = frozenset({"channel_not_found", "not_in_channel", "is_archived"})
CONFIG_SLACK_ERRORS: Final = _AUTH_ERRORS | _CHANNEL_ERRORS
"""Errors of the token or channel, not of one message: every later message would fail too."""


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


class NotifyErrorKind(StrEnum):
    """Whether sending again later can succeed."""

    TRANSIENT = "transient"  # rate limited, 5xx, timeout, connection: queue in the outbox
    PERMANENT = "permanent"  # bad token, unknown channel, rejected message: fix config first


class NotifyError(Exception):
    """A message was not delivered.

    Attributes:
        kind: :class:`NotifyErrorKind`; the outbox keeps TRANSIENT failures for a later try.
        message: what happened, for people; never contains the token.
        slack_error: Slack's error code (``invalid_auth``, ``ratelimited``, …) if Slack answered.
        retry_after_s: seconds Slack asked to wait (``Retry-After``), if it did.
        maybe_sent: the request reached Slack but no clear answer came back (read timeout,
            HTTP 5xx): the message may be in the channel already, so it must not be sent again
            without checking (:meth:`Notifier.find`).
    """

    def __init__(
        self,
        kind: NotifyErrorKind,
        message: str,
        *,
        slack_error: str | None = None,
        retry_after_s: float | None = None,
        maybe_sent: bool = False,
    ) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.slack_error = slack_error
        self.retry_after_s = retry_after_s
        self.maybe_sent = maybe_sent

    @property
    def transient(self) -> bool:
        """True when sending the same message later may succeed."""
        return self.kind is NotifyErrorKind.TRANSIENT


class Notifier(Protocol):
    """Something that delivers a :func:`format_message` dict and returns its id."""

    def send(self, message: dict[str, Any], *, key: str | None = None) -> str:
        """Deliver ``message`` tagged with the idempotency ``key``; return its id (Slack's
        ``ts``). Raises :class:`NotifyError`."""
        ...

    def find(self, key: str, since_s: float) -> str | None:
        """The id of a message tagged ``key`` sent since ``since_s`` (epoch seconds), or None.
        Raises :class:`NotifyError` when it cannot be checked."""
        ...


def _retry_after_s(value: str | None) -> int | None:
    """Parse a ``Retry-After`` header in whole seconds (as Slack sends it); None if absent or
    not an integer (the HTTP-date form is not used by Slack)."""
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


class _BoundedRateLimitRetryHandler(RateLimitErrorRetryHandler):
    """slack-sdk's 429 handler (sleeps ``Retry-After``, retries once), but only when Slack asks
    for at most ``max_wait_s``: a longer wait is handed back to the caller as a transient error
    with ``retry_after_s``, so one sender is never parked for minutes."""

    def __init__(self, max_wait_s: float) -> None:
        super().__init__(max_retry_count=1)
        self.max_wait_s = max_wait_s

    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if response is None or response.status_code != 429:
            return False
        values = {k.lower(): v for k, v in response.headers.items()}.get("retry-after")
        if not values:
            return True  # slack-sdk then waits 1-2 s
        # slack-sdk's own sleep does int(value): a value it cannot parse must not reach it.
        wait_s = _retry_after_s(values[0])
        return wait_s is not None and wait_s <= self.max_wait_s


class SlackNotifier:
    """Posts messages to one Slack channel with the bot token, via slack-sdk's ``WebClient``.

    Retries inside one :meth:`send` are bounded and never post twice: one retry after a 429
    (sleeping ``Retry-After`` seconds plus jitter, if at most ``max_retry_after_s``; Slack did not
    process the request) and one after a failure to connect (``URLError``: nothing was sent).
    A read timeout or HTTP 5xx is not retried here: Slack may have posted the message already,
    so it raises with ``maybe_sent``, and the outbox looks for the message before sending again.

    Idempotency: each message carries Slack message metadata
    (``event_type`` ``ckpt_advisor_outbox``, ``event_payload.key``); :meth:`find` looks for the
    key with ``conversations.history`` (needs the ``channels:history`` scope, and the channel ID,
    learnt from the first successful post or configured as ``C…``).

    The token is kept only inside the client: it is not in ``repr()``, nor in any
    :class:`NotifyError` (raised ``from None``, so slack-sdk's error, whose response holds the
    request headers, is not chained).
    """

    def __init__(
        self,
        token: str,
        channel: str,
        *,
        base_url: str = "https://slack.com/api/",
        timeout_s: float = 10.0,
        max_retry_after_s: float = 30.0,
    ) -> None:
        """Build the client; no request is made here.

        Args:
            token: the bot token (``xoxb-…``).
            channel: ``#name`` or channel ID to post to.
            base_url: the Web API root, ending in ``/api/`` (other deployments such as GovSlack
                differ; tests point it at a loopback fake).
            timeout_s: seconds per HTTP attempt (connect and read).
            max_retry_after_s: the longest ``Retry-After`` to sleep through inside :meth:`send`.
        """
        self.channel = channel
        self.channel_id: str | None = channel if channel[:1] in ("C", "G") else None
        self.base_url = base_url
        self.timeout_s = timeout_s
        self._client = WebClient(
            token=token,
            base_url=base_url,
            # slack-sdk annotates ``int`` but hands the value to urlopen, which takes float seconds.
            timeout=cast(int, timeout_s),
            retry_handlers=[
                _BoundedRateLimitRetryHandler(max_retry_after_s),
                ConnectionErrorRetryHandler(max_retry_count=1, error_types=[URLError]),
            ],
        )

    def __repr__(self) -> str:
        return (
            f"SlackNotifier(channel={self.channel!r}, base_url={self.base_url!r}, "
            f"timeout_s={self.timeout_s!r}, token=<hidden>)"
        )

    def send(self, message: dict[str, Any], *, key: str | None = None) -> str:
        """Post ``message`` (``{"text": ..., "blocks": [...]}``) with ``chat.postMessage``.

        Args:
            message: the :func:`format_message` dict.
            key: idempotency key, sent as message metadata so :meth:`find` can see whether a
                message whose answer was lost is in the channel.

        Returns:
            The message's ``ts`` (Slack's id for it in the channel).

        Raises:
            NotifyError: TRANSIENT for rate limits beyond the retry, HTTP 5xx, timeouts and
                connection errors (``maybe_sent`` for 5xx and timeouts); PERMANENT for answers
                that will not change on their own (``invalid_auth``, ``not_authed``,
                ``token_revoked``, ``account_inactive``, ``channel_not_found``,
                ``not_in_channel``, ``invalid_blocks``, …) and for a malformed ``base_url``.
        """
        metadata = {"event_type": METADATA_EVENT, "event_payload": {"key": key}} if key else None
        response = self._call(
            "chat.postMessage",
            lambda: self._client.chat_postMessage(
                channel=self.channel,
                text=message["text"],
                blocks=message.get("blocks"),
                metadata=metadata,
            ),
        )
        self.channel_id = str(response.get("channel") or self.channel_id or "") or None
        return str(response["ts"])

    def find(self, key: str, since_s: float) -> str | None:
        """Look in the channel's history since ``since_s`` for a message sent with ``key``.

        Returns:
            Its ``ts``, or None when no such message is there.

        Raises:
            NotifyError: as :meth:`send`; PERMANENT (``missing_scope``, ``channel_not_found``)
                when the history cannot be read, e.g. the channel is configured by name and no
                post has succeeded yet, or the bot lacks ``channels:history``.
        """
        channel = self.channel_id or self.channel
        response = self._call(
            "conversations.history",
            lambda: self._client.conversations_history(
                channel=channel, oldest=f"{since_s:.6f}", include_all_metadata=True, limit=200
            ),
        )
        for msg in response.get("messages") or []:
            payload = (msg.get("metadata") or {}).get("event_payload") or {}
            if payload.get("key") == key:
                return str(msg["ts"])
        return None

    def _call(self, method: str, request: Callable[[], Any]) -> Any:
        """Run one Web API call, mapping every failure to a token-free :class:`NotifyError`."""
        try:
            return request()
        except SlackApiError as exc:
            raise self._api_error(method, exc) from None
        except SlackClientError as exc:
            raise NotifyError(
                NotifyErrorKind.PERMANENT, self._scrub(f"Slack client error: {exc}")
            ) from None
        except (OSError, HTTPException) as exc:
            raise NotifyError(
                NotifyErrorKind.TRANSIENT,
                self._scrub(
                    f"could not reach Slack at {self.base_url}: {type(exc).__name__}: {exc}"
                ),
                maybe_sent=not isinstance(exc, URLError),
            ) from None

    def _api_error(self, method: str, exc: SlackApiError) -> NotifyError:
        """Map slack-sdk's error for an answered request to a NotifyError (token-free)."""
        status = int(exc.response.status_code)
        data = exc.response.data if isinstance(exc.response.data, dict) else {}
        code = str(data.get("error") or f"http_{status}")
        headers = {k.lower(): v for k, v in exc.response.headers.items()}
        retry_after_s = _retry_after_s(headers.get("retry-after"))
        transient = status == 429 or status >= 500 or code in _TRANSIENT_SLACK_ERRORS
        if code in _AUTH_ERRORS:
            hint = ": the bot token was rejected; check the token configured for [slack]"
        elif code in _CHANNEL_ERRORS:
            hint = f": invite the bot to {self.channel!r} or fix [slack] channel"
        elif retry_after_s is not None:
            hint = f": Slack asks to wait {retry_after_s:g} s"
        else:
            hint = ""
        return NotifyError(
            NotifyErrorKind.TRANSIENT if transient else NotifyErrorKind.PERMANENT,
            self._scrub(f"{method} to {self.channel!r} failed (HTTP {status}, {code}){hint}"),
            slack_error=code,
            retry_after_s=retry_after_s,
            maybe_sent=status >= 500,
        )

    def _scrub(self, text: str) -> str:
        token = self._client.token
        return text.replace(token, "<token>") if token else text


class LogNotifier:
    """Writes each message's fallback text to ``logger`` at WARNING (no Slack token configured).

    The Slack escaping is undone first, so the log shows the text as written in the training logs.
    """

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger

    def __repr__(self) -> str:
        return f"LogNotifier(logger={self.logger.name!r})"

    def send(self, message: dict[str, Any], *, key: str | None = None) -> str:
        """Log ``message["text"]``; return a Slack-like id (``"<epoch seconds>.<micros>"``)."""
        self.logger.warning("%s", unescape_slack(message["text"]))
        return f"{time.time():.6f}"

    def find(self, key: str, since_s: float) -> str | None:
        """A log line cannot be half-sent: never found, always safe to write again."""
        return None
