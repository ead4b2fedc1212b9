"""Power-policy names, as written in policy files, and the classes they select."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from voltpack.model.errors import PolicyError
from voltpack.policies.power.headroom import HeadroomPolicy
from voltpack.policies.power.thresholds import ThresholdPolicy
from voltpack.policies.power.view import PowerPolicy
from voltpack.policies.registry import describe_validation_error

_POLICIES: dict[str, type[HeadroomPolicy] | type[ThresholdPolicy]] = {
    cls.name: cls for cls in (HeadroomPolicy, ThresholdPolicy)
}


def power_policy_names() -> list[str]:
    """Every power-policy name a policy file may use."""
    return list(_POLICIES)


def power_policy_summaries() -> dict[str, str]:
    """Name to one-sentence definition of every power policy."""
    return {name: cls.summary for name, cls in _POLICIES.items()}


def make_power_policy(name: str, params: Mapping[str, Any] | None = None) -> PowerPolicy:
    """A new power policy called `name` with its parameters validated."""
    try:
        cls = _POLICIES[name]
    except KeyError:
        raise PolicyError(
            f"field spec.power.policy: value {name!r} is not allowed; "
            f"allowed values: {', '.join(_POLICIES)}"
        ) from None
    try:
        validated = cls.Params.model_validate(dict(params or {}))
    except ValidationError as exc:
        problems = "; ".join(
            describe_validation_error(error, prefix="spec.power.params") for error in exc.errors()
        )
        raise PolicyError(f"power policy {name}: {problems}") from None
    return cls(validated)  # type: ignore[arg-type]
