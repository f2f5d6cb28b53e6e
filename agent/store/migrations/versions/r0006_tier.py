"""Schema version 6: each event keeps the tier its save went to (``memory``, ``local``,
``persistent``: a timing record's ``tier``), for jobs that save to two tiers.

A nullable column, NULL for every event stored before (they named no tier: a timing record
without ``tier``, or a log line), so adding it is instant on both databases and no row is
rewritten. The events' packed numbers are unchanged: the group key of an event with a tier also
covers its tier (:func:`~agent.store.schema.group_key`), and one without is keyed as before.

Revision ID: r0006
Revises: r0005
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from ckpt_advisor.agent.store.schema import event_numbers

revision = "r0006"
down_revision = "r0005"


def upgrade(**_kw: Any) -> None:
    """Add ``events.tier``."""
    op.add_column("events", sa.Column("tier", sa.String(), nullable=True))


def downgrade(**_kw: Any) -> None:
    """Back to version 5: the events that have a tier get version 5's packed numbers (their
    group key without the tier, or version 5's estimator would find numbers that match no
    event), then ``events.tier`` is dropped (the tiers are lost; the saves stay)."""
    conn = op.get_bind()
    rows = conn.execute(
        sa.text(
            "SELECT id, time_s, step, duration_s, persist_s, source, parser, from_timing_file, "
            "kind FROM events WHERE tier IS NOT NULL"
        )
    ).all()
    if rows:
        conn.execute(
            sa.text("UPDATE events SET numbers = :numbers WHERE id = :id"),
            [{"id": r[0], "numbers": event_numbers(*r[1:])} for r in rows],
        )
    with op.batch_alter_table("events") as batch:
        batch.drop_column("tier")
