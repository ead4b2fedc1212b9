"""Breaker semantics: how long a domain may exceed its budget before its breaker trips.

A thermal-magnetic breaker trips on heat, roughly the integral of (I/I_rated)^2 - 1 while the
current is above its rating, and at once above the magnetic threshold. With power standing in
for current at fixed voltage, a constant overload r = P / budget trips after
`thermal_constant_s / (r^2 - 1)` seconds; below the rating the accumulated heat cools off with
`cooling_time_s`. Defaults are an illustrative UL 489-style curve (about 2 minutes at 200%,
7 minutes at 135%, instantaneous at 500%); a real feed's curve comes from its breaker's data
sheet. voltpack's controller never relies on this tolerance: the simulator uses the curve only
to report whether a run would have tripped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from voltpack.model.errors import PowerConfigError


@dataclass(frozen=True)
class BreakerCurve:
    """An inverse-time (I^2 t) trip curve with an instantaneous threshold."""

    thermal_constant_s: float = 360.0
    instantaneous_ratio: float = 5.0
    cooling_time_s: float = 600.0

    def __post_init__(self) -> None:
        if self.thermal_constant_s <= 0 or self.cooling_time_s <= 0:
            raise PowerConfigError("breaker: thermal_constant_s and cooling_time_s must be > 0")
        if self.instantaneous_ratio <= 1:
            raise PowerConfigError("breaker: instantaneous_ratio must be > 1")

    def trip_time_s(self, overload_ratio: float) -> float:
        """Seconds a constant `overload_ratio` (power / budget) takes to trip (inf if never)."""
        if overload_ratio >= self.instantaneous_ratio:
            return 0.0
        if overload_ratio <= 1.0:
            return float("inf")
        return self.thermal_constant_s / (overload_ratio**2 - 1.0)

    def first_trip_s(self, power_w: NDArray[np.float64], budget_w: float, step_s: float) -> float:
        """When a power series (one sample per `step_s`) trips the breaker (inf: never)."""
        heat = 0.0
        decay = float(np.exp(-step_s / self.cooling_time_s))
        for index, ratio in enumerate((power_w / budget_w).tolist()):
            if ratio >= self.instantaneous_ratio:
                return index * step_s
            if ratio > 1.0:
                heat += (ratio * ratio - 1.0) * step_s
                if heat >= self.thermal_constant_s:
                    return index * step_s
            else:
                heat *= decay
        return float("inf")
