"""Strategy names, as written in policy files, and the classes they select."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from voltpack.model.echo import short_repr, shorten
from voltpack.model.errors import PolicyError
from voltpack.policies.strategies.best_fit import BestFitStrategy
from voltpack.policies.strategies.dot_product import DotProductStrategy
from voltpack.policies.strategies.fgd import FgdStrategy
from voltpack.policies.strategies.gpu_clustering import GpuClusteringStrategy
from voltpack.policies.strategies.gpu_packing import GpuPackingStrategy
from voltpack.policies.strategies.least_allocated import LeastAllocatedStrategy
from voltpack.policies.strategies.random_fit import RandomStrategy
from voltpack.policies.strategy import ScoringStrategy

M = TypeVar("M", bound=BaseModel)

MAX_LISTED_ERRORS = 20
"""Field errors a message lists; more are counted, not listed."""

_STRATEGIES: dict[str, type[ScoringStrategy]] = {
    cls.name: cls
    for cls in (
        RandomStrategy,
        BestFitStrategy,
        LeastAllocatedStrategy,
        DotProductStrategy,
        GpuPackingStrategy,
        GpuClusteringStrategy,
        FgdStrategy,
    )
}


def strategy_names() -> list[str]:
    """Every strategy name a policy file may use."""
    return list(_STRATEGIES)


def strategy_summaries() -> dict[str, str]:
    """Name to one-sentence definition of every strategy."""
    return {name: cls.summary for name, cls in _STRATEGIES.items()}


def make_strategy(name: str, params: Mapping[str, Any] | None = None) -> ScoringStrategy:
    """A new instance of the strategy called `name`, with its parameters validated."""
    try:
        cls = _STRATEGIES[name]
    except KeyError:
        raise PolicyError(
            f"unknown strategy {short_repr(name)}; allowed values: {', '.join(_STRATEGIES)}"
        ) from None
    return cls(validated_params(cls.Params, params, "spec.scoring.params", f"strategy {name}"))


def validated_params(model: type[M], params: Mapping[str, Any] | None, field: str, owner: str) -> M:
    """`params` validated by `model`; PolicyError naming `owner` and each bad `field.x`."""
    try:
        return model.model_validate(dict(params or {}))
    except ValidationError as exc:
        problems = describe_validation_errors(exc.errors(), prefix=field)
        raise PolicyError(f"{owner}: {problems}") from None


def describe_validation_errors(errors: list[Any], prefix: str = "") -> str:
    """Pydantic errors joined with '; ', at most `MAX_LISTED_ERRORS` of them (then a count)."""
    shown = "; ".join(describe_validation_error(e, prefix) for e in errors[:MAX_LISTED_ERRORS])
    more = len(errors) - MAX_LISTED_ERRORS
    return f"{shown}; and {more} more" if more > 0 else shown


def describe_validation_error(error: Any, prefix: str = "") -> str:
    """One pydantic error as 'field X: value V is not allowed; allowed values: ...'; the value
    is shown up to 200 characters."""
    parts = [prefix] if prefix else []
    parts += [str(part) for part in error["loc"]]
    where = shorten(".".join(parts) or "(top level)")
    kind = error["type"]
    if kind == "missing":
        return f"field {where} is required"
    if kind == "extra_forbidden":
        return f"field {where} is not a known field; remove it or check its spelling"
    bad = short_repr(error.get("input"))
    expected = (error.get("ctx") or {}).get("expected")
    if expected:
        return f"field {where}: value {bad} is not allowed; allowed values: {shorten(expected)}"
    return f"field {where}: value {bad} is not valid: {shorten(str(error['msg']))}"
