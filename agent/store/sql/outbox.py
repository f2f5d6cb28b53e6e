"""The store's alert state, Slack outbox and silences (part of :class:`SqlStore`).

A mixin of :class:`agent.store.sql.writes.SqlStore`, which provides ``engine``, the agent's name
and the write transaction (``_write``): the decision side of the store, apart from the events
side. With several agents on one store, a decision is recorded only by the agent that holds the
job's lease (``fleet.py``), and a message is sent only by the agent that claimed it
(:meth:`OutboxTables.claim_message`): one voice, each message once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import Engine, delete, insert, select, update
from sqlalchemy.engine import Connection, CursorResult

from ckpt_advisor.agent.store.records import StoreError
from ckpt_advisor.agent.store.sql import tables as t
from ckpt_advisor.rules.model import AlertState


def new_id(result: CursorResult[Any]) -> int:
    """The primary key of the row an INSERT of one row added."""
    key = result.inserted_primary_key
    assert key is not None  # an INSERT of one row always has one
    return int(key[0])


class OutboxTables:
    """Alert state, the outbox and silences: what was told, what is to be sent, what is muted."""

    engine: Engine
    agent: str

    def _write(self) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    def _read(self) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    def _fence(self, conn: Connection, job: str) -> None:
        raise NotImplementedError

    def alert_state(self, job: str) -> AlertState:
        """What was last told about ``job`` (the default state when nothing was)."""
        with self._read() as conn:
            row = conn.execute(select(t.alerts).where(t.alerts.c.job == job)).first()
        if row is None:
            return AlertState()
        return AlertState(bool(row.in_drift), row.last_sent_s, row.last_recommended_s)

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
            conn.execute(delete(t.alerts).where(t.alerts.c.job == job))
            conn.execute(
                insert(t.alerts).values(
                    job=job,
                    in_drift=int(state.in_drift),
                    last_sent_s=state.last_sent_s,
                    last_recommended_s=state.last_recommended_s,
                )
            )
            if message is None:
                return None

            def queue(kind: str, payload: dict[str, Any], thread_of: int | None) -> int:
                if thread_of is not None:  # a reply: kept in its payload, no column of its own
                    payload = {**payload, "thread_of": thread_of}
                row = {"job": job, "created_s": now_s, "action": kind, "state": "queued"}
                values = {**row, "payload": json.dumps(payload), "attempts": 0, "agent": self.agent}
                return new_id(conn.execute(insert(t.outbox).values(**values)))

            first = queue(action, message, reply_to)
            for kind, reply in replies:
                queue(kind, reply, first)
            return first

    def silence(self, job: str, until_s: float) -> None:
        """Send nothing about ``job`` until ``until_s`` (epoch seconds); decisions go on."""
        with self._write() as conn:
            conn.execute(delete(t.silences).where(t.silences.c.job == job))
            conn.execute(insert(t.silences).values(job=job, until_s=until_s))

    def silenced_until(self, job: str, now_s: float) -> float | None:
        """When the silence of ``job`` ends, or None if it is not silenced at ``now_s``."""
        with self._read() as conn:
            until = conn.execute(
                select(t.silences.c.until_s).where(t.silences.c.job == job)
            ).scalar_one_or_none()
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
            conn.execute(
                update(t.outbox)
                .where(t.outbox.c.id == item_id)
                .values(
                    state=state,
                    attempts=t.outbox.c.attempts + 1,
                    sent_s=now_s if state == "sent" else None,
                    ts=ts,
                    error=error,
                )
            )

    def messages(self, job: str | None = None) -> list[dict[str, Any]]:
        """Every outbox record (for the CLI and tests), oldest first."""
        q = select(t.outbox).order_by(t.outbox.c.id)
        if job is not None:
            q = q.where(t.outbox.c.job == job)
        with self._read() as conn:
            return [{**dict(r._mapping), "payload": json.loads(r.payload)} for r in conn.execute(q)]

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
            c = t.outbox.c
            row = conn.execute(
                select(c.state, c.claimed_by).where(c.id == item_id).with_for_update()
            ).first()
            if row is None or row.state not in ("queued", "unsure"):
                return None
            state = row.state
            if row.claimed_by is not None and row.claimed_by != self.agent:
                state = "unsure"
            conn.execute(
                update(t.outbox)
                .where(c.id == item_id)
                .values(claimed_by=self.agent, claimed_s=now_s, state=state)
            )
            return str(state)
