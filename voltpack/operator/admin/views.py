"""The admin API's node, job and power-domain views, maintained from watch events.

Building every node and job view from every pod after any change takes seconds at 5,000 nodes
and 50,000 pods. `AdminViews` listens to the watch-fed `ResourceCache`s instead and keeps
indexes (the pods on each node, the pods of each job, the FailedScheduling Events of each pod,
the nodes of each PowerBudget, the keys in order): an event marks the few views it touches
stale, and a read builds only the stale views of the page it returns. A page of `limit` items
costs O(limit) whatever the cluster's size; one node or job costs O(1).

Each view is what `full_node_views` / `full_job_views` (the whole recomputation, kept as the
reference) give for it: the same snapshot arithmetic, on the node's own pods in the caches'
order. Jobs are made of voltpack pods: those whose `schedulerName` is one of `scheduler_names`
(the names the operator serves, `--scheduler-name`); both computations take the same names.
"""

from __future__ import annotations

import bisect
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from voltpack.api.paging import ListPage
from voltpack.model.admin import GpuView, JobView, NodeView, PowerDomainView, WorkerView
from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.devices import Device, DeviceId
from voltpack.model.errors import InvalidRequestError
from voltpack.operator.dra.figures import pod_devices, published_devices
from voltpack.operator.dra.view import pod_claim_keys, uses_claims
from voltpack.operator.kube.cache import object_key
from voltpack.operator.kube.conventions import (
    MANUAL_CAP_ANNOTATION,
    PLACEMENT_REASON_ANNOTATION,
    POD_GROUP_ANNOTATION,
    RANK_ANNOTATION,
    SERVED_SCHEDULERS,
)
from voltpack.operator.kube.translate import (
    gpu_indices,
    node_from_k8s,
    pod_from_k8s,
    pod_key,
    pod_nics,
)
from voltpack.operator.scheduling.cluster_view import build_snapshot

Obj = dict[str, Any]
TERMINAL = ("Succeeded", "Failed")
SCAN_BUDGET_PER_ITEM = 20
"""A filtered page examines at most this many items per item asked (then it ends short, with a
continue token, as a Kubernetes list with a selector may)."""


# -- one view, from the objects it reads ------------------------------------------------------


def node_view(
    raw: Obj, pods: Iterable[Obj], gpunode: Obj | None, domain: str | None
) -> NodeView | None:
    """One node's view from its own pods (those naming it in `spec.nodeName`, in the caches'
    order), its GPUNode and its power domain; None for a node the snapshot cannot read."""
    pods = list(pods)
    try:
        snapshot = build_snapshot([raw], pods)
    except InvalidRequestError:
        return None
    users: dict[int, list[str]] = {}
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in TERMINAL:
            continue
        for index in gpu_indices(pod) or ():
            users.setdefault(index, []).append(pod_key(pod))
    return _node_view(raw, snapshot, 0, gpunode, lambda index: users.get(index, []), domain)


def gpu_models(raw: Obj, gpunode: Obj | None) -> list[str]:
    """The model of each of the node's GPUs: as its GPUNode reports it, else the node's label
    (as in its view's `gpu_details`)."""
    try:
        node = node_from_k8s(raw)
    except InvalidRequestError:
        return []
    devices = {
        int(d.get("index", -1)): d for d in ((gpunode or {}).get("status") or {}).get("gpus") or []
    }
    return [
        str(devices.get(index, {}).get("model") or node.gpu_model or "unknown")
        for index in range(node.gpu_count)
    ]


def _node_view(
    raw: Obj,
    snapshot: Any,
    row: int,
    gpunode: Obj | None,
    users: Callable[[int], list[str]],
    domain: str | None,
) -> NodeView:
    name = raw["metadata"]["name"]
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (raw.get("status") or {}).get("conditions") or []
    )
    model_index = int(snapshot.node_gpu_model[row])
    model = snapshot.gpu_models[model_index] if model_index >= 0 else None
    gpus = int(snapshot.gpu_count[row])
    free_milli = snapshot.gpu_free_milli[row][:gpus]
    details = []
    status = (gpunode or {}).get("status") or {}
    devices = {int(d.get("index", -1)): d for d in status.get("gpus") or []}
    for index in range(gpus):
        device = devices.get(index, {})
        clocks = device.get("lockedClocks") or {}
        details.append(
            GpuView(
                index=index,
                model=str(device.get("model") or model or "unknown"),
                health=str(device.get("health") or "Unknown"),
                allocated_milli=int(MILLI_PER_GPU - free_milli[index]),
                pods=users(index),
                power_w=device.get("powerDrawW"),
                clock_lock_mhz=clocks.get("maxMhz"),
                power_limit_w=device.get("powerLimitW"),
            )
        )
    power = [g.power_w for g in details if g.power_w is not None]
    return NodeView(
        name=name,
        ready=ready,
        gpu_model=model,
        gpus=gpus,
        gpus_allocated=float(gpus - free_milli.sum() / MILLI_PER_GPU),
        cpu_milli=int(snapshot.cpu_capacity_milli[row]),
        cpu_milli_allocated=int(snapshot.cpu_capacity_milli[row] - snapshot.cpu_free_milli[row]),
        memory_mib=int(snapshot.memory_capacity_mib[row]),
        memory_mib_allocated=int(snapshot.memory_capacity_mib[row] - snapshot.memory_free_mib[row]),
        power_w=sum(power) if power else None,
        power_domain=domain,
        gpu_details=details,
    )


def job_view(
    namespace: str,
    name: str,
    pods: list[Obj],
    job: Obj | None,
    reasons: Mapping[str, str],
    claims: Mapping[str, Mapping[str, Any]],
    devices: Mapping[DeviceId, Device],
) -> JobView:
    """One job's view: its voltpack pods (a pod group or one pod, in the caches' order), its
    GPUJob if any, the newest FailedScheduling message of each pod, and the DRA objects."""
    spec = (job or {}).get("spec") or {}
    workers = [
        worker_view(pod, reasons, claims, devices)
        for pod in sorted(pods, key=lambda p: p["metadata"]["name"])
    ]
    waiting = [w.pending_reason for w in workers if w.node is None]
    gpus = 0.0
    for pod in pods:
        try:
            gpus += pod_from_k8s(pod).gpu_request_milli / MILLI_PER_GPU
        except InvalidRequestError:
            continue
    if job is not None:
        kind = "GPUJob"
        phase = str(((job.get("status") or {}).get("phase")) or "Pending")
    else:
        kind = "PodGroup" if len(pods) > 1 else "Pod"
        phase = "Pending" if waiting else "Running"
    annotations = pods[0]["metadata"].get("annotations") or {}
    placement = (
        (p["metadata"].get("annotations") or {}).get(PLACEMENT_REASON_ANNOTATION) for p in pods
    )
    return JobView(
        namespace=namespace,
        name=name,
        kind=kind,
        queue=str(spec.get("queue") or annotations.get("voltpack.io/queue") or "default"),
        priority=int(spec.get("priority") or (pods[0].get("spec") or {}).get("priority") or 0),
        phase=phase,
        gpus_requested=gpus,
        workers=workers,
        pending_reason=next((w for w in waiting if w), "waiting to be scheduled")
        if waiting
        else None,
        placement_reason=next((text for text in placement if text), None),
        recovery_reason=recovery_reason(job),
    )


def worker_view(
    pod: Obj,
    reasons: Mapping[str, str],
    claims: Mapping[str, Mapping[str, Any]],
    devices: Mapping[DeviceId, Device],
) -> WorkerView:
    """One pod of a job: where it runs (GPUs, NICs, devices) or why it waits."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    node = spec.get("nodeName")
    reason = None if node else reasons.get(pod_key(pod), "waiting for the next cycle")
    claim_views, held = pod_devices(pod, claims, devices)
    rank = (pod["metadata"].get("annotations") or {}).get(RANK_ANNOTATION)
    return WorkerView(
        pod=pod_key(pod),
        node=node,
        gpus=list(gpu_indices(pod) or ()),
        phase=str(status.get("phase") or "Pending"),
        pending_reason=reason,
        rank=int(rank) if node and rank and rank.isdigit() else None,
        nics=list(pod_nics(pod)) if node else [],
        claims=claim_views,
        devices=held,
    )


def domain_view(budget: Obj, members: list[str], power_of: Callable[[str], float | None]) -> (
    PowerDomainView
):  # fmt: skip
    """A PowerBudget's view: its status, else the sum of its nodes' GPU readings when every
    node has one (`power_of` is asked only then)."""
    meta = budget["metadata"]
    spec = budget.get("spec") or {}
    status = budget.get("status") or {}
    measured = status.get("powerW")
    if measured is None and members:
        readings = [power_of(n) for n in members]
        if all(r is not None for r in readings):
            measured = sum(r for r in readings if r is not None)
    budget_w = float(spec.get("budgetW") or 0.0)
    manual = (meta.get("annotations") or {}).get(MANUAL_CAP_ANNOTATION)
    manual_w = float(manual) if manual else None
    effective = min(budget_w, manual_w) if manual_w is not None else budget_w
    return PowerDomainView(
        name=meta["name"],
        budget_w=budget_w,
        power_w=None if measured is None else float(measured),
        headroom_w=None if measured is None else effective - float(measured),
        nodes=members,
        actions={
            "clock-locked": int(status.get("lockedGpus") or 0),
            "power-capped": int(status.get("cappedGpus") or 0),
            "stale-telemetry": int(status.get("staleGpus") or 0),
        },
        manual_cap_w=manual_w,
        message=status.get("level"),
    )


def _selector(budget: Obj) -> Any:
    return (budget.get("spec") or {}).get("nodeSelector")


def selects(budget: Obj, node: Obj) -> bool:
    """Whether the node's labels match the PowerBudget's node selector."""
    wanted = (_selector(budget) or {}).get("matchLabels") or {}
    labels = node["metadata"].get("labels") or {}
    return all(labels.get(key) == value for key, value in wanted.items())


def members_of(budget: Obj, nodes: Iterable[Obj]) -> list[str]:
    """Names of the nodes the PowerBudget selects, sorted."""
    return sorted(node["metadata"]["name"] for node in nodes if selects(budget, node))


def recovery_reason(job: Obj | None) -> str | None:
    """A GPUJob's last fault recovery and why (`status.recovery.message`, gang_recovery.py)."""
    recovery = ((job or {}).get("status") or {}).get("recovery") or {}
    return str(recovery.get("message") or "") or None


def event_moment(event: Obj) -> datetime:
    """When an Event last happened: `eventTime` (microseconds) or `lastTimestamp` (seconds)."""
    for field in ("eventTime", "lastTimestamp", "firstTimestamp"):
        text = event.get(field)
        if text:
            try:
                return datetime.fromisoformat(str(text))
            except ValueError:
                continue
    return datetime.min.replace(tzinfo=UTC)


def event_pod(event: Obj) -> str | None:
    """`namespace/name` of the pod a FailedScheduling Event is about (None: not a pod)."""
    involved = event.get("involvedObject") or {}
    if (involved.get("kind") or "Pod") != "Pod":
        return None
    return f"{involved.get('namespace') or 'default'}/{involved.get('name')}"


def latest_reasons(events: Iterable[Obj]) -> dict[str, str]:
    """namespace/name -> the newest FailedScheduling message for that pod (of Events at the
    same moment, the later one listed)."""
    latest: dict[str, tuple[datetime, str]] = {}
    for event in events:
        key = event_pod(event)
        if key is None:
            continue
        stamp = event_moment(event)
        if key not in latest or stamp >= latest[key][0]:
            latest[key] = (stamp, str(event.get("message") or event.get("reason") or ""))
    return {key: message for key, (_, message) in latest.items()}


def job_of(pod: Obj, scheduler_names: frozenset[str] = SERVED_SCHEDULERS) -> str | None:
    """`namespace/group` of a voltpack pod's job (its pod group, or itself); None for a pod
    whose `schedulerName` is not one of `scheduler_names`."""
    if (pod.get("spec") or {}).get("schedulerName") not in scheduler_names:
        return None
    meta = pod["metadata"]
    group = (meta.get("annotations") or {}).get(POD_GROUP_ANNOTATION) or meta["name"]
    return f"{meta.get('namespace') or 'default'}/{group}"


def gpujob_key(job: Obj) -> str:
    """`namespace/name` of a GPUJob."""
    return f"{job['metadata'].get('namespace') or 'default'}/{job['metadata']['name']}"


# -- the whole recomputation (the reference) --------------------------------------------------


def full_node_views(
    nodes: list[Obj], pods: list[Obj], gpunodes: list[Obj], budgets: list[Obj]
) -> list[NodeView]:
    """Every node's view from the whole cluster at once, sorted by name."""
    snapshot = build_snapshot(nodes, pods)
    by_name = {g["metadata"]["name"]: g for g in gpunodes}
    users: dict[tuple[str, int], list[str]] = {}
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name or (pod.get("status") or {}).get("phase") in TERMINAL:
            continue
        for index in gpu_indices(pod) or ():
            users.setdefault((node_name, index), []).append(pod_key(pod))
    domain_of = {
        node: budget["metadata"]["name"] for budget in budgets for node in members_of(budget, nodes)
    }
    views = []
    for raw in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        name = raw["metadata"]["name"]
        try:
            row = snapshot.node_index(name)
        except KeyError:
            continue
        views.append(
            _node_view(
                raw,
                snapshot,
                row,
                by_name.get(name),
                lambda index, n=name: users.get((n, index), []),  # type: ignore[misc]
                domain_of.get(name),
            )
        )
    return views


def full_job_views(
    pods: list[Obj],
    gpujobs: list[Obj],
    events: list[Obj],
    claims: Mapping[str, Mapping[str, Any]],
    devices: Mapping[DeviceId, Device],
    scheduler_names: frozenset[str] = SERVED_SCHEDULERS,
) -> list[JobView]:
    """Every job's view from the whole cluster at once, sorted by `namespace/name`; the jobs
    are the pods of `scheduler_names`, grouped."""
    groups: dict[str, list[Obj]] = {}
    for pod in pods:
        key = job_of(pod, scheduler_names)
        if key is not None:
            groups.setdefault(key, []).append(pod)
    jobs = {gpujob_key(j): j for j in gpujobs}
    reasons = latest_reasons(events)
    views = []
    for key in sorted(groups):
        namespace, name = key.split("/", 1)
        views.append(
            job_view(namespace, name, groups[key], jobs.get(key), reasons, claims, devices)
        )
    return views


def full_domain_views(nodes: list[Obj], budgets: list[Obj], views: list[NodeView]) -> list[
    PowerDomainView
]:  # fmt: skip
    """Every PowerBudget's view from the whole cluster at once, in the caches' order."""
    power_of = {n.name: n.power_w for n in views}
    return [domain_view(b, members_of(b, nodes), power_of.get) for b in budgets]


# -- the incremental views --------------------------------------------------------------------


class _Keys:
    """Keys kept sorted (bisect into a list: an insert moves pointers, 50,000 in microseconds)."""

    def __init__(self) -> None:
        self._keys: list[str] = []

    def add(self, key: str) -> None:
        at = bisect.bisect_left(self._keys, key)
        if at == len(self._keys) or self._keys[at] != key:
            self._keys.insert(at, key)

    def discard(self, key: str) -> None:
        at = bisect.bisect_left(self._keys, key)
        if at < len(self._keys) and self._keys[at] == key:
            del self._keys[at]

    def clear(self) -> None:
        self._keys = []

    def after(self, key: str | None) -> int:
        """The position of the first key after `key` (0 for None)."""
        return 0 if key is None else bisect.bisect_right(self._keys, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __getitem__(self, at: int) -> str:
        return self._keys[at]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._keys))


class _Ordered:
    """Objects of one kind by key, with each key's place in the cache's order (a dict kept with
    the cache's own operations has the cache's order; the sequence number finds it in O(1))."""

    def __init__(self) -> None:
        self.objects: dict[str, Obj] = {}
        self.seq: dict[str, int] = {}
        self._next = 0

    def put(self, key: str, obj: Obj) -> None:
        if key not in self.seq:
            self.seq[key] = self._next
            self._next += 1
        self.objects[key] = obj

    def pop(self, key: str) -> Obj | None:
        self.seq.pop(key, None)
        return self.objects.pop(key, None)

    def reset(self, objects: Iterable[Obj]) -> None:
        self.objects, self.seq = {}, {}
        for obj in objects:
            self.put(object_key(obj), obj)

    def in_order(self, keys: Iterable[str]) -> list[Obj]:
        """The objects of `keys` in the cache's order."""
        return [self.objects[k] for k in sorted(keys, key=self.seq.__getitem__)]


class AdminViews:
    """Node, job and power-domain views kept from cache events (see the module docstring).

    Each `*_listener` is a `CacheListener` for the `ResourceCache` of that kind; thread safe
    (every cache calls from its own watch thread, requests from theirs). `node_revision` and
    `job_revision` grow with every change that can touch those lists. `scheduler_names`: the
    `schedulerName`s whose pods make the jobs (the names the operator serves).
    """

    def __init__(self, scheduler_names: frozenset[str] = SERVED_SCHEDULERS) -> None:
        self.scheduler_names = scheduler_names
        self._lock = threading.RLock()
        self._nodes = _Ordered()
        self._node_keys = _Keys()
        self._pods = _Ordered()
        self._pods_on: dict[str, set[str]] = {}
        """node name -> keys of the pods naming it in spec.nodeName."""
        self._gpunodes: dict[str, Obj] = {}
        self._budgets = _Ordered()
        self._members: dict[str, set[str]] = {}
        """PowerBudget -> the nodes it selects."""
        self._gpujobs: dict[str, Obj] = {}
        self._jobs: dict[str, set[str]] = {}
        """job key (namespace/group) -> keys of its pods."""
        self._job_keys = _Keys()
        self._job_of: dict[str, str] = {}
        self._unbound: Counter[str] = Counter()
        """job key -> its pods without a node (the job waits while any)."""
        self._events = _Ordered()
        self._events_of: dict[str, set[str]] = {}
        """pod key -> keys of the FailedScheduling Events about it."""
        self._claims: dict[str, Obj] = {}
        self._claim_users: dict[str, set[str]] = {}
        """claim key -> jobs whose pods use it (as of their last build)."""
        self._job_claims: dict[str, list[str]] = {}
        self._slices: dict[str, Obj] = {}
        self._devices: dict[DeviceId, Device] | None = None
        self._node_built: dict[str, NodeView | None] = {}
        self._job_built: dict[str, JobView] = {}
        self.node_revision = 0
        self.job_revision = 0
        self.nodes_listener = _Listener(self._reset_nodes, self._node_changed)
        self.pods_listener = _Listener(self._reset_pods, self._pod_changed)
        self.gpunodes_listener = _Listener(self._reset_gpunodes, self._gpunode_changed)
        self.budgets_listener = _Listener(self._reset_budgets, self._budget_changed)
        self.gpujobs_listener = _Listener(self._reset_gpujobs, self._gpujob_changed)
        self.events_listener = _Listener(self._reset_events, self._event_changed)
        self.claims_listener = _Listener(self._reset_claims, self._claim_changed)
        self.slices_listener = _Listener(self._reset_slices, self._slice_changed)

    # -- staleness ---------------------------------------------------------------------------

    def _stale_node(self, name: str | None) -> None:
        if name is not None:
            self._node_built.pop(name, None)
            self.node_revision += 1

    def _stale_job(self, key: str | None) -> None:
        if key is not None:
            self._job_built.pop(key, None)
            self.job_revision += 1

    def _all_nodes_stale(self) -> None:
        self._node_built.clear()
        self.node_revision += 1

    def _all_jobs_stale(self) -> None:
        self._job_built.clear()
        self.job_revision += 1

    # -- nodes and PowerBudgets --------------------------------------------------------------

    def _place_node(self, name: str, node: Obj | None) -> None:
        """Add or drop the node from each PowerBudget's members."""
        for budget_key, budget in self._budgets.objects.items():
            members = self._members.setdefault(budget_key, set())
            if node is not None and selects(budget, node):
                members.add(name)
            else:
                members.discard(name)

    def _reset_nodes(self, objects: Iterable[Obj]) -> None:
        with self._lock:
            self._nodes.reset(objects)
            self._node_keys.clear()
            for name in self._nodes.objects:
                self._node_keys.add(name)
            self._recount_members()
            self._all_nodes_stale()

    def _node_changed(self, old: Obj | None, new: Obj | None) -> None:
        with self._lock:
            if old is not None and new is None:
                name = object_key(old)
                self._nodes.pop(name)
                self._node_keys.discard(name)
                self._place_node(name, None)
                self._stale_node(name)
            elif new is not None:
                name = object_key(new)
                self._nodes.put(name, new)
                self._node_keys.add(name)
                self._place_node(name, new)
                self._stale_node(name)

    def _recount_members(self) -> None:
        nodes = self._nodes.objects
        self._members = {
            key: {name for name, node in nodes.items() if selects(budget, node)}
            for key, budget in self._budgets.objects.items()
        }

    def _reset_budgets(self, objects: Iterable[Obj]) -> None:
        with self._lock:
            self._budgets.reset(objects)
            self._recount_members()
            self._all_nodes_stale()

    def _budget_changed(self, old: Obj | None, new: Obj | None) -> None:
        with self._lock:
            key = object_key(new if new is not None else old)  # type: ignore[arg-type]
            before = self._members.pop(key, set())
            if new is None:
                self._budgets.pop(key)
                after: set[str] = set()
            else:
                self._budgets.put(key, new)
                if old is not None and _selector(old) == _selector(new):
                    after = before  # a status or annotation change (every power tick, a cap)
                else:
                    after = {n for n, node in self._nodes.objects.items() if selects(new, node)}
                self._members[key] = after
            for name in before ^ after if old is not None and new is not None else before | after:
                self._stale_node(name)
            self.node_revision += 1

    def _reset_gpunodes(self, objects: Iterable[Obj]) -> None:
        with self._lock:
            self._gpunodes = {object_key(o): o for o in objects}
            self._all_nodes_stale()

    def _gpunode_changed(self, old: Obj | None, new: Obj | None) -> None:
        with self._lock:
            if new is None and old is not None:
                self._gpunodes.pop(object_key(old), None)
                self._stale_node(object_key(old))
            elif new is not None:
                self._gpunodes[object_key(new)] = new
                self._stale_node(object_key(new))

    # -- pods ----------------------------------------------------------------------------------

    def _add_pod(self, key: str, pod: Obj) -> None:
        self._pods.put(key, pod)
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            self._pods_on.setdefault(node, set()).add(key)
            self._stale_node(node)
        job = job_of(pod, self.scheduler_names)
        if job is not None:
            self._job_of[key] = job
            if job not in self._jobs:
                self._jobs[job] = set()
                self._job_keys.add(job)
            self._jobs[job].add(key)
            if not node:
                self._unbound[job] += 1
            self._stale_job(job)

    def _drop_pod(self, key: str) -> None:
        """Take the pod out of the indexes (its place in the cache's order stays)."""
        pod = self._pods.objects.get(key)
        if pod is None:
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            on = self._pods_on.get(node)
            if on is not None:
                on.discard(key)
                if not on:
                    del self._pods_on[node]
            self._stale_node(node)
        job = self._job_of.pop(key, None)
        if job is not None:
            members = self._jobs.get(job)
            if members is not None:
                members.discard(key)
                if not members:
                    del self._jobs[job]
                    self._job_keys.discard(job)
                    self._job_claims.pop(job, None)
            if not node:
                self._unbound[job] -= 1
                if self._unbound[job] <= 0:
                    del self._unbound[job]
            self._stale_job(job)

    def _reset_pods(self, objects: Iterable[Obj]) -> None:
        with self._lock:
            self._pods = _Ordered()
            self._pods_on, self._jobs, self._job_of = {}, {}, {}
            self._unbound = Counter()
            self._job_keys.clear()
            for obj in objects:
                self._add_pod(object_key(obj), obj)
            self._all_nodes_stale()
            self._all_jobs_stale()

    def _pod_changed(self, old: Obj | None, new: Obj | None) -> None:
        with self._lock:
            if new is None:
                if old is not None:
                    self._drop_pod(object_key(old))
                    self._pods.pop(object_key(old))
                return
            key = object_key(new)
            self._drop_pod(key)
            self._add_pod(key, new)

    # -- GPUJobs, Events, ResourceClaims, ResourceSlices -----------------------------------------

    def _reset_gpujobs(self, objects: Iterable[Obj]) -> None:
        with self._lock:
            self._gpujobs = {gpujob_key(o): o for o in objects}
            self._all_jobs_stale()

    def _gpujob_changed(self, old: Obj | None, new: Obj | None) -> None:
        with self._lock:
            if new is None and old is not None:
                self._gpujobs.pop(gpujob_key(old), None)
                self._stale_job(gpujob_key(old))
            elif new is not None:
                self._gpujobs[gpujob_key(new)] = new
                self._stale_job(gpujob_key(new))

    def _index_event(self, key: str, event: Obj, sign: int) -> None:
        pod = event_pod(event)
        if pod is None:
            return
        if sign > 0:
            self._events_of.setdefault(pod, set()).add(key)
        else:
            keys = self._events_of.get(pod)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._events_of[pod]
        self._stale_job(self._job_of.get(pod))

    def _reset_events(self, objects: Iterable[Obj]) -> None:
        with self._lock:
            self._events.reset(objects)
            self._events_of = {}
            for key, event in self._events.objects.items():
                self._index_event(key, event, +1)
            self._all_jobs_stale()

    def _event_changed(self, old: Obj | None, new: Obj | None) -> None:
        with self._lock:
            if old is not None:
                key = object_key(old)
                found = self._events.objects.get(key)
                if found is not None:
                    self._index_event(key, found, -1)
                if new is None:
                    self._events.pop(key)
            if new is not None:
                key = object_key(new)
                self._events.put(key, new)
                self._index_event(key, new, +1)

    def _reset_claims(self, objects: Iterable[Obj]) -> None:
        with self._lock:
            self._claims = {object_key(o): o for o in objects}
            self._all_jobs_stale()

    def _claim_changed(self, old: Obj | None, new: Obj | None) -> None:
        with self._lock:
            key = object_key(new if new is not None else old)  # type: ignore[arg-type]
            if new is None:
                self._claims.pop(key, None)
            else:
                self._claims[key] = new
            for job in self._claim_users.get(key, set()):
                self._stale_job(job)

    def _reset_slices(self, objects: Iterable[Obj]) -> None:
        with self._lock:
            self._slices = {object_key(o): o for o in objects}
            self._devices = None
            self._all_jobs_stale()

    def _slice_changed(self, old: Obj | None, new: Obj | None) -> None:
        with self._lock:
            if new is None and old is not None:
                self._slices.pop(object_key(old), None)
            elif new is not None:
                self._slices[object_key(new)] = new
            self._devices = None
            self._all_jobs_stale()

    # -- building (lock held) ----------------------------------------------------------------

    def _domain_of(self, name: str) -> str | None:
        """The last PowerBudget (in the caches' order) that selects the node."""
        found = None
        for key in self._budgets.objects:
            if name in self._members.get(key, ()):
                found = key
        return found

    def _node(self, name: str) -> NodeView | None:
        if name in self._node_built:
            return self._node_built[name]
        raw = self._nodes.objects.get(name)
        if raw is None:
            return None
        pods = self._pods.in_order(self._pods_on.get(name, ()))
        view = node_view(raw, pods, self._gpunodes.get(name), self._domain_of(name))
        self._node_built[name] = view
        return view

    def _reasons(self, pods: list[Obj]) -> dict[str, str]:
        events = [
            key for pod in pods for key in self._events_of.get(pod_key(pod), ())
        ]  # fmt: skip
        return latest_reasons(self._events.in_order(set(events)))

    def _job(self, key: str) -> JobView | None:
        built = self._job_built.get(key)
        if built is not None:
            return built
        members = self._jobs.get(key)
        if not members:
            return None
        pods = self._pods.in_order(members)
        if self._devices is None:
            self._devices = published_devices(self._slices.values())
        for claim in self._job_claims.pop(key, []):
            self._claim_users.get(claim, set()).discard(key)
        used = [c for pod in pods if uses_claims(pod) for c in pod_claim_keys(pod)[0]]
        for claim in used:
            self._claim_users.setdefault(claim, set()).add(key)
        if used:
            self._job_claims[key] = used
        namespace, name = key.split("/", 1)
        view = job_view(
            namespace,
            name,
            pods,
            self._gpujobs.get(key),
            self._reasons(pods),
            self._claims,
            self._devices,
        )
        self._job_built[key] = view
        return view

    # -- reading -------------------------------------------------------------------------------

    def node(self, name: str) -> NodeView | None:
        """One node's view (None: no such node)."""
        with self._lock:
            return self._node(name)

    def job(self, namespace: str, name: str) -> JobView | None:
        """One job's view (None: no such job)."""
        with self._lock:
            return self._job(f"{namespace}/{name}")

    def node_page(self, after: str | None, limit: int) -> ListPage[NodeView]:
        """Up to `limit` nodes after `after`, by name."""
        with self._lock:
            return _page(self._node_keys, self._node, after, limit, None, self.node_revision)

    def job_page(
        self,
        after: str | None,
        limit: int,
        pending: bool | None = None,
        queue: str | None = None,
    ) -> ListPage[JobView]:
        """Up to `limit` jobs after `after` (`namespace/name`), only pending (or not) ones, or
        one queue's, when asked; a filtered page examines at most
        `SCAN_BUDGET_PER_ITEM * limit` jobs."""

        def wanted(view: JobView) -> bool:
            if pending is not None and (view.pending_reason is not None) != pending:
                return False
            return queue is None or view.queue == queue

        def build(key: str) -> JobView | None:
            if pending is not None and (self._unbound.get(key, 0) > 0) != pending:
                return None  # known from the counters, without building the view
            view = self._job(key)
            return view if view is not None and wanted(view) else None

        filtered = pending is not None or queue is not None
        with self._lock:
            return _page(
                self._job_keys,
                build,
                after,
                limit,
                SCAN_BUDGET_PER_ITEM * limit if filtered else None,
                self.job_revision,
            )

    def nodes(self) -> list[NodeView]:
        """Every node's view, by name."""
        with self._lock:
            return [v for v in map(self._node, self._node_keys) if v is not None]

    def jobs(self) -> list[JobView]:
        """Every job's view, by `namespace/name`."""
        with self._lock:
            return [v for v in map(self._job, self._job_keys) if v is not None]

    def domain_gpu_models(self, name: str) -> list[str] | None:
        """The model of every GPU of the PowerBudget's nodes (None: no such budget), read from
        the nodes and their GPUNodes alone (no node view built, no pod read)."""
        with self._lock:
            if name not in self._budgets.objects:
                return None
            models: list[str] = []
            for member in sorted(self._members.get(name, ())):
                raw = self._nodes.objects.get(member)
                if raw is not None:
                    models += gpu_models(raw, self._gpunodes.get(member))
            return models

    def domains(self) -> list[PowerDomainView]:
        """Every PowerBudget's view, in the caches' order; O(nodes in domains), reading the
        nodes' views only for a domain without `status.powerW`."""

        def power_of(name: str) -> float | None:
            view = self._node(name)
            return None if view is None else view.power_w

        with self._lock:
            return [
                domain_view(budget, sorted(self._members.get(key, ())), power_of)
                for key, budget in self._budgets.objects.items()
            ]

    def invalidate(self) -> None:
        """Build every view again on its next read."""
        with self._lock:
            self._all_nodes_stale()
            self._all_jobs_stale()

    def budget_names(self) -> set[str]:
        """The PowerBudgets' names."""
        with self._lock:
            return set(self._budgets.objects)


def _page(
    keys: _Keys,
    build: Callable[[str], Any],
    after: str | None,
    limit: int,
    scan_budget: int | None,
    revision: int,
) -> ListPage[Any]:
    """Views of the keys after `after`, up to `limit` of them (`build` None: left out), and
    no more than `scan_budget` keys examined (None: no filter, the remaining count is known)."""
    start = at = keys.after(after)
    items: list[Any] = []
    last: str | None = None
    while at < len(keys) and len(items) < limit:
        if scan_budget is not None and at - start >= scan_budget:
            break
        key = keys[at]
        at += 1
        view = build(key)
        last = key
        if view is not None:
            items.append(view)
    more = at < len(keys)
    return ListPage(
        items=items,
        last_key=last if more else None,
        remaining=(len(keys) - at) if scan_budget is None else None,
        revision=revision,
    )


class _Listener:
    """A `CacheListener`: the whole list after a (re)list, then each change."""

    def __init__(
        self,
        on_reset: Callable[[Iterable[Obj]], None],
        on_change: Callable[[Obj | None, Obj | None], None],
    ) -> None:
        self._on_reset = on_reset
        self._on_change = on_change

    def reset(self, objects: Iterable[Obj]) -> None:
        self._on_reset(objects)

    def changed(self, old: Obj | None, new: Obj | None) -> None:
        self._on_change(old, new)
