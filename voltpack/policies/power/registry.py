"""Power-policy names, as written in policy files, and the classes they select."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from voltpack.policies.named import NamedRegistry
from voltpack.policies.power.headroom import HeadroomPolicy
from voltpack.policies.power.thresholds import ThresholdPolicy
from voltpack.policies.power.view import PowerPolicy

_CLASSES: tuple[type[HeadroomPolicy | ThresholdPolicy], ...] = (HeadroomPolicy, ThresholdPolicy)
POWER_POLICIES: NamedRegistry[HeadroomPolicy | ThresholdPolicy] = NamedRegistry(
    "power policy", "spec.power.policy", "spec.power.params", _CLASSES
)


def power_policy_summaries() -> dict[str, str]:
    """Name to one-sentence definition of every power policy."""
    return POWER_POLICIES.summaries()


def make_power_policy(name: str, params: Mapping[str, Any] | None = None) -> PowerPolicy:
    """A new power policy called `name` with its parameters validated."""
    return POWER_POLICIES.make(name, params)
