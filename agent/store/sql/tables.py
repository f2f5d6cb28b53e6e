"""The store's tables in SQLAlchemy Core, for both backends (the schema version is
:data:`~agent.store.schema.SCHEMA_VERSION`).

SQL both SQLite and PostgreSQL speak; where they differ the column says so (a 64-bit key is
SQLite's ``INTEGER PRIMARY KEY``, the rowid, and PostgreSQL's ``BIGINT`` identity). Migrations
between versions are Alembic's (``agent/store/migrations/``); a new database is created from
these tables and stamped at the newest revision.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

Key = BigInteger().with_variant(Integer, "sqlite")
"""A 64-bit primary key: SQLite's rowid alias must be spelled INTEGER."""

metadata = MetaData()

meta = Table(
    "meta", metadata, Column("key", String, primary_key=True), Column("value", Text, nullable=False)
)

files = Table(
    "files",
    metadata,
    Column("id", Key, primary_key=True, autoincrement=True),
    Column("job", String, nullable=False),
    Column("path", Text, nullable=False),
    Column("dev", BigInteger, nullable=False),
    Column("ino", BigInteger, nullable=False),
    Column("head_hash", String, nullable=False),
    Column("head_len", Integer, nullable=False),
    Column("offset", BigInteger, nullable=False),
    Column("lineno", BigInteger, nullable=False),
    Column("truncations", Integer, nullable=False, default=0),
    Column("updated_s", Float, nullable=False),
    Column("finished", Boolean, nullable=False, default=False, server_default="0"),
    Column("agent", String, nullable=False, server_default=""),  # version 5
    Column("shared_with", Text, nullable=True),  # version 5: read by that agent instead
    Index("ix_files_agent_identity", "agent", "job", "dev", "ino"),
    Index("ix_files_head", "job", "head_len", "head_hash"),
)

events = Table(
    "events",
    metadata,
    Column("id", Key, primary_key=True, autoincrement=True),
    Column("job", String, nullable=False),
    Column("file_id", BigInteger, nullable=True),
    Column("source", Text, nullable=False),
    Column("line", BigInteger, nullable=False),
    Column("kind", String, nullable=False),
    Column("time_s", Float, nullable=True),
    Column("time_estimated", Integer, nullable=False, default=0),
    Column("step", BigInteger, nullable=True),
    Column("duration_s", Float, nullable=True),
    Column("failure_class", String, nullable=True),
    Column("planned", Integer, nullable=False, default=0),
    Column("persist_s", Float, nullable=True),
    Column("detail", Text, nullable=True),
    Column("parser", String, nullable=False),
    Column("from_timing_file", Integer, nullable=False, default=0),
    Column("numbers", LargeBinary, nullable=True),  # schema.event_numbers of the row
    Column("agent", String, nullable=False, server_default=""),  # version 5
    Column("tier", String, nullable=True),  # version 6: a timing record's tier
    # covers the estimator's read: the index alone, in time order, is read (version 4)
    Index("ix_events_job_time_numbers", "job", "time_s", "id", "numbers"),
    Index("ix_events_job_kind_time", "job", "kind", "time_s"),
    Index("ix_events_file", "file_id"),  # version 5: a shared file's second copy is dropped
)

estimates = Table(
    "estimates",
    metadata,
    Column("id", Key, primary_key=True, autoincrement=True),
    Column("job", String, nullable=False),
    Column("computed_at_s", Float, nullable=False),
    Column("status", String, nullable=False),
    Column("payload", Text, nullable=False),
    Column("agent", String, nullable=False, server_default=""),  # version 5
    Index("ix_estimates_job_time", "job", "computed_at_s"),
)

alerts = Table(
    "alert_state",
    metadata,
    Column("job", String, primary_key=True),
    Column("in_drift", Integer, nullable=False),
    Column("last_sent_s", Float, nullable=True),
    Column("last_recommended_s", Float, nullable=True),
)

outbox = Table(
    "outbox",
    metadata,
    Column("id", Key, primary_key=True, autoincrement=True),
    Column("job", String, nullable=False),
    Column("created_s", Float, nullable=False),
    Column("action", String, nullable=False),
    Column("payload", Text, nullable=False),
    Column("state", String, nullable=False),  # queued | unsure | sent | failed
    Column("attempts", Integer, nullable=False, default=0),
    Column("sent_s", Float, nullable=True),
    Column("ts", String, nullable=True),
    Column("error", Text, nullable=True),
    Column("agent", String, nullable=False, server_default=""),  # version 5: who queued it
    Column("claimed_by", String, nullable=True),  # version 5: who last began to send it
    Column("claimed_s", Float, nullable=True),
    Index("ix_outbox_state", "state", "id"),
)

silences = Table(
    "silences",
    metadata,
    Column("job", String, primary_key=True),
    Column("until_s", Float, nullable=False),
)

agents = Table(  # version 5
    "agents",
    metadata,
    Column("name", String, primary_key=True),
    Column("host", String, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("version", String, nullable=False),
    Column("started_s", Float, nullable=False),
    Column("seen_s", Float, nullable=False),
    Column("stopped_s", Float, nullable=True),
)

jobs = Table(  # version 5: the jobs some agent's config names, with their sizes
    "jobs",
    metadata,
    Column("name", String, primary_key=True),
    Column("agent", String, nullable=False),
    Column("gpus", Integer, nullable=True),
    Column("nodes", Integer, nullable=True),
    Column("updated_s", Float, nullable=False),
)

leases = Table(  # version 5: which agent decides and posts for a job, until when
    "leases",
    metadata,
    Column("job", String, primary_key=True),
    Column("agent", String, nullable=False),
    Column("acquired_s", Float, nullable=False),
    Column("expires_s", Float, nullable=False),
)
