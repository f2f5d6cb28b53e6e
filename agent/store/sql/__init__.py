"""What both backends share, over SQLAlchemy Core: the tables (``tables.py``), the writes of
events and offsets (``writes.py``), the alert state, outbox and silences (``outbox.py``), the
fleet's agents, jobs and leases (``fleet.py``) and the Alembic migrations (``migrate.py``,
scripts in ``agent/store/migrations/``). The reads are ``agent/store/queries.py`` (DB-API only,
for the SQLite reader's fast start)."""
