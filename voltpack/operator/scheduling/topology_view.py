"""The cluster's topology for the operator: `Topology` objects, node labels and the host layouts
the agents reported in `GPUNode` status, turned into a `ClusterTopology` once per cycle.

Without any `Topology` object, gangs that carry a topology request wait with a reason that says
so (they are not placed pod by pod, which would silently ignore what they asked for). With
several, the one the policy file names (`spec.topology.name`) is used, else the first by name;
every object's status says which one is active.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kubernetes.client import CustomObjectsApi
from pydantic import ValidationError

from voltpack.model.errors import InvalidRequestError
from voltpack.model.host_layout import HostLayout
from voltpack.model.resources import API_GROUP, API_VERSION, TopologySpec
from voltpack.model.resources.gpunode import Topology as GpuNodeTopology
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.topology import ClusterTopology, host_layout_from_gpunode, host_layout_from_spec
from voltpack.model.topology_request import VOLTPACK_MODEL, TopologyRequest
from voltpack.model.work import PendingWork, RunningGang
from voltpack.model.workload import PodGroup
from voltpack.operator.kube.client import api_message, call_json
from voltpack.operator.kube.conventions import GPU_RESOURCE
from voltpack.operator.scheduling.queues import gang_key
from voltpack.policies.schema import TopologyPolicySpec
from voltpack.policies.topology.contended_step_model import ContentionAwareSteps, RankedPods
from voltpack.policies.topology.placers import KAI, KUEUE, StepTimePlacer
from voltpack.policies.topology.step_model import step_model_for_group
from voltpack.scheduler.gang_topology import TopologyPlacement, TopologyPlacer

log = logging.getLogger(__name__)

PLURAL = "topologies"

NO_TOPOLOGY_REASON = (
    "gang {gang}: asks for topology-aware placement, but the cluster has no Topology object "
    "(voltpack.io/v1alpha1, e.g. examples/topology.yaml); waiting"
)


def make_placer(name: str) -> TopologyPlacer:
    """The gang placer a policy file names: `voltpack` (step time), `kueue` or `kai`."""
    placers: dict[str, TopologyPlacer] = {"voltpack": StepTimePlacer(), "kueue": KUEUE, "kai": KAI}
    return placers[name]


class GpuNodeLayouts:
    """Host layouts from GPUNode status, parsed again only when a GPUNode changes.

    Each cycle sees every GPUNode; parsing thousands of them anew costs far more than the
    cycle's scheduling (about 190 ms for 5,000), so a layout is kept per GPUNode and
    resourceVersion (and GPU count of its node). Equal layouts are one object, which keeps the
    per-layout tables of the perf model (`perf.placement_links.gpu_tables`) small.
    """

    def __init__(self) -> None:
        self._parsed: dict[str, tuple[tuple[str, int], HostLayout | None]] = {}
        self._interned: dict[HostLayout, HostLayout] = {}

    def layouts(
        self, gpunodes: Iterable[dict[str, Any]], gpu_counts: Mapping[str, int]
    ) -> dict[str, HostLayout]:
        """Per node, the host layout its agent reported (GPUNode `status.topology`), if any."""
        found: dict[str, HostLayout] = {}
        seen: set[str] = set()
        for gpunode in gpunodes:
            name = gpunode["metadata"]["name"]
            if name not in gpu_counts:
                continue
            seen.add(name)
            key = (str(gpunode["metadata"].get("resourceVersion", "")), gpu_counts[name])
            cached = self._parsed.get(name)
            if cached is None or cached[0] != key or not key[0]:
                cached = (key, self._parse(gpunode, gpu_counts[name]))
                self._parsed[name] = cached
            if cached[1] is not None:
                found[name] = cached[1]
        for gone in set(self._parsed) - seen:
            del self._parsed[gone]
        return found

    def _parse(self, gpunode: dict[str, Any], gpu_count: int) -> HostLayout | None:
        name = gpunode["metadata"]["name"]
        reported = (gpunode.get("status") or {}).get("topology")
        if not reported:
            return None
        try:
            topology = GpuNodeTopology.model_validate(reported)
        except ValidationError as exc:
            log.warning("GPUNode %s: status.topology not used: %s", name, exc.errors()[0]["msg"])
            return None
        layout = host_layout_from_gpunode(topology, gpu_count)
        return self._interned.setdefault(layout, layout)


def gpunode_layouts(
    gpunodes: Iterable[dict[str, Any]], nodes: Iterable[dict[str, Any]]
) -> dict[str, HostLayout]:
    """Per node, the host layout its agent reported (GPUNode `status.topology`), if any."""
    return GpuNodeLayouts().layouts(gpunodes, node_gpu_counts(nodes))


def node_gpu_counts(nodes: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Whole GPUs per node, from its allocatable `nvidia.com/gpu` (0 when unreadable)."""
    counts = {}
    for node in nodes:
        text = ((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE, "0")
        try:
            counts[node["metadata"]["name"]] = int(str(text))
        except ValueError:
            counts[node["metadata"]["name"]] = 0
    return counts


@dataclass
class TopologyCycle:
    """What one cycle uses: the active Topology (if any), layouts, and each object's status."""

    name: str | None = None
    spec: TopologySpec | None = None
    layouts: dict[str, HostLayout] = field(default_factory=dict)
    statuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Topology object name -> the status it should have."""
    contention: ContentionAwareSteps | None = None
    """The running gangs' traffic every gang's step time is priced against (see `placement`)."""
    topology: ClusterTopology | None = None

    def placement(
        self,
        node_names: tuple[str, ...],
        nodes: Iterable[dict[str, Any]],
        placer: TopologyPlacer,
        running: Sequence[tuple[PodGroup, RankedPods]] = (),
    ) -> TopologyPlacement | None:
        """The scheduler's topology placement over the snapshot's nodes; None without a
        Topology. Fills in the active object's status (nodes, levels, domains).

        Every gang's step time (the placement's score, the `Scheduled` Event's prediction) is
        priced with the traffic of the `running` gangs (`running_topology_gangs`) and of the
        gangs placed before it in the cycle."""
        if self.spec is None or self.name is None:
            return None
        listed = list(nodes)
        labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in listed}
        topology = ClusterTopology.from_labels(
            self.spec,
            node_names,
            labels,
            hosts=self.layouts,
            gpu_counts=node_gpu_counts(listed),
        )
        self.statuses[self.name] = _status(topology, labels, self.statuses.get(self.name, {}))
        self.contention = ContentionAwareSteps(step_model_for_group, running)
        self.topology = topology
        return TopologyPlacement(topology, placer, self.contention)

    def step_slowdowns(self, snapshot: ClusterSnapshot) -> dict[str, float]:
        """Per running gang that names a training model: its step time with the traffic on
        the fabric now over its ideal step time (empty without a Topology)."""
        if self.contention is None or self.topology is None:
            return {}
        self.contention.gangs(self.topology, snapshot)
        return self.contention.slowdowns()


def running_topology_gangs(
    pods: Iterable[dict[str, Any]], running: Sequence[RunningGang]
) -> list[tuple[PodGroup, RankedPods]]:
    """The running gangs whose pods name a training model (`voltpack.io/training-model`), as
    groups carrying their topology request, with their pods' nodes and GPUs in rank order.
    A gang whose annotations are malformed is left out (its pending form says why)."""
    requests: dict[str, TopologyRequest] = {}
    for pod in pods:
        annotations = pod["metadata"].get("annotations") or {}
        if not annotations.get(VOLTPACK_MODEL):
            continue
        key = gang_key(pod)
        if key in requests:
            continue
        try:
            request = TopologyRequest.from_pod_annotations(annotations)
        except InvalidRequestError:
            continue
        if request is not None and request.model is not None:
            requests[key] = request
    gangs = []
    for gang in running:
        request = requests.get(gang.name)
        if request is None:
            continue
        group = PodGroup(
            name=gang.name,
            pods=tuple(pod for pod, _, _ in gang.pods),
            min_member=len(gang.pods),
            topology=request,
        )
        gangs.append((group, tuple((node, gpus) for _, node, gpus in gang.pods)))
    return gangs


def topology_cycle(
    topologies: Iterable[dict[str, Any]],
    gpunodes: Iterable[dict[str, Any]],
    nodes: Iterable[dict[str, Any]],
    policy: TopologyPolicySpec,
    parsed: GpuNodeLayouts | None = None,
) -> TopologyCycle:
    """Choose the active Topology; host layouts from GPUNodes (through `parsed`, kept from
    cycle to cycle), else its default host."""
    listed_nodes = list(nodes)
    layouts = (parsed or GpuNodeLayouts()).layouts(gpunodes, node_gpu_counts(listed_nodes))
    cycle = TopologyCycle(layouts=layouts)
    valid: dict[str, TopologySpec] = {}
    for obj in sorted(topologies, key=lambda o: str(o["metadata"]["name"])):
        name = str(obj["metadata"]["name"])
        try:
            valid[name] = TopologySpec.model_validate(obj.get("spec") or {})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "spec"
            cycle.statuses[name] = _condition(
                "False", "InvalidSpec", f"spec.{where}: {first['msg']}"
            )
    if not valid:
        return cycle
    wanted = policy.name
    if wanted and wanted in valid:
        chosen, why = wanted, f"named by the policy file (spec.topology.name={wanted})"
    else:
        chosen = next(iter(valid))
        why = "the first Topology by name"
        if wanted:
            why += f"; the policy file names {wanted!r}, which does not exist"
        elif len(valid) > 1:
            why += " (the policy file names none: spec.topology.name)"
    cycle.name, cycle.spec = chosen, valid[chosen]
    for name in valid:
        if name != chosen:
            cycle.statuses[name] = _condition(
                "False", "NotSelected", f"Topology {chosen} is in use: {why}"
            )
    cycle.statuses[chosen] = _condition("True", "InUse", f"in use: {why}")
    default = valid[chosen].default_host
    if default is not None:
        layout = host_layout_from_spec(default)
        for name, count in node_gpu_counts(listed_nodes).items():
            if name not in layouts and count == layout.gpu_count:
                cycle.layouts[name] = layout
    return cycle


def hold_topology_gangs(work: PendingWork) -> PendingWork:
    """Without a Topology: gangs that ask for one wait, with the reason, instead of being
    placed pod by pod."""
    kept: list[PodGroup] = []
    held = dict(work.held)
    for group in work.groups:
        if group.topology is None:
            kept.append(group)
            continue
        for pod in group.pods:
            held[pod.name] = NO_TOPOLOGY_REASON.format(gang=group.name)
    return replace(work, groups=kept, held=held)  # every other field of the work kept


def _condition(status: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "conditions": [{"type": "Active", "status": status, "reason": reason, "message": message}]
    }


def _status(
    topology: ClusterTopology, labels: Mapping[str, Mapping[str, str]], base: dict[str, Any]
) -> dict[str, Any]:
    levels = []
    for index, level in enumerate(topology.levels):
        levels.append(
            {
                "nodeLabel": level.node_label,
                "domains": topology.domain_count(index),
                "labelledNodes": sum(
                    1 for n in topology.node_names if level.node_label in labels.get(n, {})
                ),
            }
        )
    status = {**base, "nodes": topology.node_count, "levels": levels}
    if topology.unlabelled_nodes:
        missing = topology.unlabelled_nodes
        first = topology.node_names[missing[0]]
        conditions = list(status.get("conditions") or [])
        conditions.append(
            {
                "type": "NodesLabelled",
                "status": "False",
                "reason": "MissingLabels",
                "message": f"{len(missing)} nodes lack some level's label (e.g. {first}); each "
                "is a domain of its own at that level",
            }
        )
        status["conditions"] = conditions
    return status


class TopologyStatusWriter:
    """Patches each Topology's status when it differs from what the object shows."""

    def __init__(self, custom: CustomObjectsApi) -> None:
        self.custom = custom

    def list_function(self, **kwargs: Any) -> Any:
        """Cluster-wide list/watch of Topologies (for a ResourceCache)."""
        return self.custom.list_cluster_custom_object(API_GROUP, API_VERSION, PLURAL, **kwargs)

    def write(
        self, objects: Iterable[dict[str, Any]], statuses: Mapping[str, dict[str, Any]]
    ) -> None:
        """Write the statuses that changed; a failure is logged, never raised."""
        for obj in objects:
            name = str(obj["metadata"]["name"])
            wanted = statuses.get(name)
            current = obj.get("status") or {}
            if wanted is None or current == wanted:
                continue
            body = {**dict.fromkeys(k for k in current if k not in wanted), **wanted}
            try:
                call_json(
                    self.custom.patch_cluster_custom_object_status,
                    API_GROUP, API_VERSION, PLURAL, name, {"status": body},
                )  # fmt: skip
            except Exception as error:
                log.warning("Topology %s: status not written: %s", name, api_message(error))
