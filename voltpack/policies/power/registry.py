"""Power-policy names, as written in policy files, and the classes they select."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from voltpack.model.echo import short_repr
from voltpack.model.errors import PolicyError
from voltpack.policies.power.headroom import HeadroomPolicy
from voltpack.policies.power.thresholds import ThresholdPolicy
from voltpack.policies.power.view import PowerPolicy
from voltpack.policies.registry import validated_params

_POLICIES: dict[str, type[HeadroomPolicy] | type[ThresholdPolicy]] = {
    cls.name: cls for cls in (HeadroomPolicy, ThresholdPolicy)
}


def power_policy_summaries() -> dict[str, str]:
    """Name to one-sentence definition of every power policy."""
    return {name: cls.summary for name, cls in _POLICIES.items()}


def make_power_policy(name: str, params: Mapping[str, Any] | None = None) -> PowerPolicy:
    """A new power policy called `name` with its parameters validated."""
    try:
        cls = _POLICIES[name]
    except KeyError:
        raise PolicyError(
            f"field spec.power.policy: value {short_repr(name)} is not allowed; "
            f"allowed values: {', '.join(_POLICIES)}"
        ) from None
    params_model: type[BaseModel] = cls.Params
    validated = validated_params(params_model, params, "spec.power.params", f"power policy {name}")
    return cls(validated)  # type: ignore[arg-type]
