"""NVIDIA GPUs through NVML, with the official bindings (`nvidia-ml-py`, module `pynvml`).

NVML reports milliwatts and millijoules; this backend converts them to watts and joules.
A field the device does not support (NVML_ERROR_NOT_SUPPORTED and friends) is None. A GPU
that fell off the bus (NVML_ERROR_GPU_IS_LOST) raises `GpuLostError` from reads; actuation
never raises, it reports the refusal in `ActuationResult`.

Power limits are set with `nvmlDeviceSetPowerManagementLimit`, whose wrapper checks the
driver's return code, and then read back: the `_v2` wrapper in nvidia-ml-py discards the
return code, so a refused cap would look applied.

Fault signals (`voltpack.telemetry.faults`), read on every `sample()`:

* XIDs through NVML's event API: one event set per GPU (`nvmlEventSetCreate`,
  `nvmlDeviceRegisterEvents` with `nvmlEventTypeXidCriticalError`), drained without waiting
  (`nvmlEventSetWait_v2` with a 0 ms timeout until it answers NVML_ERROR_TIMEOUT, at most
  `MAX_EVENTS_PER_POLL` events), so a poll never blocks; each XID's action comes from
  `xid_catalog.yaml`;
* uncorrected volatile ECC errors, row remapping (`nvmlDeviceGetRemappedRows`: pending,
  failure), NVLink error counters of the active links (growth since the previous sample);
* the GPU fell off the bus (NVML_ERROR_GPU_IS_LOST on any read);
* clock event reasons HW thermal slowdown and HW power brake.

A GPU reset is seen as the energy counter going backwards (it counts since the driver loaded
the GPU) or as a lost GPU answering again; it clears latched XIDs and re-registers the event
set.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Final, TypeVar

import pynvml  # type: ignore[import-untyped]

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
    FaultTracker,
    ecc_signal,
    fell_off_bus_signal,
    nvlink_signal,
    row_remap_signals,
    throttle_signals,
)
from voltpack.telemetry.power_limit import PowerLimitActuation
from voltpack.telemetry.xid_catalog import XidCatalog, default_xid_catalog

T = TypeVar("T")
_log = logging.getLogger(__name__)


UNSUPPORTED: Final = frozenset(
    {
        pynvml.NVML_ERROR_NOT_SUPPORTED,
        pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
        pynvml.NVML_ERROR_NO_DATA,
        pynvml.NVML_ERROR_NO_PERMISSION,
    }
)
"""NVML answers that mean "this device cannot tell you": the field becomes None."""

THROTTLE_REASONS: Final[tuple[tuple[int, str], ...]] = (
    (pynvml.nvmlClocksThrottleReasonGpuIdle, "gpu-idle"),
    (pynvml.nvmlClocksThrottleReasonApplicationsClocksSetting, "applications-clocks-setting"),
    (pynvml.nvmlClocksThrottleReasonSwPowerCap, "sw-power-cap"),
    (pynvml.nvmlClocksThrottleReasonHwSlowdown, "hw-slowdown"),
    (pynvml.nvmlClocksThrottleReasonSyncBoost, "sync-boost"),
    (pynvml.nvmlClocksThrottleReasonSwThermalSlowdown, "sw-thermal-slowdown"),
    (pynvml.nvmlClocksThrottleReasonHwThermalSlowdown, "hw-thermal-slowdown"),
    (pynvml.nvmlClocksThrottleReasonHwPowerBrakeSlowdown, "hw-power-brake-slowdown"),
    (pynvml.nvmlClocksThrottleReasonDisplayClockSetting, "display-clock-setting"),
    (0x200, "board-limit"),
    (0x400, "reliability"),
)
"""Bits of nvmlDeviceGetCurrentClocksEventReasons (formerly ...ThrottleReasons), by name."""

ANCESTOR_KINDS: Final[dict[int, LinkKind]] = {
    pynvml.NVML_TOPOLOGY_INTERNAL: "pcie-switch",  # two GPUs on one board
    pynvml.NVML_TOPOLOGY_SINGLE: "pcie-switch",
    pynvml.NVML_TOPOLOGY_MULTIPLE: "pcie-switch",
    pynvml.NVML_TOPOLOGY_HOSTBRIDGE: "pcie-host-bridge",
    pynvml.NVML_TOPOLOGY_NODE: "pcie-host-bridge",  # host bridges of one CPU socket
    pynvml.NVML_TOPOLOGY_SYSTEM: "cross-socket",
}
"""nvmlDeviceGetTopologyCommonAncestor levels as GpuLink kinds."""


MAX_EVENTS_PER_POLL: Final = 64
"""Events drained from one GPU's event set per sample (the rest wait for the next one)."""

NVLINK_INTERVAL_S: Final = 10.0
"""Default: NVLink error counters are read at most every 10 s per GPU."""

NVLINK_COUNTERS: Final[tuple[tuple[str, int], ...]] = (
    ("replay", pynvml.NVML_NVLINK_ERROR_DL_REPLAY),
    ("recovery", pynvml.NVML_NVLINK_ERROR_DL_RECOVERY),
    ("crc-flit", pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT),
    ("crc-data", pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA),
)
"""nvmlDeviceGetNvLinkErrorCounter counters watched, by name."""


def decode_throttle_reasons(mask: int) -> tuple[str, ...]:
    """The names of the bits set in a clocks event (throttle) reason mask."""
    names = [name for bit, name in THROTTLE_REASONS if mask & bit]
    known = 0
    for bit, _ in THROTTLE_REASONS:
        known |= bit
    if mask & ~known:
        names.append(f"unknown-0x{mask & ~known:x}")
    return tuple(names)


def normalize_bus_id(raw: bytes | str) -> str:
    """NVML's `00000000:18:00.0` as Linux writes it: `0000:18:00.0`."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    try:
        domain, bus, devfn = text.strip().split(":")
        device, function = devfn.split(".")
        return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{int(function)}"
    except ValueError:
        return text.strip().lower()


def _code(err: BaseException) -> int:
    return int(getattr(err, "value", pynvml.NVML_ERROR_UNKNOWN))


def _watts(milli: Any) -> float | None:
    return None if milli is None else int(milli) / 1000.0


def _lost(index: int, err: BaseException) -> GpuLostError:
    return GpuLostError(
        f"GPU {index} is lost (NVML: {err}): it fell off the bus or was removed; "
        "drain the node and reset or replace the GPU"
    )


class NvmlBackend(PowerLimitActuation):
    """The NVIDIA GPUs of this node. Starts NVML on construction; `close()` shuts it down."""

    vendor: Vendor = "nvidia"

    def __init__(
        self,
        *,
        xid_hold_s: float = DEFAULT_XID_HOLD_S,
        wall_clock: Callable[[], float] = time.time,
        xid_catalog: XidCatalog | None = None,
        nvlink_interval_s: float = NVLINK_INTERVAL_S,
    ) -> None:
        """`nvlink_interval_s`: NVLink error counters are read at most this often per GPU."""
        self._faults = FaultTracker(xid_hold_s=xid_hold_s, clock=wall_clock)
        self._sample_lock = threading.Lock()
        self._catalog = xid_catalog or default_xid_catalog()
        self._event_sets: dict[int, Any] = {}  # index -> event set, or None: no XID events
        self._last_xid: dict[int, int] = {}
        self._energy: dict[int, int] = {}  # last energy counter (mJ), to see resets
        self._nvlink_totals: dict[int, dict[str, int]] = {}
        self._active_links: dict[int, list[int]] = {}
        self._nvlink_interval_s = nvlink_interval_s
        self._nvlink_read_at: dict[int, float] = {}  # monotonic time of the last counter read
        self._lost: set[int] = set()
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as err:
            code = _code(err)
            if code == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
                raise BackendUnavailableError(
                    "the NVIDIA driver (libnvidia-ml.so.1) was not found: install the NVIDIA "
                    "driver on this node, or run the agent with the NVIDIA container toolkit "
                    "so that the driver's libraries are mounted into the container"
                ) from None
            if code == pynvml.NVML_ERROR_DRIVER_NOT_LOADED:
                raise BackendUnavailableError(
                    "the NVIDIA driver is not loaded (NVML: Driver Not Loaded): load the "
                    "nvidia kernel module and check that `nvidia-smi` works"
                ) from None
            raise BackendUnavailableError(f"NVML failed to start: {err}") from None
        self._open = True

    # -- plumbing -----------------------------------------------------------------------------

    def _handle(self, index: int) -> Any:
        try:
            return pynvml.nvmlDeviceGetHandleByIndex(index)
        except pynvml.NVMLError as err:
            code = _code(err)
            if code == pynvml.NVML_ERROR_GPU_IS_LOST:
                raise _lost(index, err) from None
            if code == pynvml.NVML_ERROR_INVALID_ARGUMENT:
                raise TelemetryError(
                    f"no NVIDIA GPU with index {index}: this node has {self._count()}"
                ) from None
            raise TelemetryError(f"GPU {index}: NVML cannot open the device: {err}") from None

    def _count(self) -> int:
        try:
            return int(pynvml.nvmlDeviceGetCount())
        except pynvml.NVMLError as err:
            raise TelemetryError(f"NVML cannot count the GPUs: {err}") from None

    def _read(self, index: int, what: str, call: Callable[[], T]) -> T | None:
        """One NVML read: None if the device cannot tell, GpuLostError if it is gone."""
        try:
            return call()
        except pynvml.NVMLError as err:
            code = _code(err)
            if code in UNSUPPORTED:
                return None
            if code == pynvml.NVML_ERROR_GPU_IS_LOST:
                raise _lost(index, err) from None
            raise TelemetryError(f"GPU {index}: reading {what} failed (NVML: {err})") from None

    def _need(self, index: int, what: str, call: Callable[[], T]) -> T:
        """A read the caller cannot do without: None is an error."""
        value = self._read(index, what, call)
        if value is None:
            raise TelemetryError(f"GPU {index}: the driver does not report {what}")
        return value

    # -- GpuBackend ---------------------------------------------------------------------------

    def inventory(self) -> list[GpuInventory]:
        """Every GPU, in index order."""
        return [self._inventory_of(index) for index in range(self._count())]

    def _inventory_of(self, index: int) -> GpuInventory:
        handle = self._handle(index)
        pci = self._read(index, "PCI info", lambda: pynvml.nvmlDeviceGetPciInfo(handle))
        memory = self._read(index, "memory info", lambda: pynvml.nvmlDeviceGetMemoryInfo(handle))
        mig = self._read(index, "MIG mode", lambda: pynvml.nvmlDeviceGetMigMode(handle))
        numa = self._read(index, "NUMA node", lambda: pynvml.nvmlDeviceGetNumaNodeId(handle))
        return GpuInventory(
            index=index,
            uuid=str(self._need(index, "UUID", lambda: pynvml.nvmlDeviceGetUUID(handle))),
            name=str(self._need(index, "name", lambda: pynvml.nvmlDeviceGetName(handle))),
            vendor="nvidia",
            pci_bus_id=None if pci is None else normalize_bus_id(pci.busId),
            memory_total_bytes=None if memory is None else int(memory.total),
            mig_enabled=None if mig is None else int(mig[0]) == pynvml.NVML_DEVICE_MIG_ENABLE,
            numa_node=None if numa is None or int(numa) < 0 else int(numa),
        )

    def sample(self, index: int) -> GpuSample:
        """A fresh reading of one GPU; raises GpuLostError if it fell off the bus."""
        # One sample at a time: the metrics loop and the GPUNode publisher share this backend,
        # and a reading overtaken by an older one would look like a reset (energy backwards).
        with self._sample_lock:
            return self._locked_sample(index)

    def _locked_sample(self, index: int) -> GpuSample:
        try:
            return self._sample(index)
        except GpuLostError as err:
            self._lost.add(index)
            self._drop_event_set(index)
            self._faults.observe(index, [fell_off_bus_signal(str(err))])
            raise

    def faults(self, index: int) -> tuple[ActiveFault, ...]:
        """Active fault signals of one GPU as of its last `sample()`."""
        return self._faults.active(index)

    def _sample(self, index: int) -> GpuSample:
        h = self._handle(index)
        uuid = str(self._need(index, "UUID", lambda: pynvml.nvmlDeviceGetUUID(h)))
        util = self._read(index, "utilization", lambda: pynvml.nvmlDeviceGetUtilizationRates(h))
        memory = self._read(index, "memory info", lambda: pynvml.nvmlDeviceGetMemoryInfo(h))
        power = self._read(index, "power usage", lambda: pynvml.nvmlDeviceGetPowerUsage(h))
        energy = self._read(
            index, "energy counter", lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
        )
        limit = self._read(index, "power limit", lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(h))
        sm_clock = self._read(
            index, "SM clock", lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
        )
        mem_clock = self._read(
            index,
            "memory clock",
            lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
        )
        temperature = self._read(
            index,
            "temperature",
            lambda: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
        )
        reasons = self._read(index, "clock event reasons", lambda: self._event_reasons(h))
        ecc = self._read(
            index,
            "ECC errors",
            lambda: pynvml.nvmlDeviceGetTotalEccErrors(
                h, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC
            ),
        )
        throttle = () if reasons is None else decode_throttle_reasons(reasons)
        if index in self._lost or (energy is not None and int(energy) < self._energy.get(index, 0)):
            self._on_reset(index)
        if energy is not None:
            self._energy[index] = int(energy)
        remap = self._read(index, "remapped rows", lambda: pynvml.nvmlDeviceGetRemappedRows(h))
        xids = self._drain_xids(index, h)
        level = [
            *ecc_signal(None if ecc is None else int(ecc)),
            *([] if remap is None else row_remap_signals(bool(remap[2]), bool(remap[3]))),
            *throttle_signals(throttle),
        ]
        events = [self._catalog.signal(x) for x in xids]
        events += nvlink_signal(self._nvlink_growth(index, h))
        faults = self._faults.observe(index, level, events)
        if xids:
            self._last_xid[index] = xids[-1]
        supported = self._event_sets.get(index) is not None
        return GpuSample(
            index=index,
            uuid=uuid,
            healthy=True,
            utilization_ratio=None if util is None else int(util.gpu) / 100.0,
            memory_used_bytes=None if memory is None else int(memory.used),
            power_w=_watts(power),
            energy_j=_watts(energy),
            power_limit_w=_watts(limit),
            sm_clock_mhz=None if sm_clock is None else float(sm_clock),
            memory_clock_mhz=None if mem_clock is None else float(mem_clock),
            temperature_c=None if temperature is None else float(temperature),
            throttle_reasons=throttle,
            ecc_errors_total=None if ecc is None else int(ecc),
            # XIDs seen through the event set since the agent started (None: no XID events).
            xid_errors_total=sum(self._faults.xid_counts(index).values()) if supported else None,
            last_xid=self._last_xid.get(index),
            faults=faults,
            xid_counts=tuple(sorted(self._faults.xid_counts(index).items())),
        )

    # -- fault signals ------------------------------------------------------------------------

    def _on_reset(self, index: int) -> None:
        """The GPU was reset (or answers again): latched XIDs clear, counters restart."""
        self._lost.discard(index)
        self._faults.reset(index)
        self._drop_event_set(index)
        self._nvlink_totals.pop(index, None)

    def _drop_event_set(self, index: int) -> None:
        event_set = self._event_sets.pop(index, None)
        if event_set is not None:
            # the GPU is gone or was reset: the set is useless either way
            with contextlib.suppress(pynvml.NVMLError):
                pynvml.nvmlEventSetFree(event_set)

    def _event_set(self, index: int, handle: Any) -> Any:
        """This GPU's XID event set, created on first use; None if it has no XID events."""
        if index in self._event_sets:
            return self._event_sets[index]
        event_set = None
        try:
            event_set = pynvml.nvmlEventSetCreate()
            pynvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, event_set)
        except pynvml.NVMLError as err:
            if event_set is not None:
                with contextlib.suppress(pynvml.NVMLError):
                    pynvml.nvmlEventSetFree(event_set)
            if _code(err) == pynvml.NVML_ERROR_GPU_IS_LOST:
                raise _lost(index, err) from None
            _log.warning("GPU %d: XID events unavailable (NVML: %s); XIDs are not seen", index, err)
            event_set = None
        self._event_sets[index] = event_set
        return event_set

    def _drain_xids(self, index: int, handle: Any) -> list[int]:
        """XIDs delivered since the last poll, without waiting."""
        event_set = self._event_set(index, handle)
        xids: list[int] = []
        while event_set is not None and len(xids) < MAX_EVENTS_PER_POLL:
            try:
                data = pynvml.nvmlEventSetWait_v2(event_set, 0)
            except pynvml.NVMLError as err:
                code = _code(err)
                if code == pynvml.NVML_ERROR_TIMEOUT:
                    break
                if code == pynvml.NVML_ERROR_GPU_IS_LOST:
                    raise _lost(index, err) from None
                raise TelemetryError(f"GPU {index}: waiting for XID events failed: {err}") from None
            if int(data.eventType) & pynvml.nvmlEventTypeXidCriticalError:
                xids.append(int(data.eventData))
        return xids

    def _nvlink_growth(self, index: int, handle: Any) -> dict[str, int]:
        """How much each NVLink error counter (summed over active links) grew since last time."""
        if index not in self._active_links:
            self._active_links[index] = self._links_up(index, handle)
        now = time.monotonic()
        last = self._nvlink_read_at.get(index)
        # 4 counters x up to 18 links: not on every 1 s power pass
        recent = last is not None and now - last < self._nvlink_interval_s
        if index in self._nvlink_totals and recent:
            return {}
        self._nvlink_read_at[index] = now
        totals = dict.fromkeys((name for name, _ in NVLINK_COUNTERS), 0)
        for link in self._active_links[index]:
            for name, counter in NVLINK_COUNTERS:
                value = self._read(
                    index,
                    f"NVLink {link} {name} errors",
                    partial(pynvml.nvmlDeviceGetNvLinkErrorCounter, handle, link, counter),
                )
                totals[name] += 0 if value is None else int(value)
        previous = self._nvlink_totals.get(index)
        self._nvlink_totals[index] = totals
        if previous is None:
            return {}  # the first reading is the baseline: counters run since the driver loaded
        return {n: totals[n] - previous[n] for n in totals if totals[n] > previous[n]}

    def _links_up(self, index: int, handle: Any) -> list[int]:
        links: list[int] = []
        for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
            try:
                if pynvml.nvmlDeviceGetNvLinkState(handle, link):
                    links.append(link)
            except pynvml.NVMLError as err:
                if _code(err) == pynvml.NVML_ERROR_GPU_IS_LOST:
                    raise _lost(index, err) from None
                break
        return links

    @staticmethod
    def _event_reasons(handle: Any) -> int:
        """Clock event reasons; drivers before 535 know only the old "throttle" name."""
        try:
            return int(pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle))
        except pynvml.NVMLError as err:
            if _code(err) != pynvml.NVML_ERROR_FUNCTION_NOT_FOUND:
                raise
        return int(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))

    def power_limit_range(self, index: int) -> PowerLimitRange:
        """The caps the driver accepts for one GPU, in watts."""
        h = self._handle(index)
        low, high = self._need(
            index,
            "power limit constraints",
            lambda: pynvml.nvmlDeviceGetPowerManagementLimitConstraints(h),
        )
        default = self._need(
            index,
            "default power limit",
            lambda: pynvml.nvmlDeviceGetPowerManagementDefaultLimit(h),
        )
        return PowerLimitRange(
            min_w=int(low) / 1000.0, max_w=int(high) / 1000.0, default_w=int(default) / 1000.0
        )

    def _set_power_limit(
        self, index: int, action: ActuationAction, requested: str, watts: float
    ) -> ActuationResult:
        milliwatts = round(watts * 1000)
        error: str | None = None
        try:
            handle = self._handle(index)
        except TelemetryError as err:
            return ActuationResult(index, action, requested, None, False, str(err))
        try:
            # Not ..._v2: nvidia-ml-py's wrapper of it drops the driver's return code.
            pynvml.nvmlDeviceSetPowerManagementLimit(handle, milliwatts)
        except pynvml.NVMLError as err:
            error = self._refusal(index, f"a power limit of {watts:g} W", err)
        readback = self._readback(index, lambda: pynvml.nvmlDeviceGetPowerManagementLimit(handle))
        applied = None if readback is None else f"{int(readback) / 1000.0:g} W"
        if error is None and readback is None:
            error = f"GPU {index}: the driver took {requested} but the limit cannot be read back"
        elif error is None and readback is not None and int(readback) != milliwatts:
            error = f"GPU {index}: asked for {requested}, the driver reports {applied}"
        return ActuationResult(index, action, requested, applied, error is None, error)

    def lock_clocks(self, index: int, min_mhz: int, max_mhz: int) -> ActuationResult:
        """Lock the SM clock to a range; report, never raise, a refusal."""
        requested = f"{min_mhz}-{max_mhz} MHz"
        return self._clock_action(
            index,
            "lock-clocks",
            requested,
            lambda h: pynvml.nvmlDeviceSetGpuLockedClocks(h, min_mhz, max_mhz),
            f"locked clocks of {requested}",
            requested,
        )

    def unlock_clocks(self, index: int) -> ActuationResult:
        """Let the driver manage clocks again."""
        return self._clock_action(
            index,
            "unlock-clocks",
            "driver-managed",
            pynvml.nvmlDeviceResetGpuLockedClocks,
            "unlocking the clocks",
            "driver-managed",
        )

    def _clock_action(
        self,
        index: int,
        action: ActuationAction,
        requested: str,
        call: Callable[[Any], object],
        what: str,
        applied_when_ok: str,
    ) -> ActuationResult:
        try:
            handle = self._handle(index)
        except TelemetryError as err:
            return ActuationResult(index, action, requested, None, False, str(err))
        error: str | None = None
        try:
            call(handle)
        except pynvml.NVMLError as err:
            error = self._refusal(index, what, err)
        # NVML has no getter for the locked range: report the SM clock it now runs at.
        sm_clock = self._readback(
            index, lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
        )
        now = "" if sm_clock is None else f"SM clock {int(sm_clock)} MHz"
        if error is None:
            applied: str | None = applied_when_ok + (f" ({now})" if now else "")
        else:
            applied = now or None
        return ActuationResult(index, action, requested, applied, error is None, error)

    def _readback(self, index: int, call: Callable[[], T]) -> T | None:
        """A read after a setting change: never raises (actuation reports, never raises)."""
        try:
            return self._read(index, "read-back", call)
        except TelemetryError:
            return None

    def _refusal(self, index: int, what: str, err: BaseException) -> str:
        """A person-readable reason for a setter's NVML error."""
        code = _code(err)
        if code == pynvml.NVML_ERROR_NO_PERMISSION:
            return (
                f"GPU {index}: {what} needs root or CAP_SYS_ADMIN (NVML: {err}); run the "
                "agent as root or grant it CAP_SYS_ADMIN"
            )
        if code == pynvml.NVML_ERROR_INVALID_ARGUMENT:
            accepted = ""
            try:
                limits = self.power_limit_range(index)
                if "power limit" in what:
                    accepted = f"; it accepts {limits.min_w:g}-{limits.max_w:g} W"
            except TelemetryError:
                pass
            return f"GPU {index}: the driver rejected {what} (NVML: {err}){accepted}"
        if code == pynvml.NVML_ERROR_NOT_SUPPORTED:
            return f"GPU {index} does not support {what} (NVML: {err})"
        if code == pynvml.NVML_ERROR_GPU_IS_LOST:
            return str(_lost(index, err))
        return f"GPU {index}: {what} failed (NVML: {err})"

    def topology(self) -> Topology:
        """NVLink counts between GPUs, else the PCIe common ancestor of each pair."""
        count = self._count()
        handles = [self._handle(index) for index in range(count)]
        inventory = self.inventory()
        by_bus = {gpu.pci_bus_id: gpu.index for gpu in inventory if gpu.pci_bus_id}
        direct = [[0] * count for _ in range(count)]
        to_switch = [0] * count
        for index, handle in enumerate(handles):
            for peer in self._nvlink_peers(index, handle):
                if peer in by_bus and by_bus[peer] != index:
                    direct[index][by_bus[peer]] += 1
                else:  # an NVSwitch (or a device that is not one of these GPUs)
                    to_switch[index] += 1
        links: list[GpuLink] = []
        for a in range(count):
            for b in range(a + 1, count):
                nvlinks = max(direct[a][b], direct[b][a])
                if not nvlinks and to_switch[a] and to_switch[b]:
                    nvlinks = min(to_switch[a], to_switch[b])
                if nvlinks:
                    links.append(GpuLink(a, b, "nvlink", nvlinks))
                    continue
                level = self._read(
                    a,
                    f"common ancestor with GPU {b}",
                    partial(pynvml.nvmlDeviceGetTopologyCommonAncestor, handles[a], handles[b]),
                )
                kind = "unknown" if level is None else ANCESTOR_KINDS.get(int(level), "unknown")
                links.append(GpuLink(a, b, kind))
        numa = {gpu.index: gpu.numa_node for gpu in inventory if gpu.numa_node is not None}
        return Topology(links=tuple(links), numa_node_of_gpu=numa)

    def _nvlink_peers(self, index: int, handle: Any) -> list[str]:
        """The PCI bus ids at the far end of each active NVLink of one GPU."""
        peers: list[str] = []
        for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
            try:
                active = pynvml.nvmlDeviceGetNvLinkState(handle, link)
            except pynvml.NVMLError as err:
                code = _code(err)
                if code == pynvml.NVML_ERROR_GPU_IS_LOST:
                    raise _lost(index, err) from None
                break  # NOT_SUPPORTED: no NVLink; INVALID_ARGUMENT: past the last link
            if not active:
                continue
            remote = self._read(
                index,
                f"NVLink {link} remote",
                partial(pynvml.nvmlDeviceGetNvLinkRemotePciInfo, handle, link),
            )
            if remote is not None:
                peers.append(normalize_bus_id(remote.busId))
        return peers

    def close(self) -> None:
        """Free the event sets and shut NVML down (once)."""
        if self._open:
            for index in list(self._event_sets):
                self._drop_event_set(index)
            self._open = False
            try:
                pynvml.nvmlShutdown()
            except pynvml.NVMLError as err:
                raise TelemetryError(f"NVML shutdown failed: {err}") from None

    def __enter__(self) -> NvmlBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
