"""voltpack's Kubernetes resources (group voltpack.io, version v1alpha1): spec and status models.

These pydantic models are the one source of truth: the CRDs' OpenAPI schemas are generated from
them (`make crds`), and the operator parses resources with them.
"""

from voltpack.model.resources.common import API_GROUP, API_VERSION, Condition, ResourceKind
from voltpack.model.resources.gpujob import GpuJobSpec, GpuJobStatus
from voltpack.model.resources.gpunode import GpuNodeSpec, GpuNodeStatus
from voltpack.model.resources.inferenceservice import (
    InferenceServiceSpec,
    InferenceServiceStatus,
)
from voltpack.model.resources.powerbudget import PowerBudgetSpec, PowerBudgetStatus
from voltpack.model.resources.queue import QueueSpec, QueueStatus
from voltpack.model.resources.topology import TopologySpec, TopologyStatus

RESOURCE_KINDS: tuple[ResourceKind, ...] = (
    ResourceKind(
        kind="GPUNode",
        plural="gpunodes",
        short_names=("gn",),
        namespaced=False,
        spec=GpuNodeSpec,
        status=GpuNodeStatus,
        description="A GPU node: inventory, topology and power state (status), desired power "
        "and clock settings per GPU (spec, applied by the node agent).",
    ),
    ResourceKind(
        kind="GPUJob",
        plural="gpujobs",
        short_names=("gj",),
        namespaced=True,
        spec=GpuJobSpec,
        status=GpuJobStatus,
        description="A gang of workers placed all-or-nothing by voltpack.",
    ),
    ResourceKind(
        kind="Queue",
        plural="queues",
        short_names=("vq",),
        namespaced=False,
        spec=QueueSpec,
        status=QueueStatus,
        description="A scheduling queue: GPU quotas per model, a fair-share weight, a parent.",
    ),
    ResourceKind(
        kind="PowerBudget",
        plural="powerbudgets",
        short_names=("pb",),
        namespaced=False,
        spec=PowerBudgetSpec,
        status=PowerBudgetStatus,
        description="A power domain (nodes selected by labels) with a budget in watts.",
    ),
    ResourceKind(
        kind="Topology",
        plural="topologies",
        short_names=("vtopo",),
        namespaced=False,
        spec=TopologySpec,
        status=TopologyStatus,
        description="The cluster's network: levels of node labels, top to bottom, with each "
        "level's oversubscription, and a default host layout (NVLink, NUMA, NICs).",
    ),
    ResourceKind(
        kind="InferenceService",
        plural="inferenceservices",
        short_names=("vinf",),
        namespaced=True,
        spec=InferenceServiceSpec,
        status=InferenceServiceStatus,
        description="An LLM served within TTFT and TPOT SLOs: voltpack plans the cheapest mix "
        "of GPU types, tensor-parallel degrees and prefill/decode pools for its request rate, "
        "and creates and scales the replica pods.",
    ),
)

__all__ = [
    "API_GROUP",
    "API_VERSION",
    "RESOURCE_KINDS",
    "Condition",
    "GpuJobSpec",
    "GpuJobStatus",
    "GpuNodeSpec",
    "GpuNodeStatus",
    "InferenceServiceSpec",
    "InferenceServiceStatus",
    "PowerBudgetSpec",
    "PowerBudgetStatus",
    "QueueSpec",
    "QueueStatus",
    "ResourceKind",
    "TopologySpec",
    "TopologyStatus",
]
