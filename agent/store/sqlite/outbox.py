"""The SQLite store's alert state, Slack outbox and silences (part of :class:`SqliteStore`).

A mixin of :class:`agent.store.sqlite.writer.SqliteStore`, which provides ``engine`` and the
write transaction (``_write``): the decision side of the store, apart from the events side.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import Engine, delete, insert, select, update
from sqlalchemy.engine import Connection, CursorResult

from ckpt_advisor.agent.store.sqlite import tables as t
from ckpt_advisor.rules.model import AlertState


def new_id(result: CursorResult[Any]) -> int:
    """The primary key of the row an INSERT of one row added."""
    key = result.inserted_primary_key
    assert key is not None  # an INSERT of one row always has one
    return int(key[0])


class OutboxTables:
    """Alert state, the outbox and silences: what was told, what is to be sent, what is muted."""

    engine: Engine

    def _write(self) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    def alert_state(self, job: str) -> AlertState:
        """What was last told about ``job`` (the default state when nothing was)."""
        with self.engine.connect() as conn:
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
    ) -> int | None:
        """Persist the new alert state and, in the same transaction, queue ``message``.

        Returns the outbox id of the queued message, or None when there is none. Writing the
        message before sending is what makes delivery exactly-once across crashes.
        """
        with self._write() as conn:
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
            return new_id(
                conn.execute(
                    insert(t.outbox).values(
                        job=job,
                        created_s=now_s,
                        action=action,
                        payload=json.dumps(message),
                        state="queued",
                        attempts=0,
                    )
                )
            )

    def silence(self, job: str, until_s: float) -> None:
        """Send nothing about ``job`` until ``until_s`` (epoch seconds); decisions go on."""
        with self._write() as conn:
            conn.execute(delete(t.silences).where(t.silences.c.job == job))
            conn.execute(insert(t.silences).values(job=job, until_s=until_s))

    def silenced_until(self, job: str, now_s: float) -> float | None:
        """When the silence of ``job`` ends, or None if it is not silenced at ``now_s``."""
        with self.engine.connect() as conn:
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
        with self.engine.connect() as conn:
            return [{**dict(r._mapping), "payload": json.loads(r.payload)} for r in conn.execute(q)]
