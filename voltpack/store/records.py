"""What goes in and out of the store: typed, frozen records, separate from the ORM rows.

Times are float epoch seconds (`*_s`), power in watts (`*_w`). The admin API can return these
records as they are (they are pydantic models).
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from voltpack.model.decision import Decision

SimulationStatus = Literal["queued", "running", "done", "failed"]
SIMULATION_STATUSES: tuple[SimulationStatus, ...] = ("queued", "running", "done", "failed")

_FROZEN = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class DecisionRecord(BaseModel):
    """One scheduling decision as stored: who, where (or why not), when, by which policy."""

    model_config = _FROZEN

    at_s: float
    subject: str
    """The pod, gang or job the decision is about."""
    placed: bool
    reason: str
    policy: str
    cycle_id: int
    """The scheduling cycle that took the decision (counts up within one operator run)."""
    job: str | None = None
    node: str | None = None
    """The node of the first placement (a gang over several nodes names all in its reason)."""
    id: int | None = None
    """Assigned by the store; None before the record is written."""

    @classmethod
    def from_decision(
        cls,
        decision: Decision,
        *,
        at_s: float,
        policy: str,
        cycle_id: int,
        job: str | None = None,
    ) -> DecisionRecord:
        """The record of a core `Decision` taken at `at_s` in cycle `cycle_id`."""
        node = decision.placements[0].node if decision.placements else None
        return cls(
            at_s=at_s,
            subject=decision.subject,
            placed=decision.placed,
            reason=decision.reason,
            policy=policy,
            cycle_id=cycle_id,
            job=job,
            node=node,
        )


class DecisionPage(BaseModel):
    """One page of decisions, newest first, and the cursor of the next page (None: last page)."""

    model_config = _FROZEN

    items: tuple[DecisionRecord, ...]
    next_cursor: str | None


class DecisionSummary(BaseModel):
    """Counts of decisions in a time window."""

    model_config = _FROZEN

    decisions: int
    placed: int
    unplaced: int


class JobRecord(BaseModel):
    """A job's history: written when it is submitted, again when it starts and when it ends.

    A job is identified by (namespace, job, submitted_at_s): a name reused later is a new job.
    """

    model_config = _FROZEN

    job: str
    namespace: str
    queue: str
    gpu_model: str | None
    gpus: float
    priority: int
    submitted_at_s: float
    started_at_s: float | None = None
    finished_at_s: float | None = None
    state: str
    """Free text from the operator: Pending, Running, Succeeded, Failed, Preempted, ..."""


class PowerSample(BaseModel):
    """One power reading of a domain; the store keeps only per-bucket roll-ups of these."""

    model_config = _FROZEN

    at_s: float
    power_w: float
    budget_w: float | None = None
    actions: int = 0
    """Power actions taken at this reading (GPUs capped or clock-locked)."""


class PowerRollup(NamedTuple):
    """The columns of a power bucket a forecast reads (a light tuple: 20,000 of them are read
    per forecast, where validating as many `PowerBucket` models takes ~10x as long)."""

    bucket_start_s: float
    bucket_s: float
    max_w: float
    budget_w: float | None


class PowerHistoryVersion(NamedTuple):
    """What changes when a domain's stored power in a window changes: a new or dropped bucket
    changes the count or the ends, samples merged into a stored bucket change the sample sum."""

    buckets: int
    first_start_s: float | None
    last_start_s: float | None
    samples: int


class PowerBucket(BaseModel):
    """Power samples of one domain rolled up over `[bucket_start_s, bucket_start_s + bucket_s)`."""

    model_config = _FROZEN

    domain: str
    bucket_start_s: float
    bucket_s: float
    samples: int
    mean_w: float
    max_w: float
    budget_w: float | None
    """The budget of the last sample in the bucket that carried one."""
    actions: int


class SimulationRun(BaseModel):
    """A what-if simulation asked for through the API, its progress and its report."""

    model_config = _FROZEN

    id: int
    created_at_s: float
    kind: str
    request: dict[str, Any]
    status: SimulationStatus
    progress: float
    report: dict[str, Any] | None = None
    error: str | None = None


class AuditEntry(BaseModel):
    """One administrative action: who did what to what, when, and how it ended."""

    model_config = _FROZEN

    at_s: float
    user: str
    action: str
    target: str
    detail: dict[str, Any] = Field(default_factory=dict)
    outcome: str = "ok"
    id: int | None = None


class RetentionSettings(BaseModel):
    """How many days of each table to keep (None: keep forever)."""

    model_config = _FROZEN

    decisions_days: float | None = Field(default=30.0, gt=0)
    job_history_days: float | None = Field(default=365.0, gt=0)
    power_samples_days: float | None = Field(default=90.0, gt=0)
    simulation_runs_days: float | None = Field(default=90.0, gt=0)
    audit_days: float | None = Field(default=365.0, gt=0)
