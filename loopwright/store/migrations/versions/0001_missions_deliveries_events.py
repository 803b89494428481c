"""Missions, webhook deliveries, the event log and per-tier usage.

Revision ID: 0001
Revises:
Create Date: 2025-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JsonB = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "missions",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("trigger", sa.String(32), nullable=False),
        sa.Column("repo", sa.String(512), nullable=False),
        sa.Column("head_sha", sa.String(64), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=True),
        sa.Column("dedupe_key", sa.String(1024), nullable=False),
        sa.Column("request", JsonB, nullable=False),
        sa.Column("result", JsonB, nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("stage", sa.String(16), nullable=True),
        sa.Column("tier_reached", sa.String(64), nullable=True),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("check_run_id", sa.BigInteger(), nullable=True),
        sa.Column("pr_url", sa.String(1024), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_missions")),
        sa.UniqueConstraint("dedupe_key", name=op.f("uq_missions_dedupe_key")),
    )
    op.create_index("ix_missions_repo_head_sha", "missions", ["repo", "head_sha"])
    op.create_index("ix_missions_status_created_at", "missions", ["status", "created_at"])
    op.create_index("ix_missions_created_at", "missions", ["created_at"])

    op.create_table(
        "deliveries",
        sa.Column("id", sa.String(128), nullable=False),
        sa.Column("event", sa.String(64), nullable=False),
        sa.Column("action", sa.String(64), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decision", sa.Text(), nullable=True),
        sa.Column("mission_id", sa.String(32), nullable=True),
        sa.ForeignKeyConstraint(
            ["mission_id"],
            ["missions.id"],
            name=op.f("fk_deliveries_mission_id_missions"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deliveries")),
    )
    op.create_index(op.f("ix_deliveries_mission_id"), "deliveries", ["mission_id"])

    op.create_table(
        "events",
        sa.Column("mission_id", sa.String(32), nullable=False),
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("stage", sa.String(16), nullable=True),
        sa.Column("body", JsonB, nullable=False),
        sa.ForeignKeyConstraint(
            ["mission_id"],
            ["missions.id"],
            name=op.f("fk_events_mission_id_missions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("mission_id", "seq", name=op.f("pk_events")),
    )

    op.create_table(
        "mission_usage",
        sa.Column("mission_id", sa.String(32), nullable=False),
        sa.Column("tier", sa.String(64), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["mission_id"],
            ["missions.id"],
            name=op.f("fk_mission_usage_mission_id_missions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("mission_id", "tier", name=op.f("pk_mission_usage")),
    )


def downgrade() -> None:
    op.drop_table("mission_usage")
    op.drop_table("events")
    op.drop_index(op.f("ix_deliveries_mission_id"), table_name="deliveries")
    op.drop_table("deliveries")
    op.drop_index("ix_missions_created_at", table_name="missions")
    op.drop_index("ix_missions_status_created_at", table_name="missions")
    op.drop_index("ix_missions_repo_head_sha", table_name="missions")
    op.drop_table("missions")
