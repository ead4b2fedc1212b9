"""The admin API's view of a live cluster, read through the official Kubernetes client.

Implements the API's `ClusterSource` and `PolicyHolder` protocols. Reads come from watch-fed
caches, as the operator's own (`ResourceCache`: one list, then a watch): no request lists the
API server. The cluster summary is kept current by the watch events themselves
(`ClusterTally`), so it costs the same whatever the cluster's size and however often it
changes; the other views are built from the cached objects once per change and reused until
the next. The caches start with the first request, which waits until nodes, pods and events are
listed. An API server that cannot be reached then, or that the caches have not heard from for
`stale_after_s`, makes the reads raise `SourceUnavailableError` (the API answers 503). A dry
run plans one scheduling cycle with the given policy on a copy of the cluster, exactly as the
operator would, and writes nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
from kubernetes.client import ApiClient, CoreV1Api, CustomObjectsApi, ResourceV1Api
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from voltpack.api.sources import SourceUnavailableError
from voltpack.model.admin import (
    ClusterSummary,
    DryRunResult,
    GpuView,
    JobView,
    NodeView,
    PlacementChange,
    PowerDomainView,
    QueueView,
    WorkerView,
)
from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.devices import Device, DeviceId
from voltpack.model.errors import InvalidRequestError, PolicyError
from voltpack.model.resources import API_GROUP, API_VERSION
from voltpack.operator.cache import ResourceCache
from voltpack.operator.cluster_tally import ClusterTally
from voltpack.operator.cluster_view import build_snapshot, pending_work
from voltpack.operator.conventions import (
    MANUAL_CAP_ANNOTATION,
    PLACEMENT_REASON_ANNOTATION,
    POD_GROUP_ANNOTATION,
    RANK_ANNOTATION,
    SCHEDULER_NAME,
)
from voltpack.operator.cycle import QueueContext, plan_cycle
from voltpack.operator.dra_figures import pod_devices, published_devices
from voltpack.operator.policy_reload import POLICY_KEY
from voltpack.operator.power_loop import PowerCaches, PowerLoop
from voltpack.operator.power_objects import action_of
from voltpack.operator.queues import pending_queues, queue_tree, running_gangs
from voltpack.operator.setup_problems import setup_log_for
from voltpack.operator.translate import gpu_indices, pod_from_k8s, pod_key, pod_nics
from voltpack.policies.fair_share import make_ordering
from voltpack.policies.power.ladder import GpuSetting
from voltpack.policies.registry import make_strategy
from voltpack.policies.schema import PolicyFile, parse_policy
from voltpack.scheduler.cycle import Scheduler
from voltpack.scheduler.preemption import PreemptionRules

TERMINAL = ("Succeeded", "Failed")
CUSTOM_KINDS = ("gpunodes", "gpujobs", "queues", "powerbudgets")
REQUIRED = ("nodes", "pods", "events")
"""Caches a read needs; the voltpack kinds may be missing (CRDs not installed: none of them)."""


@dataclass
class _Objects:
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    gpunodes: list[dict[str, Any]]
    gpujobs: list[dict[str, Any]]
    queues: list[dict[str, Any]]
    budgets: list[dict[str, Any]]
    pending_reasons: dict[str, str]
    """namespace/pod -> message of its latest FailedScheduling Event."""
    read_at_s: float
    claims: dict[str, dict[str, Any]]
    """ResourceClaims by namespace/name."""
    devices: dict[DeviceId, Device]
    """Devices published in ResourceSlices."""


class KubeAdminSource:
    """ClusterSource and PolicyHolder over the Kubernetes API, read through watch-fed caches."""

    def __init__(
        self,
        api_client: ApiClient,
        policy: PolicyFile,
        policy_text: str,
        namespace: str = "voltpack-system",
        policy_configmap: str = "voltpack-policy",
        clock: Callable[[], float] = time.time,
        sync_timeout_s: float = 60.0,
        stale_after_s: float = 10.0,
    ) -> None:
        """`sync_timeout_s`: how long the first read waits for the first lists;
        `stale_after_s`: how long the caches may fail to reach the API server before reads
        answer 503 rather than the last state they heard of."""
        self._client = api_client
        self._core = CoreV1Api(api_client)
        self._custom = CustomObjectsApi(api_client)
        self._policy = (policy, policy_text)
        self._namespace = namespace
        self._configmap = policy_configmap
        self._clock = clock
        self._sync_timeout_s = sync_timeout_s
        self._stale_after_s = stale_after_s
        self._cache: _Objects | None = None
        self._cache_generations: tuple[int, ...] = ()
        self._views: dict[str, Any] = {}
        """Views built from the cached objects, by name (rebuilt when the objects change)."""
        self._lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._stop = threading.Event()
        self._started = False
        custom = self._custom

        def custom_list(plural: str) -> Callable[..., Any]:
            return lambda **kw: custom.list_cluster_custom_object(
                API_GROUP, API_VERSION, plural, **kw
            )

        setup = setup_log_for(str(api_client.configuration.host))  # each problem said once
        # Dynamic Resource Allocation: pods' claims and the devices they hold (none where the
        # cluster does not serve resource.k8s.io/v1)
        resource = ResourceV1Api(api_client)
        self._caches = {
            "nodes": ResourceCache("nodes", self._core.list_node, setup),
            "pods": ResourceCache("pods", self._core.list_pod_for_all_namespaces, setup),
            "events": ResourceCache(
                "events",
                lambda **kw: self._core.list_event_for_all_namespaces(
                    field_selector="reason=FailedScheduling", **kw
                ),
                setup,
            ),
            **{
                plural: ResourceCache(plural, custom_list(plural), setup) for plural in CUSTOM_KINDS
            },
            "resourceslices": ResourceCache("resourceslices", resource.list_resource_slice, setup),
            "resourceclaims": ResourceCache(
                "resourceclaims", resource.list_resource_claim_for_all_namespaces, setup
            ),
        }
        self.tally = ClusterTally(clock)
        """The summary's counters, fed by the caches' watch events."""
        self._caches["nodes"].add_listener(self.tally.nodes_listener)
        self._caches["pods"].add_listener(self.tally.pods_listener)
        self._caches["gpunodes"].add_listener(self.tally.gpunodes_listener)
        self._caches["powerbudgets"].add_listener(self.tally.budgets_listener)
        self._caches["queues"].add_listener(self.tally.queues_listener)

    # -- reading ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start the caches (list, then watch) if they are not running; return at once."""
        with self._start_lock:
            if not self._started:
                for cache in self._caches.values():
                    cache.start(self._stop)
                self._started = True

    def close(self) -> None:
        """Stop the caches' watches."""
        self._stop.set()

    def watched_changes(self) -> int:
        """How many changes the caches have taken in (grows with every watch event)."""
        return sum(cache.generation for cache in self._caches.values())

    def _ready(self) -> None:
        """Start the caches and wait for the first lists; raise SourceUnavailableError when
        the API server cannot be reached (or has not been reached for `stale_after_s`)."""
        self.start()
        deadline = time.monotonic() + self._sync_timeout_s
        for name in REQUIRED:
            cache = self._caches[name]
            while not cache.wait_synced(0.02):
                if cache.last_error is not None:
                    raise self._unavailable(name, cache)
                if time.monotonic() > deadline:
                    raise SourceUnavailableError(
                        f"Kubernetes API: {name} not listed within {self._sync_timeout_s:g} s"
                    )
            failing = cache.failing_since
            if failing is not None and time.monotonic() - failing > self._stale_after_s:
                raise self._unavailable(name, cache)
        for cache in self._caches.values():  # the optional kinds: listed, or not served
            while not cache.settled.wait(0.02) and cache.last_error is None:
                if time.monotonic() > deadline:
                    break

    def _unavailable(self, name: str, cache: ResourceCache) -> SourceUnavailableError:
        error = cache.last_error
        if isinstance(error, ApiException):
            return SourceUnavailableError(
                f"Kubernetes API: listing {name} failed: {error.status} {error.reason}"
            )
        return SourceUnavailableError(f"Kubernetes API unreachable ({name}): {error}")

    def _call(self, what: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except ApiException as exc:
            if exc.status == 404:
                return {"items": []}  # a CRD not installed: nothing of that kind
            raise SourceUnavailableError(
                f"Kubernetes API: {what} failed: {exc.status} {exc.reason}"
            ) from None
        except (HTTPError, OSError) as exc:
            raise SourceUnavailableError(f"Kubernetes API unreachable ({what}): {exc}") from None

    def _objects(self) -> _Objects:
        """The cached objects (not copies: views read them, never change them)."""
        self._ready()
        generations = tuple(cache.generation for cache in self._caches.values())
        with self._lock:
            if self._cache is not None and self._cache_generations == generations:
                return self._cache
            caches = self._caches
            self._cache = _Objects(
                nodes=caches["nodes"].values(),
                pods=caches["pods"].values(),
                gpunodes=caches["gpunodes"].values(),
                gpujobs=caches["gpujobs"].values(),
                queues=caches["queues"].values(),
                budgets=caches["powerbudgets"].values(),
                pending_reasons=latest_reasons(caches["events"].values()),
                read_at_s=time.monotonic(),
                claims={
                    f"{c['metadata'].get('namespace')}/{c['metadata']['name']}": c
                    for c in caches["resourceclaims"].values()
                },
                devices=published_devices(caches["resourceslices"].values()),
            )
            self._cache_generations = generations
            self._views = {}
            return self._cache

    def invalidate(self) -> None:
        """Forget the views built from the cached objects (they are built again on the next
        read; the summary's counters stay, the watch keeps them current)."""
        with self._lock:
            self._cache = None
            self._views = {}

    def _view(self, name: str, build: Callable[[_Objects], Any]) -> Any:
        """`build(objects)` once per change of the cached objects."""
        objects = self._objects()
        with self._lock:
            if self._cache is objects and name in self._views:
                return self._views[name]
        value = build(objects)
        with self._lock:
            if self._cache is objects:
                self._views[name] = value
        return value

    # -- ClusterSource ---------------------------------------------------------------------

    def summary(self) -> ClusterSummary:
        """Counts over the whole cluster, from the counters the watch keeps current."""
        self._ready()
        return self.tally.summary()

    def nodes(self) -> list[NodeView]:
        """Every node with GPUs, allocation and power."""
        views: list[NodeView] = self._view("nodes", self._node_views)
        return views

    def jobs(self) -> list[JobView]:
        """GPUJobs, pod groups and single voltpack pods."""
        views: list[JobView] = self._view("jobs", self._job_views)
        return views

    def queues(self) -> list[QueueView]:
        """Queues with their quotas and status."""
        views = []
        for obj in self._objects().queues:
            spec = obj.get("spec") or {}
            status = obj.get("status") or {}
            guaranteed: dict[str, float] = {}
            limits: dict[str, float] = {}
            for quota in spec.get("quotas") or []:
                model = str(quota.get("gpuModel", "*"))
                guaranteed[model] = float(quota.get("guaranteed") or 0)
                if quota.get("limit") is not None:
                    limits[model] = float(quota["limit"])
            views.append(
                QueueView(
                    name=obj["metadata"]["name"],
                    parent=spec.get("parent"),
                    weight=float(spec.get("weight", 1.0)),
                    guaranteed_gpus=guaranteed,
                    limit_gpus=limits,
                    allocated_gpus={
                        k: float(v) for k, v in (status.get("allocatedGpus") or {}).items()
                    },
                    pending_jobs=int(status.get("pendingJobs") or 0),
                    conditions={
                        str(c.get("type")): str(c.get("message") or c.get("status"))
                        for c in status.get("conditions") or []
                    },
                )
            )
        return views

    def power_domains(self) -> list[PowerDomainView]:
        """PowerBudgets with their status."""
        views: list[PowerDomainView] = self._view(
            "domains", lambda objects: self._domain_views(objects, self.nodes())
        )
        return views

    def set_manual_cap(self, domain: str, cap_w: float | None) -> PowerDomainView:
        """Annotate the PowerBudget; the power loop budgets min(budget, manual cap)."""
        names = {b["metadata"]["name"] for b in self._objects().budgets}
        if domain not in names:
            raise KeyError(domain)
        value = None if cap_w is None else f"{cap_w:g}"
        body = {"metadata": {"annotations": {MANUAL_CAP_ANNOTATION: value}}}
        patched = self._call(
            f"patching powerbudget {domain}",
            lambda: self._custom.patch_cluster_custom_object(
                API_GROUP, API_VERSION, "powerbudgets", domain, body
            ),
        )
        if isinstance(patched, dict) and patched.get("metadata"):
            self._caches["powerbudgets"].assume(patched)  # read your write: before the watch
        for view in self.power_domains():
            if view.name == domain:
                return view
        raise KeyError(domain)

    def dry_run(self, policy: PolicyFile) -> DryRunResult:
        """One scheduling cycle with `policy` on the cluster as it is; nothing is written."""
        objects = self._objects()
        snapshot = build_snapshot(objects.nodes, objects.pods)
        work = pending_work(objects.pods)
        # gangs with a topology request are placed by the operator's topology placement, which
        # the dry run does not rebuild: they are reported as staying pending, not placed pod by pod
        previewed = [group for group in work.groups if group.topology is None]
        for group in work.groups:
            if group.topology is not None:
                for member in group.pods:
                    work.held[member.name] = (
                        f"gang {group.name}: topology-aware placement is not previewed by the "
                        "dry run"
                    )
        work.groups = previewed
        strategy = make_strategy(policy.spec.scoring.strategy, policy.spec.scoring.params)
        scheduler = Scheduler.with_random_ranks(
            strategy, snapshot.node_count, np.random.default_rng(0)
        )
        queueing = policy.spec.queueing
        context = QueueContext(
            tree=queue_tree(objects.queues),
            ordering=make_ordering(queueing.ordering, queueing.params),
            rules=PreemptionRules(
                queueing.min_runtime_s, queueing.reclaim, queueing.priority_preemption
            ),
            running=running_gangs(objects.pods, snapshot),
            gangs=pending_queues(work, objects.pods),
            now_s=self._clock(),
        )
        plan = plan_cycle(scheduler, snapshot, work, np.random.default_rng(0), set(), context)
        changes: list[PlacementChange] = []
        for eviction in plan.evictions:
            changes.append(
                PlacementChange(
                    action="preempt",
                    subject=eviction.gang.name,
                    detail=f"for {eviction.by}: {eviction.reason}",
                )
            )
        for gang in plan.gangs:
            for placement in gang:
                gpus = f" GPUs {list(placement.gpu_indices)}" if placement.gpu_indices else ""
                changes.append(
                    PlacementChange(
                        action="bind",
                        subject=placement.pod,
                        detail=f"-> node {placement.node}{gpus}",
                    )
                )
        for pod, reason in sorted(plan.unplaced.items()):
            changes.append(PlacementChange(action="stay-pending", subject=pod, detail=reason))
        changes += self._power_changes(policy)
        return DryRunResult(
            policy=policy.metadata.name,
            binds=sum(len(g) for g in plan.gangs),
            pending=len(plan.unplaced),
            changes=changes,
        )

    def _power_changes(self, policy: PolicyFile) -> list[PlacementChange]:
        """The GPU settings the policy's power section would write now (one control tick)."""
        self._ready()
        caches = self._caches
        loop = PowerLoop(
            self._core,
            self._custom,
            policy.spec.power,
            PowerCaches(
                caches["nodes"], caches["pods"], caches["gpunodes"], caches["powerbudgets"]
            ),
            clock=self._clock,
            read_only=True,
        )
        loop.tick()
        changes = []
        for node, index, before, after in loop.planned:
            action: Literal["cap", "release"] = "release" if after == GpuSetting() else "cap"
            changes.append(
                PlacementChange(
                    action=action,
                    subject=f"{node}/gpu{index}",
                    detail=f"{_setting_text(before)} -> {_setting_text(after)}",
                )
            )
        return changes

    # -- PolicyHolder ----------------------------------------------------------------------

    def active(self) -> tuple[PolicyFile, str]:
        """The policy in the ConfigMap if there is one, else the one the API started with."""
        try:
            found = self._core.read_namespaced_config_map(self._configmap, self._namespace)
        except ApiException as exc:
            if exc.status == 404:
                return self._policy
            raise SourceUnavailableError(
                f"Kubernetes API: reading configmap {self._configmap}: {exc.status} {exc.reason}"
            ) from None
        except (HTTPError, OSError) as exc:
            raise SourceUnavailableError(f"Kubernetes API unreachable: {exc}") from None
        text = (found.data or {}).get(POLICY_KEY)
        if text:
            try:
                return parse_policy(text, f"configmap {self._configmap}"), text
            except PolicyError:
                pass  # a broken ConfigMap: the running policy stays the last good one
        return self._policy

    def apply(self, policy: PolicyFile, text: str) -> None:
        """Write the policy into the ConfigMap the operator reads."""
        body: Any = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": self._configmap, "namespace": self._namespace},
            "data": {POLICY_KEY: text},
        }

        def write() -> Any:
            try:
                return self._core.replace_namespaced_config_map(
                    self._configmap, self._namespace, body
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise
                return self._core.create_namespaced_config_map(self._namespace, body)

        self._call(f"configmap {self._configmap}", write)
        self._policy = (policy, text)

    # -- building views --------------------------------------------------------------------

    def _node_views(self, objects: _Objects) -> list[NodeView]:
        snapshot = build_snapshot(objects.nodes, objects.pods)
        gpunodes = {g["metadata"]["name"]: g for g in objects.gpunodes}
        users: dict[tuple[str, int], list[str]] = {}
        for pod in objects.pods:
            node_name = (pod.get("spec") or {}).get("nodeName")
            if not node_name or (pod.get("status") or {}).get("phase") in TERMINAL:
                continue
            for index in gpu_indices(pod) or ():
                users.setdefault((node_name, index), []).append(pod_key(pod))
        domain_of = {
            node: budget["metadata"]["name"]
            for budget in objects.budgets
            for node in _members(budget, objects.nodes)
        }
        views = []
        for raw in sorted(objects.nodes, key=lambda n: n["metadata"]["name"]):
            name = raw["metadata"]["name"]
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (raw.get("status") or {}).get("conditions") or []
            )
            try:
                row = snapshot.node_index(name)
            except KeyError:
                continue
            model_index = int(snapshot.node_gpu_model[row])
            model = snapshot.gpu_models[model_index] if model_index >= 0 else None
            gpus = int(snapshot.gpu_count[row])
            free_milli = snapshot.gpu_free_milli[row][:gpus]
            details = []
            status = (gpunodes.get(name) or {}).get("status") or {}
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
                        pods=users.get((name, index), []),
                        power_w=device.get("powerDrawW"),
                        clock_lock_mhz=clocks.get("maxMhz"),
                        power_limit_w=device.get("powerLimitW"),
                    )
                )
            power = [g.power_w for g in details if g.power_w is not None]
            views.append(
                NodeView(
                    name=name,
                    ready=ready,
                    gpu_model=model,
                    gpus=gpus,
                    gpus_allocated=float(gpus - free_milli.sum() / MILLI_PER_GPU),
                    cpu_milli=int(snapshot.cpu_capacity_milli[row]),
                    cpu_milli_allocated=int(
                        snapshot.cpu_capacity_milli[row] - snapshot.cpu_free_milli[row]
                    ),
                    memory_mib=int(snapshot.memory_capacity_mib[row]),
                    memory_mib_allocated=int(
                        snapshot.memory_capacity_mib[row] - snapshot.memory_free_mib[row]
                    ),
                    power_w=sum(power) if power else None,
                    power_domain=domain_of.get(name),
                    gpu_details=details,
                )
            )
        return views

    def _job_views(self, objects: _Objects) -> list[JobView]:
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for pod in objects.pods:
            spec = pod.get("spec") or {}
            if spec.get("schedulerName") != SCHEDULER_NAME:
                continue
            meta = pod["metadata"]
            group = (meta.get("annotations") or {}).get(POD_GROUP_ANNOTATION) or meta["name"]
            groups.setdefault((meta.get("namespace") or "default", group), []).append(pod)
        jobs = {
            (j["metadata"].get("namespace") or "default", j["metadata"]["name"]): j
            for j in objects.gpujobs
        }
        views = []
        for (namespace, name), pods in sorted(groups.items()):
            job = jobs.get((namespace, name))
            spec = (job or {}).get("spec") or {}
            workers = [
                _worker_view(pod, objects)
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
            views.append(
                JobView(
                    namespace=namespace,
                    name=name,
                    kind=kind,
                    queue=str(
                        spec.get("queue") or annotations.get("voltpack.io/queue") or "default"
                    ),
                    priority=int(
                        spec.get("priority") or (pods[0].get("spec") or {}).get("priority") or 0
                    ),
                    phase=phase,
                    gpus_requested=gpus,
                    workers=workers,
                    pending_reason=next((w for w in waiting if w), "waiting to be scheduled")
                    if waiting
                    else None,
                    placement_reason=next(
                        (
                            text
                            for pod in pods
                            if (
                                text := (pod["metadata"].get("annotations") or {}).get(
                                    PLACEMENT_REASON_ANNOTATION
                                )
                            )
                        ),
                        None,
                    ),
                    recovery_reason=_recovery_reason(job),
                )
            )
        return views

    def _domain_views(self, objects: _Objects, nodes: list[NodeView]) -> list[PowerDomainView]:
        power_of = {n.name: n.power_w for n in nodes}
        views = []
        for budget in objects.budgets:
            meta = budget["metadata"]
            spec = budget.get("spec") or {}
            status = budget.get("status") or {}
            members = _members(budget, objects.nodes)
            readings = [power_of.get(n) for n in members]
            measured = status.get("powerW")
            if measured is None and readings and all(r is not None for r in readings):
                measured = sum(r for r in readings if r is not None)
            budget_w = float(spec.get("budgetW") or 0.0)
            manual = (meta.get("annotations") or {}).get(MANUAL_CAP_ANNOTATION)
            manual_w = float(manual) if manual else None
            effective = min(budget_w, manual_w) if manual_w is not None else budget_w
            views.append(
                PowerDomainView(
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
            )
        return views


def _setting_text(setting: GpuSetting) -> str:
    """e.g. 'cap_power' or 'driver default'."""
    return "driver default" if setting == GpuSetting() else action_of(setting)


def _members(budget: dict[str, Any], nodes: list[dict[str, Any]]) -> list[str]:
    """Nodes whose labels match the PowerBudget's node selector."""
    wanted = ((budget.get("spec") or {}).get("nodeSelector") or {}).get("matchLabels") or {}
    return sorted(
        node["metadata"]["name"]
        for node in nodes
        if all(
            (node["metadata"].get("labels") or {}).get(key) == value
            for key, value in wanted.items()
        )
    )


def _event_moment(event: dict[str, Any]) -> datetime:
    """When an Event last happened: `eventTime` (microseconds) or `lastTimestamp` (seconds)."""
    for field in ("eventTime", "lastTimestamp", "firstTimestamp"):
        text = event.get(field)
        if text:
            try:
                return datetime.fromisoformat(str(text))
            except ValueError:
                continue
    return datetime.min.replace(tzinfo=UTC)


def latest_reasons(events: list[dict[str, Any]]) -> dict[str, str]:
    """namespace/name -> the newest FailedScheduling message for that pod."""
    latest: dict[str, tuple[datetime, str]] = {}
    for event in events:
        involved = event.get("involvedObject") or {}
        if (involved.get("kind") or "Pod") != "Pod":
            continue
        key = f"{involved.get('namespace') or 'default'}/{involved.get('name')}"
        stamp = _event_moment(event)
        if key not in latest or stamp >= latest[key][0]:
            latest[key] = (stamp, str(event.get("message") or event.get("reason") or ""))
    return {key: message for key, (_, message) in latest.items()}


def _recovery_reason(job: dict[str, Any] | None) -> str | None:
    """A GPUJob's last fault recovery and why (`status.recovery.message`, gang_recovery.py)."""
    recovery = ((job or {}).get("status") or {}).get("recovery") or {}
    return str(recovery.get("message") or "") or None


def _worker_view(pod: dict[str, Any], objects: _Objects) -> WorkerView:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    node = spec.get("nodeName")
    reason = (
        None if node else objects.pending_reasons.get(pod_key(pod), "waiting for the next cycle")
    )
    claims, devices = pod_devices(pod, objects.claims, objects.devices)
    rank = (pod["metadata"].get("annotations") or {}).get(RANK_ANNOTATION)
    return WorkerView(
        pod=pod_key(pod),
        node=node,
        gpus=list(gpu_indices(pod) or ()),
        phase=str(status.get("phase") or "Pending"),
        pending_reason=reason,
        rank=int(rank) if node and rank and rank.isdigit() else None,
        nics=list(pod_nics(pod)) if node else [],
        claims=claims,
        devices=devices,
    )
