"""Strategy names, as written in policy files, and the classes they select."""

from __future__ import annotations

from voltpack.model.errors import PolicyError
from voltpack.policies.strategies.best_fit import BestFitStrategy
from voltpack.policies.strategies.dot_product import DotProductStrategy
from voltpack.policies.strategies.gpu_clustering import GpuClusteringStrategy
from voltpack.policies.strategies.gpu_packing import GpuPackingStrategy
from voltpack.policies.strategies.least_allocated import LeastAllocatedStrategy
from voltpack.policies.strategies.random_fit import RandomStrategy
from voltpack.policies.strategy import ScoringStrategy

_STRATEGIES: dict[str, type[ScoringStrategy]] = {
    cls.name: cls
    for cls in (
        RandomStrategy,
        BestFitStrategy,
        LeastAllocatedStrategy,
        DotProductStrategy,
        GpuPackingStrategy,
        GpuClusteringStrategy,
    )
}


def strategy_names() -> list[str]:
    """Every strategy name a policy file may use."""
    return list(_STRATEGIES)


def strategy_summaries() -> dict[str, str]:
    """Name to one-sentence definition of every strategy."""
    return {name: cls.summary for name, cls in _STRATEGIES.items()}


def make_strategy(name: str) -> ScoringStrategy:
    """A new instance of the strategy called `name`."""
    try:
        return _STRATEGIES[name]()
    except KeyError:
        raise PolicyError(
            f"unknown strategy {name!r}; allowed values: {', '.join(_STRATEGIES)}"
        ) from None
