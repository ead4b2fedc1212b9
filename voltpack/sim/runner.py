"""Runs many (policy, seed) experiments, in parallel processes when asked."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from voltpack.policies.schema import PolicyFile
from voltpack.sim.experiment import ArrivalOrder, RunResult, run_experiment
from voltpack.sim.traces.openb import load_nodes, load_pods


@dataclass(frozen=True)
class ExperimentPlan:
    """Which trace, which policies, which seeds, and the protocol's settings."""

    nodes_path: Path
    pods_path: Path
    policies: tuple[PolicyFile, ...]
    seeds: tuple[int, ...]
    target_demand_ratio: float = 1.3
    order: ArrivalOrder = "shuffle"

    def config(self) -> dict[str, object]:
        """The plan as JSON-ready values (for reports)."""
        return {
            "nodes": str(self.nodes_path),
            "pods": str(self.pods_path),
            "policies": [p.metadata.name for p in self.policies],
            "seeds": list(self.seeds),
            "target_demand_ratio": self.target_demand_ratio,
            "order": self.order,
            "departures": False,
            "protocol": "FGD ATC'23 (hkust-adsl/kubernetes-scheduler-simulator)",
        }


def _run_one(plan: ExperimentPlan, policy_index: int, seed: int) -> RunResult:
    nodes = load_nodes(plan.nodes_path)
    pods = load_pods(plan.pods_path)
    return run_experiment(
        nodes,
        pods,
        plan.policies[policy_index],
        seed,
        target_demand_ratio=plan.target_demand_ratio,
        order=plan.order,
    )


def run_plan(
    plan: ExperimentPlan, jobs: int = 1, on_done: Callable[[RunResult], None] | None = None
) -> list[RunResult]:
    """Every (policy, seed) run of the plan, ordered by policy then seed."""
    work: Sequence[tuple[int, int]] = [
        (p, seed) for p in range(len(plan.policies)) for seed in plan.seeds
    ]
    results: dict[tuple[int, int], RunResult] = {}
    if jobs <= 1:
        for key in work:
            results[key] = _run_one(plan, *key)
            if on_done:
                on_done(results[key])
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(_run_one, plan, *key): key for key in work}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                if on_done:
                    on_done(results[futures[future]])
    return [results[key] for key in work]
