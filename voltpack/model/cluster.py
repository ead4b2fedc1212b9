"""Nodes and the GPUs inside them, as a scheduler sees them (capacity and what is free)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from voltpack.model.host_layout import HostLayout

MILLI_PER_GPU = 1000
"""A whole GPU is 1000 milli-GPU; a GPU-sharing pod asks for a share below that."""

NIC_PERCENT = 100
"""A whole NIC's bandwidth in percent; a pod's `rdma_percent` is a share of that."""


class Gpu(BaseModel):
    """One GPU device of a node and the share of it that is still free."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int = Field(ge=0)
    milli_free: int = Field(default=MILLI_PER_GPU, ge=0, le=MILLI_PER_GPU)


class Node(BaseModel):
    """A worker node: CPU, memory and GPUs, with capacity and the part of it that is free.

    `layout` says how the GPUs and NICs are connected (None: unknown, and no NICs to allocate);
    `nic_free_pct` gives, per NIC of the layout in order, the percent of its bandwidth still
    free (empty: every NIC wholly free).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    cpu_milli: int = Field(ge=0)
    memory_mib: int = Field(ge=0)
    gpu_model: str | None = None
    gpus: tuple[Gpu, ...] = ()
    cpu_milli_free: int | None = Field(default=None, ge=0)
    memory_mib_free: int | None = Field(default=None, ge=0)
    layout: HostLayout | None = None
    nic_free_pct: tuple[int, ...] = ()

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
        self._check_nics()
        return self

    def _check_nics(self) -> None:
        if self.layout is not None and self.layout.gpu_count != len(self.gpus):
            raise ValueError(
                f"node {self.name}: layout.gpu_count={self.layout.gpu_count} but the node has "
                f"{len(self.gpus)} GPUs"
            )
        if not self.nic_free_pct:
            return
        nic_count = len(self.layout.nics) if self.layout is not None else 0
        if len(self.nic_free_pct) != nic_count:
            raise ValueError(
                f"node {self.name}: nic_free_pct has {len(self.nic_free_pct)} entries for "
                f"{nic_count} NICs in layout.nics"
            )
        bad = [pct for pct in self.nic_free_pct if not 0 <= pct <= NIC_PERCENT]
        if bad:
            raise ValueError(f"node {self.name}: nic_free_pct {bad} outside 0..{NIC_PERCENT}")

    @classmethod
    def empty(
        cls,
        name: str,
        cpu_milli: int,
        memory_mib: int,
        gpu_count: int,
        gpu_model: str | None,
        layout: HostLayout | None = None,
    ) -> Node:
        """A node with nothing allocated, `gpu_count` idle GPUs of `gpu_model`, idle NICs."""
        gpus = tuple(Gpu(index=i) for i in range(gpu_count))
        return cls(
            name=name,
            cpu_milli=cpu_milli,
            memory_mib=memory_mib,
            gpu_model=gpu_model if gpu_count else None,
            gpus=gpus,
            layout=layout,
        )

    @property
    def gpu_count(self) -> int:
        """Number of GPU devices on the node."""
        return len(self.gpus)

    @property
    def nic_free(self) -> tuple[int, ...]:
        """Free percent of each NIC of the layout (all 100 when `nic_free_pct` is empty)."""
        if self.nic_free_pct:
            return self.nic_free_pct
        nic_count = len(self.layout.nics) if self.layout is not None else 0
        return (NIC_PERCENT,) * nic_count
