"""Warm-pool sandbox claims, so any process can tell which mission a pool container serves.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sandbox_claims",
        sa.Column("container_id", sa.String(64), nullable=False),
        sa.Column("mission_id", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("container_id", name=op.f("pk_sandbox_claims")),
    )
    op.create_index(op.f("ix_sandbox_claims_mission_id"), "sandbox_claims", ["mission_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_sandbox_claims_mission_id"), table_name="sandbox_claims")
    op.drop_table("sandbox_claims")
