"""Nodes and the GPUs inside them, as a scheduler sees them (capacity and what is free)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

MILLI_PER_GPU = 1000
"""A whole GPU is 1000 milli-GPU; a GPU-sharing pod asks for a share below that."""


class Gpu(BaseModel):
    """One GPU device of a node and the share of it that is still free."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int = Field(ge=0)
    milli_free: int = Field(default=MILLI_PER_GPU, ge=0, le=MILLI_PER_GPU)


class Node(BaseModel):
    """A worker node: CPU, memory and GPUs, with capacity and the part of it that is free."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    cpu_milli: int = Field(ge=0)
    memory_mib: int = Field(ge=0)
    gpu_model: str | None = None
    gpus: tuple[Gpu, ...] = ()
    cpu_milli_free: int | None = Field(default=None, ge=0)
    memory_mib_free: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _check_consistency(self) -> Node:
        if self.gpus and self.gpu_model is None:
            raise ValueError(f"node {self.name}: has GPUs but no gpu_model")
        indices = [gpu.index for gpu in self.gpus]
        if indices != list(range(len(self.gpus))):
            raise ValueError(f"node {self.name}: GPU indices must be 0..{len(self.gpus) - 1}")
        if self.cpu_milli_free is not None and self.cpu_milli_free > self.cpu_milli:
            raise ValueError(f"node {self.name}: cpu_milli_free exceeds cpu_milli")
        if self.memory_mib_free is not None and self.memory_mib_free > self.memory_mib:
            raise ValueError(f"node {self.name}: memory_mib_free exceeds memory_mib")
        return self

    @classmethod
    def empty(
        cls, name: str, cpu_milli: int, memory_mib: int, gpu_count: int, gpu_model: str | None
    ) -> Node:
        """A node with nothing allocated and `gpu_count` idle GPUs of `gpu_model`."""
        gpus = tuple(Gpu(index=i) for i in range(gpu_count))
        return cls(
            name=name,
            cpu_milli=cpu_milli,
            memory_mib=memory_mib,
            gpu_model=gpu_model if gpu_count else None,
            gpus=gpus,
        )

    @property
    def gpu_count(self) -> int:
        """Number of GPU devices on the node."""
        return len(self.gpus)
