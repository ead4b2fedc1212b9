"""The inside of one node: NVLink domains, NUMA nodes, and NICs by PCIe distance to each GPU.

What the node agent reports in a `GPUNode`'s status topology becomes a `HostLayout`; nodes the
agent has not reported take a default layout (the `Topology` object's `defaultHost`, or a whole
node in one NVLink domain with no NICs).

Units: a NIC's line rate is in Gbit/s (`line_rate_gbit_s`, what `ibstat` and sysfs print);
the perf models turn it into bytes.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

NicClass = Literal["infiniband", "roce", "ethernet"]
RDMA_NIC_CLASSES: frozenset[str] = frozenset({"infiniband", "roce"})


class NicDistance(IntEnum):
    """How near a NIC is to a GPU, nearest first (Koordinator's `SamePCIe` order)."""

    SAME_PCIE_SWITCH = 0
    SAME_NUMA = 1
    SAME_HOST = 2


class HostNic(BaseModel):
    """One NIC of a node: its class, line rate, NUMA node and the GPUs behind its PCIe switch."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    nic_class: NicClass
    line_rate_gbit_s: float = Field(gt=0)
    numa_node: int | None = Field(default=None, ge=0)
    pcie_gpus: tuple[int, ...] = ()
    """GPUs on the same PCIe switch as this NIC (the agent's `gpus` of a `GPUNode` NIC)."""

    @property
    def is_rdma(self) -> bool:
        """True for InfiniBand and RoCE (what NCCL and GPUDirect RDMA use)."""
        return self.nic_class in RDMA_NIC_CLASSES


class HostLayout(BaseModel):
    """How one node's GPUs and NICs are connected."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu_count: int = Field(ge=0)
    nvlink_domains: tuple[tuple[int, ...], ...] = ()
    """Groups of GPU indices joined by NVLink/NVSwitch; a GPU in no group has only PCIe."""
    numa_of_gpu: tuple[int | None, ...] = ()
    """NUMA node of each GPU (by index), or empty when unknown."""
    nics: tuple[HostNic, ...] = ()

    @model_validator(mode="after")
    def _check_indices(self) -> HostLayout:
        seen: set[int] = set()
        for domain in self.nvlink_domains:
            for gpu in domain:
                if not 0 <= gpu < self.gpu_count:
                    raise ValueError(f"nvlink domain names GPU {gpu}, node has {self.gpu_count}")
                if gpu in seen:
                    raise ValueError(f"GPU {gpu} is in two NVLink domains")
                seen.add(gpu)
        if self.numa_of_gpu and len(self.numa_of_gpu) != self.gpu_count:
            raise ValueError(
                f"numa_of_gpu has {len(self.numa_of_gpu)} entries for {self.gpu_count} GPUs"
            )
        names = [nic.name for nic in self.nics]
        if len(set(names)) != len(names):
            raise ValueError(f"NIC names repeat: {names}")
        for nic in self.nics:
            bad = [g for g in nic.pcie_gpus if not 0 <= g < self.gpu_count]
            if bad:
                raise ValueError(f"NIC {nic.name} names GPUs {bad}, node has {self.gpu_count}")
        return self

    @classmethod
    def single_domain(cls, gpu_count: int) -> HostLayout:
        """All GPUs in one NVLink domain, NUMA unknown, no NICs (the default of a bare node)."""
        domains = (tuple(range(gpu_count)),) if gpu_count else ()
        return cls(gpu_count=gpu_count, nvlink_domains=domains)

    def nvlink_domain_of(self) -> tuple[int, ...]:
        """Per GPU, the index of its NVLink domain, or -1 for a GPU on PCIe only."""
        domain_of = [-1] * self.gpu_count
        for number, domain in enumerate(self.nvlink_domains):
            for gpu in domain:
                domain_of[gpu] = number
        return tuple(domain_of)

    def nic_distances(self) -> tuple[tuple[NicDistance, ...], ...]:
        """Per GPU (row) and NIC (column, in `nics` order): how near the NIC is to the GPU."""
        return tuple(
            tuple(self.nic_distance(gpu, nic) for nic in self.nics) for gpu in range(self.gpu_count)
        )

    def nic_distance(self, gpu: int, nic: HostNic) -> NicDistance:
        """How near `nic` is to `gpu`: same PCIe switch, same NUMA node, or only the same host."""
        if gpu in nic.pcie_gpus:
            return NicDistance.SAME_PCIE_SWITCH
        numa = self.numa_of_gpu[gpu] if self.numa_of_gpu else None
        if numa is not None and nic.numa_node == numa:
            return NicDistance.SAME_NUMA
        return NicDistance.SAME_HOST
