"""Mission slots: the concurrency caps (global and per installation) shared by every process.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mission_slots",
        sa.Column("mission_id", sa.String(32), nullable=False),
        sa.Column("installation_id", sa.BigInteger(), nullable=True),
        sa.Column("holder", sa.String(255), nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("mission_id", name=op.f("pk_mission_slots")),
    )
    op.create_index(op.f("ix_mission_slots_installation_id"), "mission_slots", ["installation_id"])
    op.create_index(op.f("ix_mission_slots_holder"), "mission_slots", ["holder"])


def downgrade() -> None:
    op.drop_index(op.f("ix_mission_slots_holder"), table_name="mission_slots")
    op.drop_index(op.f("ix_mission_slots_installation_id"), table_name="mission_slots")
    op.drop_table("mission_slots")
