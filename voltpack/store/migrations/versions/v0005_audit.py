"""audit: every administrative action, who did it, when, and how it ended.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
JSON_DOCUMENT = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "audit",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("at_s", sa.Double(), nullable=False),
        sa.Column("user", sa.String(253), nullable=False),
        sa.Column("action", sa.String(128), nullable=False),
        sa.Column("target", sa.String(512), nullable=False),
        sa.Column("detail", JSON_DOCUMENT, nullable=False),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit"),
    )
    op.create_index("ix_audit_at_s_id", "audit", ["at_s", "id"])
    op.create_index("ix_audit_user_at_s", "audit", ["user", "at_s"])


def downgrade() -> None:
    op.drop_table("audit")
