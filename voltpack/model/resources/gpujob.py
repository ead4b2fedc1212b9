"""GPUJob: a gang of worker pods placed all-or-nothing."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from voltpack.model.resources.common import Condition, ResourceModel


class GpuJobTopology(ResourceModel):
    """Where the job's workers must or should stay, and the training job's parallelism.

    Levels are named by a `Topology` level's node label or name; the whole gang is placed as
    one unit (ranks in placement order). With a `model` from the training-model catalog, the
    placement with the shortest predicted step time wins.
    """

    required_level: str | None = Field(
        default=None, min_length=1, description="every worker in one domain of this level"
    )
    preferred_level: str | None = Field(
        default=None, min_length=1, description="one domain of this level if possible"
    )
    model: str | None = Field(
        default=None, min_length=1, description="a training model of the catalog, e.g. gpt-13b"
    )
    tensor_parallel: int = Field(default=1, ge=1, le=64)
    pipeline_parallel: int = Field(default=1, ge=1, le=1024)


class GpuJobSpec(ResourceModel):
    """What the job asks for; the controller creates `workers` pods from `template`."""

    workers: int = Field(ge=1, le=10_000, description="number of worker pods")
    min_workers: int | None = Field(
        default=None,
        ge=1,
        description=(
            "gang size that must be placed together (default: all); below workers the job is "
            "elastic: it may run with as few as minWorkers (docs/elastic-training.md)"
        ),
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
    topology: GpuJobTopology | None = Field(
        default=None, description="topology request: levels and parallelism"
    )
    rdma_percent: int = Field(
        default=0, ge=0, le=100, description="share of one RDMA NIC's bandwidth per worker"
    )

    @model_validator(mode="after")
    def _check_gang(self) -> GpuJobSpec:
        if self.min_workers is not None and self.min_workers > self.workers:
            raise ValueError(f"minWorkers={self.min_workers} exceeds workers={self.workers}")
        if self.gpu_milli is not None and self.gpus_per_worker != 1:
            raise ValueError("gpuMilli (a GPU share) needs gpusPerWorker: 1")
        if self.topology is not None:
            if self.gpu_milli is not None or self.gpus_per_worker == 0:
                raise ValueError("topology needs workers that ask for whole GPUs (gpusPerWorker)")
            model_parallel = self.topology.tensor_parallel * self.topology.pipeline_parallel
            gpus = self.workers * self.gpus_per_worker
            if gpus % model_parallel:
                raise ValueError(
                    f"topology.tensorParallel x topology.pipelineParallel = {model_parallel} "
                    f"must divide workers x gpusPerWorker = {gpus}"
                )
        return self


class WorkerPlacement(ResourceModel):
    """Where one worker runs."""

    pod: str
    node: str
    gpus: list[int] = Field(default_factory=list)


class GpuJobRecovery(ResourceModel):
    """What fault recovery did to the job: kept in status so a new leader keeps the budget."""

    restarts: list[str] = Field(
        default_factory=list, description="RFC 3339 times of re-placements within the window"
    )
    missing_workers: list[int] = Field(
        default_factory=list,
        description="worker indices an elastic job runs without (not recreated until it grows)",
    )
    message: str = Field(default="", description="the last recovery action and why")


class GpuJobStatus(ResourceModel):
    """What the controller and scheduler did with the job."""

    phase: Literal["Pending", "Scheduled", "Running", "Succeeded", "Failed"] = "Pending"
    placement: list[WorkerPlacement] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=list)
    observed_generation: int | None = Field(default=None, ge=0)
    recovery: GpuJobRecovery | None = Field(
        default=None, description="fault recovery: re-placements, missing workers, why"
    )
