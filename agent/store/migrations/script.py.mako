"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
"""

from __future__ import annotations

from typing import Any

from alembic import op
import sqlalchemy as sa
${imports if imports else ""}

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}


def upgrade(**kw: Any) -> None:
    ${upgrades if upgrades else "pass"}


def downgrade(**kw: Any) -> None:
    ${downgrades if downgrades else "pass"}
