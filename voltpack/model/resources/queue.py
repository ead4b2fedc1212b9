"""Queue: GPU quotas per model, a fair-share weight and a parent queue."""

from __future__ import annotations

from pydantic import Field

from voltpack.model.resources.common import Condition, ResourceModel


class GpuQuota(ResourceModel):
    """At most `gpus` GPUs of `gpu_model` ('*' for any model)."""

    gpu_model: str = Field(min_length=1)
    gpus: float = Field(ge=0)


class QueueSpec(ResourceModel):
    """A queue's share of the cluster."""

    weight: float = Field(default=1.0, gt=0, description="fair-share weight among siblings")
    parent: str | None = Field(default=None, description="parent queue, for hierarchies")
    quotas: list[GpuQuota] = Field(default_factory=list)


class QueueStatus(ResourceModel):
    """What the queue uses now."""

    allocated_gpus: dict[str, float] = Field(default_factory=dict, description="per GPU model")
    pending_jobs: int = Field(default=0, ge=0)
    conditions: list[Condition] = Field(default_factory=list)
