"""Which process runs a mission, so a mission whose worker was lost is retried once.

`attempts` already counts the starts of a mission; `runner` names the process of the
current start (`host:pid:start`, the sandboxes' owner label) and `runner_seen_at` when it
last said it was alive, so another worker can tell a lost mission from a running one.

Revision ID: 0007
Revises: 0005
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("missions") as batch:
        batch.add_column(sa.Column("runner", sa.String(255), nullable=True))
        batch.add_column(sa.Column("runner_seen_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("missions") as batch:
        batch.drop_column("runner_seen_at")
        batch.drop_column("runner")
