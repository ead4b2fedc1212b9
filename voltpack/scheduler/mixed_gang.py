"""A gang of pods of different shapes kept inside one domain of a required topology level.

`place_gang` places one pod shape (a training gang). A split inference service's prefill and
decode replicas differ (GPU type, GPU count) yet must share a domain so the KV-cache transfer
between them stays on its links. This places such a gang all or nothing: the domains of the
required level are tried with the fewest free GPUs first (best fit, so roomy domains stay
whole); inside one, the pods go largest first, each to the feasible node of the domain with
the fewest free GPUs that holds it (GPUs chosen to keep the pod on one NVLink domain).
"""

from __future__ import annotations

import numpy as np

from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.decision import Decision, Placement
from voltpack.model.snapshot import BoolArray, ClusterSnapshot
from voltpack.model.topology import ClusterTopology
from voltpack.model.workload import Pod, PodGroup
from voltpack.policies.topology.gpu_choice import choose_gpus
from voltpack.scheduler.filter import filter_nodes
from voltpack.scheduler.nic_allocation import nic_slot_for
from voltpack.scheduler.statement import Statement


def is_mixed(group: PodGroup) -> bool:
    """Whether the gang's pods ask for different resources (more than one shape)."""
    first = group.pods[0].model_copy(update={"name": "", "creation_time_s": 0.0})
    return any(
        pod.model_copy(update={"name": "", "creation_time_s": 0.0}) != first
        for pod in group.pods[1:]
    )


def place_mixed_gang(
    snapshot: ClusterSnapshot, topology: ClusterTopology, group: PodGroup, level: int
) -> Decision:
    """Place every pod of `group` inside one domain of `level` (topology aligned to the
    snapshot), or nothing, with the reason."""
    if any(pod.num_gpu == 0 or pod.is_gpu_sharing for pod in group.pods):
        return _refused(group, "topology placement needs pods that ask for whole GPUs")
    free = (snapshot.gpu_present & (snapshot.gpu_free_milli >= MILLI_PER_GPU)).sum(axis=1)
    needed = sum(pod.num_gpu for pod in group.pods)
    domains = topology.domain[level]
    count = topology.domain_count(level)
    free_by_domain = np.bincount(domains, weights=free, minlength=count)
    # a domain where some pod shape has no feasible node now cannot hold the gang (placing
    # other pods first only takes room away): skip it without trying
    possible = free_by_domain >= needed
    for shape in _distinct_shapes(group):
        feasible = filter_nodes(snapshot, shape).feasible
        possible &= np.bincount(domains[feasible], minlength=count) > 0
    order = [
        int(d) for d in np.lexsort((np.arange(free_by_domain.size), free_by_domain)) if possible[d]
    ]
    pods = sorted(group.pods, key=lambda p: (-p.num_gpu, p.name))
    name = topology.levels[level].display_name
    for domain in order:
        placements = _try_domain(snapshot, topology, pods, domains == domain)
        if placements is not None:
            label = topology.domain_label(level, domain)
            nodes = sorted({p.node for p in placements})
            reason = (
                f"gang {group.name}: {len(placements)} pods of {_shapes(group)} shapes in "
                f"{name} {label} ({len(nodes)} nodes)"
            )
            by_name = {p.pod: p for p in placements}
            ordered = tuple(by_name[pod.name] for pod in group.pods)
            return Decision(subject=group.name, placed=True, placements=ordered, reason=reason)
    roomy = int((free_by_domain >= needed).sum())
    return _refused(
        group,
        f"no {name} holds all {len(pods)} pods ({needed} GPUs) at once; {roomy} of "
        f"{free_by_domain.size} {name} domains have that many free GPUs, {len(order)} have a "
        "node for every pod shape",
    )


def _try_domain(
    snapshot: ClusterSnapshot,
    topology: ClusterTopology,
    pods: list[Pod],
    inside: BoolArray,
) -> list[Placement] | None:
    statement = Statement(snapshot)
    placements: list[Placement] = []
    for pod in pods:
        feasible = filter_nodes(snapshot, pod).feasible & inside
        candidates = np.flatnonzero(feasible)
        if candidates.size == 0:
            statement.rollback()
            return None
        whole = (snapshot.gpu_present & (snapshot.gpu_free_milli >= MILLI_PER_GPU)).sum(axis=1)
        node = int(candidates[np.argmin(whole[candidates])])
        count = int(snapshot.gpu_count[node])
        free = (snapshot.gpu_free_milli[node, :count] >= MILLI_PER_GPU).tolist()
        gpus = choose_gpus(topology.hosts[node], free, 1, pod.num_gpu, 1)[0]
        nics = nic_slot_for(snapshot, node, pod, gpus)
        placements.append(statement.place(node, pod, gpus, nics))
    statement.commit()
    return placements


def _distinct_shapes(group: PodGroup) -> list[Pod]:
    shapes: list[Pod] = []
    for pod in group.pods:
        shape = pod.model_copy(update={"name": pod.name, "creation_time_s": 0.0})
        if all(
            shape.model_copy(update={"name": ""}) != seen.model_copy(update={"name": ""})
            for seen in shapes
        ):
            shapes.append(shape)
    return shapes


def _shapes(group: PodGroup) -> int:
    return len(_distinct_shapes(group))


def _refused(group: PodGroup, why: str) -> Decision:
    return Decision(subject=group.name, placed=False, reason=f"gang {group.name}: {why}")
