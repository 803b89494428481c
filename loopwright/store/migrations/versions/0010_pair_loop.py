"""Pair mode: whether a mission's loop takes guidance now (`running`), has ended
(`ended`), or never ran with pair mode (NULL), so any server process can refuse guidance
that would never be delivered.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("missions", sa.Column("pair_loop", sa.String(8), nullable=True))


def downgrade() -> None:
    op.drop_column("missions", "pair_loop")
