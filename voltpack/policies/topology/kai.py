"""KAI Scheduler's topology-aware placement, re-implemented as a baseline.

Reproduces what kai-scheduler/KAI-Scheduler v0.17.0 (commit f218c69bee5e) does for one pod set
of identical GPU pods under its default scheduler configuration: the topology plugin
(`pkg/scheduler/plugins/topology/job_filtering.go`, `node_scoring.go`, `topology_utils.go`)
narrows the nodes to one domain, then the allocate action
(`pkg/scheduler/actions/common/allocate.go`) places the pods one at a time on the best-scored
node, scored by the `nodeplacement` plugin's GPU bin-packing (`pack.go`, default `binpack`)
plus the topology plugin's preferred-level score.

1. Domains. Each domain's allocatable pods is the sum of its nodes' slots; the job must fit the
   whole cluster first ("not enough resources in the cluster").
2. Order. From the root down to the preferred level (else the required one), each domain's
   children are sorted by the job's GPUs over the child's free GPUs, descending (the fullest
   first: bin-packing), ties by domain id (label values joined by "."); domains are then listed
   bottom-up level by level, left to right (`reverseLevelOrder`).
3. Candidates. Every domain that holds the whole job, from the preferred level (else the
   required one) up to the required level (else the root), lowest level first, in that order.
   The allocate action tries them in turn and keeps the first where all pods fit, which is the
   first candidate here (a domain's slots are exact in voltpack's tree).
4. Nodes. Inside the domain each pod goes to the node with the highest score: with a preferred
   level, floor(10 (i + 1) / n) x 100000 for the node's preferred-level domain at position `i`
   of the `n` in the sorted tree (the later, the higher); plus the GPU bin-packing score,
   higher for fewer free GPUs; ties by node name. A node keeps taking pods until its slots run
   out, so the order is fixed and each node is filled in turn.

KAI starts from the lowest domain that all nodes share (down to the preferred level) and sizes
only its subtree; a job with only a required level above that domain finds nothing. Kept.

Without a required or preferred level KAI does not use the topology: the pods go to the whole
cluster by bin-packing alone. With one, nodes missing a level's label are outside the topology
and never used. The rank order returned is the order in which the pods were placed.
"""

from __future__ import annotations

import numpy as np

from voltpack.model.domain_tree import DomainTree, NodeCounts
from voltpack.model.topology import FloatArray, IntArray
from voltpack.policies.topology.kueue import (
    BoolArray,
    HostLevels,
    StrArray,
    host_levels,
    labelled_nodes,
)

REQUIRED_RESOURCE_NOT_IN_DOMAIN_RATIO = 1000.0
"""KAI's ratio for a domain with none of a resource the job asks for."""
TOPOLOGY_SCORE = 100000.0
"""KAI's weight of the topology plugin's node score (`scores.Topology`)."""


def _ids(levels: HostLevels) -> tuple[StrArray, ...]:
    """Per level, KAI's domain ids: the label values from the top joined by '.'."""
    ids: list[StrArray] = [levels.label[0]]
    for level in range(1, len(levels.label)):
        above = ids[level - 1][levels.parent[level]]
        ids.append(np.char.add(np.char.add(above, "."), levels.label[level]))
    return tuple(ids)


def _common_level(levels: HostLevels, seen: BoolArray, preferred_level: int | None) -> int:
    """KAI's `lowestCommonDomainID`: the deepest level (down to the preferred one) at which all
    nodes of the topology share one domain; -1 for the root.

    KAI sizes only that domain's subtree; domains above it count as having no free resources,
    so a job with only a required level above it finds no domain (a preferred level is never
    above it, so with one the common domain or one inside it is always a candidate).
    """
    common = -1
    rows = np.flatnonzero(seen)
    if len(rows) == 0:
        return common
    for level, node_domain in enumerate(levels.node_domain):
        if np.any(node_domain[rows] != node_domain[rows[0]]):
            break
        common = level
        if level == preferred_level:
            break
    return common


def _job_ratio(job_gpus: int, free_gpus: IntArray) -> FloatArray:
    """KAI's `getJobRatioToFreeResources` on GPUs: the job's GPUs over the domain's free GPUs."""
    free = free_gpus.astype(np.float64)
    if job_gpus <= 0:
        return np.zeros(len(free), dtype=np.float64)
    safe = np.where(free > 0, free, 1.0)
    return np.where(free > 0, job_gpus / safe, REQUIRED_RESOURCE_NOT_IN_DOMAIN_RATIO)


def _tree_positions(
    levels: HostLevels, free_gpus: IntArray, job_gpus: int, deepest: int
) -> tuple[IntArray, ...]:
    """Per level down to `deepest`, each domain's position in the sorted tree's level order."""
    ids = _ids(levels)
    positions: list[IntArray] = []
    for level in range(deepest + 1):
        free = np.bincount(
            levels.node_domain[level], weights=free_gpus, minlength=len(levels.label[level])
        ).astype(np.int64)
        ratio = _job_ratio(job_gpus, free)
        _, id_rank = np.unique(ids[level], return_inverse=True)
        above = (
            np.zeros(len(ratio), dtype=np.int64)
            if level == 0
            else positions[level - 1][levels.parent[level]]
        )
        order = np.lexsort((id_rank, -ratio, above))
        position = np.empty(len(ratio), dtype=np.int64)
        position[order] = np.arange(len(ratio), dtype=np.int64)
        positions.append(position)
    return tuple(positions)


def _fill(
    candidates: IntArray,
    slots: IntArray,
    pods: int,
    score: FloatArray | None,
    free: IntArray,
    name_rank: IntArray,
) -> tuple[IntArray, IntArray] | None:
    """Nodes in KAI's per-pod order (score, fewest free GPUs, name), each filled to its slots."""
    nodes = candidates[slots[candidates] > 0]
    topo = np.zeros(len(nodes)) if score is None else score[nodes]
    nodes = nodes[np.lexsort((name_rank[nodes], free[nodes], -topo))]
    caps = slots[nodes]
    if int(caps.sum()) < pods:
        return None
    before = pods - np.concatenate(([0], np.cumsum(caps)[:-1]))
    last = int(np.argmax(caps >= before))
    counts = np.append(caps[:last], before[last]).astype(np.int64)
    return nodes[: last + 1], counts


def kai_topology(
    tree: DomainTree,
    pods: int,
    required_level: int | None,
    preferred_level: int | None,
    *,
    gpus_per_pod: int = 1,
) -> NodeCounts | str:
    """Place `pods` identical pods as KAI's scheduler would; a str is why they cannot be placed.

    Levels are indices into the topology's levels, `level_count` meaning a single node (KAI's
    `kubernetes.io/hostname` level). `gpus_per_pod` only matters through KAI's ratio of the
    job's GPUs to a domain's free GPUs. Nodes come back in placement order.
    """
    topology = tree.topology
    host = topology.level_count
    if pods <= 0:
        return NodeCounts((), (), "kai: nothing to place")
    _, name_rank = np.unique(np.array(topology.node_names, dtype=np.str_), return_inverse=True)
    name_rank = name_rank.astype(np.int64)
    free_all = np.asarray(tree.free_gpus, dtype=np.int64)

    if required_level is None and preferred_level is None:
        every = np.arange(topology.node_count, dtype=np.int64)
        slots = np.maximum(tree.slots, 0).astype(np.int64)
        filled = _fill(every, slots, pods, None, free_all, name_rank)
        if filled is None:
            return (
                f"Resources were found for {int(slots.sum())} pods while {pods} are required "
                "for gang scheduling"
            )
        nodes, counts = filled
        return _counts(nodes, counts, "kai: no topology constraint, bin-packing by GPU")

    for kind, level in (("required", required_level), ("preferred", preferred_level)):
        if level is not None and not 0 <= level <= host:
            return f"topology constraint error: no {kind} level {level} (levels are 0 to {host})"
    levels = host_levels(tree, labelled_nodes(tree))
    label = [levels.level_name(tree, level) for level in range(host + 1)]
    if (
        required_level is not None
        and preferred_level is not None
        and preferred_level < required_level
    ):
        return (
            f"topology constraint error: '{label[preferred_level]}' as the preferred topology "
            f"constraint level is above the required level '{label[required_level]}'; KAI "
            "finds no such level below the required one"
        )
    requirement = label[required_level] if required_level is not None else ""
    total = int(levels.slots.sum())
    if total < pods:
        return (
            f"topology, requirement {requirement} couldn't be satisfied: not enough resources "
            f"in the cluster to allocate the job ({total} of {pods} pods fit)"
        )

    lowest = preferred_level if preferred_level is not None else required_level
    assert lowest is not None
    seen = labelled_nodes(tree)
    common = _common_level(levels, seen, preferred_level)
    if preferred_level is None and required_level is not None and common > required_level:
        shared = int(levels.node_domain[common][int(np.argmax(seen))])
        return (
            f"topology, requirement {requirement} couldn't be satisfied for job: all nodes share "
            f'{label[common]} "{_ids(levels)[common][shared]}", below the required level, and '
            "KAI sizes only that domain's subtree"
        )
    job_gpus = pods * gpus_per_pod
    free = np.where(seen, free_all, 0)
    position = _tree_positions(levels, free, job_gpus, lowest)
    highest = required_level if required_level is not None else -1  # -1: the root

    chosen_level, chosen = -1, -1
    for level in range(lowest, highest - 1, -1):
        if level == -1:
            chosen_level = -1
            break
        fits = np.flatnonzero(levels.present[level] & (levels.capacity[level] >= pods))
        if len(fits):
            chosen_level = level
            chosen = int(fits[np.argmin(position[level][fits])])
            break
    else:
        assert required_level is not None
        caps = np.where(levels.present[required_level], levels.capacity[required_level], -1)
        largest = int(np.argmax(caps))
        return (
            f"topology, requirement {requirement} couldn't be satisfied for job: node-group "
            f"{_ids(levels)[required_level][largest]} can allocate only {int(caps[largest])} of "
            f"{pods} required pods"
        )

    usable = levels.slots > 0
    if chosen_level == -1:
        members = np.flatnonzero(usable)
        where = "root"
    else:
        members = np.flatnonzero(usable & (levels.node_domain[chosen_level] == chosen))
        where = f'{label[chosen_level]} "{_ids(levels)[chosen_level][chosen]}"'

    score: FloatArray | None = None
    if preferred_level is not None:
        present = np.flatnonzero(levels.present[preferred_level])
        in_order = present[np.argsort(position[preferred_level][present])]
        count = len(in_order)
        domain_score = np.zeros(len(levels.label[preferred_level]), dtype=np.float64)
        domain_score[in_order] = (
            np.floor((np.arange(1, count + 1, dtype=np.float64) / count) * 10) * TOPOLOGY_SCORE
        )
        score = domain_score[levels.node_domain[preferred_level]]

    filled = _fill(members, levels.slots, pods, score, free_all, name_rank)
    if filled is None:  # cannot happen: the domain holds the job
        return f"Resources were found for fewer than {pods} pods in {where}"
    nodes, counts = filled
    return _counts(nodes, counts, f"kai: placed in {where}")


def _counts(nodes: IntArray, counts: IntArray, note: str) -> NodeCounts:
    return NodeCounts(tuple(int(n) for n in nodes), tuple(int(c) for c in counts), note)
