"""Strategy names, as written in policy files, and the classes they select."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from voltpack.policies.named import (
    NamedRegistry,
    describe_validation_errors,
    validated_params,
)
from voltpack.policies.strategies.best_fit import BestFitStrategy
from voltpack.policies.strategies.dot_product import DotProductStrategy
from voltpack.policies.strategies.fgd import FgdStrategy
from voltpack.policies.strategies.gpu_clustering import GpuClusteringStrategy
from voltpack.policies.strategies.gpu_packing import GpuPackingStrategy
from voltpack.policies.strategies.least_allocated import LeastAllocatedStrategy
from voltpack.policies.strategies.random_fit import RandomStrategy
from voltpack.policies.strategy import ScoringStrategy

__all__ = [
    "STRATEGIES",
    "describe_validation_errors",
    "make_strategy",
    "strategy_names",
    "strategy_summaries",
    "validated_params",
]

STRATEGIES: NamedRegistry[ScoringStrategy] = NamedRegistry(
    "strategy",
    "spec.scoring.strategy",
    "spec.scoring.params",
    (
        RandomStrategy,
        BestFitStrategy,
        LeastAllocatedStrategy,
        DotProductStrategy,
        GpuPackingStrategy,
        GpuClusteringStrategy,
        FgdStrategy,
    ),
)


def strategy_names() -> list[str]:
    """Every strategy name a policy file may use."""
    return STRATEGIES.names()


def strategy_summaries() -> dict[str, str]:
    """Name to one-sentence definition of every strategy."""
    return STRATEGIES.summaries()


def make_strategy(name: str, params: Mapping[str, Any] | None = None) -> ScoringStrategy:
    """A new instance of the strategy called `name`, with its parameters validated."""
    return STRATEGIES.make(name, params)
