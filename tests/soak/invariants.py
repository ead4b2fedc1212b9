"""The soak's invariants, checked on every snapshot of the cluster (read directly from the
apiserver, not through the proxy) and on every power sample of the simulated agents.

- partial gang: a gang (pod group or GPUJob) with some but not all of its `min-members` bound
  holds GPUs; allowed only while a fault is active and for `grace_s` after the last one ended
  (and for `grace_s` after it turned partial: binding a gang takes a few requests);
- bound twice: a pod (uid) whose nodeName changes, a pod the apiserver accepted two Bindings
  for (counted by the proxy), two live pods given the same GPU of a node, or a node's live pods
  asking for more GPUs than it has;
- power: a power domain whose real draw (the agents' model) is over its budget for longer
  than `power_excursion_s` (the documented latency: control interval + actuation + telemetry)
  outside faults;
- GPUJob: a job neither Running (or Succeeded) nor with a clear reason (`Scheduled` False,
  reason `Unschedulable` or `InvalidSpec`, a message) `job_bound_s` after it was created (or
  after the last fault);
- memory: the operator's RSS above `rss_limit_mib` (the chart's memory limit).
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from typing import Any

from tests.soak.world import Snapshot, gpu_indices, gpus_of, live
from voltpack.operator.kube.conventions import MIN_MEMBERS_ANNOTATION, POD_GROUP_ANNOTATION

CLEAR_REASONS = ("Unschedulable", "InvalidSpec")


@dataclass
class Fault:
    kind: str
    started_s: float
    ended_s: float | None = None
    """When the fault itself was over (component back and ready, share switched off...)."""
    recovered_s: float | None = None
    """When the system was whole again (see `faults.py`)."""
    detail: str = ""

    @property
    def recovery_s(self) -> float | None:
        if self.ended_s is None or self.recovered_s is None:
            return None
        return round(self.recovered_s - self.ended_s, 2)


class FaultLog:
    """The faults injected so far; `quiet_since(t)` is when the last one ended (inf if one is
    still on)."""

    def __init__(self) -> None:
        self.faults: list[Fault] = []
        self.lock = threading.Lock()

    def begin(self, kind: str, now_s: float, detail: str = "") -> Fault:
        fault = Fault(kind, now_s, detail=detail)
        with self.lock:
            self.faults.append(fault)
        return fault

    def quiet_since(self) -> float:
        with self.lock:
            ends = [f.ended_s if f.ended_s is not None else float("inf") for f in self.faults]
        return max(ends, default=0.0)

    def active(self) -> bool:
        return self.quiet_since() == float("inf")


@dataclass
class Violation:
    invariant: str
    at_s: float
    subject: str
    detail: str


@dataclass
class Limits:
    grace_s: float = 6.0
    """One operator cycle (1 s) + 5 s to bind a gang whole or undo it."""
    power_excursion_s: float = 6.0
    """The documented bound (actuation latency 2 s + one 1 s tick of the soak's policy) plus
    the simulated telemetry's own delays: the agents' 2 s period and the view's 1 s poll, through
    which an agent sees its GPUNode spec."""
    job_bound_s: float = 30.0
    rss_limit_mib: float = 2048.0


@dataclass
class Checker:
    faults: FaultLog
    limits: Limits
    finishing: Any
    """() -> names of gangs the workload is deleting (their members go one by one)."""
    violations: list[Violation] = field(default_factory=list)
    partial_since: dict[str, float] = field(default_factory=dict)
    partial_longest_s: float = 0.0
    reported: set[tuple[str, str]] = field(default_factory=set)
    node_of: dict[str, str] = field(default_factory=dict)
    job_seen_s: dict[str, float] = field(default_factory=dict)
    job_running_after_s: dict[str, float] = field(default_factory=dict)
    over_since: dict[str, float] = field(default_factory=dict)
    power_longest_s: float = 0.0
    power_samples_over: int = 0
    excursions: list[dict[str, Any]] = field(default_factory=list)
    """Every stretch of samples over budget: domain, from/to (s), peak W, whether a fault was
    on or within grace of it."""
    peak_over: dict[str, float] = field(default_factory=dict)
    capacity: dict[str, int] = field(default_factory=dict)
    checks: int = 0

    def _violate(self, invariant: str, t: float, subject: str, detail: str) -> None:
        if (invariant, subject) in self.reported:
            return
        self.reported.add((invariant, subject))
        self.violations.append(Violation(invariant, round(t, 2), subject, detail))

    def _allowed_until(self, since_s: float) -> float:
        return max(since_s, self.faults.quiet_since()) + self.limits.grace_s

    # -- per snapshot --------------------------------------------------------------------

    def on_snapshot(self, snapshot: Snapshot) -> None:
        self.checks += 1
        self._partial_gangs(snapshot)
        self._bound_twice(snapshot)
        self._jobs(snapshot)

    def _partial_gangs(self, snapshot: Snapshot) -> None:
        t = snapshot.t
        finishing = self.finishing()
        gangs: dict[str, list[dict[str, Any]]] = {}
        wanted: dict[str, int] = {}
        for pod in snapshot.pods:
            annotations = pod["metadata"].get("annotations") or {}
            group = annotations.get(POD_GROUP_ANNOTATION)
            if not group:
                continue
            key = f"{pod['metadata']['namespace']}/{group}"
            gangs.setdefault(key, []).append(pod)
            wanted[key] = max(wanted.get(key, 1), int(annotations.get(MIN_MEMBERS_ANNOTATION, 1)))
        partial_now = set()
        for key, pods in gangs.items():
            if key.split("/", 1)[1] in finishing or any(
                p["metadata"].get("deletionTimestamp") for p in pods
            ):
                continue
            bound = [p for p in pods if p["spec"].get("nodeName") and live(p)]
            if 0 < len(bound) < wanted[key]:
                partial_now.add(key)
                since = self.partial_since.setdefault(key, t)
                self.partial_longest_s = max(self.partial_longest_s, t - since)
                if t > self._allowed_until(since):
                    gpus = sum(gpus_of(p) for p in bound)
                    self._violate(
                        "partial-gang",
                        t,
                        key,
                        f"{len(bound)} of {wanted[key]} members bound ({gpus} GPUs held) for "
                        f"{t - since:.1f} s; last fault ended at "
                        f"{self.faults.quiet_since():.1f} s; bound: "
                        + ", ".join(
                            f"{p['metadata']['name']}@{p['spec']['nodeName']}" for p in bound
                        ),
                    )
        for key in list(self.partial_since):
            if key not in partial_now:
                del self.partial_since[key]

    def _bound_twice(self, snapshot: Snapshot) -> None:
        t = snapshot.t
        held: dict[tuple[str, int], str] = {}
        asked: dict[str, int] = {}
        for pod in snapshot.pods:
            meta = pod["metadata"]
            node = pod["spec"].get("nodeName")
            if not node:
                continue
            name = f"{meta['namespace']}/{meta['name']}"
            first = self.node_of.setdefault(meta["uid"], node)
            if first != node:
                self._violate("bound-twice", t, name, f"uid {meta['uid']} on {first}, then {node}")
            if not live(pod):
                continue
            asked[node] = asked.get(node, 0) + gpus_of(pod)
            for index in gpu_indices(pod):
                other = held.setdefault((node, index), name)
                if other != name:
                    self._violate(
                        "gpu-given-twice", t, f"{node}/gpu{index}", f"held by {other} and {name}"
                    )
        for node, gpus in asked.items():
            if gpus > self.capacity.get(node, gpus):
                self._violate(
                    "node-over-capacity",
                    t,
                    node,
                    f"live pods ask for {gpus} GPUs of {self.capacity[node]}",
                )

    def check_proxy(self, t: float, bindings_ok: dict[str, int]) -> None:
        for pod, count in bindings_ok.items():
            # a Binding without a uid is counted by namespace/name, which a pod deleted and
            # created again (a GPUJob's worker) shares with its predecessor: uids only
            if count > 1 and "/" not in pod:
                self._violate("bound-twice", t, pod, f"the apiserver accepted {count} Bindings")

    def _jobs(self, snapshot: Snapshot) -> None:
        t = snapshot.t
        finishing = self.finishing()
        for job in snapshot.jobs:
            meta = job["metadata"]
            if meta.get("deletionTimestamp") or meta["name"] in finishing:
                continue
            key = f"{meta['namespace']}/{meta['name']}"
            seen = self.job_seen_s.setdefault(key, t)
            status = job.get("status") or {}
            phase = status.get("phase")
            if phase in ("Running", "Succeeded"):
                self.job_running_after_s.setdefault(key, t - seen)
                continue
            clear = [
                c
                for c in status.get("conditions") or []
                if c.get("type") == "Scheduled"
                and c.get("status") == "False"
                and c.get("reason") in CLEAR_REASONS
                and c.get("message")
            ]
            if clear:
                continue
            if t > max(seen, self.faults.quiet_since()) + self.limits.job_bound_s:
                conditions = [
                    f"{c.get('type')}={c.get('status')} {c.get('reason')}: {c.get('message')}"
                    for c in status.get("conditions") or []
                ]
                self._violate(
                    "gpujob-no-progress",
                    t,
                    key,
                    f"phase {phase} after {t - seen:.0f} s; conditions {conditions}",
                )

    # -- power ---------------------------------------------------------------------------

    def on_power(self, t: float, domain_w: dict[str, float], budgets_w: dict[str, float]) -> None:
        for domain, budget_w in budgets_w.items():
            power_w = domain_w.get(domain, 0.0)
            if power_w <= budget_w:
                since = self.over_since.pop(domain, None)
                if since is not None and len(self.excursions) < 500:
                    self.excursions.append({
                        "domain": domain, "from_s": round(since, 1), "to_s": round(t, 1),
                        "peak_w": round(self.peak_over.pop(domain, 0.0)), "budget_w": budget_w,
                        "near_fault": self.faults.quiet_since() + self.limits.grace_s >= since,
                    })  # fmt: skip
                continue
            self.power_samples_over += 1
            self.peak_over[domain] = max(self.peak_over.get(domain, 0.0), power_w)
            since = self.over_since.setdefault(domain, t)
            self.power_longest_s = max(self.power_longest_s, t - since)
            limit = max(since, self.faults.quiet_since()) + self.limits.power_excursion_s
            if t > limit:
                self._violate(
                    "power-over-budget",
                    t,
                    domain,
                    f"{power_w:.0f} W of {budget_w:.0f} W for {t - since:.1f} s",
                )

    # -- memory --------------------------------------------------------------------------

    def on_rss(self, t: float, identity: str, rss_mib: float) -> None:
        if rss_mib > self.limits.rss_limit_mib:
            self._violate(
                "operator-memory",
                t,
                identity,
                f"RSS {rss_mib:.0f} MiB over {self.limits.rss_limit_mib:.0f} MiB",
            )

    def summary(self) -> dict[str, Any]:
        by_kind: dict[str, int] = {}
        for violation in self.violations:
            by_kind[violation.invariant] = by_kind.get(violation.invariant, 0) + 1
        return {
            "violations": len(self.violations),
            "by_invariant": by_kind,
            "details": [asdict(v) for v in self.violations],
            "snapshots_checked": self.checks,
            "longest_partial_gang_s": round(self.partial_longest_s, 2),
            "longest_power_excursion_s": round(self.power_longest_s, 2),
            "power_samples_over_budget": self.power_samples_over,
            "power_excursions": self.excursions,
            "limits": asdict(self.limits),
        }
