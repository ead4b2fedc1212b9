"""The KV-cache transfer of a split InferenceService: which topology level its prefill and
decode replicas are kept inside, what bandwidth the plan counts on, and what the status says.

With a `Topology` whose hosts name their NICs, the service is planned once per level with that
level's bandwidth per GPU (`policies/inference/kv_placement.py`); among the plans that need no
split pool or whose KV traffic their level carries, the cheapest is kept (on a tie the widest
level, so the pool may use more of the cluster). Its split replicas then form one
gang (`voltpack.io/pod-group`) that must stay inside one domain of that level
(`voltpack.io/topology-required`), which voltpack's scheduler places as a unit. Without a
Topology (or without NIC information) the plan assumes the planner's default, one 400 Gb/s NIC
per prefill GPU, and the status says plainly that nothing guarantees it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from voltpack.model.resources.inferenceservice import InferenceServiceSpec, PlannedGroup
from voltpack.model.topology import ClusterTopology
from voltpack.operator.inference.plans import fingerprint, request_mix_of
from voltpack.operator.kube.conventions import TOPOLOGY_REQUIRED_ANNOTATION
from voltpack.perf.serving_models import default_serving_models
from voltpack.policies.inference.kv_placement import (
    GBYTE,
    MAX_LINK_LOAD,
    LevelLink,
    choose_level,
    level_links,
    needed_gbyte_s_per_gpu,
    prefill_loads,
)
from voltpack.policies.inference.mix_planner import KV_LINK_BYTES_PER_S_PER_GPU
from voltpack.policies.inference.plan import ServingPlan

ASSUMED_GBYTE_S = KV_LINK_BYTES_PER_S_PER_GPU / GBYTE
"""What the planner assumes per prefill GPU when nothing is known (50 GB/s)."""


@dataclass(frozen=True)
class KvPlacement:
    """Where a plan's split pool is kept, and the bandwidth its KV transfer is planned with."""

    level: LevelLink | None
    """The level the pool must stay inside; None = not controlled (or no split pool)."""
    planned_gbyte_s_per_gpu: float
    needed_gbyte_s_per_gpu: float
    reason: str
    """Condition reason: Controlled, NotSplit, NoTopology, NoNicInformation, Overloaded."""
    message: str

    @property
    def controlled(self) -> bool:
        """Whether the pool's placement keeps the planned bandwidth."""
        return self.level is not None


def links_of(topology: ClusterTopology | None) -> list[LevelLink] | None:
    """The topology's levels with their KV bandwidth; None without a Topology."""
    return None if topology is None else level_links(topology)


def links_fingerprint(links: list[LevelLink] | None) -> str:
    """What of the topology a plan depends on (re-plan when it changes)."""
    if links is None:
        return "no-topology"
    return fingerprint([(link.label, round(link.gbyte_s_per_gpu, 3)) for link in links])


def group_loads(plan: ServingPlan) -> float:
    """KV bandwidth per prefill GPU the plan needs (GB/s, at MAX_LINK_LOAD)."""
    groups = [
        (
            g.role,
            g.replicas,
            g.profile.gpus,
            {str(b): r for b, r in g.bucket_rates_per_s.items()},
        )
        for g in plan.groups
    ]
    prompts = {str(i): b.size.prompt_tokens for i, b in enumerate(plan.mix.buckets)}
    kv_bytes = next((g.profile.model.kv_bytes_per_token for g in plan.groups), 0.0)
    return needed_gbyte_s_per_gpu(prefill_loads(groups, prompts), kv_bytes)


def planned_need(spec: InferenceServiceSpec, groups: Sequence[PlannedGroup]) -> float:
    """`group_loads` from a plan as the status records it (after a restart)."""
    mix = request_mix_of(spec.request_sizes)
    prompts = {b.label: b.size.prompt_tokens for b in mix.buckets}
    rows = [
        (g.role, g.replicas, g.tensor_parallel, {b.bucket: b.rate_per_second for b in g.buckets})
        for g in groups
    ]
    usable = [row for row in rows if all(bucket in prompts for bucket in row[3])]
    kv_bytes = default_serving_models().get(spec.model).kv_bytes_per_token
    return needed_gbyte_s_per_gpu(prefill_loads(usable, prompts), kv_bytes)


def plan_with_kv(
    plan_at: Callable[[float], ServingPlan], links: list[LevelLink] | None
) -> tuple[ServingPlan, KvPlacement]:
    """The plan and its KV placement: `plan_at(bytes per second per prefill GPU)` is asked
    once per level with that level's bandwidth; among the plans that need no split pool or
    whose KV traffic their level carries, the cheapest wins (the widest level on a tie)."""
    if not links:
        plan = plan_at(KV_LINK_BYTES_PER_S_PER_GPU)
        return plan, uncontrolled(plan.split, group_loads(plan), links)
    best: tuple[ServingPlan, KvPlacement] | None = None
    fallback: tuple[ServingPlan, LevelLink, float] | None = None
    for link in links:
        plan = plan_at(link.gbyte_s_per_gpu * GBYTE)
        need = group_loads(plan)
        if plan.split and need > link.gbyte_s_per_gpu:
            fallback = (plan, link, need)
            continue
        placement = controlled(link, need) if plan.split else not_split(link.gbyte_s_per_gpu)
        if best is None or round(plan.cost_per_hour, 6) < round(best[0].cost_per_hour, 6):
            best = (plan, placement)
    if best is not None:
        return best
    assert fallback is not None
    plan, link, need = fallback
    placement = controlled(link, need)
    overloaded = (
        f"{placement.message}; but its KV traffic needs {need:.3g} GB/s per prefill GPU, more "
        f"than {MAX_LINK_LOAD:.0%} of even this level's bandwidth: transfers will queue"
    )
    return plan, KvPlacement(link, link.gbyte_s_per_gpu, need, "Overloaded", overloaded)


def controlled(link: LevelLink, need: float) -> KvPlacement:
    """The pool kept inside one domain of `link`'s level."""
    message = (
        f"prefill and decode replicas are kept inside one {link.name} ({link.label}): their "
        f"KV traffic needs {need:.3g} GB/s per prefill GPU at {MAX_LINK_LOAD:.0%} link load and "
        f"that level gives {link.gbyte_s_per_gpu:.3g} GB/s; the KV transfer time is planned "
        f"with {link.gbyte_s_per_gpu:.3g} GB/s per prefill GPU (without a Topology it is the "
        f"assumed {ASSUMED_GBYTE_S:.3g} GB/s)"
    )
    return KvPlacement(link, link.gbyte_s_per_gpu, need, "Controlled", message)


def not_split(gbyte_s: float) -> KvPlacement:
    """A plan without split pools: nothing to place."""
    return KvPlacement(None, gbyte_s, 0.0, "NotSplit", "the plan has no split pools")


def uncontrolled(split: bool, need: float, links: list[LevelLink] | None) -> KvPlacement:
    """No Topology, or one without NIC information: say the transfer's placement is free."""
    if not split:
        return not_split(ASSUMED_GBYTE_S)
    why = (
        "the cluster has no Topology"
        if links is None
        else "the Topology's hosts name no NICs (no GPUNode topology, no defaultHost NICs)"
    )
    message = (
        f"the KV-cache transfer's placement is not controlled: {why}; prefill and decode "
        f"replicas go wherever they fit, and the plan assumes {ASSUMED_GBYTE_S:.3g} GB/s per "
        f"prefill GPU (one 400 Gb/s NIC per GPU), which nothing guarantees (its KV traffic "
        f"needs {need:.3g} GB/s per prefill GPU at {MAX_LINK_LOAD:.0%} link load)"
    )
    return KvPlacement(
        None,
        ASSUMED_GBYTE_S,
        need,
        "NoTopology" if links is None else "NoNicInformation",
        message,
    )


def restored(
    spec: InferenceServiceSpec,
    groups: Sequence[PlannedGroup],
    links: list[LevelLink] | None,
    pods: Sequence[dict[str, Any]],
) -> KvPlacement:
    """The KV placement of a plan restored from the status (a restart or failover): the level
    the existing split replicas were given, else the widest level that carries the plan."""
    split = any(g.role != "unified" for g in groups)
    need = planned_need(spec, groups)
    if not links or not split:
        return uncontrolled(split, need, links)
    by_label = {link.label: link for link in links}
    for pod in pods:
        label = (pod["metadata"].get("annotations") or {}).get(TOPOLOGY_REQUIRED_ANNOTATION)
        if label in by_label:
            return controlled(by_label[label], need)
    link = choose_level(links, need) or links[-1]
    return controlled(link, need)
