"""Queue: a guaranteed quota and a limit per GPU model, a fair-share weight and a parent queue."""

from __future__ import annotations

from pydantic import Field, model_validator

from voltpack.model.resources.common import Condition, ResourceModel

ANY_GPU_MODEL = "*"
"""A quota entry for `*` bounds the queue's GPUs of all models together."""


class GpuQuota(ResourceModel):
    """The queue's share of one GPU model ('*' for all models together), in GPUs.

    Up to `guaranteed` GPUs are the queue's own: a gang within them may reclaim GPUs that other
    queues borrowed. Above that the queue borrows idle GPUs, up to `limit` (no limit if unset).
    """

    gpu_model: str = Field(min_length=1, description="a GPU model, or '*' for all models")
    guaranteed: float = Field(default=0.0, ge=0, description="GPUs the queue is guaranteed")
    limit: float | None = Field(
        default=None, ge=0, description="most GPUs the queue may use, borrowing included"
    )

    @model_validator(mode="after")
    def _limit_covers_guarantee(self) -> GpuQuota:
        if self.limit is not None and self.limit < self.guaranteed:
            raise ValueError(
                f"gpuModel {self.gpu_model}: limit={self.limit:g} is below "
                f"guaranteed={self.guaranteed:g}; raise the limit or lower the guarantee"
            )
        return self


class QueueSpec(ResourceModel):
    """A queue's share of the cluster."""

    weight: float = Field(default=1.0, gt=0, description="fair-share weight among siblings")
    parent: str | None = Field(default=None, description="parent queue, for hierarchies")
    quotas: list[GpuQuota] = Field(default_factory=list, description="one entry per GPU model")

    @model_validator(mode="after")
    def _one_entry_per_model(self) -> QueueSpec:
        models = [quota.gpu_model for quota in self.quotas]
        repeated = sorted({m for m in models if models.count(m) > 1})
        if repeated:
            raise ValueError(f"quotas name GPU model {repeated[0]!r} twice; merge the entries")
        return self


class QueueStatus(ResourceModel):
    """What the queue (with its child queues) uses now."""

    allocated_gpus: dict[str, float] = Field(default_factory=dict, description="per GPU model")
    borrowed_gpus: dict[str, float] = Field(
        default_factory=dict, description="per GPU model: GPUs in use above the guarantee"
    )
    pending_jobs: int = Field(default=0, ge=0)
    conditions: list[Condition] = Field(default_factory=list)
