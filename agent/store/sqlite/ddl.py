"""A new SQLite store's tables and indexes as SQL text, so it is created without SQLAlchemy.

``ingest`` into a new store spent about 0.4 s of its start-up importing SQLAlchemy (issue 15).
The tables are still defined once, in ``sql/tables.py``: :data:`CREATE_SQL` is the text that
SQLAlchemy's ``metadata.create_all`` emits for them on SQLite, then the version table of
Alembic's stamp (``sql/migrate.py``, ``_stamp_new``), as SQLite keeps it in ``sqlite_master``.
tests/agent/test_store_ddl.py fails when a table changes and this text does not (and prints
the new text); tests/agent/test_migrations.py compares a new store with Alembic's own stamp.
Standard library only.
"""

from __future__ import annotations

import sqlite3

from ckpt_advisor.agent.store.schema import HEAD_REVISION, SCHEMA_VERSION

CREATE_SQL = (
    (
        "CREATE TABLE meta ("
        '\n\t"key" VARCHAR NOT NULL, '
        "\n\tvalue TEXT NOT NULL, "
        '\n\tPRIMARY KEY ("key")'
        "\n)"
    ),
    (
        "CREATE TABLE files ("
        "\n\tid INTEGER NOT NULL, "
        "\n\tjob VARCHAR NOT NULL, "
        "\n\tpath TEXT NOT NULL, "
        "\n\tdev BIGINT NOT NULL, "
        "\n\tino BIGINT NOT NULL, "
        "\n\thead_hash VARCHAR NOT NULL, "
        "\n\thead_len INTEGER NOT NULL, "
        '\n\t"offset" BIGINT NOT NULL, '
        "\n\tlineno BIGINT NOT NULL, "
        "\n\ttruncations INTEGER NOT NULL, "
        "\n\tupdated_s FLOAT NOT NULL, "
        "\n\tfinished BOOLEAN DEFAULT '0' NOT NULL, "
        "\n\tagent VARCHAR DEFAULT '' NOT NULL, "
        "\n\tshared_with TEXT, "
        "\n\tPRIMARY KEY (id)"
        "\n)"
    ),
    "CREATE INDEX ix_files_head ON files (job, head_len, head_hash)",
    "CREATE INDEX ix_files_agent_identity ON files (agent, job, dev, ino)",
    (
        "CREATE TABLE events ("
        "\n\tid INTEGER NOT NULL, "
        "\n\tjob VARCHAR NOT NULL, "
        "\n\tfile_id BIGINT, "
        "\n\tsource TEXT NOT NULL, "
        "\n\tline BIGINT NOT NULL, "
        "\n\tkind VARCHAR NOT NULL, "
        "\n\ttime_s FLOAT, "
        "\n\ttime_estimated INTEGER NOT NULL, "
        "\n\tstep BIGINT, "
        "\n\tduration_s FLOAT, "
        "\n\tfailure_class VARCHAR, "
        "\n\tplanned INTEGER NOT NULL, "
        "\n\tpersist_s FLOAT, "
        "\n\tdetail TEXT, "
        "\n\tparser VARCHAR NOT NULL, "
        "\n\tfrom_timing_file INTEGER NOT NULL, "
        "\n\tnumbers BLOB, "
        "\n\tagent VARCHAR DEFAULT '' NOT NULL, "
        "\n\ttier VARCHAR, "
        "\n\tPRIMARY KEY (id)"
        "\n)"
    ),
    "CREATE INDEX ix_events_job_kind_time ON events (job, kind, time_s)",
    "CREATE INDEX ix_events_job_time_numbers ON events (job, time_s, id, numbers)",
    "CREATE INDEX ix_events_file ON events (file_id)",
    (
        "CREATE TABLE estimates ("
        "\n\tid INTEGER NOT NULL, "
        "\n\tjob VARCHAR NOT NULL, "
        "\n\tcomputed_at_s FLOAT NOT NULL, "
        "\n\tstatus VARCHAR NOT NULL, "
        "\n\tpayload TEXT NOT NULL, "
        "\n\tagent VARCHAR DEFAULT '' NOT NULL, "
        "\n\tPRIMARY KEY (id)"
        "\n)"
    ),
    "CREATE INDEX ix_estimates_job_time ON estimates (job, computed_at_s)",
    (
        "CREATE TABLE alert_state ("
        "\n\tjob VARCHAR NOT NULL, "
        "\n\tin_drift INTEGER NOT NULL, "
        "\n\tlast_sent_s FLOAT, "
        "\n\tlast_recommended_s FLOAT, "
        "\n\tPRIMARY KEY (job)"
        "\n)"
    ),
    (
        "CREATE TABLE outbox ("
        "\n\tid INTEGER NOT NULL, "
        "\n\tjob VARCHAR NOT NULL, "
        "\n\tcreated_s FLOAT NOT NULL, "
        "\n\taction VARCHAR NOT NULL, "
        "\n\tpayload TEXT NOT NULL, "
        "\n\tstate VARCHAR NOT NULL, "
        "\n\tattempts INTEGER NOT NULL, "
        "\n\tsent_s FLOAT, "
        "\n\tts VARCHAR, "
        "\n\terror TEXT, "
        "\n\tagent VARCHAR DEFAULT '' NOT NULL, "
        "\n\tclaimed_by VARCHAR, "
        "\n\tclaimed_s FLOAT, "
        "\n\tPRIMARY KEY (id)"
        "\n)"
    ),
    "CREATE INDEX ix_outbox_state ON outbox (state, id)",
    (
        "CREATE TABLE silences ("
        "\n\tjob VARCHAR NOT NULL, "
        "\n\tuntil_s FLOAT NOT NULL, "
        "\n\tPRIMARY KEY (job)"
        "\n)"
    ),
    (
        "CREATE TABLE agents ("
        "\n\tname VARCHAR NOT NULL, "
        "\n\thost VARCHAR NOT NULL, "
        "\n\tpid INTEGER NOT NULL, "
        "\n\tversion VARCHAR NOT NULL, "
        "\n\tstarted_s FLOAT NOT NULL, "
        "\n\tseen_s FLOAT NOT NULL, "
        "\n\tstopped_s FLOAT, "
        "\n\tPRIMARY KEY (name)"
        "\n)"
    ),
    (
        "CREATE TABLE jobs ("
        "\n\tname VARCHAR NOT NULL, "
        "\n\tagent VARCHAR NOT NULL, "
        "\n\tgpus INTEGER, "
        "\n\tnodes INTEGER, "
        "\n\tupdated_s FLOAT NOT NULL, "
        "\n\tPRIMARY KEY (name)"
        "\n)"
    ),
    (
        "CREATE TABLE leases ("
        "\n\tjob VARCHAR NOT NULL, "
        "\n\tagent VARCHAR NOT NULL, "
        "\n\tacquired_s FLOAT NOT NULL, "
        "\n\texpires_s FLOAT NOT NULL, "
        "\n\tPRIMARY KEY (job)"
        "\n)"
    ),
    (
        "CREATE TABLE alembic_version ("
        "\n\tversion_num VARCHAR(32) NOT NULL, "
        "\n\tCONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)"
        "\n)"
    ),
)
"""Every table's and index's ``CREATE`` of a store at :data:`SCHEMA_VERSION` (SQLAlchemy's text,
tab-indented, one column a line: the same text in ``sqlite_master`` whichever way a store is
made)."""


def create_store(conn: sqlite3.Connection) -> None:
    """Create a store at :data:`SCHEMA_VERSION` in the caller's transaction on ``conn``: the
    tables and indexes, Alembic's version row (:data:`HEAD_REVISION`) and ``meta``'s.

    Raises:
        sqlite3.Error: the database refused (the caller names the file).
    """
    for sql in CREATE_SQL:
        conn.execute(sql)
    conn.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (HEAD_REVISION,))
    conn.execute('INSERT INTO meta ("key", value) VALUES (?, ?)', ("schema", str(SCHEMA_VERSION)))
