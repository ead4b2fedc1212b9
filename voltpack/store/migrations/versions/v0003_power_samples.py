"""power_samples: each power domain's readings rolled up per time bucket.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "power_samples",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("domain", sa.String(253), nullable=False),
        sa.Column("bucket_start_s", sa.Double(), nullable=False),
        sa.Column("bucket_s", sa.Double(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("mean_w", sa.Double(), nullable=False),
        sa.Column("max_w", sa.Double(), nullable=False),
        sa.Column("budget_w", sa.Double(), nullable=True),
        sa.Column("actions", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_power_samples"),
        sa.UniqueConstraint(
            "domain",
            "bucket_start_s",
            "bucket_s",
            name="uq_power_samples_domain_bucket_start_s_bucket_s",
        ),
    )


def downgrade() -> None:
    op.drop_table("power_samples")
