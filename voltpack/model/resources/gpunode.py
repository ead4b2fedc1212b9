"""GPUNode: one per GPU node; the agent reports status, the power manager writes spec."""

from __future__ import annotations

from collections.abc import Iterable
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


FaultAction = Literal["none", "reset", "reboot", "replace"]
"""What a fault asks for (the XID catalog's recommended action): nothing, a GPU reset, a node
reboot, or the GPU's replacement; ordered from least to most severe."""
FAULT_ACTION_ORDER: tuple[FaultAction, ...] = ("none", "reset", "reboot", "replace")
FaultSignalKind = Literal[
    "xid", "ecc", "row-remap", "nvlink", "fell-off-bus", "thermal", "power-brake"
]
"""Where a fault was seen."""


def most_severe(actions: Iterable[FaultAction]) -> FaultAction:
    """The most severe of `actions` ("none" when there are none)."""
    return max(actions, key=FAULT_ACTION_ORDER.index, default="none")


class GpuFault(ResourceModel):
    """A fault signal seen on one GPU (XID, ECC, row remapping, NVLink, bus, throttling)."""

    signal: FaultSignalKind = Field(description="where the fault was seen")
    code: int | None = Field(default=None, description="e.g. the XID number")
    action: FaultAction = Field(description="what it calls for: none, reset, reboot, replace")
    message: str = Field(default="", description="what was seen, for people")
    first_seen: str | None = Field(default=None, description="RFC 3339")
    last_seen: str | None = Field(default=None, description="RFC 3339")


class GpuDevice(ResourceModel):
    """One GPU as the node agent sees it."""

    index: int = Field(ge=0)
    uuid: str = Field(min_length=1)
    model: str = Field(min_length=1)
    memory_mib: int = Field(ge=0)
    health: Literal["Healthy", "Unhealthy", "Unknown"] = "Unknown"
    power_limit_w: float | None = Field(default=None, gt=0)
    power_draw_w: float | None = Field(default=None, ge=0)
    sm_clock_mhz: float | None = Field(
        default=None, ge=0, description="SM clock at the last reading, MHz"
    )
    utilization_ratio: float | None = Field(
        default=None, ge=0, le=1, description="share of the last sample period a kernel ran"
    )
    locked_clocks: ClockRange | None = None
    faults: list[GpuFault] = Field(
        default_factory=list, description="active fault signals; cleared when they clear"
    )

    @property
    def worst_action(self) -> FaultAction:
        """The most severe action any active fault calls for ("none" without faults)."""
        return most_severe(f.action for f in self.faults)


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
