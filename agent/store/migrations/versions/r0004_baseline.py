"""Schema version 4, the baseline: the store as it was before Alembic (events with their packed
numbers). Databases at version 4 are stamped here; older SQLite stores are brought here by
``agent/store/sqlite/legacy.py`` first.

Revision ID: r0004
"""

from __future__ import annotations

from typing import Any

revision = "r0004"
down_revision = None


def upgrade(**_kw: Any) -> None:
    """Nothing: the baseline."""


def downgrade(**_kw: Any) -> None:
    """Nothing: the baseline."""
