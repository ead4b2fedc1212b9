"""Setting and resetting a power limit, shared by the vendor backends.

A backend supplies its cap range and one checked setter (`_set_power_limit`, which reads the
limit back); resetting is setting the driver's default.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from voltpack.telemetry.device import (
    ActuationAction,
    ActuationResult,
    PowerLimitRange,
    TelemetryError,
)


class PowerLimitActuation(ABC):
    """`set_power_limit` and `reset_power_limit` on top of one checked setter."""

    @abstractmethod
    def power_limit_range(self, index: int) -> PowerLimitRange:
        """The caps the driver accepts for one GPU."""

    @abstractmethod
    def _set_power_limit(
        self, index: int, action: ActuationAction, requested: str, watts: float
    ) -> ActuationResult:
        """Apply `watts`, read the limit back, and report; never raise."""

    def set_power_limit(self, index: int, watts: float) -> ActuationResult:
        """Cap the GPU's power; read the limit back; report, never raise, a refusal."""
        return self._set_power_limit(index, "set-power-limit", f"{watts:g} W", watts)

    def reset_power_limit(self, index: int) -> ActuationResult:
        """Back to the driver's default cap."""
        try:
            default_w = self.power_limit_range(index).default_w
        except TelemetryError as err:
            return ActuationResult(index, "reset-power-limit", "default", None, False, str(err))
        return self._set_power_limit(
            index, "reset-power-limit", f"default ({default_w:g} W)", default_w
        )
