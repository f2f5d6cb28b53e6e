"""The SQLite backend of the store (``agent/store/api.py``): the only place that speaks SQL.

Standard library only (sqlite3): ``access.py`` (opening read-only, what an error means),
``reader.py`` (the queries), ``writer.py`` (the store: the writes of ``agent/store/sql/``),
``ddl.py`` (a new store's tables as SQL text); ``legacy.py`` is the upgrade from before
Alembic (SQLAlchemy, imported only then). SQLite's own SQL (``INDEXED BY``, a BLOB
``group_concat``, ``PRAGMA``) is used here and nowhere else.
"""
