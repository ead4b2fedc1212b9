"""The gang placement policies a policy file can name, behind one interface."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from voltpack.model.domain_tree import DomainTree, NodeCounts
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
