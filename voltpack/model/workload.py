"""Workloads: pods and pod groups (gangs placed all-or-nothing)."""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.constraints.pod_constraints import PodConstraints
from voltpack.model.topology_request import TopologyRequest


class Pod(BaseModel):
    """A pod's request: CPU, memory and GPUs.

    The pod needs `num_gpu` distinct GPUs with at least `gpu_milli` free on each: `gpu_milli`
    below 1000 with `num_gpu == 1` is a share of one GPU (GPU sharing), 1000 means whole GPUs.
    `gpu_models` lists the GPU models the pod accepts; empty accepts any. `rdma_percent` is a
    share (0..100) of the bandwidth of ONE RDMA NIC (InfiniBand or RoCE) on the pod's node, as
    `voltpack.io/rdma-percent` asks; 0 asks for no NIC. `nodes`, when set, are the only nodes
    the pod may run on (e.g. those where its ResourceClaims' devices can be allocated).
    `resources` are the other resources kube-scheduler's NodeResourcesFit counts (memory and
    ephemeral-storage in bytes, hugepages, extended resources, the GPU resource too), by name;
    `constraints` what of its spec narrows or orders the nodes (None: nothing does).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    cpu_milli: int = Field(ge=0)
    memory_mib: int = Field(ge=0)
    num_gpu: int = Field(default=0, ge=0)
    gpu_milli: int = Field(default=0, ge=0, le=MILLI_PER_GPU)
    gpu_models: tuple[str, ...] = ()
    rdma_percent: int = Field(default=0, ge=0, le=100)
    qos: str = "BE"
    priority: int = 0
    creation_time_s: float = 0.0
    deletion_time_s: float | None = None
    nodes: frozenset[str] | None = None
    resources: tuple[tuple[str, int], ...] = ()
    constraints: PodConstraints | None = None

    @model_validator(mode="wrap")
    @classmethod
    def _name_the_pod(cls, data: Any, handler: ModelWrapValidatorHandler[Pod]) -> Pod:
        """Put the pod's name into every error message, keeping each error's field."""
        try:
            return handler(data)
        except ValidationError as exc:
            name = data.get("name", "?") if isinstance(data, dict) else "?"
            errors: list[Any] = []
            for error in exc.errors():
                message = error["msg"].removeprefix("Value error, ")
                if not message.startswith(f"pod {name}"):
                    message = f"pod {name}: {message}"
                errors.append(
                    {
                        "type": PydanticCustomError("pod_request", message),
                        "loc": error["loc"],
                        "input": error.get("input"),
                    }
                )
            raise ValidationError.from_exception_data(cls.__name__, errors) from None

    @field_validator("rdma_percent", mode="before")
    @classmethod
    def _check_rdma_percent(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= 100:
            raise ValueError(
                f"rdma_percent={value} is not a share of one RDMA NIC's bandwidth; use 0..100"
            )
        return value

    @model_validator(mode="after")
    def _check_gpu_request(self) -> Pod:
        if self.num_gpu == 0 and self.gpu_milli != 0:
            raise ValueError(f"pod {self.name}: gpu_milli={self.gpu_milli} needs num_gpu >= 1")
        if self.num_gpu >= 1 and self.gpu_milli == 0:
            raise ValueError(f"pod {self.name}: num_gpu={self.num_gpu} needs gpu_milli in 1..1000")
        if self.num_gpu > 1 and self.gpu_milli != MILLI_PER_GPU:
            raise ValueError(
                f"pod {self.name}: a share of a GPU (gpu_milli={self.gpu_milli}) "
                f"needs num_gpu=1, got num_gpu={self.num_gpu}"
            )
        return self

    @property
    def gpu_request_milli(self) -> int:
        """Total GPU request in milli-GPU (num_gpu x gpu_milli)."""
        return self.num_gpu * self.gpu_milli

    @property
    def is_gpu_sharing(self) -> bool:
        """True when the pod asks for a share of a single GPU."""
        return self.num_gpu == 1 and self.gpu_milli < MILLI_PER_GPU


class PodGroup(BaseModel):
    """A gang: at least `min_member` of `pods` must be placed together, or none of them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    pods: tuple[Pod, ...] = Field(min_length=1)
    min_member: int = Field(ge=1)
    topology: TopologyRequest | None = None
    """Place the gang as one unit into the topology (every pod, whatever `min_member` says)."""

    @model_validator(mode="after")
    def _check_min_member(self) -> PodGroup:
        if self.min_member > len(self.pods):
            raise ValueError(
                f"pod group {self.name}: min_member={self.min_member} exceeds its "
                f"{len(self.pods)} pods"
            )
        return self
