"""The operator process: caches, leader election, the scheduling loop and the power loop.

Level-triggered: every cycle starts from the caches (the cluster as it is), so after a crash or
a failover a new leader simply carries on; nothing lives only in memory except the Event
de-duplication, the strategy's observed workload and the InferenceServices' measured-rate
histories (inference_rates.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from kubernetes.client import (
    ApiClient,
    CoordinationV1Api,
    CoreV1Api,
    CustomObjectsApi,
    PolicyV1Api,
    StorageV1Api,
)

from voltpack.model.errors import InvalidRequestError, VoltpackError
from voltpack.model.resources import API_GROUP, API_VERSION
from voltpack.model.snapshot import NO_GPU_MODEL, ClusterSnapshot
from voltpack.model.work import PendingWork
from voltpack.operator.dra.support import ClaimReserver, DraSupport
from voltpack.operator.heap import GcPauses, HeapKeeper
from voltpack.operator.inference.services import InferenceServiceController
from voltpack.operator.kube.async_post import AsyncPoster, attach
from voltpack.operator.kube.cache import ResourceCache, older_pod
from voltpack.operator.kube.conventions import (
    SERVED_SCHEDULERS,
)
from voltpack.operator.kube.event_queue import EventQueue
from voltpack.operator.kube.leader import LeaderElector
from voltpack.operator.kube.node_facts import node_facts_from_k8s
from voltpack.operator.kube.policy_reload import PolicyWatcher
from voltpack.operator.kube.same_object_memo import SameObjectMemo
from voltpack.operator.kube.setup_problems import served_voltpack_plurals, setup_log_for
from voltpack.operator.kube.translate import node_from_k8s, pod_from_k8s, pod_key
from voltpack.operator.metrics import (
    ClusterFigures,
    MetricsServer,
    cluster_figures,
    now_s,
    power_domains,
    step_slowdowns,
)
from voltpack.operator.power.loop import PowerCaches, PowerLoop
from voltpack.operator.scheduling.apply import CycleInput, OperatorStats, PlanWriter
from voltpack.operator.scheduling.binding_writer import BindingWriter, PendingEventWriter
from voltpack.operator.scheduling.cluster_view import build_snapshot, pending_work
from voltpack.operator.scheduling.gang_recovery import GangRecovery
from voltpack.operator.scheduling.gang_undo import PartialGangs
from voltpack.operator.scheduling.gpu_faults import gpu_faults, isolation_of
from voltpack.operator.scheduling.hetero import HeteroAllocator, HeteroCycle
from voltpack.operator.scheduling.job_history import JobHistoryRecorder
from voltpack.operator.scheduling.jobs import JobController
from voltpack.operator.scheduling.nominations import awaiting_victims
from voltpack.operator.scheduling.queues import (
    QueueWriter,
    pending_queues,
    queue_tree,
    running_gangs,
)
from voltpack.operator.scheduling.straggler_watch import StragglerWatch
from voltpack.operator.scheduling.topology_view import (
    GpuNodeLayouts,
    TopologyCycle,
    TopologyStatusWriter,
    hold_topology_gangs,
    make_placer,
    running_topology_gangs,
    topology_cycle,
)
from voltpack.operator.scheduling.volumes import VolumeView
from voltpack.operator.scheduling.wakeups import CycleWakeups
from voltpack.operator.scheduling.writers import (
    EvictionWriter,
    InferenceWriter,
    JobWriter,
    MoveWriter,
    QueueStatusWriter,
    StragglerWriter,
    TopologyWriter,
)
from voltpack.policies.fair_share import make_ordering
from voltpack.policies.registry import make_strategy
from voltpack.policies.schema import PolicyFile
from voltpack.scheduler.fault_recovery import recovery_policy
from voltpack.scheduler.placement import Scheduler
from voltpack.scheduler.preemption import PreemptionRules
from voltpack.scheduler.queue_cycle import snapshot_capacity
from voltpack.scheduler.session import Plan, SessionQueues, decide
from voltpack.store import BufferedStore, DecisionRecord, RetentionSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OperatorConfig:
    """How one operator replica runs."""

    policy: PolicyFile
    identity: str
    namespace: str = "voltpack-system"
    lease_name: str = "voltpack-scheduler"
    seed: int = 0
    cycle_interval_s: float = 1.0
    lease_duration_s: int = 15
    bind_workers: int = 16
    """Gangs bound at once (each gang's pods one after another), as kube-scheduler's 16."""
    metrics_port: int | None = None
    """Serve Prometheus metrics on this port (0: any free one; None: do not serve)."""
    power: bool = True
    """Run the power loop (as leader): keep PowerBudgets under budget via GPUNode specs."""
    power_interval_s: float | None = None
    """Power-loop interval; None: the policy file's `spec.power.interval_s`."""
    policy_configmap: str | None = "voltpack-policy"
    """ConfigMap (in `namespace`) the admin API applies policies to; None: do not watch."""
    policy_refresh_s: float = 5.0
    database_url: str | None = None
    """Record decisions and power in this database (voltpack.store); None: keep no history."""
    retention: RetentionSettings = field(default_factory=RetentionSettings)
    """How long the history keeps each kind of record; applied hourly by the leader."""
    scheduler_names: frozenset[str] = SERVED_SCHEDULERS
    """The `schedulerName`s whose pods this operator places (add `default-scheduler` to replace
    kube-scheduler)."""
    freeze_heap: bool = False
    """Freeze what outlives each cycle out of the cyclic collector's reach
    (`voltpack.operator.heap`): on in the `voltpack operator` process; off where the operator
    runs inside another program's process (the tests), whose heap is not its own."""


class Operator:
    """One replica; only the Lease holder writes bindings and Events."""

    def __init__(
        self,
        api_client: ApiClient,
        config: OperatorConfig,
        power_clock: Callable[[], float] = time.time,
    ) -> None:
        """`power_clock`: Unix seconds for the power loop (injected by tests)."""
        self.config = config
        self.setup = setup_log_for(str(api_client.configuration.host))
        """Setup problems (no namespace, CRDs, permission, API server), each said once."""
        self.core = CoreV1Api(api_client)
        self.poster = AsyncPoster.for_client(api_client)
        """Bindings and Events posted over aiohttp (`kube/async_post.py`); None: the client's."""
        attach(api_client, self.poster)
        self.nodes = ResourceCache("nodes", self.core.list_node, self.setup)
        self.namespaces = ResourceCache("namespaces", self.core.list_namespace, self.setup)
        """Namespace labels, for pod affinity's namespace selectors."""
        self.claims = ResourceCache(
            "persistentvolumeclaims",
            self.core.list_persistent_volume_claim_for_all_namespaces,
            self.setup,
        )
        self.volumes = ResourceCache(
            "persistentvolumes", self.core.list_persistent_volume, self.setup
        )
        self.storage_classes = ResourceCache(
            "storageclasses", StorageV1Api(api_client).list_storage_class, self.setup
        )
        """Claims, volumes and classes: a pending pod's bound volumes pin it to their nodes."""
        self.disruption_budgets = ResourceCache(
            "poddisruptionbudgets",
            PolicyV1Api(api_client).list_pod_disruption_budget_for_all_namespaces,
            self.setup,
        )
        """PodDisruptionBudgets: preemption prefers victims whose eviction they allow."""
        self.pods = ResourceCache(
            "pods", self.core.list_pod_for_all_namespaces, self.setup, older=older_pod
        )
        self.wakeups = CycleWakeups(config.scheduler_names)
        """When the loop's next cycle is due: new pending pods at once, the rest each interval."""
        self.pods.add_listener(self.wakeups)
        self.nodes.add_listener(self.wakeups.nodes)
        custom = CustomObjectsApi(api_client)
        self.setup.served_crds = lambda: served_voltpack_plurals(custom)
        self.job_controller = JobController(self.core, custom)
        self.recovery = GangRecovery(self.core, recovery_policy(config.policy.spec.recovery))
        self.partial_gangs = PartialGangs(self.core, config.scheduler_names)
        self.jobs = ResourceCache("gpujobs", self.job_controller.list_function, self.setup)
        self.budgets = ResourceCache(
            "powerbudgets",
            lambda **kwargs: custom.list_cluster_custom_object(
                API_GROUP, API_VERSION, "powerbudgets", **kwargs
            ),
            self.setup,
        )
        self.gpunodes = ResourceCache(
            "gpunodes",
            lambda **kwargs: custom.list_cluster_custom_object(
                API_GROUP, API_VERSION, "gpunodes", **kwargs
            ),
            self.setup,
        )
        self.queues = ResourceCache(
            "queues",
            lambda **kwargs: custom.list_cluster_custom_object(
                API_GROUP, API_VERSION, "queues", **kwargs
            ),
            self.setup,
        )
        self.inference = InferenceServiceController(
            self.core, custom, power=config.policy.spec.power
        )
        self.inference_services = ResourceCache(
            "inferenceservices", self.inference.list_function, self.setup
        )
        self.dra = DraSupport(api_client, self.setup)
        self.topology_writer = TopologyStatusWriter(custom)
        self.topologies = ResourceCache(
            "topologies", self.topology_writer.list_function, self.setup
        )
        self._gpunode_layouts = GpuNodeLayouts()
        self.queue_writer = QueueWriter(self.core, custom, self.queues, self.pods)
        queueing = config.policy.spec.queueing
        self._ordering = make_ordering(queueing.ordering, queueing.params)
        self._preemption = PreemptionRules.of(queueing)
        self.history: BufferedStore | None = None
        self.job_history: JobHistoryRecorder | None = None
        if config.database_url:
            self.history = BufferedStore.open(config.database_url)
            self.job_history = JobHistoryRecorder(self.history, time.time)
        self._recorded: dict[str, str] = {}
        self._retention_due = 0.0
        self.power_loop: PowerLoop | None = None
        if config.power:
            caches = PowerCaches(
                self.nodes, self.pods, self.gpunodes, self.budgets, self.inference_services
            )
            self.power_loop = PowerLoop(
                self.core,
                custom,
                config.policy.spec.power,
                caches,
                clock=power_clock,
                interval_s=config.power_interval_s,
                history=self.history,
            )
        self.elector = LeaderElector(
            CoordinationV1Api(api_client),
            config.namespace,
            config.lease_name,
            config.identity,
            config.lease_duration_s,
            setup=self.setup,
        )
        self._strategy = make_strategy(
            config.policy.spec.scoring.strategy, config.policy.spec.scoring.params
        )
        self.policy = config.policy
        allocation = config.policy.spec.allocation
        self.hetero = HeteroAllocator(allocation, config.seed) if allocation.enabled else None
        self.policy_watcher = (
            PolicyWatcher(
                self.core,
                config.namespace,
                config.policy_configmap,
                config.policy_refresh_s,
                setup=self.setup,
            )
            if config.policy_configmap
            else None
        )
        self._scheduler: Scheduler | None = None
        self._topology_cycle = TopologyCycle()
        self._node_names: tuple[str, ...] = ()
        self._rng = np.random.default_rng(config.seed)
        self._observed: set[str] = set()
        self.stats = OperatorStats()
        self.gc_pauses = GcPauses()
        """The cyclic collector's pauses while this operator runs (a metric)."""
        self.stragglers = StragglerWatch()
        self._bind_pool: ThreadPoolExecutor | None = None
        self.events = EventQueue(self.core)
        """Each bound pod's Scheduled Event, written off the binding threads."""
        # nodes and pods translated once while the caches hold the same objects
        self._node_of = SameObjectMemo(node_from_k8s)
        self._request_of = SameObjectMemo(pod_from_k8s)
        self._facts_of = SameObjectMemo(node_facts_from_k8s)
        self._pending_events = PendingEventWriter(self.core, self.stats)
        self.writers: tuple[PlanWriter, ...] = (
            MoveWriter(self.core, self.stats),
            JobWriter(
                self.pods,
                self.partial_gangs,
                self.recovery,
                self.job_controller,
                self.job_history,
                self.stats,
            ),
            StragglerWriter(self.core, self.gpunodes, self.stragglers, self.stats),
            EvictionWriter(self.queue_writer, self.recovery, self.stats),
            TopologyWriter(self.topology_writer),
            BindingWriter(
                self.core,
                self.pods,
                self.elector.is_leader,
                self.dra.write,
                self._binding_pool,
                self._pending_events,
                self.stats,
                self.events,
            ),
            self._pending_events,
            QueueStatusWriter(self.queue_writer),
            InferenceWriter(self.inference, self.inference_services),
        )
        """What a plan changes, written in this order (as leader only)."""
        self.figures = ClusterFigures()
        self.metrics: MetricsServer | None = None
        self._figures_due = 0.0

    def run(self, stop: threading.Event) -> None:
        """Run until `stop` is set; then give up the Lease."""
        if self.history is not None:
            self.history.start(1.0)
        if self.config.metrics_port is not None:
            self.metrics = MetricsServer(self, port=self.config.metrics_port)
        self.nodes.start(stop)
        self.pods.start(stop)
        self.disruption_budgets.start(stop)
        for cache in (self.namespaces, self.claims, self.volumes, self.storage_classes):
            cache.start(stop)
        self.jobs.start(stop)
        self.budgets.start(stop)
        self.queues.start(stop)
        self.topologies.start(stop)
        self.gpunodes.start(stop)
        self.inference_services.start(stop)
        self.dra.start(stop)
        power_stop = threading.Event()  # set before the Lease is given up
        power: threading.Thread | None = None
        if self.power_loop is not None:
            power = threading.Thread(
                target=self.power_loop.run,
                args=(power_stop, self.elector.is_leader),
                name="power-loop",
                daemon=True,
            )
            power.start()
        self.nodes.wait_synced(30)
        self.pods.wait_synced(30)
        self.dra.wait_synced(30)
        renew_stop = threading.Event()  # set before the Lease is given up
        renewer = threading.Thread(
            target=self.elector.keep_renewing,
            args=(renew_stop, max(self.config.lease_duration_s / 4, 0.1)),
            name="lease-renewal",
            daemon=True,
        )
        renewer.start()
        self.gc_pauses.install()
        heap = HeapKeeper() if self.config.freeze_heap else None
        try:
            while not stop.is_set():
                self.wakeups.cycle_started()
                if self.elector.is_leader():
                    for cache in (self.nodes, self.pods, self.jobs):
                        cache.changed.clear()
                    self._reload_policy()
                    self._cycle_safely()
                    self._apply_retention()
                    if heap is not None:
                        heap.after_cycle()
                if not self.jobs.changed.is_set() and self.wakeups.wait(
                    self.config.cycle_interval_s
                ):
                    self.wakeups.settle()
        finally:
            self.gc_pauses.remove()
            power_stop.set()
            renew_stop.set()
            if power is not None:
                power.join(timeout=30)
            renewer.join(timeout=30)
            if self._bind_pool is not None:
                self._bind_pool.shutdown(wait=True)
                self._bind_pool = None
            self.events.close()
            self.elector.release()
            if self.poster is not None:
                self.poster.close()
                attach(self.core.api_client, None)
            if self.metrics is not None:
                self.metrics.stop()
            if self.history is not None:
                self.history.close()

    def _record_decisions(self, plan: Plan) -> None:
        """Decisions into the history: every placement, and a wait only when its reason changes."""
        if self.history is None or not self.elector.is_leader():
            return
        now = time.time()
        records = []
        for decision in plan.decisions:
            if not decision.placed and self._recorded.get(decision.subject) == decision.reason:
                continue
            self._recorded[decision.subject] = decision.reason
            records.append(
                DecisionRecord.from_decision(
                    decision,
                    at_s=now,
                    policy=self.policy.metadata.name,
                    cycle_id=self.stats.cycles,
                    job=decision.subject,
                )
            )
        waiting = {d.subject for d in plan.decisions if not d.placed}
        self._recorded = {k: v for k, v in self._recorded.items() if k in waiting}
        if records:
            self.history.add_decisions(records)

    def _apply_retention(self) -> None:
        """Delete history older than the retention settings, at most once an hour."""
        if self.history is None or time.monotonic() < self._retention_due:
            return
        self._retention_due = time.monotonic() + 3600.0
        try:
            deleted = self.history.read(
                lambda store: store.apply_retention(time.time(), self.config.retention)
            )
        except VoltpackError as exc:
            log.warning("history retention not applied: %s", exc)
            return
        if any(deleted.values()):
            log.info("history retention deleted %s", deleted)

    def _reload_policy(self) -> None:
        """Switch to a policy applied through the admin API (scoring to recovery settings)."""
        if self.policy_watcher is None:
            return
        policy = self.policy_watcher.poll()
        if policy is None:
            return
        try:
            strategy = make_strategy(policy.spec.scoring.strategy, policy.spec.scoring.params)
            queueing = policy.spec.queueing
            ordering = make_ordering(queueing.ordering, queueing.params)
            hetero = self.hetero
            if policy.spec.allocation != self.policy.spec.allocation:
                allocation = policy.spec.allocation
                hetero = (
                    HeteroAllocator(allocation, self.config.seed) if allocation.enabled else None
                )
        except VoltpackError as exc:
            log.warning("policy %s refused: %s", policy.metadata.name, exc)
            return
        self.policy = policy
        self._strategy, self._ordering = strategy, ordering
        self.recovery.set_policy(recovery_policy(policy.spec.recovery))
        self.hetero = hetero
        self._preemption = PreemptionRules.of(queueing)
        self._scheduler = None  # rebuilt with the new strategy on this cycle
        self._observed = set()

    def _cycle_safely(self) -> None:
        try:
            plan = self.run_cycle()
            self.wakeups.waiting = bool(plan.unplaced or plan.evictions)
        except Exception:  # a cycle must never take the operator down
            self.wakeups.waiting = True
            self.stats.failed_cycles += 1
            log.exception("scheduling cycle failed; retrying next cycle")

    def run_cycle(self) -> Plan:
        """One cycle: read the caches into the session's input, decide, and (as leader) hand
        the plan to each writer in turn."""
        started = time.perf_counter()
        cycle, work, queues = self._cycle_input()
        read = time.perf_counter()
        before = cycle.snapshot.copy() if self.metrics is not None else None
        assert self._scheduler is not None
        plan = decide(
            self._scheduler,
            cycle.snapshot,
            work,
            self._rng,
            self._observed,
            queues,
            cycle.reserver,
            cycle.faulted or (),
            self.recovery.policy,
        )
        decided = time.perf_counter()
        self.stats.cycles += 1
        self.stats.last_plan = plan
        self._record_decisions(plan)
        self._observed &= cycle.by_key.keys()  # forget pods that are gone: memory stays bounded
        self._pending_events.keep_only(cycle.by_key)
        if before is not None and time.monotonic() >= self._figures_due:
            # what a scrape shows: refreshed at most once a second, off the binding path
            pods = cycle.pods
            self.figures = self._figures(before, pods, time.perf_counter() - started)
            self.figures.domain_budgets_w, self.figures.domain_nodes = power_domains(
                self.budgets.values(), cycle.nodes
            )
            self.figures.job_step_slowdown = {
                **step_slowdowns(pods),  # as predicted at binding, then with today's traffic:
                **self._topology_cycle.step_slowdowns(cycle.snapshot),
            }
            self._figures_due = time.monotonic() + 1.0
        if not self.elector.is_leader():
            return plan
        for writer in self.writers:
            writer.apply(plan, cycle)
        log.debug(
            "cycle %d: %d gangs placed, %d pods unplaced; input %.0f ms, decide %.0f ms, "
            "write %.0f ms", self.stats.cycles, len(plan.gangs), len(plan.unplaced),
            1000 * (read - started), 1000 * (decided - read),
            1000 * (time.perf_counter() - decided),
        )  # fmt: skip
        return plan

    def _cycle_input(self) -> tuple[CycleInput, PendingWork, SessionQueues]:
        """The caches read into what the session decides from."""
        dra = self.dra.cycle()
        self._node_of.new_cycle()
        self._request_of.new_cycle()
        self._facts_of.new_cycle()
        # the cached objects themselves (the watch replaces an object, never edits one): copying
        # every pod and node each cycle cost about 0.1 s per 1,000 pods; the cycle only reads
        # them, and a binding it assumes is a new object (`BindingWriter`)
        nodes = dra.node_views(self.nodes.values()) if dra.active else self.nodes.values()
        pods = self.pods.values()
        gpunodes = self.gpunodes.values()
        topology_objects = self.topologies.values()
        topo = topology_cycle(
            topology_objects,
            gpunodes,
            nodes,
            self.policy.spec.topology,
            self._gpunode_layouts,
        )
        faults = gpu_faults(gpunodes)
        layouts = {**topo.layouts, **dra.layouts()}  # the devices claims will name
        namespace_labels = {
            str(ns["metadata"]["name"]): ns["metadata"].get("labels") or {}
            for ns in self.namespaces.values()
        }
        snapshot = build_snapshot(
            nodes,
            pods,
            layouts,
            faults,
            self.recovery.policy,
            self._node_of,
            self._request_of,
            self._facts_of,
            namespace_labels,
        )
        dra.account(snapshot, pods)
        if self.power_loop is not None:
            snapshot.power = self.power_loop.headroom(snapshot)
        if snapshot.node_names != self._node_names or self._scheduler is None:
            rank_rng = np.random.default_rng(self.config.seed)
            self._scheduler = Scheduler.with_random_ranks(
                self._strategy, snapshot.node_count, rank_rng
            )
            self._node_names = snapshot.node_names
        self._scheduler.preferences = self.policy.spec.scoring.preferences
        running = running_gangs(
            pods,
            snapshot,
            self.config.scheduler_names,
            self.disruption_budgets.values(),
            self._request_of,
        )
        self._scheduler.topology = topo.placement(
            snapshot.node_names,
            nodes,
            make_placer(self.policy.spec.topology.placer),
            # only with an active Topology: no scan of every pod's annotations otherwise
            running_topology_gangs(pods, running) if topo.spec is not None else (),
        )
        self._topology_cycle = topo
        work = pending_work(
            pods,
            dra.request if dra.active else None,
            self._request_of,
            self.config.scheduler_names,
            VolumeView(
                self.claims.values(), self.volumes.values(), self.storage_classes.values()
            ).request,
        )
        topology_gangs = {group.name for group in work.groups if group.topology is not None}
        if self._scheduler.topology is None:
            work = hold_topology_gangs(work)
        queue_objects = self.queues.values()
        tree = queue_tree(queue_objects)
        gpujobs = self.jobs.values()
        now = time.time()
        hetero = self._hetero_cycle(gpujobs, pods, snapshot, now)
        queues = SessionQueues(
            tree=tree,
            ordering=self._ordering,
            rules=self._preemption,
            running=running,
            gangs=pending_queues(work, pods),
            now_s=now,
            model_choices=hetero.choices,
            awaiting_victims=awaiting_victims(pods),
        )
        by_key = {pod_key(p): p for p in pods}
        rows = {name: row for row, name in enumerate(snapshot.node_names)}
        isolation = isolation_of(faults, rows, self.recovery.policy)
        faulted = (  # leader only: preparing keeps recovery state the writers then act on
            self.recovery.prepare(gpujobs, pods, faults, isolation, snapshot)
            if self.elector.is_leader()
            else None
        )
        cycle = CycleInput(
            pods=pods,
            by_key=by_key,
            nodes=nodes,
            gpujobs=gpujobs,
            snapshot=snapshot,
            faults=faults,
            isolation=isolation,
            faulted=faulted,
            topology_objects=topology_objects,
            topology_statuses=topo.statuses,
            topology=self._scheduler.topology.topology if self._scheduler.topology else None,
            queue_objects=queue_objects,
            tree=tree,
            hetero=hetero,
            topology_gangs=topology_gangs,
            reserver=ClaimReserver(self.dra, dra, by_key),
            gated=work.gated,
        )
        return cycle, work, queues

    def _binding_pool(self) -> ThreadPoolExecutor | None:
        """The threads that bind gangs concurrently (kept across cycles; None: one at a time)."""
        if self._bind_pool is None and self.config.bind_workers > 1:
            self._bind_pool = ThreadPoolExecutor(
                self.config.bind_workers, thread_name_prefix="bind"
            )
        return self._bind_pool

    def _hetero_cycle(
        self,
        gpujobs: list[dict[str, Any]],
        pods: list[dict[str, Any]],
        snapshot: ClusterSnapshot,
        now: float,
    ) -> HeteroCycle:
        """The allocation's model choices for training jobs (none when it is off)."""
        if self.hetero is None:
            return HeteroCycle()
        node_models = {
            name: snapshot.gpu_models[int(model)]
            for name, model in zip(snapshot.node_names, snapshot.node_gpu_model, strict=True)
            if model != NO_GPU_MODEL
        }
        return self.hetero.cycle(gpujobs, pods, snapshot_capacity(snapshot), node_models, now)

    def _figures(
        self, snapshot: ClusterSnapshot, pods: list[dict[str, Any]], duration_s: float
    ) -> ClusterFigures:
        workload = []
        pending_created = []
        for pod in pods:
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            try:
                workload.append(pod_from_k8s(pod))
            except InvalidRequestError:
                continue
            spec = pod.get("spec") or {}
            if spec.get("schedulerName") in self.config.scheduler_names and not spec.get(
                "nodeName"
            ):
                created = _parse_time(pod["metadata"].get("creationTimestamp"))
                if created is not None:
                    pending_created.append(created)
        return cluster_figures(snapshot, workload, pending_created, now_s(), duration_s)


def _parse_time(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None
