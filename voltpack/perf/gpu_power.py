"""GPU power versus SM clock and activity, the clock a power cap imposes, and the slowdown.

One GPU draws `idle_w` plus a dynamic part: `activity` (0..1, the share of the GPU's peak
dynamic power the work would draw at the maximum clock) times the peak dynamic power
(`tdp_w * transient_peak_ratio - idle_w`) times `(clock / max_clock) ** clock_exponent`.
Activity 1 is the prefill burst that spikes above TDP; sustained work the firmware holds at
TDP has activity `sustained_tdp_activity`. The calibration (with a source per value) lives in
`gpu_power.yaml`; TDP and maximum clock come from the GPU catalog.

Every method takes floats or numpy arrays (broadcast together) and returns float64 arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np
import yaml
from numpy.typing import ArrayLike, NDArray
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from voltpack.model.errors import CatalogError
from voltpack.model.gpu_sku import GpuSku, default_catalog

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class GpuPowerModel:
    """Power and speed of one GPU as functions of SM clock (MHz) and activity (0..1)."""

    sku: str
    idle_w: float
    tdp_w: float
    max_clock_mhz: float
    min_clock_mhz: float
    clock_exponent: float
    """Exponent of the dynamic part in clock (2.5 for A100: between f*V^2 with V ~ f, i.e. 3,
    at the top of the V/f curve, and 1 at the voltage floor)."""
    transient_peak_ratio: float
    """Peak power of a prefill burst at max clock, as a multiple of TDP (>= 1)."""
    calibrated: bool = True
    """False for the generic fallback derived only from the catalog's TDP and max clock."""
    source: str = ""

    def __post_init__(self) -> None:
        if not 0 <= self.idle_w < self.tdp_w:
            raise CatalogError(f"GPU power model {self.sku}: idle_w must lie in [0, tdp_w)")
        if not 0 < self.min_clock_mhz <= self.max_clock_mhz:
            raise CatalogError(
                f"GPU power model {self.sku}: min_clock_mhz must lie in (0, max_clock_mhz]"
            )
        if self.clock_exponent <= 0 or self.transient_peak_ratio < 1:
            raise CatalogError(
                f"GPU power model {self.sku}: clock_exponent must be > 0 and "
                "transient_peak_ratio >= 1"
            )

    @property
    def peak_w(self) -> float:
        """Power of the most power-hungry work (a prefill burst) at max clock."""
        return self.tdp_w * self.transient_peak_ratio

    @property
    def peak_dynamic_w(self) -> float:
        """Dynamic power (above idle) at activity 1 and max clock."""
        return self.peak_w - self.idle_w

    @property
    def sustained_tdp_activity(self) -> float:
        """Activity of work that draws exactly TDP at max clock (e.g. a training compute phase)."""
        return (self.tdp_w - self.idle_w) / self.peak_dynamic_w

    def clamp_clock_mhz(self, clock_mhz: ArrayLike) -> FloatArray:
        """Clocks clamped to the GPU's range [min_clock_mhz, max_clock_mhz]."""
        return np.clip(
            np.asarray(clock_mhz, dtype=np.float64), self.min_clock_mhz, self.max_clock_mhz
        )

    def power_w(self, activity: ArrayLike, clock_mhz: ArrayLike) -> FloatArray:
        """Average power (W) of work with `activity` (clipped to 0..1) at `clock_mhz`.

        No power limit is applied here: see `clock_for_power_limit_mhz`.
        """
        share = np.clip(np.asarray(activity, dtype=np.float64), 0.0, 1.0)
        ratio = self.clamp_clock_mhz(clock_mhz) / self.max_clock_mhz
        return np.asarray(
            self.idle_w + share * self.peak_dynamic_w * ratio**self.clock_exponent,
            dtype=np.float64,
        )

    def clock_for_power_limit_mhz(
        self, activity: ArrayLike, power_limit_w: ArrayLike
    ) -> FloatArray:
        """The clock a sustained power limit imposes on work with `activity`.

        Inverse of `power_w` in the clock, clamped to [min_clock_mhz, max_clock_mhz]: work
        under the limit at max clock keeps max clock; a limit at or below idle gives the
        minimum clock (where the GPU may still draw more than the limit).
        """
        share = np.clip(np.asarray(activity, dtype=np.float64), 0.0, 1.0)
        headroom_w = np.asarray(power_limit_w, dtype=np.float64) - self.idle_w
        with np.errstate(divide="ignore", invalid="ignore"):
            fraction = headroom_w / (share * self.peak_dynamic_w)
            ratio = np.where(
                headroom_w <= 0,
                0.0,
                np.where(share <= 0, 1.0, np.clip(fraction, 0.0, 1.0) ** (1 / self.clock_exponent)),
            )
        return self.clamp_clock_mhz(ratio * self.max_clock_mhz)

    def effective_clock_mhz(
        self, clock_mhz: ArrayLike, activity: float, power_limit_w: ArrayLike | None = None
    ) -> FloatArray:
        """The clock work of `activity` runs at: the (clamped) set clock, lowered further to
        what `power_limit_w` allows when a cap is set."""
        clock = self.clamp_clock_mhz(clock_mhz)
        if power_limit_w is None:
            return clock
        limited = self.clock_for_power_limit_mhz(activity, power_limit_w)
        return np.minimum(clock, np.broadcast_to(limited, clock.shape))

    def time_factor(self, clock_mhz: ArrayLike, compute_bound_share: ArrayLike) -> FloatArray:
        """Duration multiplier (>= 1) of work at `clock_mhz` relative to max clock.

        The compute-bound share of the work stretches with max_clock / clock; the rest
        (memory- or communication-bound) does not.
        """
        share = np.clip(np.asarray(compute_bound_share, dtype=np.float64), 0.0, 1.0)
        stretch = self.max_clock_mhz / self.clamp_clock_mhz(clock_mhz)
        return np.asarray(share * stretch + (1.0 - share), dtype=np.float64)


@dataclass(frozen=True)
class ServerPowerModel:
    """Power of one multi-GPU server: its GPUs plus a non-GPU part.

    Non-GPU power (CPUs, DRAM, NVSwitches, NICs, fans, PSU losses) is `non_gpu_idle_w` plus
    `coupling` W per W that the GPUs draw above their idle floor; the coupling depends on the
    workload (training drives CPUs, NICs and NVSwitches much harder than inference), so the
    workload profiles carry it.
    """

    name: str
    gpu_sku: str
    gpus_per_server: int
    provisioned_w: float
    non_gpu_idle_w: float
    source: str = ""

    def idle_w(self, gpu: GpuPowerModel) -> float:
        """Power of the server with every GPU idle."""
        return self.non_gpu_idle_w + self.gpus_per_server * gpu.idle_w

    def power_w(self, gpu_power_w: ArrayLike, gpu: GpuPowerModel, coupling: float) -> FloatArray:
        """Server power (W) when each GPU (modelled by `gpu`) draws `gpu_power_w` on average."""
        per_gpu = np.asarray(gpu_power_w, dtype=np.float64)
        above_idle = np.maximum(per_gpu - gpu.idle_w, 0.0)
        return np.asarray(
            self.non_gpu_idle_w + self.gpus_per_server * (per_gpu + coupling * above_idle),
            dtype=np.float64,
        )


# --- calibration file -------------------------------------------------------------------------


class _Sourced(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float
    source: str = Field(min_length=1)


class _GpuEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    sku: str
    idle_w: _Sourced
    min_clock_mhz: _Sourced
    clock_exponent: _Sourced
    transient_peak_ratio: _Sourced


class _Generic(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    idle_fraction_of_tdp: _Sourced
    min_clock_fraction_of_max: _Sourced
    clock_exponent: _Sourced
    transient_peak_ratio: _Sourced


class _ServerEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    gpu_sku: str
    gpus_per_server: _Sourced
    provisioned_w: _Sourced
    non_gpu_idle_w: _Sourced


class _CalibrationFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int
    gpus: list[_GpuEntry]
    generic: _Generic
    servers: list[_ServerEntry]


CALIBRATION_FILE = "voltpack/perf/gpu_power.yaml"


@cache
def _calibration() -> _CalibrationFile:
    text = resources.files("voltpack.perf").joinpath("gpu_power.yaml").read_text("utf-8")
    try:
        return _CalibrationFile.model_validate(yaml.safe_load(text))
    except (yaml.YAMLError, ValidationError) as exc:
        raise CatalogError(f"{CALIBRATION_FILE}: malformed calibration: {exc}") from None


def _catalog_figures(sku: GpuSku) -> tuple[float, float]:
    missing = [
        field
        for field, value in (("tdp_w", sku.tdp_w), ("max_sm_clock_mhz", sku.max_sm_clock_mhz))
        if value is None
    ]
    if missing or sku.tdp_w is None or sku.max_sm_clock_mhz is None:
        raise CatalogError(
            f"GPU model {sku.name!r} has no {' or '.join(missing)} in the GPU catalog, so voltpack "
            "cannot build a power model for it; add the figure to voltpack/model/gpu_skus.yaml"
        )
    return sku.tdp_w, sku.max_sm_clock_mhz


def power_model_for(sku_name: str) -> GpuPowerModel:
    """The power model of the GPU called `sku_name` (catalog name or alias, any case).

    SKUs without an entry in `gpu_power.yaml` get the generic fallback (calibrated=False).
    Raises CatalogError for an unknown SKU or one whose TDP or max clock is unpublished.
    """
    sku = default_catalog().get(sku_name)
    tdp_w, max_clock_mhz = _catalog_figures(sku)
    calibration = _calibration()
    for entry in calibration.gpus:
        if entry.sku.casefold() == sku.name.casefold():
            return GpuPowerModel(
                sku=sku.name,
                idle_w=entry.idle_w.value,
                tdp_w=tdp_w,
                max_clock_mhz=max_clock_mhz,
                min_clock_mhz=entry.min_clock_mhz.value,
                clock_exponent=entry.clock_exponent.value,
                transient_peak_ratio=entry.transient_peak_ratio.value,
                calibrated=True,
                source=f"{CALIBRATION_FILE} ({sku.name}); TDP and max clock: {sku.source}",
            )
    generic = calibration.generic
    return GpuPowerModel(
        sku=sku.name,
        idle_w=generic.idle_fraction_of_tdp.value * tdp_w,
        tdp_w=tdp_w,
        max_clock_mhz=max_clock_mhz,
        min_clock_mhz=generic.min_clock_fraction_of_max.value * max_clock_mhz,
        clock_exponent=generic.clock_exponent.value,
        transient_peak_ratio=generic.transient_peak_ratio.value,
        calibrated=False,
        source=(
            f"generic fallback in {CALIBRATION_FILE} (A100 ratios applied to the catalog's "
            f"tdp_w and max_sm_clock_mhz); catalog: {sku.source}"
        ),
    )


def server_power_model_for(name: str) -> ServerPowerModel:
    """The server power model called `name` in `gpu_power.yaml` (e.g. `dgx-a100`)."""
    entries = _calibration().servers
    for entry in entries:
        if entry.name.casefold() == name.casefold():
            return ServerPowerModel(
                name=entry.name,
                gpu_sku=default_catalog().get(entry.gpu_sku).name,
                gpus_per_server=int(entry.gpus_per_server.value),
                provisioned_w=entry.provisioned_w.value,
                non_gpu_idle_w=entry.non_gpu_idle_w.value,
                source=f"{CALIBRATION_FILE} (server {entry.name})",
            )
    known = ", ".join(entry.name for entry in entries)
    raise CatalogError(f"unknown server power model {name!r}; known: {known}")
