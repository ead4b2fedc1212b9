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


@dataclass(frozen=True)
class KueuePlacer:
    """Kueue's topology-aware scheduling (BestFit), label-only: it counts pods, not groups."""

    name: str = "kueue"
    keeps_groups_whole: bool = False

    def choose(
        self,
        tree: DomainTree,
        units: int,
        required_level: int | None,
        preferred_level: int | None,
        step_time_of: Callable[[NodeCounts], float] | None,
    ) -> NodeCounts | str:
        """Kueue's assignment; the step time is not consulted."""
        del step_time_of
        return kueue_best_fit(tree, units, required_level, preferred_level)


@dataclass(frozen=True)
class KaiPlacer:
    """KAI Scheduler's topology plugin, label-only: it counts pods, not groups."""

    name: str = "kai"
    keeps_groups_whole: bool = False

    def choose(
        self,
        tree: DomainTree,
        units: int,
        required_level: int | None,
        preferred_level: int | None,
        step_time_of: Callable[[NodeCounts], float] | None,
    ) -> NodeCounts | str:
        """KAI's assignment; the step time is not consulted."""
        del step_time_of
        return kai_topology(
            tree, units, required_level, preferred_level, gpus_per_pod=tree.gpus_per_unit
        )


PLACERS = {"voltpack": StepTimePlacer, "kueue": KueuePlacer, "kai": KaiPlacer}
"""Gang placement policies by the name a policy file or benchmark uses."""
