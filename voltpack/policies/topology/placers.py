"""The gang placement policies a policy file can name, behind one interface."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from voltpack.model.domain_tree import DomainTree, NodeCounts
from voltpack.policies.topology.kai import kai_topology
from voltpack.policies.topology.kueue import kueue_best_fit
from voltpack.policies.topology.step_time_placement import place_by_step_time


@dataclass(frozen=True)
class StepTimePlacer:
    """voltpack's placement: candidates scored by predicted step time, then hierarchical fit."""

    name: str = "voltpack"
    keeps_groups_whole: bool = True

    def choose(
        self,
        tree: DomainTree,
        units: int,
        required_level: int | None,
        preferred_level: int | None,
        step_time_of: Callable[[NodeCounts], float] | None,
    ) -> NodeCounts | str:
        """The fastest candidate (lowest level and tightest fit among near-equals)."""
        result = place_by_step_time(tree, units, required_level, preferred_level, step_time_of)
        if isinstance(result, str):
            return result
        chosen, compared = result
        return (
            chosen.counts
            if len(compared) < 2
            else NodeCounts(
                chosen.counts.nodes,
                chosen.counts.pods,
                f"best of {len(compared)} candidate domains",
            )
        )


LabelOnlyPlacement = Callable[[DomainTree, int, int | None, int | None], NodeCounts | str]
"""A placement that reads only the tree: (tree, pods, required level, preferred level)."""


@dataclass(frozen=True)
class LabelOnlyPlacer:
    """A scheduler's label-only topology placement (Kueue's, KAI's): it counts pods, not
    tensor-parallel groups, and never consults the step time."""

    name: str
    place: LabelOnlyPlacement
    keeps_groups_whole: bool = False

    def choose(
        self,
        tree: DomainTree,
        units: int,
        required_level: int | None,
        preferred_level: int | None,
        step_time_of: Callable[[NodeCounts], float] | None,
    ) -> NodeCounts | str:
        """The scheduler's own assignment."""
        del step_time_of
        return self.place(tree, units, required_level, preferred_level)


def _kai(
    tree: DomainTree, pods: int, required_level: int | None, preferred_level: int | None
) -> NodeCounts | str:
    """KAI's placement; its domain order weighs the job's GPUs, a slot's being the tree's."""
    return kai_topology(
        tree, pods, required_level, preferred_level, gpus_per_pod=tree.gpus_per_unit
    )


KUEUE = LabelOnlyPlacer("kueue", kueue_best_fit)
"""Kueue's topology-aware scheduling (BestFit for required/preferred levels)."""
KAI = LabelOnlyPlacer("kai", _kai)
"""KAI Scheduler's topology plugin."""
