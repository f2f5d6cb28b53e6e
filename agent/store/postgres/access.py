"""What a PostgreSQL error means for the agent: the server is away (retry), or the database
refuses this role for good (a wrong password, a missing database or grant: exit 2 at start with
the right named), and which rights an agent's role needs.

An error of the server carries its SQLSTATE (PostgreSQL's Appendix A, "Error Codes"): class 28
is a failed authentication, 3D a missing database, 42501 a missing privilege. A connection that
never reached the server (refused, timed out, no route) has none: that is an outage.
"""

from __future__ import annotations

from typing import Any

from ckpt_advisor.agent.store.records import StoreError

REFUSED_CLASSES = ("28", "3D", "42")
"""SQLSTATE classes that no retry fixes: authentication, catalog, access rule."""

PASSING = (
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "the database system is not yet accepting connections",
    "too many clients",
    "connection slots are reserved",
    "terminating connection",
)
"""FATAL messages of a server that will answer again soon."""

AGENT_TABLES = (
    "meta",
    "files",
    "events",
    "estimates",
    "alert_state",
    "outbox",
    "silences",
    "agents",
    "jobs",
    "leases",
)
"""Every table an agent reads and writes (``meta`` and ``alembic_version`` it only reads)."""
ID_TABLES = ("files", "events", "estimates", "outbox")
"""Tables whose ids come from a sequence (an INSERT needs USAGE on it)."""
WRITE_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE")
GRANT_HINT = (
    "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}; "
    "GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role} (docs/INSTALL.md, fleet mode)"
)


class StoreAccessError(StoreError):
    """The database refuses this agent for good: no retry will help (exit 2 at start)."""


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a driver error (psycopg's ``sqlstate``), or None (no server answer)."""
    orig = getattr(exc, "orig", exc)
    state = getattr(orig, "sqlstate", None)
    return str(state) if state else None


def refused(exc: BaseException) -> bool:
    """Whether ``exc`` is a refusal that a retry will not fix (see :data:`REFUSED_CLASSES`).

    libpq reports a refused connection without a SQLSTATE, as the server's ``FATAL:`` message
    (``password authentication failed``, ``database "x" does not exist``, ``no pg_hba.conf
    entry``); a server starting, stopping or full (:data:`PASSING`) is an outage.
    """
    state = sqlstate(exc)
    if state is not None:
        return state[:2] in REFUSED_CLASSES
    text = describe(exc)
    return "FATAL:" in text and not any(p in text for p in PASSING)


def describe(exc: BaseException) -> str:
    """The driver's message of ``exc`` on one line (psycopg's are several)."""
    orig = getattr(exc, "orig", exc)
    return " ".join(str(orig).split())


def missing_rights(conn: Any, tables: tuple[str, ...] = AGENT_TABLES) -> list[str]:
    """The rights the connected role lacks to run an agent (``PRIVILEGE on table T``), from
    ``has_table_privilege`` and ``has_sequence_privilege``; empty when it has them all."""
    missing = []
    for table in tables:
        wanted = ("SELECT",) if table == "meta" else WRITE_PRIVILEGES
        for privilege in wanted:
            row = conn.exec_driver_sql(
                "SELECT has_table_privilege(current_user, %(t)s, %(p)s)",
                {"t": table, "p": privilege},
            ).scalar()
            if not row:
                missing.append(f"{privilege} on table {table}")
        if table not in ID_TABLES:
            continue
        sequence = conn.exec_driver_sql(
            "SELECT pg_get_serial_sequence(%(t)s, 'id')", {"t": table}
        ).scalar()
        if (
            sequence
            and not conn.exec_driver_sql(
                "SELECT has_sequence_privilege(current_user, %(s)s, 'USAGE')", {"s": sequence}
            ).scalar()
        ):
            missing.append(f"USAGE on sequence {sequence}")
    return missing
