"""What the admin API shows of InferenceServices: read models built from their spec and status."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _View(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BucketView(_View):
    """Requests of one size bucket a replica group is planned to serve."""

    bucket: str
    rate_per_s: float


class ReplicaGroupView(_View):
    """Replicas of one GPU type, tensor-parallel degree and role."""

    gpu_type: str
    tensor_parallel: int
    role: str = Field(description="unified, prefill or decode")
    replicas: int
    ready_replicas: int
    cost_per_hour: float = Field(description="USD per hour of the group's GPUs")
    load: float = Field(description="planned load, in replicas")
    extrapolated: bool = Field(description="the performance profile has no measured point")
    basis: str
    buckets: list[BucketView] = Field(default_factory=list)


class InferenceServiceView(_View):
    """An InferenceService at a glance."""

    namespace: str
    name: str
    model: str
    phase: str
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    replicas: int = 0
    ready_replicas: int = 0
    predicted_cost_per_hour: float | None = Field(default=None, description="USD")
    predicted_slo_attainment: float | None = Field(
        default=None, description="share of requests within both SLOs, predicted by the planner"
    )
    planning_rate_per_s: float | None = None
    rate_source: str | None = None
    observed_slo_attainment: float | None = None
    conditions: dict[str, str] = Field(default_factory=dict, description="type -> message")


class InferencePlanView(_View):
    """The plan in effect for a service, what it costs, the rate it is for, and why."""

    namespace: str
    name: str
    model: str
    phase: str
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    split: bool | None = None
    groups: list[ReplicaGroupView] = Field(default_factory=list)
    gpus_by_type: dict[str, int] = Field(default_factory=dict)
    predicted_cost_per_hour: float | None = Field(default=None, description="USD")
    predicted_slo_attainment: float | None = Field(
        default=None, description="share of requests within both SLOs, predicted by the planner"
    )
    predicted_slo_attainment_basis: str | None = None
    planning_rate_per_s: float | None = None
    rate_source: str | None = None
    latest_rate_per_s: float | None = None
    reason: str = Field(default="", description="why this plan (the Planned condition)")
    infeasible: str | None = Field(
        default=None, description="the planner's message when the SLO cannot be met"
    )
    last_plan_time: str | None = None
