"""Schema version 5, fleet mode: each file, event, estimate and message names its agent; the
agents, the jobs their configs name and the jobs' leases (one voice); the outbox's claims.

Files, estimates and messages already stored become the upgrading agent's (``[agent] name``),
so that agent goes on reading its files from their offsets; events stored before keep an empty
agent (rewriting every event would cost seconds per million). Adding a column with a constant
default is instant on both databases.

Revision ID: r0005
Revises: r0004
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "r0005"
down_revision = "r0004"


def _agent() -> sa.Column[str]:
    return sa.Column("agent", sa.String(), nullable=False, server_default="")


def upgrade(*, agent: str, **_kw: Any) -> None:
    """Add the agent columns (filled for the upgrading agent), the claims, the new tables and
    the per-agent file identity index."""
    op.add_column("files", _agent())
    op.add_column("files", sa.Column("shared_with", sa.Text(), nullable=True))
    op.add_column("events", _agent())
    op.add_column("estimates", _agent())
    op.add_column("outbox", _agent())
    op.add_column("outbox", sa.Column("claimed_by", sa.String(), nullable=True))
    op.add_column("outbox", sa.Column("claimed_s", sa.Float(), nullable=True))
    for table in ("files", "estimates", "outbox"):
        op.execute(sa.text(f"UPDATE {table} SET agent = :agent").bindparams(agent=agent))
    op.drop_index("ix_files_identity", table_name="files")
    op.create_index("ix_files_agent_identity", "files", ["agent", "job", "dev", "ino"])
    op.create_index("ix_files_head", "files", ["job", "head_len", "head_hash"])
    op.create_index("ix_events_file", "events", ["file_id"])
    op.create_table(
        "agents",
        sa.Column("name", sa.String(), primary_key=True),
        sa.Column("host", sa.String(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(), nullable=False),
        sa.Column("started_s", sa.Float(), nullable=False),
        sa.Column("seen_s", sa.Float(), nullable=False),
        sa.Column("stopped_s", sa.Float(), nullable=True),
    )
    op.create_table(
        "jobs",
        sa.Column("name", sa.String(), primary_key=True),
        sa.Column("agent", sa.String(), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=True),
        sa.Column("nodes", sa.Integer(), nullable=True),
        sa.Column("updated_s", sa.Float(), nullable=False),
    )
    op.create_table(
        "leases",
        sa.Column("job", sa.String(), primary_key=True),
        sa.Column("agent", sa.String(), nullable=False),
        sa.Column("acquired_s", sa.Float(), nullable=False),
        sa.Column("expires_s", sa.Float(), nullable=False),
    )


def downgrade(**_kw: Any) -> None:
    """Back to version 4: drop what version 5 added."""
    for table in ("leases", "jobs", "agents"):
        op.drop_table(table)
    op.drop_index("ix_events_file", table_name="events")
    op.drop_index("ix_files_head", table_name="files")
    op.drop_index("ix_files_agent_identity", table_name="files")
    op.create_index("ix_files_identity", "files", ["job", "dev", "ino"])
    for table, column in (
        ("outbox", "claimed_s"),
        ("outbox", "claimed_by"),
        ("outbox", "agent"),
        ("estimates", "agent"),
        ("events", "agent"),
        ("files", "shared_with"),
        ("files", "agent"),
    ):
        with op.batch_alter_table(table) as batch:
            batch.drop_column(column)
