"""The plan's writers other than bindings: moves, jobs, stragglers, evictions, statuses.

Each is a `PlanWriter` (`apply.py`); the operator runs them in order, as leader only.
"""

from __future__ import annotations

from kubernetes.client import CoreV1Api

from voltpack.model.snapshot import NO_GPU_MODEL
from voltpack.operator.inference.services import InferenceServiceController
from voltpack.operator.kube.binder import record_event
from voltpack.operator.kube.cache import ResourceCache
from voltpack.operator.power.straggler_caps import CapSlowdowns, GpuReadings, RankReadings
from voltpack.operator.scheduling.apply import CycleInput, OperatorStats
from voltpack.operator.scheduling.gang_recovery import GangRecovery
from voltpack.operator.scheduling.gang_undo import PartialGangs
from voltpack.operator.scheduling.job_history import JobHistoryRecorder
from voltpack.operator.scheduling.jobs import JobController
from voltpack.operator.scheduling.queues import QueueWriter
from voltpack.operator.scheduling.step_reports import RankReport
from voltpack.operator.scheduling.straggler_watch import StragglerWatch
from voltpack.operator.scheduling.topology_view import TopologyStatusWriter
from voltpack.operator.scheduling.training_rounds import carry_out_move
from voltpack.scheduler.session import Plan


class MoveWriter:
    """Heterogeneity-aware training: the allocation's warnings as Events, and the jobs it
    moves to another GPU model at a round boundary."""

    def __init__(self, core: CoreV1Api, stats: OperatorStats) -> None:
        self.core, self.stats = core, stats

    def apply(self, plan: Plan, cycle: CycleInput) -> None:
        for warning in cycle.hetero.warnings:
            record_event(self.core, warning.job, warning.reason, warning.message)
            self.stats.events += 1
        for planned in cycle.hetero.moves:
            carry_out_move(self.core, planned.move, planned.workers)
            self.stats.moved_jobs += 1


class JobWriter:
    """GPUJobs: gangs found partly bound undone, the session's recovery choices carried out,
    workers created
    by the job controller (told which waited last cycle, and why), the jobs' history kept."""

    def __init__(
        self,
        pods: ResourceCache,
        partial_gangs: PartialGangs,
        recovery: GangRecovery,
        controller: JobController,
        history: JobHistoryRecorder | None,
        stats: OperatorStats,
    ) -> None:
        self.pods, self.partial_gangs, self.recovery = pods, partial_gangs, recovery
        self.controller, self.history, self.stats = controller, history, stats
        self._last_unplaced: dict[str, str] = {}

    def apply(self, plan: Plan, cycle: CycleInput) -> None:
        snapshot = cycle.snapshot
        partly_bound = self.partial_gangs.cycle(cycle.pods)
        if partly_bound:
            for key in partly_bound:
                self.pods.forget(key)
            self.stats.undone_gangs += 1
        pods = cycle.pods
        if cycle.faulted is None:  # led only since the cycle began: recovery chooses alone
            worker_plans = self.recovery.cycle(
                cycle.gpujobs, pods, cycle.faults, cycle.isolation, snapshot
            )
        else:  # the session chose for the gangs prepared
            worker_plans = self.recovery.carry_out(plan.recoveries, snapshot)
        self.controller.reconcile_all(cycle.gpujobs, pods, self._last_unplaced, worker_plans)
        if self.history is not None:
            self.history.observe(cycle.gpujobs)
        self._last_unplaced = dict(plan.unplaced)


class StragglerWriter:
    """The gangs' step-time reports fed to their detectors; a Warning Event on each rank newly
    flagged (deliberate caps from the GPUNode specs discounted, the GPUs' published power draw,
    SM clock and utilisation as evidence) or report refused."""

    def __init__(
        self,
        core: CoreV1Api,
        gpunodes: ResourceCache,
        watch: StragglerWatch,
        stats: OperatorStats,
    ) -> None:
        self.core, self.gpunodes, self.watch, self.stats = core, gpunodes, watch, stats

    def apply(self, plan: Plan, cycle: CycleInput) -> None:
        snapshot = cycle.snapshot
        caps: CapSlowdowns | None = None

        def expected(report: RankReport) -> float:
            nonlocal caps
            if caps is None:  # built only in a cycle that has step-time reports to judge
                models = {
                    snapshot.node_names[row]: snapshot.gpu_models[int(model)]
                    for row, model in enumerate(snapshot.node_gpu_model)
                    if model != NO_GPU_MODEL
                }
                caps = CapSlowdowns(self.gpunodes.values(), models)
            return caps.expected(report)

        gpus: GpuReadings | None = None

        def readings(report: RankReport) -> RankReadings:
            nonlocal gpus
            if gpus is None:
                gpus = GpuReadings(self.gpunodes.values())
            return gpus.of(report)

        for notice in self.watch.update(cycle.pods, expected, readings):
            pod = cycle.by_key.get(notice.pod)
            if pod is not None:
                record_event(self.core, pod, notice.reason, notice.message)
                self.stats.events += 1


class EvictionWriter:
    """The gangs the session preempted or reclaimed: evicted whole, or an elastic gang's
    shed workers (recovery is told, so that it does not create them again at once)."""

    def __init__(self, queues: QueueWriter, recovery: GangRecovery, stats: OperatorStats) -> None:
        self.queues, self.recovery, self.stats = queues, recovery, stats

    def apply(self, plan: Plan, cycle: CycleInput) -> None:
        for eviction in plan.evictions:
            self.queues.evict(eviction, cycle.by_key)
            if eviction.shrink:
                self.recovery.shrunk_by_preemption(eviction, cycle.by_key)
            self.stats.evicted_gangs += 1


class TopologyWriter:
    """Each Topology object's status (which one is active, and why the others are not)."""

    def __init__(self, writer: TopologyStatusWriter) -> None:
        self.writer = writer

    def apply(self, plan: Plan, cycle: CycleInput) -> None:
        self.writer.write(cycle.topology_objects, cycle.topology_statuses)


class QueueStatusWriter:
    """Each Queue's status: what it holds, borrows and waits for, and the limits it reached."""

    def __init__(self, queues: QueueWriter) -> None:
        self.queues = queues

    def apply(self, plan: Plan, cycle: CycleInput) -> None:
        self.queues.write_status(cycle.tree, plan.queue_reports, cycle.queue_objects)


class InferenceWriter:
    """InferenceServices reconciled against the pods as this cycle's bindings left them."""

    def __init__(
        self,
        controller: InferenceServiceController,
        services: ResourceCache,
    ) -> None:
        self.controller, self.services = controller, services

    def apply(self, plan: Plan, cycle: CycleInput) -> None:
        self.controller.reconcile_all(
            self.services.values(),
            cycle.pods_after_binding(),
            plan.unplaced,
            synced=self.services.wait_synced(0),
            nodes=cycle.nodes,
            topology=cycle.topology,
        )
