"""A policy dry run: one scheduling cycle and one power tick over a copy of the cluster.

`plan_dry_run` plans exactly as the operator would with the given policy and writes nothing.
It reads the objects of `DRY_RUN_KINDS` from caches; `voltpack.operator.admin.dry_run_process` runs
it in a child process over a copy of the admin API's caches, so that a whole cycle (seconds at
thousands of nodes) never competes with the API's requests for one interpreter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal

import numpy as np
from kubernetes.client import CoreV1Api, CustomObjectsApi

from voltpack.model.admin import DryRunResult, PlacementChange
from voltpack.operator.kube.cache import ResourceCache
from voltpack.operator.kube.conventions import SERVED_SCHEDULERS
from voltpack.operator.power.loop import PowerCaches, PowerLoop
from voltpack.operator.power.objects import action_of
from voltpack.operator.scheduling.cluster_view import build_snapshot, pending_work
from voltpack.operator.scheduling.queues import pending_queues, queue_tree, running_gangs
from voltpack.policies.fair_share import make_ordering
from voltpack.policies.power.ladder import GpuSetting
from voltpack.policies.registry import make_strategy
from voltpack.policies.schema import PolicyFile
from voltpack.scheduler.placement import Scheduler
from voltpack.scheduler.preemption import PreemptionRules
from voltpack.scheduler.session import SessionQueues, decide

DRY_RUN_KINDS = ("nodes", "pods", "queues", "gpunodes", "powerbudgets")
"""The cached kinds a dry run reads."""


def plan_dry_run(
    caches: Mapping[str, ResourceCache],
    policy: PolicyFile,
    clock: Callable[[], float],
    core: CoreV1Api,
    custom: CustomObjectsApi,
    scheduler_names: frozenset[str] = SERVED_SCHEDULERS,
) -> DryRunResult:
    """What `policy` would bind, leave pending (why), preempt and cap on the cluster in
    `caches` (`DRY_RUN_KINDS`), for the pods of `scheduler_names` (the names the operator
    serves); `core` and `custom` are never written through."""
    nodes, pods = caches["nodes"].values(), caches["pods"].values()
    snapshot = build_snapshot(nodes, pods)
    work = pending_work(pods, scheduler_names=scheduler_names)
    # gangs with a topology request are placed by the operator's topology placement, which
    # the dry run does not rebuild: they are reported as staying pending, not placed pod by pod
    previewed = [group for group in work.groups if group.topology is None]
    for group in work.groups:
        if group.topology is not None:
            for member in group.pods:
                work.held[member.name] = (
                    f"gang {group.name}: topology-aware placement is not previewed by the dry run"
                )
    work.groups = previewed
    strategy = make_strategy(policy.spec.scoring.strategy, policy.spec.scoring.params)
    scheduler = Scheduler.with_random_ranks(strategy, snapshot.node_count, np.random.default_rng(0))
    queueing = policy.spec.queueing
    context = SessionQueues(
        tree=queue_tree(caches["queues"].values()),
        ordering=make_ordering(queueing.ordering, queueing.params),
        rules=PreemptionRules.of(queueing),
        running=running_gangs(pods, snapshot, scheduler_names),
        gangs=pending_queues(work, pods),
        now_s=clock(),
    )
    plan = decide(scheduler, snapshot, work, np.random.default_rng(0), set(), context)
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
                    action="bind", subject=placement.pod, detail=f"-> node {placement.node}{gpus}"
                )
            )
    for pod, reason in sorted(plan.unplaced.items()):
        changes.append(PlacementChange(action="stay-pending", subject=pod, detail=reason))
    changes += power_changes(caches, policy, clock, core, custom)
    return DryRunResult(
        policy=policy.metadata.name,
        binds=sum(len(g) for g in plan.gangs),
        pending=len(plan.unplaced),
        changes=changes,
    )


def power_changes(
    caches: Mapping[str, ResourceCache],
    policy: PolicyFile,
    clock: Callable[[], float],
    core: CoreV1Api,
    custom: CustomObjectsApi,
) -> list[PlacementChange]:
    """The GPU settings the policy's power section would write now (one control tick)."""
    loop = PowerLoop(
        core,
        custom,
        policy.spec.power,
        PowerCaches(caches["nodes"], caches["pods"], caches["gpunodes"], caches["powerbudgets"]),
        clock=clock,
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


def _setting_text(setting: GpuSetting) -> str:
    """e.g. 'cap_power' or 'driver default'."""
    return "driver default" if setting == GpuSetting() else action_of(setting)
