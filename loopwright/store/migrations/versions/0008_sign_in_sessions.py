"""Sign-in sessions shared by every server process: the repository lists of GitHub
sign-ins too long for their cookie move from one process's memory to `sign_in_sessions`,
and both tables key a session by the SHA-256 of its id instead of the id itself.

Revocations recorded before the upgrade are rewritten to the hash, so they still hold. A
downgrade deletes every revocation (the older code looks up raw ids), so sessions signed
out before it are accepted again until their cookies expire; GitHub sign-ins with a long
repository list sign in again.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_revoked = sa.table("revoked_sessions", sa.column("id", sa.String(64)))


def upgrade() -> None:
    op.create_table(
        "sign_in_sessions",
        sa.Column("id_hash", sa.String(64), nullable=False),
        sa.Column(
            "repos", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id_hash", name=op.f("pk_sign_in_sessions")),
    )
    op.create_index(op.f("ix_sign_in_sessions_expires_at"), "sign_in_sessions", ["expires_at"])
    connection = op.get_bind()
    for (raw,) in connection.execute(sa.select(_revoked.c.id)).all():
        hashed = hashlib.sha256(raw.encode()).hexdigest()
        connection.execute(sa.update(_revoked).where(_revoked.c.id == raw).values(id=hashed))


def downgrade() -> None:
    op.execute(sa.delete(_revoked))
    op.drop_index(op.f("ix_sign_in_sessions_expires_at"), table_name="sign_in_sessions")
    op.drop_table("sign_in_sessions")
