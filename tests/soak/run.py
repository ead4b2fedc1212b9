"""One soak run: a restartable control plane with kwok nodes, the fault proxy, the operator as
a process behind it, simulated GPU agents with PowerBudgets per rack, a workload of pod groups
and GPUJobs, the fault injector and the invariant checkers; returns the figures and the
violations (`run_soak`)."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.integration.backends import RealCluster
from tests.k8s_control_plane import ADMIN_USER, KWOK_NODE_ANNOTATION
from tests.soak.faults import KINDS, LEASE_PATH, Injector, OperatorProcess, Timings, sample_rss
from tests.soak.invariants import Checker, FaultLog, Limits
from tests.soak.kube import GROUP_PATH, Kube, KubeError
from tests.soak.plane import restartable_plane
from tests.soak.proxy import running_proxy
from tests.soak.world import (
    NAMESPACE,
    RACK_LABEL,
    Clock,
    ClusterView,
    NodeSpec,
    PowerSample,
    SimAgents,
    Workload,
)
from voltpack.emulator.nodes import EMULATED_ANNOTATION, node_object
from voltpack.model import Node
from voltpack.perf.gpu_power import power_model_for

log = logging.getLogger(__name__)

GPU_MODEL = "H100-SXM"
POLICY = """\
apiVersion: voltpack.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: soak}
spec:
  scoring: {strategy: best-fit}
  power:
    policy: thresholds
    params:
      thresholds: [0.8, 0.95]
      release_margin: 0.05
      hold_s: 10
      low_priority_rungs: [0, 1, 2]
      high_priority_rungs: [0, 0, 1]
    interval_s: 1
    actuation_latency_s: 2
    stale_after_s: 15
"""


@dataclass
class SoakConfig:
    duration_s: float = 600.0
    nodes: int = 32
    nodes_per_rack: int = 8
    gpus_per_node: int = 8
    pods_per_s: float = 4.0
    lifetime_s: tuple[float, float] = (20.0, 60.0)
    max_wait_s: float = 120.0
    budget_ratio: float = 0.75
    """Each rack's budget as a share of its GPUs' TDP (so the power loop has work)."""
    lease_s: int = 5
    seed: int = 42
    kinds: tuple[str, ...] = KINDS
    timings: Timings = field(default_factory=Timings)
    limits: Limits = field(default_factory=Limits)
    view_period_s: float = 1.0
    agent_period_s: float = 2.0


def _kubeconfig(server: str, token: str) -> str:
    return json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "soak", "cluster": {"server": server}}],
        "users": [{"name": ADMIN_USER, "user": {"token": token}}],
        "contexts": [{"name": "soak", "context": {"cluster": "soak", "user": ADMIN_USER}}],
        "current-context": "soak",
    })  # fmt: skip


def _create_nodes(kube: Kube, config: SoakConfig) -> list[NodeSpec]:
    specs = []
    now = datetime.now(UTC)
    for index in range(config.nodes):
        rack = f"r{index // config.nodes_per_rack}"
        node = Node.empty(f"soak-{index:03d}", 128_000, 1_048_576, config.gpus_per_node, GPU_MODEL)
        body = node_object(node, now)
        body["metadata"]["annotations"].pop(EMULATED_ANNOTATION, None)
        body["metadata"]["annotations"][KWOK_NODE_ANNOTATION] = "fake"
        body["metadata"]["labels"][RACK_LABEL] = rack
        kube.create("/api/v1/nodes", body)
        specs.append(NodeSpec(node.name, rack, config.gpus_per_node, GPU_MODEL))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready = {
            n["metadata"]["name"]
            for n in kube.items("/api/v1/nodes")
            if any(c["type"] == "Ready" and c["status"] == "True"
                   for c in (n.get("status") or {}).get("conditions") or [])
        }  # fmt: skip
        if len(ready) >= config.nodes:
            return specs
        time.sleep(0.5)
    raise RuntimeError("kwok did not make every soak node Ready within 120 s")


def _budgets(kube: Kube, nodes: list[NodeSpec], ratio: float) -> dict[str, float]:
    racks: dict[str, float] = {}
    for node in nodes:
        racks[node.rack] = racks.get(node.rack, 0.0) + node.gpus * power_model_for(node.model).tdp_w
    budgets = {}
    for rack, tdp_w in racks.items():
        budget_w = round(tdp_w * ratio)
        kube.create(f"{GROUP_PATH}/powerbudgets", {
            "apiVersion": "voltpack.io/v1alpha1", "kind": "PowerBudget",
            "metadata": {"name": f"rack-{rack}"},
            "spec": {"nodeSelector": {"matchLabels": {RACK_LABEL: rack}}, "budgetW": budget_w},
        })  # fmt: skip
        budgets[rack] = float(budget_w)
    return budgets


def _per_minute(times: list[float], start_s: float, end_s: float) -> list[float]:
    """Pods bound per second in each whole minute of [start_s, end_s)."""
    rates = []
    minute = start_s
    while minute + 60 <= end_s:
        rates.append(sum(1 for t in times if minute <= t < minute + 60) / 60)
        minute += 60
    return rates


def run_soak(config: SoakConfig, workdir: Path) -> dict[str, Any]:
    """Run the soak; every log stays in `workdir`."""
    workdir.mkdir(parents=True, exist_ok=True)
    with restartable_plane(keep_dir=workdir / "plane") as plane:
        cluster = RealCluster(plane.control_plane())
        for namespace in ("voltpack-system", NAMESPACE):
            cluster.ensure_namespace(namespace)
        cluster.install_crds()
        kube = Kube(plane.url, plane.token, plane.ca_file)
        nodes = _create_nodes(kube, config)
        budgets_w = _budgets(kube, nodes, config.budget_ratio)
        with running_proxy(plane.url, plane.ca_file, seed=config.seed) as proxy:
            kubeconfig = workdir / "operator.kubeconfig"
            kubeconfig.write_text(_kubeconfig(proxy.url, plane.token))
            policy = workdir / "soak-policy.yaml"
            policy.write_text(POLICY)
            return _run(config, workdir, plane, kube, nodes, budgets_w, proxy, kubeconfig, policy)


def _run(
    config: SoakConfig, workdir: Path, plane: Any, kube: Kube, nodes: list[NodeSpec],
    budgets_w: dict[str, float], proxy: Any, kubeconfig: Path, policy: Path,
) -> dict[str, Any]:  # fmt: skip
    clock = Clock()
    faults = FaultLog()
    view = ClusterView(kube, clock, config.view_period_s)
    agents = SimAgents(kube, view, nodes, config.agent_period_s)
    agents.create_gpunodes()
    total_gpus = sum(n.gpus for n in nodes)
    workload = Workload(
        kube, view, pods_per_s=config.pods_per_s, total_gpus=total_gpus,
        lifetime_s=config.lifetime_s, max_wait_s=config.max_wait_s, seed=config.seed,
    )  # fmt: skip
    checker = Checker(faults, config.limits, workload.finishing)
    checker.capacity = {n.name: n.gpus for n in nodes}
    view.subscribers += [workload.observe, checker.on_snapshot]
    agents.listeners.append(lambda s: checker.on_power(s.t, s.domain_w, budgets_w))
    operator = OperatorProcess(kubeconfig, policy, workdir, config.lease_s)
    operator.start()
    injector = Injector(plane, proxy, operator, agents, view, checker, faults, kube, clock, nodes,
                        timings=config.timings, seed=config.seed, kinds=config.kinds)  # fmt: skip
    injector._wait_leader(operator.identity, 120)
    clock.start = time.monotonic()  # every time in the results counts from here
    started_s = 0.0
    load: list[tuple[float, float]] = []
    crashes: list[str] = []
    stop, stop_faults = threading.Event(), threading.Event()
    threads = [
        threading.Thread(target=view.run, args=(stop,), name="view"),
        threading.Thread(target=agents.run, args=(stop,), name="agents"),
        threading.Thread(target=workload.run, args=(stop, clock), name="workload"),
        threading.Thread(target=sample_rss, args=(operator, checker, clock, stop), name="rss"),
    ]
    injector_thread = threading.Thread(
        target=injector.run, args=(stop_faults, started_s + config.duration_s), name="injector"
    )
    for thread in [*threads, injector_thread]:
        thread.start()
    try:
        end_s = started_s + config.duration_s
        while clock() < end_s:
            time.sleep(1.0)
            load.append((round(clock(), 1), os.getloadavg()[0]))
            status = operator.died()
            if status is not None and injector_thread.is_alive() and not _being_killed(faults):
                crashes.append(f"{operator.identity} exited with {status} at {clock():.0f} s")
                checker._violate("operator-crash", clock(), operator.identity,
                                 f"exited on its own with status {status}")  # fmt: skip
                operator.start()
        workload.paused.set()
        stop_faults.set()
        injector_thread.join(timeout=300)
        checker.check_proxy(clock(), dict(proxy.stats.bindings_ok))
        time.sleep(2 * config.view_period_s)  # a last look after the last fault
    finally:
        stop.set()
        stop_faults.set()
        for thread in threads:
            thread.join(timeout=60)
        exit_status = operator.stop()
    ended_s = clock()
    bound_times = [t for uid, t in workload.stats.first_bound_s.items() if t >= started_s]
    rates = _per_minute(bound_times, started_s, started_s + config.duration_s)
    rss = [value for _, _, value in operator.rss]
    return {
        "config": {**asdict(config), "timings": asdict(config.timings)},
        "duration_s": round(ended_s - started_s, 1),
        "cluster": {
            "nodes": len(nodes),
            "gpus": total_gpus,
            "racks": len(budgets_w),
            "budgets_w": budgets_w,
        },
        "workload": {
            "gangs_created": workload.stats.gangs_created,
            "pods_created_directly": workload.stats.pods_created,
            "gpujobs_created": workload.stats.jobs_created,
            "gangs_finished": workload.stats.gangs_finished,
            "gangs_cancelled": workload.stats.gangs_cancelled,
            "arrivals_deferred_for_backlog": workload.stats.arrivals_deferred,
            "create_failures": workload.stats.create_failures,
            "pods_bound": len(bound_times),
            "pods_per_s": round(len(bound_times) / config.duration_s, 2),
            "pods_per_s_by_minute": [round(r, 2) for r in rates],
            "pods_per_s_worst_minute": round(min(rates), 2) if rates else None,
        },
        "faults": [
            {
                **asdict(f),
                "recovery_s": f.recovery_s,
                "started_s": round(f.started_s - started_s, 1),
                "ended_s": None if f.ended_s is None else round(f.ended_s - started_s, 1),
                "recovered_s": None
                if f.recovered_s is None
                else round(f.recovered_s - started_s, 1),
            }
            for f in faults.faults
        ],
        "faults_by_kind": _by_kind(faults),
        "proxy": {
            "requests": proxy.stats.requests,
            "bindings": proxy.stats.bindings,
            "bindings_failed_before": proxy.stats.bindings_failed_before,
            "bindings_failed_after": proxy.stats.bindings_failed_after,
            "watches_opened": proxy.stats.watches_opened,
            "watches_dropped": proxy.stats.watches_dropped,
            "watches_expired": proxy.stats.watches_expired,
            "upstream_errors": proxy.stats.upstream_errors,
        },
        "operator": {
            "incarnations": operator.incarnation,
            "peak_rss_mib": round(max(rss), 1) if rss else None,
            "rss_growth": _rss_growth(operator.rss),
            "crashes": crashes,
            "final_exit_status": exit_status,
            "tracebacks": _tracebacks(operator.logs()),
        },
        "load_average_1m": {
            "mean": round(sum(v for _, v in load) / len(load), 2) if load else None,
            "max": round(max(v for _, v in load), 2) if load else None,
        },
        "view": {"failed_polls": view.failed_polls, "subscriber_errors": view.errors[:5]},
        "agents": {
            "status_write_failures": agents.write_failures,
            "peak_domain_w": _peak_domains(agents.samples),
        },
        "invariants": checker.summary(),
    }


def _being_killed(faults: FaultLog) -> bool:
    with faults.lock:
        last = faults.faults[-1] if faults.faults else None
    return last is not None and last.kind == "operator-kill" and last.ended_s is None


def _by_kind(faults: FaultLog) -> dict[str, Any]:
    kinds: dict[str, dict[str, Any]] = {}
    for fault in faults.faults:
        entry = kinds.setdefault(fault.kind, {"count": 0, "recovery_s": [], "not_recovered": 0})
        entry["count"] += 1
        if fault.recovery_s is None:
            entry["not_recovered"] += 1
        else:
            entry["recovery_s"].append(fault.recovery_s)
    for entry in kinds.values():
        values = entry["recovery_s"]
        entry["recovery_max_s"] = max(values) if values else None
    return kinds


def _rss_growth(samples: list[tuple[float, int, float]]) -> dict[str, Any]:
    """Per incarnation: RSS at a quarter of its life and at its end, and the slope between
    (MiB/min); `flag` when the longest-lived one grew by more than 25% over that span."""
    lives: dict[int, list[tuple[float, float]]] = {}
    for t, incarnation, value in samples:
        lives.setdefault(incarnation, []).append((t, value))
    longest = max(lives.values(), key=lambda s: s[-1][0] - s[0][0], default=[])
    if len(longest) < 8:
        return {"flag": False, "note": "too few samples"}
    quarter = longest[len(longest) // 4]
    last = longest[-1]
    minutes = max((last[0] - quarter[0]) / 60, 1e-9)
    growth = (last[1] - quarter[1]) / quarter[1]
    return {
        "longest_life_s": round(longest[-1][0] - longest[0][0], 1),
        "rss_at_quarter_mib": round(quarter[1], 1),
        "rss_at_end_mib": round(last[1], 1),
        "slope_mib_per_min": round((last[1] - quarter[1]) / minutes, 2),
        "flag": growth > 0.25,
    }


def _peak_domains(samples: list[PowerSample]) -> dict[str, float]:
    peaks: dict[str, float] = {}
    for sample in samples:
        for domain, watts in sample.domain_w.items():
            peaks[domain] = round(max(peaks.get(domain, 0.0), watts), 1)
    return peaks


def _tracebacks(logs: list[Path]) -> list[str]:
    found = []
    for path in logs:
        text = path.read_text(errors="replace")
        if "Traceback" in text:
            at = text.index("Traceback")
            found.append(f"{path.name}: {text[at : at + 600]}")
    return found[:5]


__all__ = ["LEASE_PATH", "KubeError", "SoakConfig", "run_soak"]
