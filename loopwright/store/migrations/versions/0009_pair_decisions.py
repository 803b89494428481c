"""Pair mode: the requests for approval a mission waits on, and the decisions and guidance
people sent, kept where every server and worker process on the store reads them.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "pair_requests",
        sa.Column("mission_id", sa.String(32), nullable=False),
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column(
            "payload", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column("asked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["mission_id"],
            ["missions.id"],
            name=op.f("fk_pair_requests_mission_id_missions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("mission_id", "id", name=op.f("pk_pair_requests")),
    )
    op.create_table(
        "pair_decisions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("mission_id", sa.String(32), nullable=False),
        sa.Column("request_id", sa.String(64), nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("decided_by", sa.String(255), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["mission_id"],
            ["missions.id"],
            name=op.f("fk_pair_decisions_mission_id_missions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pair_decisions")),
        sa.UniqueConstraint("mission_id", "request_id", name=op.f("uq_pair_decisions_mission_id")),
    )
    op.create_index(op.f("ix_pair_decisions_mission_id"), "pair_decisions", ["mission_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_pair_decisions_mission_id"), table_name="pair_decisions")
    op.drop_table("pair_decisions")
    op.drop_table("pair_requests")
