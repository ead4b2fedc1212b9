"""Where a split service's prefill and decode replicas must sit so the KV-cache transfer keeps
the bandwidth the planner counted on.

Without a topology the planner assumes `KV_LINK_BYTES_PER_S_PER_GPU` (one 400 Gb/s NIC per
prefill GPU) and nothing guarantees it. With one, each level of the topology gives a bandwidth
per GPU between two nodes whose deepest shared domain is at that level (the link model of
`voltpack/perf/links.py`: the hosts' NIC class, line rate and NICs per GPU, divided by the
oversubscription of every level below it; the slowest host counts). A split pool kept inside
one domain of a level gets at least that level's bandwidth.

The level chosen for a plan is the widest (highest) one whose bandwidth carries the plan's
KV traffic: per prefill replica, its planned prompt tokens per second times the model's KV
bytes per token, spread over the replica's GPUs, at most `MAX_LINK_LOAD` of the link (the
transfers queue on the link beyond that). The planner is then asked again with that level's
bandwidth, so the transfer time it counts is the one the placement guarantees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from voltpack.model.host_layout import NicDistance
from voltpack.model.topology import ClusterTopology
from voltpack.perf.links import NIC_CLASS_EFFICIENCY, network_speed

MAX_LINK_LOAD = 0.5
"""Share of a level's bandwidth the KV transfers may use on average: at half load a transfer
waits on average about as long as it takes (M/D/1), so the TPOT the planner counted holds."""
GBYTE = 1e9


@dataclass(frozen=True)
class LevelLink:
    """One topology level and the KV bandwidth per GPU a pool inside one of its domains gets."""

    label: str
    """The level's node label (what a pod's topology request names)."""
    name: str
    gbyte_s_per_gpu: float


@dataclass(frozen=True)
class PrefillLoad:
    """One prefill group's planned traffic: prompt tokens per second over its replicas."""

    replicas: int
    gpus_per_replica: int
    prompt_tokens_per_s: float


def level_links(topology: ClusterTopology) -> list[LevelLink]:
    """Per level (top to bottom), the KV bandwidth per GPU between two nodes sharing one of
    its domains, from the slowest host's NICs; [] when no host layout names a NIC (the
    bandwidth is then unknown and the placement cannot be chosen by it)."""
    hosts = list(dict.fromkeys(h for h in topology.hosts if h.nics and h.gpu_count > 0))
    if not hosts:
        return []
    links = []
    for level in range(topology.level_count):
        factor = float(topology.crossing_factor(level))
        speeds = []
        for host in hosts:
            slowest = min(host.nics, key=lambda nic: nic.line_rate_gbit_s)
            worst_class = min(host.nics, key=lambda nic: NIC_CLASS_EFFICIENCY[nic.nic_class])
            speed = network_speed(
                worst_class.nic_class,
                slowest.line_rate_gbit_s,
                len(host.nics) / host.gpu_count,
                NicDistance.SAME_PCIE_SWITCH,
                factor,
            )
            speeds.append(speed.bandwidth_gbyte_s)
        spec = topology.levels[level]
        links.append(LevelLink(spec.node_label, spec.display_name, min(speeds)))
    return links


def needed_gbyte_s_per_gpu(loads: Sequence[PrefillLoad], kv_bytes_per_token: float) -> float:
    """The KV bandwidth per prefill GPU the plan needs: its busiest prefill group's KV bytes
    per second per GPU over `MAX_LINK_LOAD` (0 without prefill replicas)."""
    needs = [
        load.prompt_tokens_per_s
        * kv_bytes_per_token
        / (load.replicas * load.gpus_per_replica)
        / MAX_LINK_LOAD
        / GBYTE
        for load in loads
        if load.replicas > 0 and load.prompt_tokens_per_s > 0
    ]
    return max(needs, default=0.0)


def choose_level(links: Sequence[LevelLink], needed_gbyte_s: float) -> LevelLink | None:
    """The widest level (top first) whose bandwidth per GPU carries `needed_gbyte_s`; None
    when even the lowest does not."""
    for link in links:
        if link.gbyte_s_per_gpu >= needed_gbyte_s:
            return link
    return None


def prefill_loads(
    groups: Sequence[tuple[str, int, int, Mapping[str, float]]],
    prompt_tokens_of: Mapping[str, float],
) -> list[PrefillLoad]:
    """Prefill loads from plan groups given as (role, replicas, GPUs per replica, bucket ->
    planned rate) and each bucket's mean prompt tokens."""
    return [
        PrefillLoad(
            replicas,
            gpus,
            sum(rate * prompt_tokens_of[bucket] for bucket, rate in rates.items()),
        )
        for role, replicas, gpus, rates in groups
        if role == "prefill"
    ]
