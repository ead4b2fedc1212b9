"""AMD GPUs through AMD SMI, with the official bindings (the `amdsmi` package of ROCm).

`amdsmi` binds ROCm's `libamd_smi.so` when it is imported (from `$ROCM_HOME/lib`,
`$ROCM_PATH/lib`, the loader's path, then `/opt/rocm/lib`), and a missing library surfaces
as `KeyError: 'libamd_smi.so'` from inside the package. This backend therefore imports
`amdsmi` only when it is constructed, and turns a missing ROCm into a
`BackendUnavailableError` that says what to install.

Units, from `amdsmi.h` (ROCm 7, Linux bare metal): `amdsmi_power_info_t` is in watts
(`socket_power`, `current_socket_power`, `average_socket_power`; 0xFFFF means "not
available"), `amdsmi_power_cap_info_t` and `amdsmi_set_power_cap` are in MICROWATTS, the
energy accumulator counts ticks of `counter_resolution` microjoules, clocks are MHz,
temperatures degrees Celsius, activity percent.

A field the device does not support (AMDSMI_STATUS_NOT_SUPPORTED and friends) is None. A GPU
that is gone (AMDSMI_STATUS_NOT_FOUND, no driver) raises `GpuLostError` from reads; actuation
never raises, it reports the refusal in `ActuationResult`. Clock locking uses
`amdsmi_set_gpu_clk_range` (GFX clock) and unlocking returns the GPU to the driver's `auto`
performance level.

Fault signals (`voltpack.telemetry.faults`), only what AMD SMI exposes: uncorrectable ECC errors
(`amdsmi_get_gpu_total_ecc_count`, counted since the driver loaded the GPU), thermal throttling
(`amdsmi_get_violation_status`: socket, PROCHOT, VR and HBM thermal; AMD has no power-brake
equivalent), and a lost GPU. AMD GPUs have no XIDs, no NVML-style row remapping state (bad
pages are retired by the driver) and no xGMI error counters in amdsmi's stable API, so those
signals are never raised here. A reset is seen as the energy counter going backwards or a lost
GPU answering again.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import threading
import time
from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import Any, Final, TypeVar

from voltpack.telemetry.device import (
    ActuationAction,
    ActuationResult,
    BackendUnavailableError,
    GpuInventory,
    GpuLink,
    GpuLostError,
    GpuSample,
    LinkKind,
    PowerLimitRange,
    TelemetryError,
    Topology,
    Vendor,
)
from voltpack.telemetry.faults import (
    DEFAULT_XID_HOLD_S,
    ActiveFault,
    FaultSignal,
    FaultTracker,
    ecc_signal,
    fell_off_bus_signal,
)
from voltpack.telemetry.power_limit import PowerLimitActuation

T = TypeVar("T")


# amdsmi_status_t values (amdsmi.h; the same numbers as amdsmi.amdsmi_wrapper.AMDSMI_STATUS_*).
STATUS_INVAL: Final = 1
STATUS_NOT_SUPPORTED: Final = 2
STATUS_NOT_YET_IMPLEMENTED: Final = 3
STATUS_NO_PERM: Final = 10
STATUS_NOT_FOUND: Final = 31
STATUS_DRIVER_NOT_LOADED: Final = 34
STATUS_NO_DATA: Final = 40
STATUS_NO_DRV: Final = 51
STATUS_AMDGPU_RESTART_ERR: Final = 54
STATUS_SETTING_UNAVAILABLE: Final = 55

UNSUPPORTED: Final = frozenset(
    {
        STATUS_NOT_SUPPORTED,
        STATUS_NOT_YET_IMPLEMENTED,
        STATUS_NO_PERM,
        STATUS_NO_DATA,
        STATUS_SETTING_UNAVAILABLE,
    }
)
"""AMD SMI answers that mean "this device cannot tell you": the field becomes None."""

LOST: Final = frozenset(
    {STATUS_NOT_FOUND, STATUS_DRIVER_NOT_LOADED, STATUS_NO_DRV, STATUS_AMDGPU_RESTART_ERR}
)
"""AMD SMI answers that mean the GPU (or its driver) is gone."""

NOT_AVAILABLE: Final = 0xFFFF
"""amdsmi_power_info_t and amdsmi_engine_usage_t use 0xFFFF for "no reading"."""

VIOLATIONS: Final[tuple[tuple[str, str], ...]] = (
    ("active_ppt_pwr", "sw-power-cap"),  # PPT: package power tracking, the power cap
    ("active_socket_thrm", "socket-thermal"),
    ("active_prochot_thrm", "prochot-thermal"),
    ("active_vr_thrm", "vr-thermal"),
    ("active_hbm_thrm", "hbm-thermal"),
)
"""Fields of amdsmi_get_violation_status that are set while the GPU is throttled, by name."""

THERMAL_VIOLATIONS: Final = frozenset(
    {"socket-thermal", "prochot-thermal", "vr-thermal", "hbm-thermal"}
)
"""Violations that are thermal throttling (the `thermal` fault signal)."""

LINK_TYPE_XGMI: Final = 2
LINK_TYPE_PCIE: Final = 1


def _library_dir() -> str:
    """Where amdsmi looks for libamd_smi.so first."""
    root = os.environ.get("ROCM_HOME") or os.environ.get("ROCM_PATH") or "/opt/rocm"
    return os.path.join(root, "lib")


def import_amdsmi() -> ModuleType:
    """Import `amdsmi`, or say which part of ROCm is missing."""
    printed = io.StringIO()  # amdsmi prints its own complaint to stdout; keep it for ours
    try:
        with contextlib.redirect_stdout(printed):
            return importlib.import_module("amdsmi")
    except ModuleNotFoundError as err:
        if err.name != "amdsmi":
            raise
        raise BackendUnavailableError(
            "the amdsmi Python package is not installed: `pip install amdsmi` (the version "
            "matching the node's ROCm)"
        ) from None
    except (KeyError, OSError) as err:
        detail = printed.getvalue().strip().splitlines()
        raise BackendUnavailableError(
            f"ROCm's AMD SMI library (libamd_smi.so) was not found in {_library_dir()} or on "
            "the loader path: install ROCm's amd-smi-lib package on this node (or mount "
            "/opt/rocm into the agent's container) and set ROCM_PATH to the ROCm directory"
            + (f" ({detail[0]})" if detail else f" ({type(err).__name__}: {err})")
        ) from None
    except AttributeError as err:
        raise BackendUnavailableError(
            f"the libamd_smi.so found via {_library_dir()} lacks a function the amdsmi Python "
            f"package needs ({err}): install the amdsmi package version that matches the "
            "node's ROCm"
        ) from None


def _number(value: Any, *, limit: int | None = None) -> int | None:
    """An integer reading, or None for amdsmi's "N/A" (a string) and sentinel values."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    if value < 0 or (limit is not None and value >= limit):
        return None
    return value


def _watts(value: Any) -> float | None:
    """A power reading in watts (amdsmi_power_info_t), None if not available."""
    number = _number(value, limit=NOT_AVAILABLE)
    return None if number is None else float(number)


def _microwatts_to_w(value: Any) -> float | None:
    number = _number(value)
    return None if number is None else number / 1_000_000.0


class AmdSmiBackend(PowerLimitActuation):
    """The AMD GPUs of this node. Starts AMD SMI on construction; `close()` shuts it down."""

    vendor: Vendor = "amd"

    def __init__(
        self,
        *,
        xid_hold_s: float = DEFAULT_XID_HOLD_S,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._faults = FaultTracker(xid_hold_s=xid_hold_s, clock=wall_clock)
        self._sample_lock = threading.Lock()
        self._energy: dict[int, float] = {}
        self._lost_gpus: set[int] = set()
        smi = import_amdsmi()
        self._smi = smi
        self._error: type[Exception] = smi.AmdSmiException
        try:
            smi.amdsmi_init(smi.AmdSmiInitFlags.INIT_AMD_GPUS)
        except self._error as err:
            if self._code(err) in LOST:
                raise BackendUnavailableError(
                    "the amdgpu driver is not loaded (AMD SMI: "
                    f"{self._describe(err)}): load the amdgpu kernel module and check that "
                    "`amd-smi list` works"
                ) from None
            raise BackendUnavailableError(
                f"AMD SMI failed to start: {self._describe(err)}"
            ) from None
        self._open = True
        try:
            self._handles: list[Any] = list(smi.amdsmi_get_processor_handles())
        except self._error as err:
            self.close()
            raise TelemetryError(f"AMD SMI cannot list the GPUs: {self._describe(err)}") from None

    # -- plumbing -----------------------------------------------------------------------------

    @staticmethod
    def _code(err: BaseException) -> int | None:
        getter = getattr(err, "get_error_code", None)
        return None if getter is None else int(getter())

    @staticmethod
    def _describe(err: BaseException) -> str:
        info = getattr(err, "get_error_info", None)
        return str(info()) if info is not None else str(err)

    def _lost(self, index: int, err: BaseException) -> GpuLostError:
        return GpuLostError(
            f"GPU {index} is lost (AMD SMI: {self._describe(err)}): it fell off the bus, was "
            "removed or its driver was unloaded; drain the node and reset or replace the GPU"
        )

    def _handle(self, index: int) -> Any:
        if not 0 <= index < len(self._handles):
            raise TelemetryError(
                f"no AMD GPU with index {index}: this node has {len(self._handles)}"
            )
        return self._handles[index]

    def _read(self, index: int, what: str, call: Callable[[], T]) -> T | None:
        """One AMD SMI read: None if the device cannot tell, GpuLostError if it is gone."""
        try:
            return call()
        except self._error as err:
            code = self._code(err)
            if code in UNSUPPORTED:
                return None
            if code in LOST:
                raise self._lost(index, err) from None
            raise TelemetryError(
                f"GPU {index}: reading {what} failed (AMD SMI: {self._describe(err)})"
            ) from None

    def _need(self, index: int, what: str, call: Callable[[], T]) -> T:
        """A read the caller cannot do without: None is an error."""
        value = self._read(index, what, call)
        if value is None:
            raise TelemetryError(f"GPU {index}: the driver does not report {what}")
        return value

    # -- GpuBackend ---------------------------------------------------------------------------

    def inventory(self) -> list[GpuInventory]:
        """Every GPU, in AMD SMI's enumeration order."""
        return [self._inventory_of(index) for index in range(len(self._handles))]

    def _inventory_of(self, index: int) -> GpuInventory:
        smi, h = self._smi, self._handle(index)
        asic = self._read(index, "ASIC info", lambda: smi.amdsmi_get_gpu_asic_info(h))
        bdf = self._read(index, "PCI address", lambda: smi.amdsmi_get_gpu_device_bdf(h))
        total = self._read(
            index,
            "VRAM total",
            lambda: smi.amdsmi_get_gpu_memory_total(h, smi.AmdSmiMemoryType.VRAM),
        )
        numa = self._read(index, "NUMA node", lambda: smi.amdsmi_topo_get_numa_node_number(h))
        name = None if asic is None else str(asic.get("market_name", "")).strip()
        return GpuInventory(
            index=index,
            uuid=str(self._need(index, "UUID", lambda: smi.amdsmi_get_gpu_device_uuid(h))),
            name=name if name and name != "N/A" else "AMD GPU",
            vendor="amd",
            pci_bus_id=None if bdf is None else str(bdf).lower(),
            memory_total_bytes=_number(total),
            mig_enabled=None,  # AMD's compute partitions are not MIG
            numa_node=_number(numa, limit=0x7FFFFFFF),
        )

    def sample(self, index: int) -> GpuSample:
        """A fresh reading of one GPU; raises GpuLostError if it is gone."""
        # One sample at a time: the metrics loop and the GPUNode publisher share this backend,
        # and a reading overtaken by an older one would look like a reset (energy backwards).
        with self._sample_lock:
            return self._locked_sample(index)

    def _locked_sample(self, index: int) -> GpuSample:
        try:
            return self._sample(index)
        except GpuLostError as err:
            self._lost_gpus.add(index)
            self._faults.observe(index, [fell_off_bus_signal(str(err))])
            raise

    def faults(self, index: int) -> tuple[ActiveFault, ...]:
        """Active fault signals of one GPU as of its last `sample()`."""
        return self._faults.active(index)

    def _sample(self, index: int) -> GpuSample:
        smi, h = self._smi, self._handle(index)
        uuid = str(self._need(index, "UUID", lambda: smi.amdsmi_get_gpu_device_uuid(h)))
        activity = self._read(index, "activity", lambda: smi.amdsmi_get_gpu_activity(h))
        used = self._read(
            index,
            "VRAM used",
            lambda: smi.amdsmi_get_gpu_memory_usage(h, smi.AmdSmiMemoryType.VRAM),
        )
        power = self._read(index, "power", lambda: smi.amdsmi_get_power_info(h))
        energy = self._read(index, "energy counter", lambda: smi.amdsmi_get_energy_count(h))
        cap = self._read(index, "power cap", lambda: smi.amdsmi_get_power_cap_info(h))
        gfx = self._read(
            index, "GFX clock", lambda: smi.amdsmi_get_clock_info(h, smi.AmdSmiClkType.GFX)
        )
        mem = self._read(
            index, "memory clock", lambda: smi.amdsmi_get_clock_info(h, smi.AmdSmiClkType.MEM)
        )
        ecc = self._read(index, "ECC errors", lambda: smi.amdsmi_get_gpu_total_ecc_count(h))
        violations = self._read(
            index, "violation status", lambda: smi.amdsmi_get_violation_status(h)
        )
        gfx_activity = None if activity is None else _number(activity.get("gfx_activity"))
        energy_j = None if energy is None else self._energy_j(energy)
        if index in self._lost_gpus or (
            energy_j is not None and energy_j < self._energy.get(index, 0.0)
        ):
            self._lost_gpus.discard(index)
            self._faults.reset(index)
        if energy_j is not None:
            self._energy[index] = energy_j
        uncorrectable = None if ecc is None else _number(ecc.get("uncorrectable_count"))
        throttle = self._throttle_reasons(violations)
        faults = self._faults.observe(
            index, [*ecc_signal(uncorrectable), *self._thermal_signal(throttle)]
        )
        return GpuSample(
            index=index,
            uuid=uuid,
            healthy=True,
            utilization_ratio=None if gfx_activity is None else min(gfx_activity, 100) / 100.0,
            memory_used_bytes=_number(used),
            power_w=None if power is None else self._power_w(power),
            energy_j=energy_j,
            power_limit_w=None if cap is None else _microwatts_to_w(cap.get("power_cap")),
            sm_clock_mhz=self._clock_mhz(gfx),
            memory_clock_mhz=self._clock_mhz(mem),
            temperature_c=self._temperature(index, h),
            throttle_reasons=throttle,
            ecc_errors_total=uncorrectable,
            xid_errors_total=None,  # an NVIDIA notion
            last_xid=None,
            faults=faults,
        )

    @staticmethod
    def _thermal_signal(throttle: tuple[str, ...]) -> list[FaultSignal]:
        thermal = [reason for reason in throttle if reason in THERMAL_VIOLATIONS]
        if not thermal:
            return []
        return [FaultSignal("thermal", "none", "thermal throttling: " + ", ".join(thermal))]

    @staticmethod
    def _power_w(info: dict[str, Any]) -> float | None:
        """Socket power in W: the instantaneous reading (MI300+), else the average."""
        for key in ("socket_power", "current_socket_power", "average_socket_power"):
            watts = _watts(info.get(key))
            if watts is not None:
                return watts
        return None

    @staticmethod
    def _energy_j(counter: dict[str, Any]) -> float | None:
        """The energy accumulator times its resolution (microjoules per tick), in joules."""
        ticks = _number(counter.get("energy_accumulator"))
        resolution = counter.get("counter_resolution")
        if ticks is None or not isinstance(resolution, int | float) or resolution <= 0:
            return None
        return ticks * float(resolution) / 1_000_000.0

    @staticmethod
    def _clock_mhz(info: dict[str, Any] | None) -> float | None:
        clock = None if info is None else _number(info.get("clk"), limit=0xFFFFFFFF)
        return None if clock is None else float(clock)

    def _temperature(self, index: int, handle: Any) -> float | None:
        """The edge temperature, else the hotspot (junction): MI300 has no edge sensor."""
        smi = self._smi
        for sensor in (smi.AmdSmiTemperatureType.EDGE, smi.AmdSmiTemperatureType.HOTSPOT):
            value = self._read(
                index,
                "temperature",
                partial(
                    smi.amdsmi_get_temp_metric,
                    handle,
                    sensor,
                    smi.AmdSmiTemperatureMetric.CURRENT,
                ),
            )
            if isinstance(value, int) and value >= 0:
                return float(value)
        return None

    @staticmethod
    def _throttle_reasons(violations: dict[str, Any] | None) -> tuple[str, ...]:
        if violations is None:
            return ()
        return tuple(name for key, name in VIOLATIONS if violations.get(key) is True)

    def power_limit_range(self, index: int) -> PowerLimitRange:
        """The caps the driver accepts for one GPU, in watts (AMD SMI reports microwatts)."""
        h = self._handle(index)
        info = self._need(index, "power cap info", lambda: self._smi.amdsmi_get_power_cap_info(h))
        values = [
            _microwatts_to_w(info.get(key))
            for key in ("min_power_cap", "max_power_cap", "default_power_cap")
        ]
        low, high, default = values
        if low is None or high is None or default is None:
            raise TelemetryError(f"GPU {index}: the driver does not report its power cap range")
        return PowerLimitRange(min_w=low, max_w=high, default_w=default)

    def _set_power_limit(
        self, index: int, action: ActuationAction, requested: str, watts: float
    ) -> ActuationResult:
        microwatts = round(watts * 1_000_000)
        try:
            handle = self._handle(index)
        except TelemetryError as err:
            return ActuationResult(index, action, requested, None, False, str(err))
        error: str | None = None
        try:
            self._smi.amdsmi_set_power_cap(handle, 0, microwatts)
        except self._error as err:
            error = self._refusal(index, f"a power cap of {watts:g} W", err)
        info = self._readback(index, lambda: self._smi.amdsmi_get_power_cap_info(handle))
        readback = None if info is None else _microwatts_to_w(info.get("power_cap"))
        applied = None if readback is None else f"{readback:g} W"
        if error is None and readback is None:
            error = f"GPU {index}: the driver took {requested} but the cap cannot be read back"
        elif error is None and readback is not None and abs(readback - watts) >= 1.0:
            # amdgpu keeps caps in whole watts: a sub-watt difference is the driver's rounding.
            error = f"GPU {index}: asked for {requested}, the driver reports {applied}"
        return ActuationResult(index, action, requested, applied, error is None, error)

    def lock_clocks(self, index: int, min_mhz: int, max_mhz: int) -> ActuationResult:
        """Lock the GFX clock to a range (amdsmi_set_gpu_clk_range); read the range back."""
        requested = f"{min_mhz}-{max_mhz} MHz"
        smi = self._smi
        try:
            handle = self._handle(index)
        except TelemetryError as err:
            return ActuationResult(index, "lock-clocks", requested, None, False, str(err))
        error: str | None = None
        try:
            smi.amdsmi_set_gpu_clk_range(handle, min_mhz, max_mhz, smi.AmdSmiClkType.GFX)
        except self._error as err:
            error = self._refusal(index, f"a GFX clock range of {requested}", err)
        info = self._readback(
            index, lambda: smi.amdsmi_get_clock_info(handle, smi.AmdSmiClkType.GFX)
        )
        low = None if info is None else _number(info.get("min_clk"), limit=0xFFFFFFFF)
        high = None if info is None else _number(info.get("max_clk"), limit=0xFFFFFFFF)
        applied = None if low is None or high is None else f"{low}-{high} MHz"
        if error is None and applied is None:
            error = f"GPU {index}: the driver took {requested} but the range cannot be read back"
        elif error is None and (low, high) != (min_mhz, max_mhz):
            error = f"GPU {index}: asked for {requested}, the driver reports {applied}"
        return ActuationResult(index, "lock-clocks", requested, applied, error is None, error)

    def unlock_clocks(self, index: int) -> ActuationResult:
        """Let the driver manage clocks again: performance level `auto`."""
        requested = "driver-managed"
        smi = self._smi
        try:
            handle = self._handle(index)
        except TelemetryError as err:
            return ActuationResult(index, "unlock-clocks", requested, None, False, str(err))
        error: str | None = None
        try:
            smi.amdsmi_set_gpu_perf_level(handle, smi.AmdSmiDevPerfLevel.AUTO)
        except self._error as err:
            error = self._refusal(index, "unlocking the clocks (perf level auto)", err)
        level = self._readback(index, lambda: smi.amdsmi_get_gpu_perf_level(handle))
        applied = None if level is None else str(level).removeprefix("AMDSMI_DEV_PERF_LEVEL_")
        if error is None and applied != "AUTO":
            error = f"GPU {index}: asked for perf level AUTO, the driver reports {applied}"
        shown = None if applied is None else f"perf level {applied.lower()}"
        if error is None:
            shown = f"{requested} ({shown})"
        return ActuationResult(index, "unlock-clocks", requested, shown, error is None, error)

    def _readback(self, index: int, call: Callable[[], T]) -> T | None:
        """A read after a setting change: never raises (actuation reports, never raises)."""
        try:
            return self._read(index, "read-back", call)
        except TelemetryError:
            return None

    def _refusal(self, index: int, what: str, err: BaseException) -> str:
        """A person-readable reason for a setter's AMD SMI error."""
        code = self._code(err)
        described = self._describe(err)
        if code == STATUS_NO_PERM:
            return (
                f"GPU {index}: {what} needs root (AMD SMI: {described}); run the agent as "
                "root so that it can write the amdgpu sysfs files"
            )
        if code == STATUS_INVAL:
            accepted = ""
            if "power cap" in what:
                try:
                    limits = self.power_limit_range(index)
                    accepted = f"; it accepts {limits.min_w:g}-{limits.max_w:g} W"
                except TelemetryError:
                    pass
            return f"GPU {index}: the driver rejected {what} (AMD SMI: {described}){accepted}"
        if code in UNSUPPORTED:
            return f"GPU {index} does not support {what} (AMD SMI: {described})"
        if code in LOST:
            return str(self._lost(index, err))
        return f"GPU {index}: {what} failed (AMD SMI: {described})"

    def topology(self) -> Topology:
        """XGMI between GPU pairs (amdsmi_topo_get_link_type), else PCIe by NUMA node."""
        smi = self._smi
        inventory = self.inventory()
        numa = {gpu.index: gpu.numa_node for gpu in inventory if gpu.numa_node is not None}
        links: list[GpuLink] = []
        count = len(self._handles)
        for a in range(count):
            for b in range(a + 1, count):
                link = self._read(
                    a,
                    f"link to GPU {b}",
                    partial(smi.amdsmi_topo_get_link_type, self._handles[a], self._handles[b]),
                )
                links.append(self._link(a, b, link, numa))
        return Topology(links=tuple(links), numa_node_of_gpu=numa)

    @staticmethod
    def _link(a: int, b: int, link: dict[str, Any] | None, numa: dict[int, int]) -> GpuLink:
        kind_code = None if link is None else _number(link.get("type"))
        hops = None if link is None else _number(link.get("hops"))
        if kind_code == LINK_TYPE_XGMI:
            # One hop is a direct XGMI link; more hops route through other GPUs.
            return GpuLink(a, b, "xgmi", 1 if hops == 1 else 0)
        if kind_code == LINK_TYPE_PCIE and a in numa and b in numa:
            kind: LinkKind = "pcie-host-bridge" if numa[a] == numa[b] else "cross-socket"
            return GpuLink(a, b, kind)
        return GpuLink(a, b, "unknown")

    def close(self) -> None:
        """Shut AMD SMI down (once)."""
        if self._open:
            self._open = False
            try:
                self._smi.amdsmi_shut_down()
            except self._error as err:
                raise TelemetryError(f"AMD SMI shutdown failed: {self._describe(err)}") from None

    def __enter__(self) -> AmdSmiBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
