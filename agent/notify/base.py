"""What every notifier is: the :class:`Notifier` protocol and the error it raises.

The outbox (``outbox.py``) holds any :class:`Notifier` (Slack, or the log without a token) and
decides from :class:`NotifyError` alone whether to retry, look before resending, or stop.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Protocol


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
        stops_delivery: the error is the token's or the channel's, not this message's (bad
            token, unknown channel): every later message would fail the same way.
    """

    def __init__(
        self,
        kind: NotifyErrorKind,
        message: str,
        *,
        slack_error: str | None = None,
        retry_after_s: float | None = None,
        maybe_sent: bool = False,
        stops_delivery: bool = False,
    ) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.slack_error = slack_error
        self.retry_after_s = retry_after_s
        self.maybe_sent = maybe_sent
        self.stops_delivery = stops_delivery

    @property
    def transient(self) -> bool:
        """True when sending the same message later may succeed."""
        return self.kind is NotifyErrorKind.TRANSIENT


class Notifier(Protocol):
    """Something that delivers a message dict (:mod:`agent.notify.message`: a post, or a
    plot to upload) and returns its id."""

    def send(
        self, message: dict[str, Any], *, key: str | None = None, thread_ts: str | None = None
    ) -> str:
        """Deliver ``message`` tagged with the idempotency ``key`` (as a reply in the thread of
        the message ``thread_ts`` when given); return its id (Slack's ``ts``, or a file's id).
        Raises :class:`NotifyError`."""
        ...

    def find(self, key: str, since_s: float, *, thread_ts: str | None = None) -> str | None:
        """The id of a message tagged ``key`` sent since ``since_s`` (epoch seconds; in the
        thread ``thread_ts`` when given), or None. Raises :class:`NotifyError` when it cannot
        be checked."""
        ...
