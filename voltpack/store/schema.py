"""The tables, as SQLAlchemy 2 typed ORM classes.

Alembic migrations in `migrations/versions/` create these tables; a test checks that the
migrated schema and these classes agree. Change both together (see `docs/store.md`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    Double,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeEngine

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "pk": "pk_%(table_name)s",
}

ID: TypeEngine[int] = BigInteger().with_variant(Integer(), "sqlite")
"""64-bit ids on PostgreSQL; SQLite's INTEGER PRIMARY KEY (the rowid) on SQLite."""

JSON_DOCUMENT: TypeEngine[Any] = JSON().with_variant(JSONB(), "postgresql")

NAME = String(253)
"""Kubernetes object names are at most 253 characters."""


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class DecisionRow(Base):
    __tablename__ = "decisions"
    __table_args__ = (
        Index(None, "at_s", "id"),
        Index(None, "job", "at_s", "id"),
        Index(None, "node", "at_s", "id"),
    )

    id: Mapped[int] = mapped_column(ID, primary_key=True, autoincrement=True)
    at_s: Mapped[float] = mapped_column(Double())
    subject: Mapped[str] = mapped_column(NAME)
    job: Mapped[str | None] = mapped_column(NAME)
    node: Mapped[str | None] = mapped_column(NAME)
    placed: Mapped[bool]
    reason: Mapped[str] = mapped_column(Text())
    policy: Mapped[str] = mapped_column(String(128))
    cycle_id: Mapped[int] = mapped_column(BigInteger())


class JobHistoryRow(Base):
    __tablename__ = "job_history"
    __table_args__ = (
        UniqueConstraint("namespace", "job", "submitted_at_s"),
        Index(None, "submitted_at_s"),
        Index(None, "queue", "submitted_at_s"),
    )

    id: Mapped[int] = mapped_column(ID, primary_key=True, autoincrement=True)
    job: Mapped[str] = mapped_column(NAME)
    namespace: Mapped[str] = mapped_column(String(63))
    queue: Mapped[str] = mapped_column(NAME)
    gpu_model: Mapped[str | None] = mapped_column(String(64))
    gpus: Mapped[float] = mapped_column(Double())
    priority: Mapped[int] = mapped_column(Integer())
    submitted_at_s: Mapped[float] = mapped_column(Double())
    started_at_s: Mapped[float | None] = mapped_column(Double())
    finished_at_s: Mapped[float | None] = mapped_column(Double())
    state: Mapped[str] = mapped_column(String(32))


class PowerSampleRow(Base):
    __tablename__ = "power_samples"
    __table_args__ = (UniqueConstraint("domain", "bucket_start_s", "bucket_s"),)

    id: Mapped[int] = mapped_column(ID, primary_key=True, autoincrement=True)
    domain: Mapped[str] = mapped_column(NAME)
    bucket_start_s: Mapped[float] = mapped_column(Double())
    bucket_s: Mapped[float] = mapped_column(Double())
    samples: Mapped[int] = mapped_column(Integer())
    mean_w: Mapped[float] = mapped_column(Double())
    max_w: Mapped[float] = mapped_column(Double())
    budget_w: Mapped[float | None] = mapped_column(Double())
    actions: Mapped[int] = mapped_column(Integer())


class SimulationRunRow(Base):
    __tablename__ = "simulation_runs"
    __table_args__ = (
        CheckConstraint("status IN ('queued', 'running', 'done', 'failed')", name="status"),
        CheckConstraint("progress >= 0 AND progress <= 1", name="progress"),
        Index(None, "created_at_s"),
    )

    id: Mapped[int] = mapped_column(ID, primary_key=True, autoincrement=True)
    created_at_s: Mapped[float] = mapped_column(Double())
    kind: Mapped[str] = mapped_column(String(64))
    request: Mapped[dict[str, Any]] = mapped_column(JSON_DOCUMENT)
    status: Mapped[str] = mapped_column(String(16))
    progress: Mapped[float] = mapped_column(Double())
    report: Mapped[dict[str, Any] | None] = mapped_column(JSON_DOCUMENT)
    error: Mapped[str | None] = mapped_column(Text())


class AuditRow(Base):
    __tablename__ = "audit"
    __table_args__ = (
        Index(None, "at_s", "id"),
        Index(None, "user", "at_s"),
    )

    id: Mapped[int] = mapped_column(ID, primary_key=True, autoincrement=True)
    at_s: Mapped[float] = mapped_column(Double())
    user: Mapped[str] = mapped_column(NAME)
    action: Mapped[str] = mapped_column(String(128))
    target: Mapped[str] = mapped_column(String(512))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON_DOCUMENT)
    outcome: Mapped[str] = mapped_column(String(32))


class DecisionCountRow(Base):
    """Decisions and placements per `COUNT_BUCKET_S`, kept in step with `decisions`."""

    __tablename__ = "decision_counts"

    bucket_start_s: Mapped[float] = mapped_column(Double(), primary_key=True)
    decisions: Mapped[int] = mapped_column(BigInteger())
    placed: Mapped[int] = mapped_column(BigInteger())


COUNT_BUCKET_S = 3600.0
"""Width of the `decision_counts` buckets (a change needs a migration that rebuilds them)."""
