"""job_history: submitted, started and finished times of every job (forecasting, fairness).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "job_history",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("job", sa.String(253), nullable=False),
        sa.Column("namespace", sa.String(63), nullable=False),
        sa.Column("queue", sa.String(253), nullable=False),
        sa.Column("gpu_model", sa.String(64), nullable=True),
        sa.Column("gpus", sa.Double(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("submitted_at_s", sa.Double(), nullable=False),
        sa.Column("started_at_s", sa.Double(), nullable=True),
        sa.Column("finished_at_s", sa.Double(), nullable=True),
        sa.Column("state", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_job_history"),
        sa.UniqueConstraint(
            "namespace", "job", "submitted_at_s", name="uq_job_history_namespace_job_submitted_at_s"
        ),
    )
    op.create_index("ix_job_history_submitted_at_s", "job_history", ["submitted_at_s"])
    op.create_index(
        "ix_job_history_queue_submitted_at_s", "job_history", ["queue", "submitted_at_s"]
    )


def downgrade() -> None:
    op.drop_table("job_history")
