"""simulation_runs: what-if simulations asked for through the API, with their reports.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
JSON_DOCUMENT = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "simulation_runs",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("created_at_s", sa.Double(), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("request", JSON_DOCUMENT, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("progress", sa.Double(), nullable=False),
        sa.Column("report", JSON_DOCUMENT, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_simulation_runs"),
        sa.CheckConstraint(
            "status IN ('queued', 'running', 'done', 'failed')", name="ck_simulation_runs_status"
        ),
        sa.CheckConstraint("progress >= 0 AND progress <= 1", name="ck_simulation_runs_progress"),
    )
    op.create_index("ix_simulation_runs_created_at_s", "simulation_runs", ["created_at_s"])


def downgrade() -> None:
    op.drop_table("simulation_runs")
