"""Placing pods and gangs on a snapshot: filter, score, select a node, its GPUs and NIC, reserve."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from voltpack.model.decision import Decision, Placement
from voltpack.model.snapshot import BoolArray, ClusterSnapshot, IntArray
from voltpack.model.workload import Pod, PodGroup
from voltpack.policies.preference_weights import PreferenceWeights
from voltpack.policies.strategy import ScoringStrategy
from voltpack.scheduler.constraints.preferences import combined, preference_scores
from voltpack.scheduler.filter import (
    explain_rejection,
    filter_nodes,
)
from voltpack.scheduler.gang_topology import TopologyPlacement
from voltpack.scheduler.nic_allocation import choose_on_snapshot
from voltpack.scheduler.statement import Statement


@dataclass
class Scheduler:
    """Places pods and gangs on a snapshot with one scoring strategy.

    Among nodes with the best score, the node with the lowest `tie_break_rank` wins. The rank is
    a permutation of the nodes drawn once from the seed (see `with_random_ranks`), so ties are
    spread over the cluster, yet the same seed always gives the same decisions.
    """

    strategy: ScoringStrategy
    tie_break_rank: IntArray
    topology: TopologyPlacement | None = None
    """Places gangs with a topology request as one unit; without it, they go pod by pod."""
    preferences: PreferenceWeights = field(default_factory=PreferenceWeights)
    """Weights of the soft constraints beside the packing score (nodes with rules only)."""

    @classmethod
    def with_random_ranks(
        cls, strategy: ScoringStrategy, node_count: int, rng: np.random.Generator
    ) -> Scheduler:
        """A scheduler whose tie-break order is a random permutation of the nodes."""
        return cls(strategy=strategy, tie_break_rank=rng.permutation(node_count))

    def observe_arrival(self, pod: Pod) -> None:
        """Tell the strategy a pod arrived (once per pod, before its first scheduling)."""
        self.strategy.observe_arrival(pod)

    def schedule_pod(
        self,
        snapshot: ClusterSnapshot,
        pod: Pod,
        rng: np.random.Generator,
        allowed: BoolArray | None = None,
    ) -> Decision:
        """Place one pod and commit it to the snapshot, or explain why it cannot be placed.

        `allowed`, when given, is a per-node mask of the nodes the caller permits (for a
        constraint the filters do not know, such as a per-node instance limit of an app).
        """
        statement = Statement(snapshot)
        decision = self._place(snapshot, pod, rng, statement, allowed)
        statement.commit()
        return decision

    def place(
        self, snapshot: ClusterSnapshot, group: PodGroup, rng: np.random.Generator
    ) -> Decision:
        """Place a lone pod or a gang on `snapshot` (kept if placed); the subject is the gang."""
        if len(group.pods) == 1 and group.min_member == 1:
            decision = self.schedule_pod(snapshot, group.pods[0], rng)
            return decision.model_copy(update={"subject": group.name})
        return self.schedule_group(snapshot, group, rng)

    def schedule_group(
        self, snapshot: ClusterSnapshot, group: PodGroup, rng: np.random.Generator
    ) -> Decision:
        """Place a gang all-or-nothing: at least `min_member` pods, or none (rolled back).

        A gang with a topology request goes to `topology` (when the scheduler has one) and is
        placed whole, as one unit.
        """
        if group.topology is not None and self.topology is not None:
            return self.topology.place(snapshot, group).decision
        statement = Statement(snapshot)
        placements: list[Placement] = []
        failures: list[str] = []
        for pod in group.pods:
            decision = self._place(snapshot, pod, rng, statement)
            if decision.placed:
                placements.extend(decision.placements)
            else:
                failures.append(decision.reason)
        if len(placements) >= group.min_member:
            statement.commit()
            reason = f"gang {group.name}: {len(placements)}/{len(group.pods)} pods placed"
            if failures:
                reason += "; not placed: " + "; ".join(failures)
            return Decision(
                subject=group.name, placed=True, placements=tuple(placements), reason=reason
            )
        statement.rollback()
        reason = (
            f"gang {group.name}: only {len(placements)} of min {group.min_member} pods fit, "
            "nothing placed; " + "; ".join(failures)
        )
        return Decision(subject=group.name, placed=False, reason=reason)

    def _place(
        self,
        snapshot: ClusterSnapshot,
        pod: Pod,
        rng: np.random.Generator,
        statement: Statement,
        allowed: BoolArray | None = None,
    ) -> Decision:
        result = filter_nodes(snapshot, pod)
        if allowed is not None:
            result = result.excluding(allowed)
        candidates = np.flatnonzero(result.feasible)
        if candidates.size == 0:
            return Decision(
                subject=pod.name, placed=False, reason=explain_rejection(snapshot, pod, result)
            )
        node, why = self._select_node(snapshot, pod, candidates, rng)
        gpus = self.strategy.pick_gpus(snapshot, node, pod, rng)
        nics: tuple[int, ...] = ()
        nic_text = ""
        if pod.rdma_percent:
            choice = choose_on_snapshot(snapshot, node, pod, gpus)
            gpus = choice.gpus
            nics = () if choice.nic is None else (choice.nic,)
            nic_text = ", " + choice.describe(snapshot.layouts[node], pod.rdma_percent)
        placement = statement.place(node, pod, gpus, nics)
        gpu_text = f" GPUs {list(gpus)}" if gpus else ""
        reason = f"pod {pod.name} -> node {placement.node}{gpu_text}{nic_text}: {why}"
        return Decision(subject=pod.name, placed=True, placements=(placement,), reason=reason)

    def _select_node(
        self,
        snapshot: ClusterSnapshot,
        pod: Pod,
        candidates: IntArray,
        rng: np.random.Generator,
    ) -> tuple[int, str]:
        nominated = pod.constraints.nominated_node if pod.constraints is not None else None
        if nominated is not None and candidates.size > 1:
            try:
                row = snapshot.node_index(nominated)
            except KeyError:
                row = -1
            if bool((candidates == row).any()):
                # kube-scheduler tries the node preemption freed for the pod first
                return row, "its nominated node (freed for it by preemption)"
        prefix = ""
        power = snapshot.power
        if power is not None and candidates.size > 1 and power.is_high_priority(pod):
            roomy = candidates[power.preferred(pod)[candidates]]
            if 0 < roomy.size < candidates.size:
                prefix = (
                    f"high priority: {roomy.size} of {candidates.size} feasible nodes keep "
                    f"{power.preferred_headroom_fraction:.0%} power headroom; "
                )
                candidates = roomy
        node, why = self._best_scored(snapshot, pod, candidates, rng)
        return node, prefix + why

    def _best_scored(
        self,
        snapshot: ClusterSnapshot,
        pod: Pod,
        candidates: IntArray,
        rng: np.random.Generator,
    ) -> tuple[int, str]:
        if candidates.size == 1:
            return int(candidates[0]), "the only feasible node"
        scores = self.strategy.score(snapshot, pod, candidates, rng)
        label = f"{self.strategy.name} score"
        rules = snapshot.rules
        preferred = (
            preference_scores(rules, pod, candidates, self.preferences)
            if rules is not None
            else None
        )
        if preferred is not None:
            scores = combined(scores, preferred, self.preferences)
            label = f"{self.strategy.name} with the pod's preferences, score"
        best_score = scores.max()
        best = candidates[scores == best_score]
        node = int(best[np.argmin(self.tie_break_rank[best])])
        why = f"{label} {float(best_score):.4g}, best of {candidates.size} feasible nodes"
        if best.size > 1:
            why += f" ({best.size} tied, won on rank)"
        return node, why
