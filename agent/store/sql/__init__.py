"""What both backends share. The writes as SQL text over DB-API (standard library only, like
the reads of ``agent/store/queries.py``): their transaction and each database's own pieces
(``base.py``), events and offsets (``writes.py``, rows by ``rows.py``), the alert state, outbox
and silences (``outbox.py``), the fleet's agents, jobs and leases (``fleet.py``). In SQLAlchemy
Core, imported only by PostgreSQL and by upgrades: the tables (``tables.py``) and the Alembic
migrations (``migrate.py``, scripts in ``agent/store/migrations/``)."""
