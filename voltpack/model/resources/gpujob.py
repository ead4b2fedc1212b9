"""GPUJob: a gang of worker pods placed all-or-nothing."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from voltpack.model.resources.common import Condition, ResourceModel


class GpuJobSpec(ResourceModel):
    """What the job asks for; the controller creates `workers` pods from `template`."""

    workers: int = Field(ge=1, le=10_000, description="number of worker pods")
    min_workers: int | None = Field(
        default=None, ge=1, description="gang size that must be placed together (default: all)"
    )
    template: dict[str, Any] = Field(description="a core/v1 PodTemplateSpec for every worker")
    gpus_per_worker: int = Field(default=1, ge=0, le=64, description="whole GPUs per worker")
    gpu_milli: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description="a share of one GPU per worker in milli-GPU (with gpusPerWorker 1)",
    )
    gpu_models: list[str] = Field(default_factory=list, description="accepted GPU models")
    queue: str = Field(default="default", min_length=1)
    priority: int = Field(default=0, ge=-1000, le=1000)
    preemptible: bool = False

    @model_validator(mode="after")
    def _check_gang(self) -> GpuJobSpec:
        if self.min_workers is not None and self.min_workers > self.workers:
            raise ValueError(f"minWorkers={self.min_workers} exceeds workers={self.workers}")
        if self.gpu_milli is not None and self.gpus_per_worker != 1:
            raise ValueError("gpuMilli (a GPU share) needs gpusPerWorker: 1")
        return self


class WorkerPlacement(ResourceModel):
    """Where one worker runs."""

    pod: str
    node: str
    gpus: list[int] = Field(default_factory=list)


class GpuJobStatus(ResourceModel):
    """What the controller and scheduler did with the job."""

    phase: Literal["Pending", "Scheduled", "Running", "Succeeded", "Failed"] = "Pending"
    placement: list[WorkerPlacement] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=list)
    observed_generation: int | None = Field(default=None, ge=0)
