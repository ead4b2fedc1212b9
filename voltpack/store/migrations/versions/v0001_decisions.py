"""decisions: every scheduling decision with its reason.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "decisions",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("at_s", sa.Double(), nullable=False),
        sa.Column("subject", sa.String(253), nullable=False),
        sa.Column("job", sa.String(253), nullable=True),
        sa.Column("node", sa.String(253), nullable=True),
        sa.Column("placed", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("policy", sa.String(128), nullable=False),
        sa.Column("cycle_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_decisions"),
    )
    op.create_index("ix_decisions_at_s_id", "decisions", ["at_s", "id"])
    op.create_index("ix_decisions_job_at_s_id", "decisions", ["job", "at_s", "id"])
    op.create_index("ix_decisions_node_at_s_id", "decisions", ["node", "at_s", "id"])


def downgrade() -> None:
    op.drop_table("decisions")
