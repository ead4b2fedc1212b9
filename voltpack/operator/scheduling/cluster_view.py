"""From the cached Kubernetes objects to what the scheduling core needs: a snapshot and the
pending work, grouped into gangs."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from voltpack.model.cluster import Node
from voltpack.model.constraints.node_rules import NodeFacts, NodeRules
from voltpack.model.errors import InvalidRequestError
from voltpack.model.host_layout import HostLayout
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.topology_request import TopologyRequest
from voltpack.model.work import PendingWork
from voltpack.model.workload import Pod, PodGroup
from voltpack.operator.kube.conventions import (
    MIN_MEMBERS_ANNOTATION,
    POD_GROUP_ANNOTATION,
    SERVED_SCHEDULERS,
    WORLD_SIZE_ANNOTATION,
)
from voltpack.operator.kube.node_facts import MALFORMED_TAINT, node_facts_from_k8s
from voltpack.operator.kube.translate import (
    gpu_indices,
    node_from_k8s,
    pod_from_k8s,
    pod_key,
    pod_nics,
)
from voltpack.operator.scheduling.gpu_faults import GpuFaultSeen, cordon, isolation_of
from voltpack.policies.strategy import pick_best_fit_gpus
from voltpack.scheduler.fault_recovery import RecoveryPolicy
from voltpack.scheduler.nic_allocation import nic_for_gpus

log = logging.getLogger(__name__)

TERMINAL_PHASES = ("Succeeded", "Failed")
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"
"""kube-scheduler's message for a gated pod (its `PodScheduled` condition, reason
`SchedulingGated`)."""


def _is_active(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES


def build_snapshot(
    nodes: Iterable[dict[str, Any]],
    pods: Iterable[dict[str, Any]],
    layouts: Mapping[str, HostLayout] | None = None,
    faults: Iterable[GpuFaultSeen] = (),
    recovery: RecoveryPolicy | None = None,
    node_of: Callable[[dict[str, Any]], Node] = node_from_k8s,
    request_of: Callable[[dict[str, Any]], Pod] = pod_from_k8s,
    facts_of: Callable[[dict[str, Any]], NodeFacts] = node_facts_from_k8s,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> ClusterSnapshot:
    """The cluster's free resources: node capacity minus every bound, still-running pod.

    Nodes are ordered by name, so the same cluster gives the same snapshot whatever order the
    API listed it in; `layouts` gives nodes their host layout (NVLink, NUMA, NICs), e.g. from
    their GPUNode (a layout whose GPU count differs from the node's is left out).
    GPU shares go to the GPUs voltpack recorded on the pod; pods bound by someone else get the
    best-fitting GPUs (what the device plugin would most likely have given them). RDMA shares
    go to the NICs voltpack recorded (`voltpack.io/nics`), else to the nearest NIC with room.
    GPUs with `faults` (from their GPUNodes, `gpu_faults.gpu_faults`) are cordoned last: taken
    out of the free capacity (the GPU, or its whole node for a reboot; `gpu_faults.py`), the
    pods already on them still accounted. `node_of` and `request_of` translate a node and a
    pod (`node_from_k8s`, `pod_from_k8s`, or memos of them). The snapshot carries the nodes'
    rules (`facts_of`: labels, taints, cordons, resources) and every bound pod counts in them,
    so kube-scheduler's filters hold; `namespace_labels` serve pod affinity's namespace
    selectors.
    """
    ready = []
    facts = []
    for empty, raw in sorted(((node_of(n), n) for n in nodes), key=lambda pair: pair[0].name):
        layout = (layouts or {}).get(empty.name)
        fits = layout is not None and layout.gpu_count == empty.gpu_count
        ready.append(empty.model_copy(update={"layout": layout}) if fits else empty)
        facts.append(_facts(raw, empty.name, facts_of))
    snapshot = ClusterSnapshot.from_nodes(ready)
    snapshot.rules = NodeRules.from_facts(snapshot.node_names, facts, namespace_labels)
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name or not _is_active(pod):
            continue
        try:
            node = snapshot.node_index(node_name)
        except KeyError:
            continue  # a node voltpack does not know (deleted, or not yet in the cache)
        try:
            request = request_of(pod)
            if (pod.get("spec") or {}).get("resourceClaims") and not request.num_gpu:
                # its devices are counted from its claims' allocations (dra_cycle.account)
                snapshot.allocate(node, request.model_copy(update={"rdma_percent": 0}), (), ())
                continue
            gpus = gpu_indices(pod) or pick_best_fit_gpus(snapshot, node, request)
            request, nics = _nics_of(snapshot, node, pod, request, gpus)
            snapshot.allocate(node, request, gpus, nics)
        except InvalidRequestError as exc:
            log.warning("pod %s on %s not accounted: %s", pod_key(pod), node_name, exc)
    names = {name: row for row, name in enumerate(snapshot.node_names)}
    cordon(snapshot, isolation_of(faults, names, recovery or RecoveryPolicy()))
    return snapshot


def _facts(
    node: dict[str, Any], name: str, facts_of: Callable[[dict[str, Any]], NodeFacts]
) -> NodeFacts:
    """A node's facts; a node whose facts cannot be read takes no pod (fail closed)."""
    try:
        return facts_of(node)
    except InvalidRequestError as exc:
        log.warning("node %s takes no pods: %s", name, exc)
        return NodeFacts(labels={}, taints=(MALFORMED_TAINT,), unschedulable=True)


def _nics_of(
    snapshot: ClusterSnapshot, node: int, pod: dict[str, Any], request: Pod, gpus: tuple[int, ...]
) -> tuple[Pod, tuple[int, ...]]:
    """The NIC slot a bound pod's RDMA share is accounted on; a node without RDMA NICs (or
    without a known layout) accounts no share."""
    layout = snapshot.layouts[node]
    if not request.rdma_percent:
        return request, ()
    if layout is None or not any(nic.is_rdma for nic in layout.nics):
        return request.model_copy(update={"rdma_percent": 0}), ()
    slots = {nic.name: slot for slot, nic in enumerate(layout.nics) if nic.is_rdma}
    named = [slots[name] for name in pod_nics(pod) if name in slots]
    free = [int(v) for v in snapshot.nic_free_pct[node, : len(layout.nics)]]
    if named and free[named[0]] >= request.rdma_percent:
        return request, (named[0],)
    try:
        choice = nic_for_gpus(layout, request, gpus, free)
    except InvalidRequestError:  # every NIC full: keep the pod's GPUs accounted all the same
        return request.model_copy(update={"rdma_percent": 0}), ()
    return request, (() if choice.nic is None else (choice.nic,))


RequestAdjuster = Callable[[dict[str, Any], Pod], Pod]
"""The request of a pod that asks for devices through ResourceClaims (`dra_cycle`); raises
InvalidRequestError to hold the pod with the reason."""


def pending_work(
    pods: Iterable[dict[str, Any]],
    claims_request: RequestAdjuster | None = None,
    request_of: Callable[[dict[str, Any]], Pod] = pod_from_k8s,
    scheduler_names: frozenset[str] = SERVED_SCHEDULERS,
    volumes_request: RequestAdjuster | None = None,
) -> PendingWork:
    """Unbound pods for voltpack, grouped by `voltpack.io/pod-group` (a pod alone otherwise).
    A pod with ResourceClaims gets its request from `claims_request` (held without one).
    `request_of` translates a pod (`pod_from_k8s`, or a memo of it); `scheduler_names` are the
    `schedulerName`s this operator serves; `volumes_request` adds a pod's bound volumes' node
    affinity (or holds it while a claim cannot be used).

    A group's topology request comes from its members' annotations: voltpack's
    (`voltpack.io/topology-required`, ...) or else Kueue's or KAI's (the first member's that has
    one).

    Groups come out oldest first (by their first member's creation time), then by name.
    The bound members of an elastic GPUJob (workers with `voltpack.io/world-size`) count
    towards its minimum: a worker created after the others were placed joins them alone.
    """
    work = PendingWork()
    members: dict[str, list[tuple[dict[str, Any], Pod]]] = {}
    minimum: dict[str, int] = {}
    topology: dict[str, TopologyRequest] = {}
    running: dict[str, int] = {}
    gated: dict[str, list[str]] = {}
    for pod in pods:
        spec = pod.get("spec") or {}
        meta = pod["metadata"]
        if spec.get("schedulerName") not in scheduler_names:
            continue
        if spec.get("nodeName"):
            placed = meta.get("annotations") or {}
            if WORLD_SIZE_ANNOTATION in placed and _is_active(pod):
                running_key = (
                    f"{meta.get('namespace', 'default')}/{placed.get(POD_GROUP_ANNOTATION)}"
                )
                running[running_key] = running.get(running_key, 0) + 1
            continue
        if meta.get("deletionTimestamp") or not _is_active(pod):
            continue
        key = pod_key(pod)
        annotations = meta.get("annotations") or {}
        group = annotations.get(POD_GROUP_ANNOTATION)
        group_key = f"{meta.get('namespace', 'default')}/{group}" if group else key
        if spec.get("schedulingGates"):
            gates = [str((g or {}).get("name")) for g in spec["schedulingGates"]]
            work.held[key] = f"{GATED_MESSAGE} ({', '.join(gates)})"
            work.gated.add(key)
            gated.setdefault(group_key, []).append(key)
            continue
        try:
            request = request_of(pod)
            if spec.get("resourceClaims"):
                if claims_request is None:
                    raise InvalidRequestError(
                        f"pod {key}: asks for devices through ResourceClaims, and the cluster "
                        "serves no resource.k8s.io/v1 devices"
                    )
                request = claims_request(pod, request)
            if volumes_request is not None:
                request = volumes_request(pod, request)
        except InvalidRequestError as exc:
            work.held[key] = str(exc)
            continue
        try:
            request_topology = TopologyRequest.from_pod_annotations(annotations)
        except InvalidRequestError as exc:
            work.held[key] = f"pod {key}: {exc}"
            continue
        if request_topology is not None:
            topology.setdefault(group_key, request_topology)
        members.setdefault(group_key, []).append((pod, request))
        if group and MIN_MEMBERS_ANNOTATION in annotations:
            try:
                minimum[group_key] = int(annotations[MIN_MEMBERS_ANNOTATION])
            except ValueError:
                work.held[key] = (
                    f"pod {key}: annotation {MIN_MEMBERS_ANNOTATION}="
                    f"{annotations[MIN_MEMBERS_ANNOTATION]!r} is not an integer"
                )
    ordered = sorted(
        members.items(),
        key=lambda item: (
            min(p["metadata"].get("creationTimestamp") or "" for p, _ in item[1]),
            item[0],
        ),
    )
    for group_key, entries in ordered:
        entries.sort(key=lambda entry: entry[1].name)
        if group_key in gated:
            # a gang waits until every member is ungated (as the Workload API's gangs do)
            for _, request in entries:
                work.held.setdefault(
                    request.name,
                    f"gang {group_key}: waiting for {len(gated[group_key])} member(s) with "
                    f"scheduling gates ({', '.join(sorted(gated[group_key]))})",
                )
            continue
        # an elastic job's members running already count towards its minimum
        wanted = max(minimum.get(group_key, len(entries)) - running.get(group_key, 0), 1)
        if wanted > len(entries):
            # not every member exists yet: a gang waits until it can be placed whole
            for _, request in entries:
                work.held.setdefault(
                    request.name,
                    f"gang {group_key}: {len(entries)} of {wanted} members exist; waiting",
                )
            continue
        work.groups.append(
            PodGroup(
                name=group_key,
                pods=tuple(request for _, request in entries),
                min_member=max(wanted, 1),
                topology=topology.get(group_key),
            )
        )
    return work
