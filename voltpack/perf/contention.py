"""Network contention between running gangs: how much slower each gang's network hops run.

The flow-level model of issue 32, item 1 (a fluid model, as flow-level network simulators
use): every running gang's flows (`voltpack.perf.network_flows.gang_flows`) share the fabric's
links max-min fair (`voltpack.perf.link_sharing`), and a flow that is granted less than it asks
for runs `asked / granted` times slower. A gang's slowdown for a kind of group (tensor,
pipeline, data) is that of its slowest flow of the kind: a ring waits for its slowest hop.
The step model then prices the kind's network hops that much slower (`PlacementParts.links`)
and adds the result to the step as it does without contention, with the job's own
compute/communication overlap.

Assumptions, stated because the model rests on them:

- **Each gang communicates continuously while it communicates.** Inside one gang the kinds
  take turns: a kind's flows ask for its share of the gang's network time (its `duty`,
  from the gang's uncontended step: e.g. data 0.9 and pipeline 0.1), so a gang alone never
  slows itself by running its own kinds at once. Between gangs nothing is staggered: every
  running gang's flows are on the wire together. Real jobs' communication phases collide only
  part of the time, so this is the pessimistic end (the "all jobs synchronised" case); Crux
  (SIGCOMM'24) reports that it is common on shared clusters (most of its contention comes from
  gradient synchronisation of jobs that all communicate every step).
- **Shares are computed once per change.** Duties come from the uncontended step, not from
  the contended one (no fixed-point iteration); the simulator re-solves at every start and end.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from voltpack.model.topology import ClusterTopology, FloatArray
from voltpack.perf.link_sharing import progressive_filling
from voltpack.perf.network_flows import FabricLinks, GangFlows, IntArray, fabric_links
from voltpack.perf.step_time import StepTime

Slowdowns = tuple[float, float, float]
"""Per kind (tensor, pipeline, data): how many times slower its network hops run (>= 1)."""
NO_SLOWDOWN: Slowdowns = (1.0, 1.0, 1.0)
STARVED_SLOWDOWN = 1e6
"""Slowdown of a flow granted nothing (a link of zero capacity): effectively stopped."""


def comm_duty(step: StepTime, kinds: tuple[bool, bool, bool]) -> Slowdowns:
    """Each kind's share of the gang's network time, among the kinds that have flows."""
    times = np.array([step.tensor_comm_s, step.pipeline_comm_s, step.data_comm_s])
    present = np.array(kinds, dtype=bool)
    times = np.where(present, times, 0.0)
    total = float(times.sum())
    if total <= 0.0:
        shares = present / max(1, int(present.sum()))
        return (float(shares[0]), float(shares[1]), float(shares[2]))
    return (float(times[0] / total), float(times[1] / total), float(times[2] / total))


@dataclass(frozen=True)
class NetworkGang:
    """A placed gang's flows and the share of its network time each kind takes."""

    flows: GangFlows
    duty: Slowdowns

    def asks_gbit_s(self) -> FloatArray:
        """What each flow asks while the gang communicates: its demand x its kind's duty."""
        return np.asarray(self.flows.demand_gbit_s * np.asarray(self.duty)[self.flows.kind])


def network_slowdowns(fabric: FabricLinks, gangs: Iterable[NetworkGang]) -> list[Slowdowns]:
    """Per gang, per kind, how many times slower its network hops run with all `gangs` on
    the fabric at once (1.0 when granted all they ask)."""
    listed = list(gangs)
    demands: list[np.ndarray] = []
    owners: list[np.ndarray] = []
    kinds: list[np.ndarray] = []
    paths: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    for index, gang in enumerate(listed):
        if gang.flows.count == 0:
            continue
        ask = gang.asks_gbit_s()
        keep = ask > 0
        demands.append(ask[keep])
        owners.append(np.full(int(keep.sum()), index, dtype=np.int64))
        kinds.append(gang.flows.kind[keep])
        paths.append(gang.flows.paths[keep])
        weights.append(gang.flows.weight[keep])
    result = np.ones((len(listed), 3))
    if not demands or sum(d.size for d in demands) == 0:
        return [NO_SLOWDOWN for _ in listed]
    demand = np.concatenate(demands)
    width = max(p.shape[1] for p in paths)
    path = np.concatenate([_pad(p, width) for p in paths])
    flow_ids = np.repeat(np.arange(demand.size, dtype=np.int64), width)
    link_ids = path.reshape(-1)
    used = link_ids >= 0
    rate = progressive_filling(
        fabric.capacity_gbit_s,
        demand,
        flow_ids[used],
        link_ids[used],
        np.concatenate(weights),
    )
    slowdown = np.where(rate > 0, demand / np.maximum(rate, 1e-300), STARVED_SLOWDOWN)
    slowdown = np.maximum(slowdown, 1.0)
    np.maximum.at(result, (np.concatenate(owners), np.concatenate(kinds)), slowdown)
    return [(float(r[0]), float(r[1]), float(r[2])) for r in result]


def _pad(paths: np.ndarray, width: int) -> np.ndarray:
    if paths.shape[1] == width:
        return paths
    padded = np.full((paths.shape[0], width), -1, dtype=np.int64)
    padded[:, : paths.shape[1]] = paths
    return padded


@dataclass
class RunningNetwork:
    """The gangs on one topology's fabric now, and their slowdowns (solved on demand)."""

    topology: ClusterTopology
    gangs: dict[Hashable, NetworkGang] = field(default_factory=dict)
    _solved: dict[
        frozenset[tuple[Hashable, int]],
        tuple[tuple[NetworkGang, ...], dict[Hashable, Slowdowns]],
    ] = field(default_factory=dict, repr=False)

    @property
    def fabric(self) -> FabricLinks:
        """The topology's directed links."""
        return fabric_links(self.topology)

    def add(self, key: Hashable, gang: NetworkGang) -> None:
        """A gang starts."""
        self.gangs[key] = gang

    def remove(self, key: Hashable) -> None:
        """A gang ends (unknown keys are ignored: a gang with no flows was never added)."""
        self.gangs.pop(key, None)

    def link_busy(self) -> tuple[FloatArray, ...]:
        """Per level each domain's uplink, then per node its NICs: what the gangs ask to send
        through it (demand x duty) over its capacity, the busier of its two directions."""
        fabric = self.fabric
        load = np.zeros(fabric.link_count)
        for gang in self.gangs.values():
            flows = gang.flows
            if flows.count == 0:
                continue
            ask = gang.asks_gbit_s()
            links = flows.paths.reshape(-1)
            asks = np.repeat(ask, flows.paths.shape[1])
            used = links >= 0
            load += np.bincount(links[used], weights=asks[used], minlength=fabric.link_count)
        capacity = fabric.capacity_gbit_s

        def domain_share(ports: IntArray) -> FloatArray:
            """A domain's load over its capacity, summed over its ports (-1: none)."""
            used = ports >= 0
            asked = np.where(used, load[np.maximum(ports, 0)], 0.0).sum(axis=1)
            room = np.where(used, capacity[np.maximum(ports, 0)], 0.0).sum(axis=1)
            return np.asarray(asked / np.maximum(room, 1e-9), dtype=np.float64)

        levels = tuple(
            np.maximum(domain_share(up), domain_share(down))
            for up, down in zip(fabric.up, fabric.down, strict=True)
        )
        share = load / np.maximum(capacity, 1e-9)
        return (*levels, np.maximum(share[fabric.nic_out], share[fabric.nic_in]))

    def slowdowns(
        self, extra: Mapping[Hashable, NetworkGang] | None = None
    ) -> dict[Hashable, Slowdowns]:
        """Every running gang's slowdowns (and `extra` gangs', as if they ran too).

        Gangs that share no link cannot slow each other, so the sharing is solved per group
        of gangs joined by shared links, and each group's answer is kept: a start or end
        re-solves only the group it touches (the answer is the same as one solve of all).
        """
        together = dict(self.gangs)
        together.update(extra or {})
        result: dict[Hashable, Slowdowns] = {}
        extra_keys = set(extra or {})
        for members in _sharing_groups(together, self.fabric.link_count):
            group_key = frozenset((key, id(together[key])) for key in members)
            kept = self._solved.get(group_key)
            if kept is not None:
                result.update(kept[1])
                continue
            answers = network_slowdowns(self.fabric, (together[key] for key in members))
            solved = dict(zip(members, answers, strict=True))
            result.update(solved)
            if extra_keys.isdisjoint(members):  # a candidate's group is not asked twice
                if len(self._solved) >= SOLVED_GROUPS_KEPT:
                    self._solved.clear()
                # the gangs are kept with the answer, so their ids stay theirs while it is
                self._solved[group_key] = (tuple(together[key] for key in members), solved)
        return result


SOLVED_GROUPS_KEPT = 4096
"""Solved groups of gangs kept for reuse (all are dropped when this many are kept)."""


def _sharing_groups(gangs: Mapping[Hashable, NetworkGang], link_count: int) -> list[list[Hashable]]:
    """The gangs grouped so that two gangs that share a link (directly or through others)
    are in one group; gangs with no flow are groups of their own."""
    keys = list(gangs)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    for index, key in enumerate(keys):
        paths = gangs[key].flows.paths
        links = np.unique(paths[paths >= 0])
        rows.append(np.full(links.size, index, dtype=np.int64))
        cols.append(links + len(keys))
    size = len(keys) + link_count
    if not keys:
        return []
    row, col = np.concatenate(rows), np.concatenate(cols)
    graph = coo_matrix((np.ones(row.size), (row, col)), shape=(size, size))
    _, label = connected_components(graph, directed=False)
    groups: dict[int, list[Hashable]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(int(label[index]), []).append(key)
    return list(groups.values())
