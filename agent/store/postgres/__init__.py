"""The PostgreSQL backend of the store (fleet mode): one database, many agents.

``store.py`` (the read-only reader and the read-write store over SQLAlchemy's pool and psycopg 3),
``access.py`` (what an error of the server means: away for now, or refused for good, with the
right the role lacks). The tables, writes and migrations are ``agent/store/sql/``'s.
"""
