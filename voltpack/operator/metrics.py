"""The operator's Prometheus metrics: scheduling work, GPUs allocated by model, fragmentation,
Dynamic Resource Allocation devices by driver, kind and state.

Read from the last scheduling cycle, or for DRA devices from the operator's watch-fed caches
(no extra API calls on a scrape). Names follow the Prometheus conventions: base units,
`_total` counters.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.workload import Pod
from voltpack.operator.dra.figures import DeviceCountKey, dra_device_counts
from voltpack.operator.kube.conventions import (
    IDEAL_STEP_ANNOTATION,
    POD_GROUP_ANNOTATION,
    PREDICTED_STEP_ANNOTATION,
)
from voltpack.operator.power.metrics import PowerCollector
from voltpack.policies.fragmentation import FragmentationModel, TypicalPods


@dataclass
class ClusterFigures:
    """What the last cycle saw, kept for scrapes."""

    gpus_by_model: dict[str, float] = field(default_factory=dict)
    allocated_gpus_by_model: dict[str, float] = field(default_factory=dict)
    pending_pods: int = 0
    oldest_pending_s: float = 0.0
    fragmented_gpus: float = 0.0
    idle_gpus: float = 0.0
    cycle_duration_s: float = 0.0
    updated_at_s: float = 0.0
    domain_budgets_w: dict[str, float] = field(default_factory=dict)
    domain_nodes: dict[str, list[str]] = field(default_factory=dict)
    job_step_slowdown: dict[str, float] = field(default_factory=dict)
    """Per placed training gang (`namespace/group`), predicted over ideal step time."""


def cluster_figures(
    snapshot: ClusterSnapshot,
    workload: list[Pod],
    pending_created_s: list[float],
    now_s: float,
    cycle_duration_s: float,
) -> ClusterFigures:
    """Per-model GPU totals and allocations, pending work, and fragmentation of the snapshot.

    Fragmentation is measured against the shapes of `workload` (the pods the cluster holds and
    waits for): the expected idle GPU capacity those shapes could not use.
    """
    figures = ClusterFigures(cycle_duration_s=cycle_duration_s, updated_at_s=now_s)
    for index, model in enumerate(snapshot.gpu_models):
        rows = snapshot.node_gpu_model == index
        total = float(snapshot.gpu_count[rows].sum())
        free = float(snapshot.gpu_free_milli[rows].sum()) / MILLI_PER_GPU
        figures.gpus_by_model[model] = total
        figures.allocated_gpus_by_model[model] = total - free
    figures.pending_pods = len(pending_created_s)
    figures.oldest_pending_s = max((now_s - t for t in pending_created_s), default=0.0)
    figures.idle_gpus = float(snapshot.gpu_free_milli.sum()) / MILLI_PER_GPU
    if workload and snapshot.node_count:
        measure = FragmentationModel(TypicalPods.from_pods(workload), snapshot.gpu_models)
        rows = np.arange(snapshot.node_count)
        figures.fragmented_gpus = float(measure.snapshot_frag_milli(snapshot, rows).sum()) / 1000
    return figures


class OperatorCollector(Collector):
    """Exports an operator's counters and its last `ClusterFigures`."""

    def __init__(self, source: Any) -> None:
        self.source = source  # an Operator: `.stats`, `.figures` and `.dra` (its DRA caches)
        self._dra_counts: tuple[tuple[int, int], dict[DeviceCountKey, int]] = ((-1, -1), {})
        """The DRA device counts and the cache generations they were counted at."""

    def dra_devices(self) -> dict[DeviceCountKey, int]:
        """Published DRA devices by (driver, kind, state), counted again only when the
        operator's ResourceSlice or ResourceClaim cache changed."""
        dra = getattr(self.source, "dra", None)
        if dra is None:
            return {}
        generations = (dra.slices.generation, dra.claims.generation)
        if self._dra_counts[0] != generations:
            counts = dra_device_counts(dra.slices.values(), dra.claims.values())
            self._dra_counts = (generations, counts)
        return self._dra_counts[1]

    def collect(self) -> Iterator[Metric]:
        stats = self.source.stats
        figures: ClusterFigures = self.source.figures
        yield CounterMetricFamily(
            "voltpack_scheduler_cycles", "Scheduling cycles run.", value=stats.cycles
        )
        yield CounterMetricFamily(
            "voltpack_scheduler_pods_bound", "Pods bound by this replica.", value=stats.bound
        )
        yield CounterMetricFamily(
            "voltpack_scheduler_bind_failures",
            "Bindings the API server refused.",
            value=stats.bind_failures,
        )
        yield GaugeMetricFamily(
            "voltpack_scheduler_leader",
            "1 while this replica holds the leader Lease.",
            value=1.0 if self.source.elector.is_leader() else 0.0,
        )
        yield GaugeMetricFamily(
            "voltpack_scheduler_pending_pods",
            "Pods waiting for voltpack at the last cycle.",
            value=figures.pending_pods,
        )
        yield GaugeMetricFamily(
            "voltpack_scheduler_oldest_pending_seconds",
            "How long the oldest pending pod has waited.",
            value=figures.oldest_pending_s,
        )
        yield GaugeMetricFamily(
            "voltpack_scheduler_cycle_duration_seconds",
            "Wall time of the last scheduling cycle.",
            value=figures.cycle_duration_s,
        )
        pauses = getattr(self.source, "gc_pauses", None)
        if pauses is not None:
            gc_seconds = CounterMetricFamily(
                "voltpack_operator_gc_pause_seconds",
                "Time Python's cyclic garbage collector held the process, by generation.",
                labels=["generation"],
            )
            for generation, seconds in enumerate(pauses.seconds):
                gc_seconds.add_metric([str(generation)], seconds)
            yield gc_seconds
        total = GaugeMetricFamily(
            "voltpack_cluster_gpus", "GPUs in the cluster by model.", labels=["model"]
        )
        allocated = GaugeMetricFamily(
            "voltpack_cluster_gpus_allocated",
            "GPUs allocated to pods by model (shares count as fractions).",
            labels=["model"],
        )
        for model, count in sorted(figures.gpus_by_model.items()):
            total.add_metric([model], count)
            allocated.add_metric([model], figures.allocated_gpus_by_model.get(model, 0.0))
        yield total
        yield allocated
        budgets = GaugeMetricFamily(
            "voltpack_power_domain_budget_watts",
            "Power budget of each power domain (PowerBudget).",
            labels=["domain"],
        )
        members = GaugeMetricFamily(
            "voltpack_power_domain_node_info",
            "1 for each node of each power domain.",
            labels=["domain", "node"],
        )
        for domain, budget_w in sorted(figures.domain_budgets_w.items()):
            budgets.add_metric([domain], budget_w)
            for node in figures.domain_nodes.get(domain, []):
                members.add_metric([domain, node], 1.0)
        yield budgets
        yield members
        slowdown = GaugeMetricFamily(
            "voltpack_job_predicted_step_slowdown_ratio",
            "Predicted step time of a topology-placed training job over its ideal placement's.",
            labels=["gang"],
        )
        for job, ratio in sorted(figures.job_step_slowdown.items()):
            slowdown.add_metric([job], ratio)
        yield slowdown
        devices = GaugeMetricFamily(
            "voltpack_dra_devices",
            "Devices published in ResourceSlices by driver, kind (gpu, nic, other) and state "
            "(allocated to a ResourceClaim by any scheduler, or free).",
            labels=["driver", "kind", "state"],
        )
        for (driver, kind, state), count in sorted(self.dra_devices().items()):
            devices.add_metric([driver, kind, state], count)
        yield devices
        yield GaugeMetricFamily(
            "voltpack_cluster_gpu_fragmentation_gpus",
            "Expected idle GPU capacity the current workload's pod shapes cannot use.",
            value=figures.fragmented_gpus,
        )
        yield GaugeMetricFamily(
            "voltpack_cluster_gpu_fragmentation_ratio",
            "Fragmented share of the idle GPU capacity.",
            value=figures.fragmented_gpus / figures.idle_gpus if figures.idle_gpus else 0.0,
        )


class InferenceCollector(Collector):
    """Exports each InferenceService's plan: predicted cost, planned replicas by GPU type and
    role, the planning rate, the SLO attainment a metrics adapter reported and the one the
    planner predicts."""

    def __init__(self, source: Any) -> None:
        self.source = source  # an Operator: `.inference.figures`

    def collect(self) -> Iterator[Metric]:
        controller = getattr(self.source, "inference", None)
        figures = dict(controller.figures) if controller is not None else {}
        cost = GaugeMetricFamily(
            "voltpack_inference_service_predicted_cost_usd_per_hour",
            "Predicted price of an InferenceService's planned GPUs, USD per hour.",
            labels=["service"],
        )
        replicas = GaugeMetricFamily(
            "voltpack_inference_service_planned_replicas",
            "Replicas of an InferenceService's plan by GPU type and role.",
            labels=["service", "gpu_type", "role"],
        )
        rate = GaugeMetricFamily(
            "voltpack_inference_service_planning_rate_requests_per_second",
            "Request rate the InferenceService's plan in effect was made for.",
            labels=["service"],
        )
        attainment = GaugeMetricFamily(
            "voltpack_inference_service_slo_attainment_ratio",
            "Share of an InferenceService's requests within both SLOs, as measured and "
            "reported in its voltpack.io/observed-slo-attainment annotation.",
            labels=["service"],
        )
        predicted = GaugeMetricFamily(
            "voltpack_inference_service_predicted_slo_attainment_ratio",
            "Share of an InferenceService's requests within both SLOs that the planner "
            "predicts for the plan in effect.",
            labels=["service"],
        )
        for service, figure in sorted(figures.items()):
            if figure.cost_per_hour is not None:
                cost.add_metric([service], figure.cost_per_hour)
            for (gpu_type, role), count in sorted(figure.replicas.items()):
                replicas.add_metric([service, gpu_type, role], count)
            if figure.planning_rate_per_s is not None:
                rate.add_metric([service], figure.planning_rate_per_s)
            if figure.slo_attainment is not None:
                attainment.add_metric([service], figure.slo_attainment)
            if figure.predicted_slo_attainment is not None:
                predicted.add_metric([service], figure.predicted_slo_attainment)
        yield cost
        yield replicas
        yield rate
        yield attainment
        yield predicted


class MetricsServer:
    """Serves an operator's metrics (scheduling, power, inference services) on `/metrics`
    from a thread."""

    def __init__(self, source: Any, host: str = "0.0.0.0", port: int = 0) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(OperatorCollector(source))
        self.registry.register(PowerCollector(source))
        self.registry.register(InferenceCollector(source))
        self._server, self._thread = start_http_server(port, host, registry=self.registry)
        self.port = int(self._server.server_port)

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def step_slowdowns(pods: list[dict[str, Any]]) -> dict[str, float]:
    """Predicted over ideal step time per gang, from what voltpack wrote on its bound, still
    active pods (so a job's series goes when its pods go, and survives a failover)."""
    ratios: dict[str, float] = {}
    for pod in pods:
        meta = pod["metadata"]
        annotations = meta.get("annotations") or {}
        if PREDICTED_STEP_ANNOTATION not in annotations or not (pod.get("spec") or {}).get(
            "nodeName"
        ):
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        try:
            predicted = float(annotations[PREDICTED_STEP_ANNOTATION])
            ideal = float(annotations.get(IDEAL_STEP_ANNOTATION, ""))
        except ValueError:
            continue
        if not (ideal > 0 and predicted > 0):
            continue
        group = annotations.get(POD_GROUP_ANNOTATION) or meta["name"]
        ratios[f"{meta.get('namespace') or 'default'}/{group}"] = predicted / ideal
    return ratios


def now_s() -> float:
    """Wall clock in Unix seconds (pod ages are measured against creation timestamps)."""
    return time.time()


def power_domains(
    budgets: list[dict[str, Any]], nodes: list[dict[str, Any]]
) -> tuple[dict[str, float], dict[str, list[str]]]:
    """Each PowerBudget's budget and the nodes its label selector picks."""
    budget_w: dict[str, float] = {}
    members: dict[str, list[str]] = {}
    for budget in budgets:
        name = budget["metadata"]["name"]
        spec = budget.get("spec") or {}
        try:
            budget_w[name] = float(spec["budgetW"])
        except (KeyError, TypeError, ValueError):
            continue
        wanted = ((spec.get("nodeSelector") or {}).get("matchLabels")) or {}
        members[name] = sorted(
            node["metadata"]["name"]
            for node in nodes
            if all(
                (node["metadata"].get("labels") or {}).get(key) == value
                for key, value in wanted.items()
            )
        )
    return budget_w, members
