"""Alembic's environment for the store: runs on the connection (and in the transaction) that
``agent/store/sql/migrate.py`` hands it, never on a URL of its own."""

from __future__ import annotations

from alembic import context

from ckpt_advisor.agent.store.sql.tables import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations(agent=context.config.attributes["agent"])
