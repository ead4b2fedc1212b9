"""Each GPU's ladder of power actions, from none to the power-cap floor.

Rung 0 is no action; rungs 1..k lock the SM clock to successively lower clocks (a small,
proactive performance cost); the last rung caps power at the floor (the backstop). For every
rung the ladder knows the power the GPU draws at full activity (`full_w`: activity 1 is the
most power-hungry work, whose transient peaks exceed TDP), the limit a cap enforces (`limit_w`,
infinite for clock locks) and the worst case (`bound_w`), so the controller can estimate and
bound a domain's power. Power is linear in activity at a fixed clock: p = idle(f) + a x dyn(f)
(as `voltpack.perf.gpu_power` models it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from voltpack.model.errors import PowerConfigError

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


class PowerCurve(Protocol):
    """What a ladder needs of a GPU power model (`voltpack.perf.GpuPowerModel` is one)."""

    @property
    def tdp_w(self) -> float: ...

    @property
    def max_clock_mhz(self) -> float: ...

    @property
    def min_clock_mhz(self) -> float: ...

    def power_w(self, activity: Any, clock_mhz: Any) -> Any: ...


@dataclass(frozen=True)
class GpuSetting:
    """A desired actuation: a locked SM clock, a power limit, or neither."""

    locked_clock_mhz: int | None = None
    power_limit_w: float | None = None

    def describe(self) -> str:
        """E.g. 'clock locked at 1110 MHz', 'power capped at 200 W', 'no action'."""
        if self.power_limit_w is not None:
            return f"power capped at {self.power_limit_w:.0f} W"
        if self.locked_clock_mhz is not None:
            return f"clock locked at {self.locked_clock_mhz} MHz"
        return "no action"


@dataclass(frozen=True)
class ActionLadder:
    """The actions available for one GPU SKU, least to most restrictive."""

    sku: str
    settings: tuple[GpuSetting, ...]
    idle_w: tuple[float, ...]
    full_w: tuple[float, ...]
    limit_w: tuple[float, ...]
    bound_w: tuple[float, ...]

    @property
    def top(self) -> int:
        """The most restrictive rung (the power-cap floor)."""
        return len(self.settings) - 1

    @classmethod
    def build(
        cls, sku: str, curve: PowerCurve, lock_clocks_mhz: Sequence[int], floor_power_w: float
    ) -> ActionLadder:
        """Rung 0: none; then one clock lock per entry (descending); last: cap at the floor."""
        clocks = list(lock_clocks_mhz)
        if clocks != sorted(clocks, reverse=True) or len(set(clocks)) != len(clocks):
            raise PowerConfigError(
                f"{sku}: lockClocksMhz must be strictly descending, got {clocks}"
            )
        for clock in clocks:
            if not curve.min_clock_mhz <= clock <= curve.max_clock_mhz:
                raise PowerConfigError(
                    f"{sku}: lock clock {clock} MHz is outside the GPU's range "
                    f"{curve.min_clock_mhz:.0f}..{curve.max_clock_mhz:.0f} MHz"
                )
        if not 0 < floor_power_w <= curve.tdp_w:
            raise PowerConfigError(
                f"{sku}: floor power {floor_power_w} W must be in (0, TDP {curve.tdp_w} W]"
            )
        settings = [GpuSetting()] + [GpuSetting(locked_clock_mhz=c) for c in clocks]
        settings.append(GpuSetting(power_limit_w=floor_power_w))
        rung_clocks = [curve.max_clock_mhz, *clocks, curve.max_clock_mhz]
        idle = [float(curve.power_w(0.0, c)) for c in rung_clocks]
        full = [float(curve.power_w(1.0, c)) for c in rung_clocks]
        limit = [np.inf] * (len(clocks) + 1) + [floor_power_w]
        bound = [*full[:-1], min(full[-1], floor_power_w)]
        return cls(sku, tuple(settings), tuple(idle), tuple(full), tuple(limit), tuple(bound))


def capped_ladder(sku: str, curve: PowerCurve, caps_w: Sequence[float]) -> ActionLadder:
    """Rung 0: none; then power caps only (descending `caps_w`, the last one the floor), in
    the units `curve` models (a GPU, or a whole server). For throughput-bound work (training)
    whose energy per iteration is lowest near a cap: a cap slows only the phases that draw
    more than it (compute), not communication, as a clock lock does."""
    caps = [float(c) for c in caps_w]
    if not caps or caps != sorted(set(caps), reverse=True) or caps[-1] <= 0:
        raise PowerConfigError(f"{sku}: power caps must be positive and strictly descending, "
                               f"got {caps}")  # fmt: skip
    idle_w = float(curve.power_w(0.0, curve.max_clock_mhz))
    full_w = float(curve.power_w(1.0, curve.max_clock_mhz))
    return ActionLadder(
        sku,
        (GpuSetting(), *(GpuSetting(power_limit_w=c) for c in caps)),
        (idle_w,) * (len(caps) + 1),
        (full_w,) * (len(caps) + 1),
        (np.inf, *caps),
        (full_w, *(min(full_w, c) for c in caps)),
    )


@dataclass(frozen=True)
class LadderTable:
    """Ladders of many GPUs as arrays `[gpu, rung]`, padded by repeating the top rung."""

    idle_w: FloatArray
    full_w: FloatArray
    limit_w: FloatArray
    bound_w: FloatArray
    top: IntArray

    @classmethod
    def of(cls, ladders: Sequence[ActionLadder]) -> LadderTable:
        """Stack one ladder per GPU."""
        width = max((ladder.top + 1 for ladder in ladders), default=1)

        def stack(field: str) -> FloatArray:
            rows = [list(getattr(ladder, field)) for ladder in ladders]
            padded = [row + [row[-1]] * (width - len(row)) for row in rows]
            return np.array(padded, dtype=np.float64).reshape(len(ladders), width)

        top = np.array([ladder.top for ladder in ladders], dtype=np.int64)
        return cls(stack("idle_w"), stack("full_w"), stack("limit_w"), stack("bound_w"), top)

    def subset(self, index: IntArray) -> LadderTable:
        """The ladders of the GPUs at `index`."""
        return LadderTable(
            self.idle_w[index], self.full_w[index], self.limit_w[index], self.bound_w[index],
            self.top[index],
        )  # fmt: skip

    def at(self, table: FloatArray, rung: IntArray) -> FloatArray:
        """`table[gpu, rung[gpu]]` for every GPU."""
        return table[np.arange(len(rung)), np.minimum(rung, self.top)]

    def estimate_w(self, power_w: FloatArray, from_rung: IntArray, to_rung: IntArray) -> FloatArray:
        """Power each GPU would draw at `to_rung`, given it draws `power_w` at `from_rung`."""
        idle_from = self.at(self.idle_w, from_rung)
        dyn_from = np.maximum(self.at(self.full_w, from_rung) - idle_from, 1e-9)
        activity = np.clip((power_w - idle_from) / dyn_from, 0.0, 1.0)
        idle_to = self.at(self.idle_w, to_rung)
        dyn_to = self.at(self.full_w, to_rung) - idle_to
        return np.minimum(idle_to + activity * dyn_to, self.at(self.limit_w, to_rung))
