"""Delivery: the store's outbox sent through a notifier, in order, each message once.

A message is written to the outbox before anything is sent (``Store.record_decision``), so a
crash loses nothing; :class:`Outbox` then sends what is queued. Each send runs on its own thread
with a deadline, so a hung Slack call never holds up the daemon; one that outlives it may still
land, so its message is ``unsure`` and is looked for in the channel before it is sent again.

A reply (a message's detail and plot, a resolve: ``OutboxItem.thread_of``) goes into the
thread of the message it belongs under, by that message's ``ts``; delivery in queue order
sends a message before its replies, and a reply that may have landed is looked for in the
thread. A plot the token may not upload (no ``files:write``) is marked failed with one
warning, and the rest goes on: the message went out without it.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ckpt_advisor.agent.notify.base import Notifier, NotifyError, NotifyErrorKind

if TYPE_CHECKING:
    from ckpt_advisor.agent.store import OutboxItem, Store

THREAD_ONLY = frozenset({"detail", "plot"})
"""Outbox actions that make sense only under their message: without it they are not posted
(a resolve whose message failed goes to the channel instead)."""

log = logging.getLogger(__name__)


class Outbox:
    """Sends the store's queued messages through one notifier.

    Args:
        store: where the queued messages are, and their outcomes are recorded.
        notifier: what sends them (:meth:`use` swaps it on a config reload).
        clock: the current aware UTC datetime.
        send_deadline_s: the longest one send may take; a call still running then is left
            behind (its message counts as maybe sent) so later deliveries are not held up.
    """

    def __init__(
        self,
        store: Store,
        notifier: Notifier,
        *,
        clock: Callable[[], datetime],
        send_deadline_s: float = 120.0,
    ) -> None:
        self.store = store
        self.notifier = notifier
        self.send_deadline_s = send_deadline_s
        self._clock = clock
        self.blocked: str | None = None  # a token/channel error: no delivery until reconfigured
        self._delivering = threading.Lock()
        self._inflight: threading.Thread | None = None
        self._told_scope = False

    def use(self, notifier: Notifier, *, send_deadline_s: float) -> None:
        """Send through ``notifier`` from the next delivery on (a config reload); a delivery
        stopped by a token or channel error may go on: the new config may have fixed it."""
        self.notifier = notifier
        self.send_deadline_s = send_deadline_s
        self.blocked = None

    def deliver(self) -> int:
        """Send queued messages in order, each at most once; returns how many were sent.

        The outbox record was written before sending (:meth:`Store.record_decision`), so a
        crash loses nothing. A send that may have landed (timeout, 5xx, deadline) is marked
        ``unsure``; before it is sent again, :meth:`Notifier.find` looks for its key in the
        channel, and if that cannot be checked the message is marked ``failed`` rather than
        risk a second copy. Delivery stops at the first transient error (order is kept) and,
        after an error that :attr:`NotifyError.stops_delivery` (``invalid_auth``,
        ``channel_not_found``, …), until a fixed config is loaded (:meth:`use`; one error
        logged; messages stay queued). Runs one at a time; a
        call while another delivery runs returns 0.
        """
        if self.blocked is not None or not self._delivering.acquire(blocking=False):
            return 0
        try:
            if self._inflight is not None and self._inflight.is_alive():
                return 0  # a send that outlived its deadline may still land: wait for it
            return self._deliver_queued()
        finally:
            self._delivering.release()

    def _deliver_queued(self) -> int:
        sent = 0
        sent_ts: dict[int, str] = {}  # ts of what this delivery sent: replies go under them
        for item in self.store.queued_messages():
            # one voice: only the agent holding the job's lease sends, and a message another
            # agent began to send is looked for before it is sent again (Store.claim_message)
            state = self.store.claim_message(item.id, item.job, self._now_s())
            if state is None:
                continue
            key = f"ckpt-advisor:{item.id}:{item.created_s:.6f}"
            thread_ts = item.thread_ts
            if item.thread_of is not None and thread_ts is None:
                thread_ts = sent_ts.get(item.thread_of)
                if thread_ts is None and item.action in THREAD_ONLY:
                    self._orphan(item)
                    continue
            try:
                ts = self._find(key, item.created_s, thread_ts) if state == "unsure" else None
                if ts is None:
                    ts = self._send(item.payload, key, thread_ts)
            except NotifyError as exc:
                if not self._failed(item, state, exc):
                    break
                continue
            self.store.mark_message(item.id, state="sent", now_s=self._now_s(), ts=ts)
            sent_ts[item.id] = ts
            sent += 1
        return sent

    def _orphan(self, item: OutboxItem) -> None:
        """A detail or plot whose message was not delivered: it is not posted on its own."""
        error = "the message it belongs under was not delivered"
        self.store.mark_message(item.id, state="failed", now_s=self._now_s(), error=error)
        log.warning("%s for %s not sent: %s", item.action, item.job, error)

    def _now_s(self) -> float:
        return self._clock().timestamp()

    def _find(self, key: str, created_s: float, thread_ts: str | None) -> str | None:
        try:
            return self.notifier.find(key, created_s - 60.0, thread_ts=thread_ts)
        except NotifyError as exc:
            if exc.transient:
                raise
            raise NotifyError(
                NotifyErrorKind.PERMANENT,
                f"an earlier send may have been delivered and it cannot be checked "
                f"({exc.message}); not sending again, to never post twice",
            ) from None

    def _send(self, payload: dict[str, Any], key: str, thread_ts: str | None) -> str:
        """``notifier.send`` on its own thread, waiting at most ``send_deadline_s``."""
        answer: queue.Queue[str | NotifyError] = queue.Queue(maxsize=1)

        def call() -> None:
            try:
                answer.put(self.notifier.send(payload, key=key, thread_ts=thread_ts))
            except NotifyError as exc:
                answer.put(exc)
            except Exception as exc:  # a notifier bug must not kill delivery
                answer.put(NotifyError(NotifyErrorKind.TRANSIENT, repr(exc), maybe_sent=True))

        self._inflight = threading.Thread(target=call, name="notifier-send", daemon=True)
        self._inflight.start()
        try:
            result = answer.get(timeout=self.send_deadline_s)
        except queue.Empty:
            raise NotifyError(
                NotifyErrorKind.TRANSIENT,
                f"no answer within {self.send_deadline_s:g} s",
                maybe_sent=True,
            ) from None
        if isinstance(result, NotifyError):
            raise result
        return result

    def _failed(self, item: OutboxItem, state: str, exc: NotifyError) -> bool:
        """Record a failed attempt; True when delivery may go on with the next message."""
        now_s = self._now_s()
        if exc.maybe_sent:
            self.store.mark_message(item.id, state="unsure", now_s=now_s, error=exc.message)
            log.warning("message for %s may not have been delivered: %s", item.job, exc.message)
            return False
        if exc.transient:
            self.store.mark_message(item.id, state=state, now_s=now_s, error=exc.message)
            log.warning("message for %s not delivered yet: %s", item.job, exc.message)
            return False
        if exc.stops_delivery:
            self.blocked = exc.message
            log.error(
                "delivery stopped until the config is fixed (reload or restart): %s "
                "(messages stay queued)",
                exc.message,
            )
            return False
        self.store.mark_message(item.id, state="failed", now_s=now_s, error=exc.message)
        if item.action == "plot" and exc.slack_error == "missing_scope":
            if not self._told_scope:  # every plot would fail the same way: say it once
                log.warning("%s", exc.message)
                self._told_scope = True
            return True
        log.error("message for %s not delivered: %s", item.job, exc.message)
        return True
