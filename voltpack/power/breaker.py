"""Breaker semantics: how long a domain may exceed its budget before its breaker trips.

A thermal-magnetic breaker trips on heat, roughly the integral of (I/I_rated)^2 - 1 while the
current is above its rating, and at once above the magnetic threshold. With power standing in
for current at fixed voltage, a constant overload r = P / budget trips after
`thermal_constant_s / (r^2 - 1)` seconds; below the rating the accumulated heat cools off with
`cooling_time_s`. Defaults are an illustrative UL 489-style curve (about 2 minutes at 200%,
7 minutes at 135%, instantaneous at 500%); a real feed's curve comes from its breaker's data
sheet. voltpack's controller never relies on this tolerance: the simulator uses the curve only
to report whether a run would have tripped, and how close it came (`heat_peak_share`: the
largest accumulated heat as a share of the heat that trips).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from voltpack.model.errors import PowerConfigError

FloatArray = NDArray[np.float64]


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

    def heat_s(self, power_w: NDArray[np.float64], budget_w: float, step_s: float) -> FloatArray:
        """Accumulated heat after each sample of a power series (one sample per `step_s`), in
        overload-seconds: each sample above the rating adds `(r^2 - 1) * step_s`, each sample at
        or below it cools the heat by `exp(-step_s / cooling_time_s)`. The breaker trips when
        the heat reaches `thermal_constant_s` (the instantaneous trip is not counted here)."""
        if budget_w <= 0 or step_s <= 0:
            raise PowerConfigError("breaker: budget_w and step_s must be > 0")
        decay = float(np.exp(-step_s / self.cooling_time_s))
        heat = 0.0
        out = np.empty(power_w.size)
        for index, ratio in enumerate((power_w / budget_w).tolist()):
            heat = heat + (ratio * ratio - 1.0) * step_s if ratio > 1.0 else heat * decay
            out[index] = heat
        return out

    def first_trip_s(self, power_w: NDArray[np.float64], budget_w: float, step_s: float) -> float:
        """When a power series (one sample per `step_s`) trips the breaker (inf: never): the
        start of the first sample at or above the instantaneous ratio or whose heat reaches
        `thermal_constant_s`."""
        hits = np.flatnonzero(
            self._trips(power_w, budget_w, self.heat_s(power_w, budget_w, step_s))
        )
        return float(hits[0]) * step_s if hits.size else float("inf")

    def heat_peak_share(
        self, power_w: NDArray[np.float64], budget_w: float, step_s: float
    ) -> float:
        """The breaker's margin over a power series: the largest accumulated heat as a share of
        the heat that trips it (`thermal_constant_s`). 0: never above the rating; 1: trips (a
        sample at or above the instantaneous ratio counts as 1; the share is capped at 1, since
        the heat after a trip means nothing). `1 - share` is the margin left."""
        heat = self.heat_s(power_w, budget_w, step_s)
        if self._trips(power_w, budget_w, heat).any():
            return 1.0
        return float(heat.max() / self.thermal_constant_s) if heat.size else 0.0

    def _trips(
        self, power_w: NDArray[np.float64], budget_w: float, heat_s: FloatArray
    ) -> NDArray[np.bool_]:
        """[sample] whether the sample trips the breaker: its heat reaches the thermal
        constant, or its power reaches the instantaneous ratio."""
        thermal: NDArray[np.bool_] = heat_s >= self.thermal_constant_s
        return thermal | (power_w / budget_w >= self.instantaneous_ratio)
