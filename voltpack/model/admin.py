"""What the admin API shows: read models of the cluster, built by a driver from live objects.

Plain data (pydantic, JSON-ready); the operator's adapter fills them from the Kubernetes API,
the API serves them. Units in names.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _View(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GpuView(_View):
    """One GPU of a node."""

    index: int
    model: str
    health: str = Field(description="Healthy, Unhealthy or Unknown (from the node agent)")
    allocated_milli: int = Field(ge=0, le=1000, description="share in use, 1000 = whole GPU")
    pods: list[str] = Field(default_factory=list, description="namespace/name using it")
    power_w: float | None = None
    clock_lock_mhz: float | None = None
    power_limit_w: float | None = None


class NodeView(_View):
    """One node: its GPUs, what is allocated, its power."""

    name: str
    ready: bool
    gpu_model: str | None
    gpus: int
    gpus_allocated: float
    cpu_milli: int
    cpu_milli_allocated: int
    memory_mib: int
    memory_mib_allocated: int
    power_w: float | None = None
    power_domain: str | None = None
    gpu_details: list[GpuView] = Field(default_factory=list)


class DeviceView(_View):
    """One device a pod holds: allocated to one of its ResourceClaims (binding), or recorded
    by voltpack on a pod of the device-plugin path (advisory: the device plugin picks)."""

    binding: Literal["allocated", "advisory"] = Field(
        description="allocated: named in a ResourceClaim's allocation, the driver prepares "
        "exactly it; advisory: voltpack's choice in the voltpack.io/gpu-indices or "
        "voltpack.io/nics annotation, the device plugin may give another"
    )
    kind: Literal["gpu", "nic", "other"]
    driver: str | None = Field(default=None, description="DRA driver, e.g. gpu.nvidia.com")
    pool: str | None = Field(default=None, description="DRA pool (usually the node's name)")
    device: str | None = Field(
        default=None, description="device name in its pool (gpu-0), or an advisory NIC's name"
    )
    request: str | None = Field(default=None, description="the claim's request it serves")
    claim: str | None = Field(default=None, description="namespace/name of its ResourceClaim")
    node: str | None = None
    gpu_index: int | None = Field(default=None, description="a GPU's index on its node")
    pcie_root: str | None = Field(
        default=None, description="resource.kubernetes.io/pcieRoot of an allocated device"
    )


class ClaimView(_View):
    """One ResourceClaim a pod uses, with the devices allocated to it."""

    name: str = Field(description="namespace/name")
    allocated: bool
    node: str | None = Field(default=None, description="the node of its allocation")
    devices: list[DeviceView] = Field(default_factory=list)
    problem: str | None = Field(default=None, description="e.g. the claim does not exist")


class WorkerView(_View):
    """Where one pod of a job runs, or why it waits."""

    pod: str
    node: str | None
    gpus: list[int] = Field(default_factory=list)
    phase: str
    pending_reason: str | None = None
    rank: int | None = None
    """The pod's rank in its gang (placement order), once bound."""
    nics: list[str] = Field(default_factory=list)
    """RDMA NICs the pod got a share of."""
    claims: list[ClaimView] = Field(default_factory=list)
    """The pod's ResourceClaims (Dynamic Resource Allocation) and what each holds."""
    devices: list[DeviceView] = Field(default_factory=list)
    """Every device the pod holds: its claims' allocated devices, or, for a bound pod without
    claims, the GPUs and NICs voltpack recorded on it (advisory)."""


class JobView(_View):
    """A gang (a GPUJob or a pod group) with its placement or the reason it is pending."""

    namespace: str
    name: str
    kind: Literal["GPUJob", "PodGroup", "Pod"]
    queue: str
    priority: int
    phase: str
    gpus_requested: float
    workers: list[WorkerView]
    pending_reason: str | None = None
    placement_reason: str | None = None
    """Why the gang was placed where it is, when voltpack recorded it (topology-placed gangs:
    the domain, and the predicted step time against the ideal)."""
    recovery_reason: str | None = None
    """The last fault recovery of a GPUJob and why (a GPU fault: restarted from its checkpoint,
    shrunk in place, grown back, or a restart deferred by the budget)."""


class QueueView(_View):
    """A queue's usage against its quotas."""

    name: str
    parent: str | None
    weight: float
    guaranteed_gpus: dict[str, float]
    limit_gpus: dict[str, float]
    allocated_gpus: dict[str, float]
    pending_jobs: int
    conditions: dict[str, str] = Field(default_factory=dict, description="type -> message")


class PowerDomainView(_View):
    """A power domain: budget, power now, headroom and the actions in effect."""

    name: str
    budget_w: float
    power_w: float | None
    headroom_w: float | None
    nodes: list[str]
    actions: dict[str, int] = Field(
        default_factory=dict, description="GPUs per action in effect, e.g. clock-lock-1275"
    )
    manual_cap_w: float | None = None
    message: str | None = None


class ClusterSummary(_View):
    """The cluster at a glance."""

    nodes: int
    nodes_ready: int
    gpus_by_model: dict[str, float]
    gpus_allocated_by_model: dict[str, float]
    jobs_running: int
    jobs_pending: int
    pods_pending: int
    queues: int
    power_domains: int
    power_w: float | None
    budget_w: float | None
    observed_at_s: float


class PlacementChange(_View):
    """One thing a dry run says would happen."""

    action: Literal["bind", "stay-pending", "preempt", "cap", "release"]
    subject: str
    detail: str


class DryRunResult(_View):
    """What a policy would do on the current cluster, without doing it."""

    policy: str
    binds: int
    pending: int
    changes: list[PlacementChange]


DryRunStatus = Literal["queued", "running", "done", "failed"]


class DryRunView(_View):
    """A dry run submitted to the API: its state and, once done, its result."""

    id: str
    policy: str
    status: DryRunStatus
    user: str
    created_at_s: float
    started_at_s: float | None = None
    finished_at_s: float | None = None
    error: str | None = None
    result: DryRunResult | None = Field(
        default=None, description="set when status is done: the cluster as it was when it ran"
    )
