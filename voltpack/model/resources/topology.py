"""Topology: a cluster's network as ordered levels of node labels, with bandwidth per level.

Levels are listed top to bottom (e.g. block > spine > leaf > host), the way Kueue's and KAI's
`Topology` objects name them; any label works, so NVIDIA Topograph's
(`network.topology.nvidia.com/spine`, `fabric.topograph.run/tier-1`) and the clouds' labels are
used by naming them as levels. Beyond what those objects hold, each level states the
oversubscription of its switches (downlink over uplink capacity), and the object may give a
default layout for the inside of a host (NVLink domains, NUMA nodes, NICs) for nodes whose
agent has not reported one in their `GPUNode`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from voltpack.model.resources.common import Condition, ResourceModel

GPU_CLIQUE_LABEL = "nvidia.com/gpu.clique"
"""GPU Feature Discovery's label: nodes with the same value share one multi-node NVLink domain."""


class TopologyLevel(ResourceModel):
    """One switch level: the node label naming each node's switch, and that level's links."""

    node_label: str = Field(min_length=1, description="label whose value names the domain")
    name: str | None = Field(default=None, description="display name (default: the label)")
    oversubscription: float = Field(
        ge=1.0,
        description="downlink over uplink capacity of this level's switches (1 = non-blocking); "
        "required: there is no default, so a fabric is never taken as non-blocking unsaid",
    )
    ecmp_port_gbit_s: float | None = Field(
        default=None,
        gt=0,
        description="line rate (Gbit/s) of one uplink port when this level's switches spread "
        "flows over their equal-cost uplinks by hashing (ECMP, e.g. RoCE fabrics): flows may "
        "collide on a port; unset: the uplinks are balanced (adaptive routing, InfiniBand)",
    )

    @model_validator(mode="before")
    @classmethod
    def _oversubscription_stated(cls, data: Any) -> Any:
        """Name the level when its oversubscription is missing (pydantic would say only
        'Field required')."""
        if isinstance(data, dict) and "oversubscription" not in data:
            label = data.get("nodeLabel", data.get("node_label"))
            raise PydanticCustomError(
                "oversubscription_missing",
                "level nodeLabel={label}: oversubscription is required (no default): state "
                "its switches' downlink over uplink capacity, e.g. 2.0 for 2:1 (1.0 = "
                "non-blocking)",
                {"label": label},
            )
        return data

    @property
    def display_name(self) -> str:
        """The level's name, or its label when unnamed."""
        return self.name or self.node_label


class HostNicSpec(ResourceModel):
    """A NIC of the default host layout."""

    name: str = Field(min_length=1)
    nic_class: Literal["infiniband", "roce", "ethernet"]
    line_rate_gbit_s: float = Field(gt=0)
    numa_node: int | None = Field(default=None, ge=0)
    gpus: list[int] = Field(default_factory=list, description="GPUs on the same PCIe switch")


class HostSpec(ResourceModel):
    """The inside of a host, for nodes whose agent reported no topology."""

    gpus: int = Field(ge=0, le=64, description="GPUs per node this layout describes")
    nvlink_domains: list[list[int]] = Field(
        default_factory=list, description="GPU indices joined by NVLink (default: all of them)"
    )
    numa_nodes: list[list[int]] = Field(default_factory=list, description="GPU indices per NUMA")
    nics: list[HostNicSpec] = Field(default_factory=list)


class TopologySpec(ResourceModel):
    """The levels, top to bottom, and the default host layout."""

    levels: list[TopologyLevel] = Field(min_length=1, description="top to bottom")
    nvlink_clique_label: str | None = Field(
        default=GPU_CLIQUE_LABEL,
        description="label shared by nodes of one multi-node NVLink domain (e.g. GB200 NVL72)",
    )
    default_host: HostSpec | None = None

    @model_validator(mode="after")
    def _labels_unique(self) -> TopologySpec:
        labels = [level.node_label for level in self.levels]
        repeated = sorted({label for label in labels if labels.count(label) > 1})
        if repeated:
            raise ValueError(f"levels name node label {repeated[0]!r} twice; keep one")
        return self


class LevelStatus(ResourceModel):
    """How many domains a level has and how many nodes carry its label."""

    node_label: str
    domains: int = Field(ge=0)
    labelled_nodes: int = Field(ge=0)


class TopologyStatus(ResourceModel):
    """What the operator found when it read the nodes' labels."""

    nodes: int = Field(default=0, ge=0)
    levels: list[LevelStatus] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=list)
