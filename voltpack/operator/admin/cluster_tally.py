"""The cluster summary kept current by watch events: each change adjusts a few counters.

The admin API's `GET /cluster` used to list every node and pod and rebuild every view; at
5,000 nodes and 50,000 pods that takes seconds. `ClusterTally` listens to the watch-fed
`ResourceCache`s instead: a node, pod, GPUNode, PowerBudget or Queue event costs O(1), and a
summary costs O(GPU models + power domains), whatever the cluster's size.

It counts what the views count (`KubeAdminSource.nodes()`, `.jobs()`, `.power_domains()`): a
node's GPUs and model as the scheduler reads them; GPUs allocated on a node as the sum of the
GPU requests of its bound, still-running pods (whole GPUs, or a share), at most its GPUs (the
snapshot the views use cannot allocate more either); a job is a group of voltpack pods (a pod
group, or one pod), pending while any of its pods is unbound; pending pods are unbound,
unfinished voltpack pods; a voltpack pod is one whose `schedulerName` the operator serves
(`scheduler_names`: `--scheduler-name` of `voltpack operator` and `voltpack api`); a domain's
power is its PowerBudget's `status.powerW`, else the sum of its nodes' GPU readings when every
node has one.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from voltpack.model.admin import ClusterSummary
from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.errors import InvalidRequestError
from voltpack.operator.kube.cache import object_key
from voltpack.operator.kube.conventions import POD_GROUP_ANNOTATION, SERVED_SCHEDULERS
from voltpack.operator.kube.translate import node_from_k8s, pod_from_k8s
from voltpack.operator.scheduling.cluster_view import TERMINAL_PHASES

Obj = dict[str, Any]


@dataclass(frozen=True)
class _NodeFacts:
    ready: bool
    model: str | None
    gpus: int
    labels: dict[str, str]


@dataclass(frozen=True)
class _PodFacts:
    node: str | None
    """The node it is bound to and counts on (None: unbound, or finished)."""
    gpu_milli: int
    pending: bool
    """A voltpack pod that is unbound and unfinished."""
    group: tuple[str, str] | None
    """(namespace, pod group or pod name) for a voltpack pod."""
    unbound: bool
    """A voltpack pod without a node (finished or not): its group waits."""


def _node_facts(node: Obj) -> _NodeFacts | None:
    try:
        empty = node_from_k8s(node)
    except InvalidRequestError:
        return None
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )
    labels = dict((node["metadata"].get("labels") or {}).items())
    model = empty.gpu_model if empty.gpu_count else None  # as the snapshot reads it
    return _NodeFacts(ready, model, empty.gpu_count, labels)


def _pod_facts(pod: Obj, scheduler_names: frozenset[str] = SERVED_SCHEDULERS) -> _PodFacts:
    """What the tally counts of one pod; `scheduler_names`: the `schedulerName`s whose pods are
    voltpack's (jobs, pending and unbound pods)."""
    spec = pod.get("spec") or {}
    meta = pod["metadata"]
    node = spec.get("nodeName")
    finished = (pod.get("status") or {}).get("phase") in TERMINAL_PHASES
    milli = 0
    if node and not finished:
        try:
            milli = pod_from_k8s(pod).gpu_request_milli
        except InvalidRequestError:
            milli = 0  # the snapshot does not account it either
    ours = spec.get("schedulerName") in scheduler_names
    group = None
    if ours:
        name = (meta.get("annotations") or {}).get(POD_GROUP_ANNOTATION) or meta["name"]
        group = (meta.get("namespace") or "default", name)
    return _PodFacts(
        node=node if node and not finished else None,
        gpu_milli=milli,
        pending=ours and not node and not finished,
        group=group,
        unbound=ours and not node,
    )


def _gpunode_power(gpunode: Obj) -> dict[int, float]:
    """GPU index -> its power reading (W) in a GPUNode's status."""
    readings = {}
    for device in (gpunode.get("status") or {}).get("gpus") or []:
        if device.get("powerDrawW") is not None:
            readings[int(device.get("index", -1))] = float(device["powerDrawW"])
    return readings


class ClusterTally:
    """Counters over nodes, pods, GPUNodes, PowerBudgets and Queues, fed by cache events.

    Each `*_listener` is a `CacheListener` for the `ResourceCache` of that kind. Thread safe:
    every cache calls from its own watch thread. `scheduler_names`: the `schedulerName`s whose
    pods count as voltpack's (the names the operator serves).
    """

    def __init__(
        self, clock: Callable[[], float], scheduler_names: frozenset[str] = SERVED_SCHEDULERS
    ) -> None:
        self._clock = clock
        self.scheduler_names = scheduler_names
        self._lock = threading.Lock()
        self._nodes: dict[str, _NodeFacts] = {}
        self._ready = 0
        self._gpus_by_model: Counter[str] = Counter()
        self._pods: dict[str, _PodFacts] = {}
        self._milli_on_node: Counter[str] = Counter()
        self._allocated_by_model: Counter[str] = Counter()
        """Sum over nodes with a GPU model of min(GPU milli of their pods, their GPUs)."""
        self._pending_pods = 0
        self._group_pods: Counter[tuple[str, str]] = Counter()
        self._group_unbound: Counter[tuple[str, str]] = Counter()
        self._waiting_groups = 0
        """Groups with at least one unbound pod."""
        self._gpunode_power: dict[str, dict[int, float]] = {}
        self._budgets: dict[str, Obj] = {}
        self._queues: set[str] = set()
        self._nodes_version = 0
        """Bumped when a node comes, goes or changes labels or GPUs (domain membership)."""
        self._power_version = 0
        """Bumped when a GPUNode's readings change."""
        self._domain_memo: dict[str, tuple[tuple[str, int, int], float | None]] = {}
        self.nodes_listener = _Listener(self._reset_nodes, self._node_changed)
        self.pods_listener = _Listener(self._reset_pods, self._pod_changed)
        self.gpunodes_listener = _Listener(self._reset_gpunodes, self._gpunode_changed)
        self.budgets_listener = _Listener(self._reset_budgets, self._budget_changed)
        self.queues_listener = _Listener(self._reset_queues, self._queue_changed)

    def _allocation(self, node: str, sign: int) -> None:
        """Add (+1) or take out (-1) one node's allocated GPUs from its model's sum."""
        facts = self._nodes.get(node)
        if facts is None or facts.model is None:
            return
        milli = min(self._milli_on_node.get(node, 0), facts.gpus * MILLI_PER_GPU)
        self._allocated_by_model[facts.model] += sign * milli

    # -- nodes ------------------------------------------------------------------------------

    def _add_node(self, key: str, facts: _NodeFacts | None, sign: int) -> None:
        if facts is None:
            return
        if sign > 0:
            self._nodes[key] = facts
            self._allocation(key, +1)
        else:
            self._allocation(key, -1)
            self._nodes.pop(key, None)
        self._ready += sign * int(facts.ready)
        if facts.model is not None:
            self._gpus_by_model[facts.model] += sign * facts.gpus
            if self._gpus_by_model[facts.model] <= 0:
                del self._gpus_by_model[facts.model]

    def _reset_nodes(self, objects: Iterable[Obj]) -> None:
        with self._lock:
            self._nodes, self._ready, self._gpus_by_model = {}, 0, Counter()
            self._allocated_by_model = Counter()
            self._nodes_version += 1
            for obj in objects:
                self._add_node(object_key(obj), _node_facts(obj), +1)

    def _node_changed(self, old: Obj | None, new: Obj | None) -> None:
        with self._lock:
            before = self._nodes.get(object_key(old)) if old is not None else None
            after = _node_facts(new) if new is not None else None
            if old is not None:
                self._add_node(object_key(old), before, -1)
            if new is not None:
                self._add_node(object_key(new), after, +1)
            if (
                before is None
                or after is None
                or (before.labels, before.gpus)
                != (
                    after.labels,
                    after.gpus,
                )
            ):
                self._nodes_version += 1

    # -- pods -------------------------------------------------------------------------------

    def _add_pod(self, key: str, facts: _PodFacts | None, sign: int) -> None:
        if facts is None:
            return
        if sign > 0:
            self._pods[key] = facts
        else:
            self._pods.pop(key, None)
        if facts.node is not None and facts.gpu_milli:
            self._allocation(facts.node, -1)
            self._milli_on_node[facts.node] += sign * facts.gpu_milli
            if self._milli_on_node[facts.node] == 0:
                del self._milli_on_node[facts.node]
            self._allocation(facts.node, +1)
        self._pending_pods += sign * int(facts.pending)
        if facts.group is not None:
            group = facts.group
            was_waiting = self._group_unbound.get(group, 0) > 0
            self._group_pods[group] += sign
            self._group_unbound[group] += sign * int(facts.unbound)
            if self._group_pods[group] <= 0:
                del self._group_pods[group]
                self._group_unbound.pop(group, None)
            waiting = self._group_unbound.get(group, 0) > 0
            self._waiting_groups += int(waiting) - int(was_waiting)

    def _reset_pods(self, objects: Iterable[Obj]) -> None:
        with self._lock:
            self._pods, self._milli_on_node, self._pending_pods = {}, Counter(), 0
            self._allocated_by_model = Counter()
            self._group_pods, self._group_unbound = Counter(), Counter()
            self._waiting_groups = 0
            for obj in objects:
                self._add_pod(object_key(obj), _pod_facts(obj, self.scheduler_names), +1)

    def _pod_changed(self, old: Obj | None, new: Obj | None) -> None:
        with self._lock:
            if old is not None:
                self._add_pod(object_key(old), self._pods.get(object_key(old)), -1)
            if new is not None:
                self._add_pod(object_key(new), _pod_facts(new, self.scheduler_names), +1)

    # -- GPUNodes, PowerBudgets, Queues -----------------------------------------------------

    def _reset_gpunodes(self, objects: Iterable[Obj]) -> None:
        with self._lock:
            self._gpunode_power = {object_key(o): _gpunode_power(o) for o in objects}
            self._power_version += 1

    def _gpunode_changed(self, old: Obj | None, new: Obj | None) -> None:
        with self._lock:
            if old is not None:
                self._gpunode_power.pop(object_key(old), None)
            if new is not None:
                self._gpunode_power[object_key(new)] = _gpunode_power(new)
            self._power_version += 1

    def _reset_budgets(self, objects: Iterable[Obj]) -> None:
        with self._lock:
            self._budgets = {object_key(o): o for o in objects}

    def _budget_changed(self, old: Obj | None, new: Obj | None) -> None:
        with self._lock:
            if old is not None:
                self._budgets.pop(object_key(old), None)
                self._domain_memo.pop(object_key(old), None)
            if new is not None:
                self._budgets[object_key(new)] = new

    def _reset_queues(self, objects: Iterable[Obj]) -> None:
        with self._lock:
            self._queues = {object_key(o) for o in objects}

    def _queue_changed(self, old: Obj | None, new: Obj | None) -> None:
        with self._lock:
            if old is not None:
                self._queues.discard(object_key(old))
            if new is not None:
                self._queues.add(object_key(new))

    # -- the summary ------------------------------------------------------------------------

    def summary(self) -> ClusterSummary:
        """The counts now: O(GPU models + power domains), plus a domain's nodes when its
        PowerBudget has no `status.powerW` yet."""
        with self._lock:
            allocated = {m: self._allocated_by_model.get(m, 0) for m in self._gpus_by_model}
            groups, waiting = len(self._group_pods), self._waiting_groups
            domains = list(self._budgets.values())
            powers = [p for p in map(self._domain_power, domains) if p is not None]
            budgets = [float((b.get("spec") or {}).get("budgetW") or 0.0) for b in domains]
            return ClusterSummary(
                nodes=len(self._nodes),
                nodes_ready=self._ready,
                gpus_by_model={m: float(g) for m, g in sorted(self._gpus_by_model.items())},
                gpus_allocated_by_model={
                    m: v / MILLI_PER_GPU for m, v in sorted(allocated.items())
                },
                jobs_running=groups - waiting,
                jobs_pending=waiting,
                pods_pending=self._pending_pods,
                queues=len(self._queues),
                power_domains=len(self._budgets),
                power_w=sum(powers) if powers else None,
                budget_w=sum(budgets) if budgets else None,
                observed_at_s=self._clock(),
            )

    def _domain_power(self, budget: Obj) -> float | None:
        """A domain's power: its status, else its nodes' readings when all have one (lock held;
        the sum is kept until the budget, a node or a reading changes)."""
        measured = (budget.get("status") or {}).get("powerW")
        if measured is not None:
            return float(measured)
        meta = budget["metadata"]
        key = (str(meta.get("resourceVersion")), self._nodes_version, self._power_version)
        memo = self._domain_memo.get(meta["name"])
        if memo is not None and memo[0] == key:
            return memo[1]
        power = self._summed_power(budget)
        self._domain_memo[meta["name"]] = (key, power)
        return power

    def _summed_power(self, budget: Obj) -> float | None:
        wanted = ((budget.get("spec") or {}).get("nodeSelector") or {}).get("matchLabels") or {}
        total, members = 0.0, 0
        for name, facts in self._nodes.items():
            if any(facts.labels.get(k) != v for k, v in wanted.items()):
                continue
            members += 1
            readings = self._gpunode_power.get(name, {})
            known = [readings[i] for i in range(facts.gpus) if i in readings]
            if not known:
                return None
            total += sum(known)
        return total if members else None


@dataclass(frozen=True)
class _Listener:
    """A `CacheListener`: the whole list after a (re)list, then each change."""

    on_reset: Callable[[Iterable[Obj]], None]
    on_change: Callable[[Obj | None, Obj | None], None]

    def reset(self, objects: Iterable[Obj]) -> None:
        self.on_reset(objects)

    def changed(self, old: Obj | None, new: Obj | None) -> None:
        self.on_change(old, new)
