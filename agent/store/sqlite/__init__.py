"""The SQLite backend of the store (``agent/store/api.py``): the only place that speaks SQL.

``schema.py`` (standard library only: the schema version, its check, the packed numbers of an
event), ``tables.py`` (the tables in SQLAlchemy Core and the migrations), ``reader.py`` (the
queries, over sqlite3), ``writer.py`` (the writes, over SQLAlchemy). SQLite's own SQL
(``INDEXED BY``, a BLOB ``group_concat``, ``PRAGMA``) is used here and nowhere else.
"""
