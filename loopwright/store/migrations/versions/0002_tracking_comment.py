"""The tracking comment a mission keeps on its pull request.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("missions") as batch:
        batch.add_column(sa.Column("tracking_comment_id", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("missions") as batch:
        batch.drop_column("tracking_comment_id")
