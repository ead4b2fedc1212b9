"""GPUNode: one per GPU node; the agent reports status, the power manager writes spec."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from voltpack.model.resources.common import Condition, ResourceModel


class ClockRange(ResourceModel):
    """Locked SM clock range in MHz."""

    min_mhz: int = Field(ge=0)
    max_mhz: int = Field(ge=0)


class GpuSetting(ResourceModel):
    """Desired power limit and clocks of one GPU (unset: driver default)."""

    index: int = Field(ge=0)
    power_limit_w: float | None = Field(default=None, gt=0)
    locked_clocks: ClockRange | None = None


class GpuNodeSpec(ResourceModel):
    """What the power manager wants the node agent to apply."""

    gpus: list[GpuSetting] = Field(default_factory=list)


class GpuDevice(ResourceModel):
    """One GPU as the node agent sees it."""

    index: int = Field(ge=0)
    uuid: str = Field(min_length=1)
    model: str = Field(min_length=1)
    memory_mib: int = Field(ge=0)
    health: Literal["Healthy", "Unhealthy", "Unknown"] = "Unknown"
    power_limit_w: float | None = Field(default=None, gt=0)
    power_draw_w: float | None = Field(default=None, ge=0)
    locked_clocks: ClockRange | None = None


class Nic(ResourceModel):
    """A network interface and the GPUs it serves best."""

    name: str = Field(min_length=1)
    nic_class: str = Field(description="e.g. frontend, rdma-200g, rdma-400g")
    bandwidth_gbps: float | None = Field(default=None, gt=0, description="line rate, Gbit/s")
    numa_node: int | None = Field(default=None, ge=0, description="the NIC's NUMA node")
    gpus: list[int] = Field(
        default_factory=list, description="GPUs it serves best (nearest on the PCIe tree)"
    )


class Topology(ResourceModel):
    """How the node's GPUs and NICs are connected."""

    nvlink_domains: list[list[int]] = Field(
        default_factory=list, description="groups of GPU indices joined by NVLink/NVSwitch"
    )
    numa_nodes: list[list[int]] = Field(
        default_factory=list, description="GPU indices per NUMA node"
    )
    nics: list[Nic] = Field(default_factory=list)


class GpuNodeStatus(ResourceModel):
    """What the node agent observed and applied."""

    gpus: list[GpuDevice] = Field(default_factory=list)
    topology: Topology | None = None
    last_heartbeat_time: str | None = Field(default=None, description="RFC 3339")
    conditions: list[Condition] = Field(default_factory=list)
