"""The Slack adapter: posts messages with slack-sdk's ``WebClient`` (``chat.postMessage``,
replies in threads, plots with ``files_upload_v2``).

References:

- chat.postMessage (``thread_ts`` for replies): https://api.slack.com/methods/chat.postMessage
- conversations.history and .replies: https://api.slack.com/methods/conversations.history,
  https://api.slack.com/methods/conversations.replies
- files_upload_v2 (files.getUploadURLExternal, files.completeUploadExternal):
  https://api.slack.com/methods/files.completeUploadExternal
- scopes of a token (``x-oauth-scopes``): https://api.slack.com/methods/auth.test
- Rate limits and ``Retry-After``: https://api.slack.com/apis/rate-limits
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from http.client import HTTPException
from pathlib import Path
from typing import Any, Final, cast
from urllib.error import URLError

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError, SlackRequestError
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from ckpt_advisor.agent.notify.base import NotifyError, NotifyErrorKind
from ckpt_advisor.agent.notify.wording import cli_command

METADATA_EVENT: Final = "ckpt_advisor_outbox"
UPLOAD_SCOPE: Final = "files:write"
"""The OAuth scope ``files_upload_v2`` needs (the waste-curve plot)."""
SCOPES: Final = {
    "chat:write": "no message can be posted",
    UPLOAD_SCOPE: "messages go out without the waste-curve plot",
    "channels:history": "a send whose answer was lost cannot be looked for in the channel, so "
    "it is never sent again (use groups:history for a private channel)",
}
"""The scopes the bot uses, and what is lost without each."""

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


def _key_tag(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:8]


def upload_name(filename: str, key: str | None) -> str:
    """The file name an upload is shared under: ``waste-curve.png`` with a short hash of the
    idempotency key before the extension (``waste-curve-1a2b3c4d.png``), so :meth:`find` can
    recognise it."""
    if key is None:
        return filename
    stem, dot, ext = filename.rpartition(".")
    if not dot:
        return f"{filename}-{_key_tag(key)}"
    return f"{stem}-{_key_tag(key)}.{ext}"


def _named_for(name: str, key: str) -> bool:
    """True when a shared file's ``name`` carries ``key``'s hash (:func:`upload_name`)."""
    tag = f"-{_key_tag(key)}"
    return name.rpartition(".")[0].endswith(tag) or name.endswith(tag)


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
        config_path: Path | None = None,
    ) -> None:
        """Build the client; no request is made here.

        Args:
            token: the bot token (``xoxb-…``).
            channel: ``#name`` or channel ID to post to.
            base_url: the Web API root, ending in ``/api/`` (other deployments such as GovSlack
                differ; tests point it at a loopback fake).
            timeout_s: seconds per HTTP attempt (connect and read).
            max_retry_after_s: the longest ``Retry-After`` to sleep through inside :meth:`send`.
            config_path: the daemon's config file, named (``--config``) in the command its
                errors suggest.
        """
        self.channel = channel
        self.channel_id: str | None = channel if channel[:1] in ("C", "G") else None
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.config_path = config_path
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

    def send(
        self, message: dict[str, Any], *, key: str | None = None, thread_ts: str | None = None
    ) -> str:
        """Post ``message`` (``{"text": ..., "blocks": [...]}``) with ``chat.postMessage``, or
        upload a plot (``{"upload": {...}}``, :func:`agent.notify.message.plot_upload`) with
        ``files_upload_v2``; in the thread of ``thread_ts`` when given.

        Args:
            message: an :mod:`agent.notify.message` payload.
            key: idempotency key: sent as message metadata (an upload's file name carries a
                hash of it), so :meth:`find` can see whether a message whose answer was lost
                is in the channel.
            thread_ts: the ``ts`` of the message to reply under, or None.

        Returns:
            The message's ``ts`` (Slack's id for it in the channel); an upload's file id.

        Raises:
            NotifyError: TRANSIENT for rate limits beyond the retry, HTTP 5xx, timeouts and
                connection errors (``maybe_sent`` for 5xx and timeouts); PERMANENT for answers
                that will not change on their own (``invalid_auth``, ``not_authed``,
                ``token_revoked``, ``account_inactive``, ``channel_not_found``,
                ``not_in_channel``, ``invalid_blocks``, ``missing_scope`` for an upload without
                ``files:write``, …) and for a malformed ``base_url``.
        """
        if "upload" in message:
            return self._upload(message["upload"], key, thread_ts)
        metadata = {"event_type": METADATA_EVENT, "event_payload": {"key": key}} if key else None
        response = self._call(
            "chat.postMessage",
            lambda: self._client.chat_postMessage(
                channel=self.channel,
                text=message["text"],
                blocks=message.get("blocks"),
                metadata=metadata,
                thread_ts=thread_ts,
            ),
        )
        self.channel_id = str(response.get("channel") or self.channel_id or "") or None
        return str(response["ts"])

    def _upload(self, upload: dict[str, Any], key: str | None, thread_ts: str | None) -> str:
        """``files_upload_v2`` (files.getUploadURLExternal, the upload, then
        files.completeUploadExternal sharing it to the channel or thread); the file id."""
        data = base64.b64decode(upload["png_base64"])
        filename = upload_name(upload["filename"], key)

        def request() -> Any:
            try:
                return self._client.files_upload_v2(
                    channel=self.channel_id or self.channel,
                    file=data,
                    filename=filename,
                    title=upload["title"],
                    thread_ts=thread_ts,
                )
            except SlackRequestError as exc:  # the bytes did not reach the upload URL
                if "Failed to upload" not in str(exc):
                    raise
                message = self._scrub(f"upload of {filename} failed: {exc}")
                raise NotifyError(NotifyErrorKind.TRANSIENT, message) from None

        try:
            response = self._call("files_upload_v2", request)
        except NotifyError as exc:
            if exc.slack_error == "missing_scope":
                slack_test = cli_command("slack-test", config=self.config_path)
                raise NotifyError(
                    NotifyErrorKind.PERMANENT,
                    f"{exc.message}: the bot token lacks {UPLOAD_SCOPE}, so the waste-curve plot "
                    f"is not attached (`{slack_test}` lists the scopes)",
                    slack_error="missing_scope",
                ) from None
            raise
        files = response.get("files") or [{}]
        return str(files[0].get("id") or filename)

    def find(self, key: str, since_s: float, *, thread_ts: str | None = None) -> str | None:
        """Look in the channel's history since ``since_s`` (the thread's replies when
        ``thread_ts`` is given) for a message sent with ``key``.

        Returns:
            Its ``ts`` (a plot's file id), or None when no such message is there.

        Raises:
            NotifyError: as :meth:`send`; PERMANENT (``missing_scope``, ``channel_not_found``)
                when the history cannot be read, e.g. the channel is configured by name and no
                post has succeeded yet, or the bot lacks ``channels:history``.
        """
        channel = self.channel_id or self.channel
        oldest = f"{since_s:.6f}"
        if thread_ts is None:
            response = self._call(
                "conversations.history",
                lambda: self._client.conversations_history(
                    channel=channel, oldest=oldest, include_all_metadata=True, limit=200
                ),
            )
        else:
            response = self._call(
                "conversations.replies",
                lambda: self._client.conversations_replies(
                    channel=channel, ts=thread_ts, oldest=oldest, include_all_metadata=True
                ),
            )
        for msg in response.get("messages") or []:
            payload = (msg.get("metadata") or {}).get("event_payload") or {}
            if payload.get("key") == key:
                return str(msg["ts"])
            for file in msg.get("files") or []:
                if _named_for(str(file.get("name") or ""), key):
                    return str(file.get("id"))
        return None

    def scopes(self) -> frozenset[str] | None:
        """The token's OAuth scopes, from the ``x-oauth-scopes`` header of ``auth.test``; None
        when Slack does not say. Raises :class:`NotifyError` as :meth:`send`."""
        response = self._call("auth.test", self._client.auth_test)
        headers = {k.lower(): v for k, v in (response.headers or {}).items()}
        value = headers.get("x-oauth-scopes")
        if isinstance(value, list):
            value = ",".join(value)
        if value is None:
            return None
        return frozenset(scope.strip() for scope in str(value).split(",") if scope.strip())

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
            stops_delivery=code in CONFIG_SLACK_ERRORS,
        )

    def _scrub(self, text: str) -> str:
        token = self._client.token
        return text.replace(token, "<token>") if token else text
