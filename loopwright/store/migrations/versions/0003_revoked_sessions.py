"""Revoked sign-in sessions, so that signing out holds on every server process.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "revoked_sessions",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_revoked_sessions")),
    )
    op.create_index(op.f("ix_revoked_sessions_expires_at"), "revoked_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_revoked_sessions_expires_at"), table_name="revoked_sessions")
    op.drop_table("revoked_sessions")
