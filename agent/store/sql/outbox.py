"""The store's alert state, Slack outbox and silences (part of :class:`SqlStore`).

A mixin of :class:`agent.store.sql.writes.SqlStore`, which provides the agent's name and the
write transaction (``_write``, a DB-API connection: ``base.py``): the decision side of the
store, apart from the events side. With several agents on one store, a decision is recorded
only by the agent that holds the job's lease (``fleet.py``), and a message is sent only by the
agent that claimed it (:meth:`OutboxTables.claim_message`): one voice, each message once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ckpt_advisor.agent.store.records import StoreError
from ckpt_advisor.agent.store.sql.base import StoreBase
from ckpt_advisor.rules.model import AlertState

OUTBOX_INSERT = (
    "INSERT INTO outbox (job, created_s, action, state, payload, attempts, agent) "
    "VALUES (?, ?, ?, 'queued', ?, 0, ?)"
)


class OutboxTables(StoreBase):
    """Alert state, the outbox and silences: what was told, what is to be sent, what is muted."""

    def _fence(self, conn: Any, job: str) -> None:
        raise NotImplementedError

    def alert_state(self, job: str) -> AlertState:
        """What was last told about ``job`` (the default state when nothing was)."""
        rows = self._rows(
            "SELECT in_drift, last_sent_s, last_recommended_s FROM alert_state WHERE job = ?",
            (job,),
        )
        if not rows:
            return AlertState()
        row = rows[0]
        return AlertState(bool(row["in_drift"]), row["last_sent_s"], row["last_recommended_s"])

    def record_decision(
        self,
        job: str,
        state: AlertState,
        *,
        message: dict[str, Any] | None,
        action: str,
        now_s: float,
        replies: Sequence[tuple[str, dict[str, Any]]] = (),
        reply_to: int | None = None,
    ) -> int | None:
        """Persist the new alert state and, in the same transaction, queue ``message`` (as a
        reply under the outbox item ``reply_to`` when given) and ``replies`` (``(action,
        payload)`` pairs such as ``("detail", …)``, each under ``message``, in order); a
        reply's payload carries the outbox id it goes under as ``thread_of``.

        Returns the outbox id of the queued message, or None when there is none. Writing the
        messages before sending is what makes delivery exactly-once across crashes.

        Raises:
            LeaseLost: another agent holds the job's lease (nothing is written).
        """
        with self._write() as conn:
            self._fence(conn, job)
            self._exec(conn, "DELETE FROM alert_state WHERE job = ?", (job,))
            self._exec(
                conn,
                "INSERT INTO alert_state (job, in_drift, last_sent_s, last_recommended_s) "
                "VALUES (?, ?, ?, ?)",
                (job, int(state.in_drift), state.last_sent_s, state.last_recommended_s),
            )
            if message is None:
                return None

            def queue(kind: str, payload: dict[str, Any], thread_of: int | None) -> int:
                if thread_of is not None:  # a reply: kept in its payload, no column of its own
                    payload = {**payload, "thread_of": thread_of}
                values = (job, now_s, kind, json.dumps(payload), self.agent)
                return self._insert_id(conn, OUTBOX_INSERT, values)

            first = queue(action, message, reply_to)
            for kind, reply in replies:
                queue(kind, reply, first)
            return first

    def silence(self, job: str, until_s: float) -> None:
        """Send nothing about ``job`` until ``until_s`` (epoch seconds); decisions go on."""
        with self._write() as conn:
            self._exec(conn, "DELETE FROM silences WHERE job = ?", (job,))
            self._exec(conn, "INSERT INTO silences (job, until_s) VALUES (?, ?)", (job, until_s))

    def silenced_until(self, job: str, now_s: float) -> float | None:
        """When the silence of ``job`` ends, or None if it is not silenced at ``now_s``."""
        rows = self._rows("SELECT until_s FROM silences WHERE job = ?", (job,))
        until = rows[0]["until_s"] if rows else None
        return until if until is not None and until > now_s else None

    def mark_message(
        self,
        item_id: int,
        *,
        state: str,
        now_s: float,
        ts: str | None = None,
        error: str | None = None,
    ) -> None:
        """Record the outcome of one delivery attempt (``sent``, ``failed``, ``unsure`` or still
        ``queued``)."""
        with self._write() as conn:
            self._exec(
                conn,
                "UPDATE outbox SET state = ?, attempts = attempts + 1, sent_s = ?, ts = ?, "
                "error = ? WHERE id = ?",
                (state, now_s if state == "sent" else None, ts, error, item_id),
            )

    def messages(self, job: str | None = None) -> list[dict[str, Any]]:
        """Every outbox record (for the CLI and tests), oldest first."""
        where, params = ("WHERE job = ? ", (job,)) if job is not None else ("", ())
        rows = self._rows(f"SELECT * FROM outbox {where}ORDER BY id", params)
        return [{**dict(r), "payload": json.loads(r["payload"])} for r in rows]

    def claim_message(self, item_id: int, job: str, now_s: float) -> str | None:
        """Claim a queued message for this agent to send now; returns the state to send it
        in, or None when it is not this agent's to send (another agent holds the job's lease,
        or the message is no longer queued).

        ``unsure`` when an earlier send may have landed: it was ``unsure`` already, or another
        agent claimed it last (that agent may have died mid-send), so it is looked for in the
        channel before it is sent again. A message that this agent claimed last keeps its state
        (a restart of the one agent behaves as before fleet mode).
        """
        with self._write() as conn:
            try:
                self._fence(conn, job)
            except StoreError:
                return None
            row = self._exec(
                conn,
                f"SELECT state, claimed_by FROM outbox WHERE id = ?{self._row_lock}",
                (item_id,),
            ).fetchone()
            if row is None or row["state"] not in ("queued", "unsure"):
                return None
            state = row["state"]
            if row["claimed_by"] is not None and row["claimed_by"] != self.agent:
                state = "unsure"
            self._exec(
                conn,
                "UPDATE outbox SET claimed_by = ?, claimed_s = ?, state = ? WHERE id = ?",
                (self.agent, now_s, state, item_id),
            )
            return str(state)
