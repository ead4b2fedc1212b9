"""What the soak simulates around the operator: the cluster view it polls, the GPU node agents
(power draw and faults in `GPUNode` status) and the workload (pod groups and GPUJobs that
arrive, run for a while and finish). All of it talks to the apiserver directly (`Kube`)."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.soak.kube import GROUP_PATH, Kube, KubeError
from voltpack.operator.kube.conventions import (
    GPU_INDICES_ANNOTATION,
    MIN_MEMBERS_ANNOTATION,
    POD_GROUP_ANNOTATION,
)
from voltpack.perf.gpu_power import power_model_for

log = logging.getLogger(__name__)

NAMESPACE = "soak"
GPU = "nvidia.com/gpu"
RACK_LABEL = "voltpack.io/rack"
ENDED = ("Succeeded", "Failed")


def gpus_of(pod: dict[str, Any]) -> int:
    total = 0
    for container in pod["spec"].get("containers") or []:
        limits = (container.get("resources") or {}).get("limits") or {}
        total += int(limits.get(GPU, 0) or 0)
    return total


def gpu_indices(pod: dict[str, Any]) -> list[int]:
    text = (pod["metadata"].get("annotations") or {}).get(GPU_INDICES_ANNOTATION) or ""
    return [int(part) for part in text.split(",") if part.strip().isdigit()]


def live(pod: dict[str, Any]) -> bool:
    """A pod that holds (or may hold) its GPUs: not ended, not being deleted."""
    return (pod.get("status") or {}).get("phase") not in ENDED and not pod["metadata"].get(
        "deletionTimestamp"
    )


@dataclass
class Snapshot:
    t: float
    """Seconds since the soak started, when the lists were read."""
    pods: list[dict[str, Any]]
    jobs: list[dict[str, Any]]
    gpunodes: list[dict[str, Any]]
    budgets: list[dict[str, Any]]


class Clock:
    def __init__(self) -> None:
        self.start = time.monotonic()

    def __call__(self) -> float:
        return time.monotonic() - self.start


class ClusterView:
    """Polls pods, GPUJobs, GPUNodes and PowerBudgets every `period_s` and hands each
    snapshot to its subscribers (in the polling thread). A poll the apiserver does not answer
    is counted and skipped."""

    def __init__(self, kube: Kube, clock: Clock, period_s: float = 1.0) -> None:
        self.kube = kube
        self.clock = clock
        self.period_s = period_s
        self.latest: Snapshot | None = None
        self.failed_polls = 0
        self.subscribers: list[Callable[[Snapshot], None]] = []
        self.errors: list[str] = []

    def poll(self) -> Snapshot | None:
        t = self.clock()
        try:
            snapshot = Snapshot(
                t,
                self.kube.items(f"/api/v1/namespaces/{NAMESPACE}/pods"),
                self.kube.items(f"{GROUP_PATH}/namespaces/{NAMESPACE}/gpujobs"),
                self.kube.items(f"{GROUP_PATH}/gpunodes"),
                self.kube.items(f"{GROUP_PATH}/powerbudgets"),
            )
        except KubeError:
            self.failed_polls += 1
            return None
        self.latest = snapshot
        for subscriber in self.subscribers:
            try:
                subscriber(snapshot)
            except Exception as error:  # a checker's bug must not stop the others
                log.exception("soak view subscriber failed")
                self.errors.append(f"{subscriber}: {error!r}")
        return snapshot

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            started = time.monotonic()
            self.poll()
            stop.wait(max(0.0, self.period_s - (time.monotonic() - started)))


# -- agents --------------------------------------------------------------------------------


@dataclass
class NodeSpec:
    name: str
    rack: str
    gpus: int
    model: str


@dataclass
class PowerSample:
    t: float
    domain_w: dict[str, float]


class SimAgents:
    """The node agents of every GPU node in one thread: each period, every GPU's draw from the
    power model (busy: a live pod holds it, at the activity that draws TDP at max clock; idle:
    0), under the clocks and limit its GPUNode spec asks for (applied at once: the actuation
    latency is one period), written with its faults into `GPUNode` status."""

    def __init__(
        self, kube: Kube, view: ClusterView, nodes: list[NodeSpec], period_s: float = 2.0
    ) -> None:
        self.kube = kube
        self.view = view
        self.nodes = nodes
        self.period_s = period_s
        self.faults: dict[tuple[str, int], dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.samples: list[PowerSample] = []
        self.write_failures = 0
        self.listeners: list[Callable[[PowerSample], None]] = []

    def create_gpunodes(self) -> None:
        for node in self.nodes:
            body = {"apiVersion": "voltpack.io/v1alpha1", "kind": "GPUNode",
                    "metadata": {"name": node.name}, "spec": {}}  # fmt: skip
            try:
                self.kube.create(f"{GROUP_PATH}/gpunodes", body)
            except KubeError as error:
                if error.status != 409:
                    raise

    def set_fault(self, node: str, gpu: int, fault: dict[str, Any] | None) -> None:
        with self.lock:
            if fault is None:
                self.faults.pop((node, gpu), None)
            else:
                self.faults[(node, gpu)] = fault

    def tick(self) -> None:
        snapshot = self.view.latest
        if snapshot is None:
            return
        busy: dict[str, set[int]] = {}
        for pod in snapshot.pods:
            node = pod["spec"].get("nodeName")
            if node and live(pod):
                busy.setdefault(node, set()).update(gpu_indices(pod))
        specs = {g["metadata"]["name"]: (g.get("spec") or {}) for g in snapshot.gpunodes}
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        domain_w: dict[str, float] = {}
        for node in self.nodes:
            model = power_model_for(node.model)
            settings = {s["index"]: s for s in specs.get(node.name, {}).get("gpus") or []}
            devices = []
            for index in range(node.gpus):
                setting = settings.get(index) or {}
                activity = model.sustained_tdp_activity if index in busy.get(node.name, ()) else 0.0
                locked = setting.get("lockedClocks")
                clock = float(locked["maxMhz"]) if locked else model.max_clock_mhz
                limit = setting.get("powerLimitW")
                effective = model.effective_clock_mhz(clock, activity, limit)
                draw_w = float(model.power_w(activity, effective))
                if limit is not None:
                    draw_w = min(draw_w, float(limit))
                domain_w[node.rack] = domain_w.get(node.rack, 0.0) + draw_w
                with self.lock:
                    fault = self.faults.get((node.name, index))
                devices.append({
                    "index": index, "uuid": f"GPU-{node.name}-{index}", "model": node.model,
                    "memoryMib": 81_559, "health": "Unhealthy" if fault else "Healthy",
                    "powerLimitW": float(limit) if limit is not None else model.tdp_w,
                    "powerDrawW": round(draw_w, 1), "smClockMhz": round(float(effective), 1),
                    "utilizationRatio": 1.0 if activity else 0.0,
                    **({"lockedClocks": locked} if locked else {}),
                    "faults": [fault] if fault else [],
                })  # fmt: skip
            status = {
                "gpus": devices,
                "lastHeartbeatTime": now,
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "AgentReporting", "message": ""},
                    {"type": "SettingsApplied", "status": "True", "reason": "Applied",
                     "message": ""},
                ],
            }  # fmt: skip
            try:
                self.kube.merge_patch(
                    f"{GROUP_PATH}/gpunodes/{node.name}/status", {"status": status}
                )
            except KubeError:
                self.write_failures += 1
        sample = PowerSample(self.view.clock(), domain_w)
        self.samples.append(sample)
        for listener in self.listeners:
            listener(sample)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                self.tick()
            except Exception:
                log.exception("soak agents tick failed")
            stop.wait(max(0.0, self.period_s - (time.monotonic() - started)))


# -- workload ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    kind: str
    """`group` (pods with a pod-group annotation) or `job` (a GPUJob)."""
    members: int
    gpus: int
    weight: float


SHAPES = (
    Shape("group", 1, 1, 3), Shape("group", 1, 2, 2), Shape("group", 1, 4, 1),
    Shape("group", 1, 8, 1), Shape("group", 2, 4, 1), Shape("group", 4, 2, 1),
    Shape("group", 4, 1, 1), Shape("job", 2, 4, 1), Shape("job", 4, 2, 1),
    Shape("job", 2, 8, 0.5), Shape("job", 3, 1, 1),
)  # fmt: skip


@dataclass
class Gang:
    name: str
    kind: str
    members: int
    gpus: int
    created_s: float
    lifetime_s: float
    bound_s: float | None = None
    finishing_s: float | None = None
    cancelled: bool = False
    pods: list[str] = field(default_factory=list)


@dataclass
class WorkloadStats:
    gangs_created: int = 0
    pods_created: int = 0
    jobs_created: int = 0
    gangs_finished: int = 0
    gangs_cancelled: int = 0
    arrivals_deferred: int = 0
    create_failures: int = 0
    bound_uids: set[str] = field(default_factory=set)
    first_bound_s: dict[str, float] = field(default_factory=dict)


def group_pod(name: str, group: str, members: int, gpus: int) -> dict[str, Any]:
    resources = {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {GPU: str(gpus)}}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE,
                     "annotations": {POD_GROUP_ANNOTATION: group,
                                     MIN_MEMBERS_ANNOTATION: str(members)}},
        "spec": {"schedulerName": "voltpack", "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "main", "image": "soak/train:1", "resources": resources}]},
    }  # fmt: skip


def gpu_job(name: str, workers: int, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "voltpack.io/v1alpha1", "kind": "GPUJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"workers": workers, "gpusPerWorker": gpus,
                 "template": {"spec": {"containers": [{"name": "w", "image": "soak/train:1"}]}}},
    }  # fmt: skip


class Workload:
    """Gangs arrive at `pods_per_s` (Poisson; shapes from `SHAPES`), run `lifetime_s` once
    fully bound, then finish: a pod group's pods are deleted, a GPUJob is deleted (the
    operator's finalizer removes its workers). A gang not fully bound after `max_wait_s` is
    cancelled the same way. Arrivals wait while the GPUs asked for by unbound pods exceed
    `backlog_ratio` of the cluster's GPUs (so the backlog stays bounded)."""

    def __init__(
        self, kube: Kube, view: ClusterView, *, pods_per_s: float, total_gpus: int,
        lifetime_s: tuple[float, float], max_wait_s: float, seed: int,
        backlog_ratio: float = 0.5, tick_s: float = 0.25,
    ) -> None:  # fmt: skip
        self.kube = kube
        self.view = view
        self.random = random.Random(seed)
        mean_pods = sum(s.members * s.weight for s in SHAPES) / sum(s.weight for s in SHAPES)
        self.gangs_per_s = pods_per_s / mean_pods
        self.total_gpus = total_gpus
        self.lifetime_s = lifetime_s
        self.max_wait_s = max_wait_s
        self.backlog_ratio = backlog_ratio
        self.tick_s = tick_s
        self.gangs: dict[str, Gang] = {}
        self.stats = WorkloadStats()
        self.sequence = 0
        self.retired: set[str] = set()
        self.paused = threading.Event()

    def finishing(self) -> set[str]:
        """Gangs (by pod-group name) being deleted or cancelled: the checkers skip them."""
        return self.retired | {
            g.name for g in list(self.gangs.values()) if g.finishing_s is not None
        }

    def observe(self, snapshot: Any) -> None:
        """(view subscriber) bound pods, and when each gang became fully bound."""
        bound: dict[str, int] = {}
        for pod in snapshot.pods:
            if pod["spec"].get("nodeName") and live(pod):
                if pod["metadata"]["name"].startswith("canary-"):
                    continue
                uid = pod["metadata"]["uid"]
                if uid not in self.stats.bound_uids:
                    self.stats.bound_uids.add(uid)
                    self.stats.first_bound_s[uid] = snapshot.t
                group = (pod["metadata"].get("annotations") or {}).get(POD_GROUP_ANNOTATION)
                if group:
                    bound[group] = bound.get(group, 0) + 1
        for gang in list(self.gangs.values()):
            if gang.bound_s is None and bound.get(gang.name, 0) >= gang.members:
                gang.bound_s = snapshot.t

    def _backlog_gpus(self) -> int:
        snapshot = self.view.latest
        if snapshot is None:
            return 0
        pending = sum(gpus_of(p) for p in snapshot.pods if not p["spec"].get("nodeName"))
        queued_jobs = sum(
            int(j["spec"]["workers"]) * int(j["spec"]["gpusPerWorker"])
            for j in snapshot.jobs
            if ((j.get("status") or {}).get("phase") or "Pending") == "Pending"
        )
        return pending + queued_jobs // 2  # a job's workers are pods too once created

    def arrive(self, now_s: float) -> None:
        if self._backlog_gpus() > self.backlog_ratio * self.total_gpus:
            self.stats.arrivals_deferred += 1
            return
        shape = self.random.choices(SHAPES, weights=[s.weight for s in SHAPES])[0]
        self.sequence += 1
        lifetime = self.random.uniform(*self.lifetime_s)
        if shape.kind == "job":
            name = f"j{self.sequence:05d}"
            gang = Gang(name, "job", shape.members, shape.gpus, now_s, lifetime)
            try:
                self.kube.create(f"{GROUP_PATH}/namespaces/{NAMESPACE}/gpujobs",
                                 gpu_job(name, shape.members, shape.gpus))  # fmt: skip
            except KubeError:
                self.stats.create_failures += 1
                return
            self.stats.jobs_created += 1
        else:
            name = f"g{self.sequence:05d}"
            gang = Gang(name, "group", shape.members, shape.gpus, now_s, lifetime)
            for index in range(shape.members):
                pod = f"{name}-{index}"
                try:
                    self.kube.create(f"/api/v1/namespaces/{NAMESPACE}/pods",
                                     group_pod(pod, name, shape.members, shape.gpus))  # fmt: skip
                except KubeError:
                    self.stats.create_failures += 1
                    gang.finishing_s = now_s  # a gang with a member missing: take it back
                    gang.cancelled = True
                    break
                gang.pods.append(pod)
            self.stats.pods_created += len(gang.pods)
        self.gangs[name] = gang
        self.stats.gangs_created += 1

    def finish(self, gang: Gang, now_s: float) -> bool:
        """Delete the gang; True once every delete was accepted (else retried next tick)."""
        if gang.finishing_s is None:
            gang.finishing_s = now_s
        try:
            if gang.kind == "job":
                self.kube.delete(f"{GROUP_PATH}/namespaces/{NAMESPACE}/gpujobs/{gang.name}", None)
            else:
                for pod in list(gang.pods):
                    self.kube.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}")
                    gang.pods.remove(pod)
        except KubeError:
            return False
        return True

    def tick(self, now_s: float, dt_s: float) -> None:
        if not self.paused.is_set():
            arrivals = _poisson(self.random, self.gangs_per_s * dt_s)
            for _ in range(arrivals):
                self.arrive(now_s)
        for gang in list(self.gangs.values()):
            done = gang.bound_s is not None and now_s - gang.bound_s >= gang.lifetime_s
            stuck = gang.bound_s is None and now_s - gang.created_s >= self.max_wait_s
            if (gang.cancelled or done or stuck) and self.finish(gang, now_s):
                self.retired.add(gang.name)
                del self.gangs[gang.name]
                if done:
                    self.stats.gangs_finished += 1
                else:
                    self.stats.gangs_cancelled += 1

    def run(self, stop: threading.Event, clock: Clock) -> None:
        last = clock()
        while not stop.is_set():
            now = clock()
            try:
                self.tick(now, now - last)
            except Exception:
                log.exception("soak workload tick failed")
            last = now
            stop.wait(self.tick_s)


def _poisson(rng: random.Random, mean: float) -> int:
    count, threshold, product = 0, pow(2.718281828459045, -mean), rng.random()
    while product > threshold:
        count += 1
        product *= rng.random()
    return count
