"""Contention-aware placement scoring: a candidate's own step time with the running gangs'
traffic, and the slowdown it inflicts on them.

`RunningGangs` holds the gangs on the fabric now (their `PlacedGang`s) and their current
slowdowns; a driver (the simulator, the operator) adds and removes gangs as they start and end
and calls `resolve` to re-share the links. `ContendedStepModel` is a `GangStepModel` for the
placement mechanism: for a candidate placement it solves the sharing with the candidate added
and scores

    own step time with contention x (1 + inflicted),

where `inflicted` is the running gangs' extra step time the candidate causes, weighted by
their GPUs and divided by the candidate's GPUs (GPU-seconds others lose per GPU-second the
candidate runs). A placement across a busy uplink thus pays for the neighbours it slows.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from voltpack.model.errors import VoltpackError
from voltpack.model.snapshot import ClusterSnapshot, IntArray
from voltpack.model.topology import ClusterTopology, FloatArray
from voltpack.model.workload import PodGroup
from voltpack.perf.contention import NO_SLOWDOWN, RunningNetwork, Slowdowns
from voltpack.policies.topology.step_model import PlacedGang, TopologyStepModel

CANDIDATE_KEY = ("voltpack.candidate",)
"""The key a candidate placement is solved under (no running gang uses a tuple like it)."""


@dataclass
class RunningGangs:
    """Gangs running on one topology, their slowdowns and step times as last solved."""

    topology: ClusterTopology
    placed: dict[Hashable, PlacedGang] = field(default_factory=dict)
    slowdowns: dict[Hashable, Slowdowns] = field(default_factory=dict)
    step_s: dict[Hashable, float] = field(default_factory=dict)
    network: RunningNetwork = field(init=False)
    _busy: tuple[FloatArray, ...] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.network = RunningNetwork(self.topology)

    def add(self, key: Hashable, gang: PlacedGang) -> None:
        """A gang starts (call `resolve` after the instant's starts and ends)."""
        self.placed[key] = gang
        self._busy = None
        if gang.network.flows.count:
            self.network.add(key, gang.network)
        self.slowdowns[key] = NO_SLOWDOWN
        self.step_s[key] = gang.step_s()

    def remove(self, key: Hashable) -> None:
        """A gang ends."""
        self.placed.pop(key, None)
        self._busy = None
        self.network.remove(key)
        self.slowdowns.pop(key, None)
        self.step_s.pop(key, None)

    def resolve(self) -> dict[Hashable, float]:
        """Re-share the links; the gangs whose step time changed, with the new one."""
        solved = self.network.slowdowns()
        changed: dict[Hashable, float] = {}
        for key, gang in self.placed.items():
            slowdowns = solved.get(key, NO_SLOWDOWN)
            if slowdowns == self.slowdowns.get(key):
                continue
            self.slowdowns[key] = slowdowns
            step_s = gang.step_s(slowdowns)
            if step_s != self.step_s.get(key):
                self.step_s[key] = step_s
                changed[key] = step_s
        return changed

    def link_busy(self) -> tuple[FloatArray, ...]:
        """Per level each domain's uplink, then per node its NICs: the traffic the running
        gangs ask to send through it, over its capacity (the busier direction)."""
        if self._busy is None:
            self._busy = self.network.link_busy()
        return self._busy

    def inflicted_gpu_s_per_s(self, solved: dict[Hashable, Slowdowns]) -> float:
        """GPU-seconds per second the running gangs would lose at `solved` slowdowns, against
        their current step times (gangs whose slowdowns do not change cost nothing)."""
        lost = 0.0
        for key, gang in self.placed.items():
            slowdowns = solved.get(key, NO_SLOWDOWN)
            if slowdowns == self.slowdowns.get(key):
                continue
            lost += gang.gpus * (gang.step_s(slowdowns) / self.step_s[key] - 1.0)
        return lost


@dataclass
class ContendedStepModel:
    """A gang's step model that scores candidates with the running gangs' traffic.

    `key`: the gang's name among the running gangs once placed (`commit` adds it, so gangs
    placed later in the same cycle see its traffic); None: the driver adds it itself.
    """

    base: TopologyStepModel
    running: RunningGangs
    key: Hashable | None = None

    def evaluate(self, rank_nodes: IntArray, rank_gpus: IntArray) -> tuple[float, float]:
        """(own step s with contention, inflicted GPU-s per GPU-s) of a candidate placement."""
        candidate = self.base.placed(rank_nodes, rank_gpus)
        if candidate.network.flows.count == 0:
            return candidate.step_s(), 0.0
        solved = self.running.network.slowdowns(extra={CANDIDATE_KEY: candidate.network})
        own_s = candidate.step_s(solved[CANDIDATE_KEY])
        inflicted = self.running.inflicted_gpu_s_per_s(solved) / max(1, candidate.gpus)
        return own_s, inflicted

    def step_s(self, rank_nodes: IntArray, rank_gpus: IntArray) -> float:
        """The placement's own step time with the running gangs' traffic."""
        return self.evaluate(rank_nodes, rank_gpus)[0]

    def score_s(self, rank_nodes: IntArray, rank_gpus: IntArray) -> float:
        """The candidate's score: own contended step x (1 + inflicted)."""
        own_s, inflicted = self.evaluate(rank_nodes, rank_gpus)
        return own_s * (1.0 + max(0.0, inflicted))

    def link_busy(self) -> tuple[FloatArray, ...] | None:
        """The running gangs' load on every uplink and NIC (`RunningGangs.link_busy`)."""
        return self.running.link_busy()

    def commit(self, rank_nodes: IntArray, rank_gpus: IntArray) -> None:
        """Add the placed gang to the running ones (when it has a `key`) and re-share."""
        if self.key is None:
            return
        self.running.add(self.key, self.base.placed(rank_nodes, rank_gpus))
        self.running.resolve()

    def ideal_s(self) -> float:
        """The gang's step on the best placement, alone (contention is not ideal)."""
        return self.base.ideal_s()


RankedPods = tuple[tuple[int, tuple[int, ...]], ...]
"""(node index, GPU indices) of each pod of a running gang, in rank order."""


@dataclass
class ContentionAwareSteps:
    """A `TopologyPlacement.step_model_for` that prices every gang against the running ones.

    `base` gives a gang's own step model (e.g. `step_model_for_group`); `running` lists the
    gangs that hold GPUs now, each as a group (its topology request names its model) and its
    pods' nodes and GPUs in rank order. Their flows are put on the fabric the first time a
    cycle asks (a running gang whose model or rank layout cannot be priced is left out: its
    traffic is unknown, not zero, and the reason is kept in `skipped`).
    """

    base: Callable[[ClusterTopology, ClusterSnapshot, PodGroup], TopologyStepModel | None]
    running: Sequence[tuple[PodGroup, RankedPods]] = ()
    skipped: dict[str, str] = field(default_factory=dict)
    _gangs: RunningGangs | None = None

    def __call__(
        self, topology: ClusterTopology, snapshot: ClusterSnapshot, group: PodGroup
    ) -> ContendedStepModel | None:
        """The gang's contention-aware step model, or None when it names no model."""
        model = self.base(topology, snapshot, group)
        if model is None:
            return None
        return ContendedStepModel(model, self.gangs(topology, snapshot), key=group.name)

    def gangs(self, topology: ClusterTopology, snapshot: ClusterSnapshot) -> RunningGangs:
        """The running gangs on `topology`'s fabric (built once per topology object)."""
        if self._gangs is not None and self._gangs.topology is topology:
            return self._gangs
        gangs = RunningGangs(topology)
        for group, pods in self.running:
            try:
                model = self.base(topology, snapshot, group)
                if model is None:
                    continue
                nodes = np.array([n for n, gpus in pods for _ in gpus], dtype=np.int64)
                gpus = np.array([g for _, ids in pods for g in ids], dtype=np.int64)
                gangs.add(group.name, model.placed(nodes, gpus))
            except (VoltpackError, ValueError) as exc:
                self.skipped[group.name] = str(exc)
        gangs.resolve()
        self._gangs = gangs
        return gangs

    def slowdowns(self) -> dict[str, float]:
        """Per running gang priced this cycle, its step time now over its ideal one."""
        if self._gangs is None:
            return {}
        return {
            str(key): self._gangs.step_s[key] / gang.step_model.ideal_s()
            for key, gang in self._gangs.placed.items()
        }
