"""A simulated GPU backend: N GPUs of one catalog model driven by a simple workload model.

Each GPU has a utilization in 0..1, either set by the caller (`set_utilization`) or drawn from
a deterministic seeded pattern (a new level every `pattern_period_s` seconds). Its power is

    demand = idle + (TDP - idle) x utilization x clock factor
    power  = min(demand, power limit)

where the clock factor is the locked maximum SM clock over the model's maximum (1.0 when the
clocks are unlocked). When the cap binds, the GPU slows down like a real one: the speed factor
`(limit - idle) / (demand - idle)` scales the reported SM clock and `sw-power-cap` is reported
as a throttle reason. Energy integrates power exactly (the power is piecewise constant) over an
injectable monotonic clock, so tests are deterministic.

Like a driver, the backend refuses (never raises on) a power limit outside [min, TDP] or a clock
lock outside [min, max SM clock]; the refusal names the accepted range.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from voltpack.model.errors import CatalogError
from voltpack.model.gpu_sku import GpuCatalog, GpuSku, default_catalog
from voltpack.telemetry.device import (
    ActuationAction,
    ActuationResult,
    GpuInventory,
    GpuLink,
    GpuLostError,
    GpuSample,
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
    nvlink_signal,
    row_remap_signals,
    throttle_signals,
)
from voltpack.telemetry.xid_catalog import default_xid_catalog

Clock = Callable[[], float]
"""Monotonic seconds (like `time.monotonic`)."""

_UUID_NAMESPACE = uuid.UUID("6f1c2f9e-3d7a-4d8e-9a55-1b0e7c5a9d21")
_NVLINK_LINKS = {"nvlink1": 4, "nvlink2": 6, "nvlink3": 12, "nvlink4": 18, "nvlink5": 18}
_MIB = 1024 * 1024
_GIB = 1024 * _MIB

DEFAULT_IDLE_FRACTION = 0.1
"""Idle power as a fraction of TDP (an idle H100-SXM draws about 70 W of its 700 W)."""
DEFAULT_MIN_POWER_FRACTION = 0.25
"""Lowest cap as a fraction of TDP, for models whose catalog entry has no published minimum."""
DEFAULT_MAX_SM_CLOCK_MHZ = 1980.0
"""Maximum SM clock for models whose catalog entry has none."""


@dataclass
class _Gpu:
    """Mutable state of one simulated GPU (guarded by the backend's lock)."""

    index: int
    uuid: str
    utilization: float | None  # None: follow the seeded pattern
    power_limit_w: float
    clock_lock_mhz: tuple[int, int] | None = None
    energy_j: float = 0.0
    integrated_until_s: float = 0.0
    lost: bool = False
    xid_errors_total: int = 0
    last_xid: int | None = None
    ecc_errors_total: int = 0
    ecc_volatile: int = 0
    pending_xids: list[int] = field(default_factory=list)
    row_remap_pending: bool = False
    row_remap_failure: bool = False
    nvlink_grown: dict[str, int] = field(default_factory=dict)
    hw_throttle: tuple[str, ...] = ()
    rng_cache: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class _Operating:
    """What a GPU does at one instant."""

    utilization: float
    power_w: float
    speed_factor: float
    sm_clock_mhz: float
    capped: bool


class SimulatedBackend:
    """`GpuBackend` for `count` simulated GPUs of one catalog model (`model`, e.g. "H100-SXM")."""

    vendor: Vendor = "simulated"

    def __init__(
        self,
        model: str = "H100-SXM",
        count: int = 8,
        *,
        node_name: str = "sim-node",
        catalog: GpuCatalog | None = None,
        clock: Clock = time.monotonic,
        seed: int = 0,
        utilization: float | None = None,
        pattern_period_s: float = 10.0,
        idle_fraction: float = DEFAULT_IDLE_FRACTION,
        min_sm_clock_mhz: float = 210.0,
        memory_clock_mhz: float = 1593.0,
        xid_hold_s: float = DEFAULT_XID_HOLD_S,
        wall_clock: Clock = time.time,
    ) -> None:
        """`utilization=None` makes every GPU follow the seeded pattern until set explicitly."""
        if count < 1:
            raise TelemetryError(f"simulated backend: count must be at least 1, got {count}")
        if utilization is not None:
            _check_ratio(utilization)
        if pattern_period_s <= 0:
            raise TelemetryError(
                f"simulated backend: pattern_period_s must be positive, got {pattern_period_s}"
            )
        try:
            sku = (catalog or default_catalog()).get(model)
        except CatalogError as exc:
            raise TelemetryError(f"simulated backend: {exc}") from None
        if sku.tdp_w is None:
            raise TelemetryError(
                f"simulated backend: GPU model {sku.name!r} has no tdp_w in the catalog; "
                "pick a model with a published TDP"
            )
        self.sku: GpuSku = sku
        self.node_name = node_name
        self.tdp_w: float = sku.tdp_w
        self.min_power_limit_w: float = (
            sku.min_power_limit_w
            if sku.min_power_limit_w is not None
            else round(self.tdp_w * DEFAULT_MIN_POWER_FRACTION)
        )
        self.idle_w: float = self.tdp_w * idle_fraction
        self.max_sm_clock_mhz: float = sku.max_sm_clock_mhz or DEFAULT_MAX_SM_CLOCK_MHZ
        self.min_sm_clock_mhz: float = min_sm_clock_mhz
        self.memory_clock_mhz = memory_clock_mhz
        self.memory_total_bytes: int | None = (
            int(sku.memory_gib * _GIB) if sku.memory_gib is not None else None
        )
        self._clock = clock
        self._seed = seed
        self._period_s = pattern_period_s
        self._lock = threading.Lock()
        self._catalog = default_xid_catalog()
        self._faults = FaultTracker(xid_hold_s=xid_hold_s, clock=wall_clock)
        now = clock()
        self._start_s = now
        self._gpus = [
            _Gpu(
                index=i,
                uuid="GPU-" + str(uuid.uuid5(_UUID_NAMESPACE, f"{node_name}/{seed}/{i}")),
                utilization=utilization,
                power_limit_w=self.tdp_w,
                integrated_until_s=now,
            )
            for i in range(count)
        ]

    # -- workload model (the caller's controls) -------------------------------------------------

    def set_utilization(self, index: int, ratio: float | None) -> None:
        """Fix one GPU's utilization (0..1) from now on; None returns it to the seeded pattern."""
        if ratio is not None:
            _check_ratio(ratio)
        with self._lock:
            gpu = self._gpu(index)
            self._integrate(gpu)
            gpu.utilization = ratio

    def mark_lost(self, index: int) -> None:
        """The GPU falls off the bus: `sample` raises GpuLostError, actuation is refused."""
        with self._lock:
            gpu = self._gpu(index)
            self._integrate(gpu)
            gpu.lost = True

    def mark_recovered(self, index: int) -> None:
        """The GPU is back (after a reset); its energy counter resumes where it stopped."""
        self.reset_gpu(index)

    def reset_gpu(self, index: int) -> None:
        """A GPU reset: it answers again, volatile ECC counts and a pending row remap clear
        (the remap is applied), and its latched XIDs clear."""
        with self._lock:
            gpu = self._gpu(index)
            if gpu.lost:
                gpu.integrated_until_s = self._clock()
            gpu.lost = False
            gpu.ecc_volatile = 0
            gpu.row_remap_pending = False
            gpu.pending_xids.clear()
            self._faults.reset(index)

    def inject_xid(self, index: int, xid: int) -> None:
        """Raise an XID on one GPU: an event the next `sample` delivers (and counts)."""
        with self._lock:
            gpu = self._gpu(index)
            gpu.xid_errors_total += 1
            gpu.last_xid = xid
            gpu.pending_xids.append(xid)

    def inject_ecc_errors(self, index: int, count: int = 1) -> None:
        """Add uncorrected ECC errors to one GPU's counters (lifetime and since reset)."""
        with self._lock:
            gpu = self._gpu(index)
            gpu.ecc_errors_total += count
            gpu.ecc_volatile += count

    def set_row_remap(self, index: int, *, pending: bool, failure: bool = False) -> None:
        """Row remapping state: pending (a reset applies it) or failed (no spare rows)."""
        with self._lock:
            gpu = self._gpu(index)
            gpu.row_remap_pending = pending
            gpu.row_remap_failure = failure

    def inject_nvlink_errors(self, index: int, counter: str, count: int = 1) -> None:
        """NVLink error counter growth seen by the next `sample` (replay, recovery, crc)."""
        with self._lock:
            grown = self._gpu(index).nvlink_grown
            grown[counter] = grown.get(counter, 0) + count

    def set_hw_throttle(self, index: int, reasons: tuple[str, ...]) -> None:
        """Hardware throttle reasons, e.g. ("hw-thermal-slowdown", "hw-power-brake-slowdown")."""
        with self._lock:
            self._gpu(index).hw_throttle = tuple(reasons)

    def speed_factor(self, index: int) -> float:
        """Speed relative to uncapped and unlocked (1.0); a binding cap or clock lock lowers it."""
        with self._lock:
            gpu = self._gpu(index)
            return self._operating(gpu, self._clock()).speed_factor

    # -- GpuBackend -----------------------------------------------------------------------------

    def inventory(self) -> list[GpuInventory]:
        """Every GPU, in index order."""
        half = max(1, (len(self._gpus) + 1) // 2)
        return [
            GpuInventory(
                index=gpu.index,
                uuid=gpu.uuid,
                name=self.sku.name,
                vendor=self.vendor,
                pci_bus_id=f"00000000:{0x18 + 0x10 * gpu.index:02X}:00.0",
                memory_total_bytes=self.memory_total_bytes,
                mig_enabled=False,
                numa_node=gpu.index // half,
            )
            for gpu in self._gpus
        ]

    def sample(self, index: int) -> GpuSample:
        """A fresh reading of one GPU; raises GpuLostError for a GPU marked lost."""
        with self._lock:
            gpu = self._gpu(index)
            if gpu.lost:
                message = f"GPU {index} ({gpu.uuid}) has fallen off the bus"
                self._faults.observe(index, [fell_off_bus_signal(message)], self._xids(gpu))
                raise GpuLostError(message)
            now = self._clock()
            self._integrate(gpu)
            op = self._operating(gpu, now)
            throttle = (("sw-power-cap",) if op.capped else ()) + gpu.hw_throttle
            level = [
                *ecc_signal(gpu.ecc_volatile),
                *row_remap_signals(gpu.row_remap_pending, gpu.row_remap_failure),
                *throttle_signals(throttle),
            ]
            events = [*self._xids(gpu), *nvlink_signal(gpu.nvlink_grown)]
            gpu.nvlink_grown = {}
            faults = self._faults.observe(index, level, events)
            memory_used = (
                int(self.memory_total_bytes * (0.05 + 0.85 * op.utilization)) // _MIB * _MIB
                if self.memory_total_bytes is not None
                else None
            )
            return GpuSample(
                index=index,
                uuid=gpu.uuid,
                healthy=True,
                utilization_ratio=op.utilization,
                memory_used_bytes=memory_used,
                power_w=op.power_w,
                energy_j=gpu.energy_j,
                power_limit_w=gpu.power_limit_w,
                sm_clock_mhz=op.sm_clock_mhz,
                memory_clock_mhz=self.memory_clock_mhz,
                temperature_c=round(30.0 + 50.0 * op.power_w / self.tdp_w, 1),
                throttle_reasons=throttle,
                ecc_errors_total=gpu.ecc_errors_total,
                xid_errors_total=gpu.xid_errors_total,
                last_xid=gpu.last_xid,
                faults=faults,
                xid_counts=tuple(sorted(self._faults.xid_counts(index).items())),
            )

    def faults(self, index: int) -> tuple[ActiveFault, ...]:
        """Active fault signals of one GPU as of its last `sample()`."""
        return self._faults.active(index)

    def power_limit_range(self, index: int) -> PowerLimitRange:
        """[min, TDP] W, default TDP."""
        with self._lock:
            gpu = self._gpu(index)
            if gpu.lost:
                raise GpuLostError(f"GPU {index} ({gpu.uuid}) has fallen off the bus")
        return PowerLimitRange(min_w=self.min_power_limit_w, max_w=self.tdp_w, default_w=self.tdp_w)

    def set_power_limit(self, index: int, watts: float) -> ActuationResult:
        """Cap the GPU's power; refuse (ok=False) a value outside [min, TDP]."""
        requested = f"{watts:g} W"
        with self._lock:
            gpu = self._gpu(index)
            if gpu.lost:
                return self._lost_result(gpu, "set-power-limit", requested)
            if not self.min_power_limit_w <= watts <= self.tdp_w:
                return ActuationResult(
                    index=index,
                    action="set-power-limit",
                    requested=requested,
                    applied=f"{gpu.power_limit_w:g} W",
                    ok=False,
                    error=(
                        f"GPU {index}: power limit {watts:g} W is outside the accepted range "
                        f"{self.min_power_limit_w:g}..{self.tdp_w:g} W"
                    ),
                )
            self._integrate(gpu)
            gpu.power_limit_w = float(watts)
            applied = f"{gpu.power_limit_w:g} W"
        return ActuationResult(index, "set-power-limit", requested, applied, ok=True)

    def reset_power_limit(self, index: int) -> ActuationResult:
        """Back to the default cap (TDP)."""
        requested = f"{self.tdp_w:g} W"
        with self._lock:
            gpu = self._gpu(index)
            if gpu.lost:
                return self._lost_result(gpu, "reset-power-limit", requested)
            self._integrate(gpu)
            gpu.power_limit_w = self.tdp_w
        return ActuationResult(index, "reset-power-limit", requested, requested, ok=True)

    def lock_clocks(self, index: int, min_mhz: int, max_mhz: int) -> ActuationResult:
        """Lock the SM clock to [min_mhz, max_mhz]; refuse a range outside the GPU's clocks."""
        requested = f"{min_mhz}-{max_mhz} MHz"
        with self._lock:
            gpu = self._gpu(index)
            if gpu.lost:
                return self._lost_result(gpu, "lock-clocks", requested)
            valid = self.min_sm_clock_mhz <= min_mhz <= max_mhz <= self.max_sm_clock_mhz
            if not valid:
                return ActuationResult(
                    index=index,
                    action="lock-clocks",
                    requested=requested,
                    applied=self._clock_text(gpu),
                    ok=False,
                    error=(
                        f"GPU {index}: clock range {min_mhz}-{max_mhz} MHz is invalid; both ends "
                        f"must lie in {self.min_sm_clock_mhz:g}..{self.max_sm_clock_mhz:g} MHz "
                        "and min must not exceed max"
                    ),
                )
            self._integrate(gpu)
            gpu.clock_lock_mhz = (min_mhz, max_mhz)
            applied = self._clock_text(gpu)
        return ActuationResult(index, "lock-clocks", requested, applied, ok=True)

    def unlock_clocks(self, index: int) -> ActuationResult:
        """Let the (simulated) driver manage clocks again."""
        with self._lock:
            gpu = self._gpu(index)
            if gpu.lost:
                return self._lost_result(gpu, "unlock-clocks", "unlocked")
            self._integrate(gpu)
            gpu.clock_lock_mhz = None
        return ActuationResult(index, "unlock-clocks", "unlocked", "unlocked", ok=True)

    def topology(self) -> Topology:
        """All-to-all NVLink (xGMI on AMD) for SXM/OAM-class models, PCIe otherwise."""
        link = (self.sku.intra_node_link or "").casefold()
        inventory = self.inventory()
        numa = {gpu.index: gpu.numa_node for gpu in inventory if gpu.numa_node is not None}
        links: list[GpuLink] = []
        for a in range(len(inventory)):
            for b in range(a + 1, len(inventory)):
                if link.startswith("nvlink"):
                    links.append(GpuLink(a, b, "nvlink", _NVLINK_LINKS.get(link, 1)))
                elif link == "infinity-fabric":
                    links.append(GpuLink(a, b, "xgmi", 1))
                elif numa.get(a) == numa.get(b):
                    links.append(GpuLink(a, b, "pcie-switch"))
                else:
                    links.append(GpuLink(a, b, "cross-socket"))
        return Topology(links=tuple(links), numa_node_of_gpu=numa)

    def close(self) -> None:
        """Nothing to release."""

    # -- internals ------------------------------------------------------------------------------

    def _xids(self, gpu: _Gpu) -> list[FaultSignal]:
        events = [self._catalog.signal(xid) for xid in gpu.pending_xids]
        gpu.pending_xids.clear()
        return events

    def _gpu(self, index: int) -> _Gpu:
        if not 0 <= index < len(self._gpus):
            raise TelemetryError(
                f"no GPU with index {index}; this node has {len(self._gpus)} GPUs "
                f"(0..{len(self._gpus) - 1})"
            )
        return self._gpus[index]

    def _pattern(self, gpu: _Gpu, step: int) -> float:
        """The seeded utilization of one GPU in one pattern period (0.2..1.0)."""
        level = gpu.rng_cache.get(step)
        if level is None:
            rng = random.Random(f"{self._seed}/{gpu.index}/{step}")
            level = round(0.2 + 0.8 * rng.random(), 3)
            if len(gpu.rng_cache) > 64:
                gpu.rng_cache.clear()
            gpu.rng_cache[step] = level
        return level

    def _utilization(self, gpu: _Gpu, now: float) -> float:
        if gpu.utilization is not None:
            return gpu.utilization
        step = int((now - self._start_s) // self._period_s)
        return self._pattern(gpu, max(step, 0))

    def _operating(self, gpu: _Gpu, now: float) -> _Operating:
        utilization = self._utilization(gpu, now)
        clock_max = self.max_sm_clock_mhz
        if gpu.clock_lock_mhz is not None:
            clock_max = float(gpu.clock_lock_mhz[1])
        clock_factor = clock_max / self.max_sm_clock_mhz
        demand = self.idle_w + (self.tdp_w - self.idle_w) * utilization * clock_factor
        capped = demand > gpu.power_limit_w
        speed = 1.0
        power = demand
        if capped:
            power = gpu.power_limit_w
            speed = max(0.0, (gpu.power_limit_w - self.idle_w) / (demand - self.idle_w))
        sm_clock = max(self.min_sm_clock_mhz, clock_max * speed)
        return _Operating(utilization, power, speed * clock_factor, sm_clock, capped)

    def _integrate(self, gpu: _Gpu) -> None:
        """Add the energy used since the last integration (exact: power is piecewise constant)."""
        now = self._clock()
        t = gpu.integrated_until_s
        if gpu.lost or now <= t:
            gpu.integrated_until_s = max(t, now)
            return
        while t < now:
            if gpu.utilization is None:
                step = int((t - self._start_s) // self._period_s)
                boundary = self._start_s + (step + 1) * self._period_s
                end = min(now, boundary) if boundary > t else now
            else:
                end = now
            gpu.energy_j += self._operating(gpu, t).power_w * (end - t)
            t = end
        gpu.integrated_until_s = now

    def _clock_text(self, gpu: _Gpu) -> str:
        if gpu.clock_lock_mhz is None:
            return "unlocked"
        return f"{gpu.clock_lock_mhz[0]}-{gpu.clock_lock_mhz[1]} MHz"

    def _lost_result(self, gpu: _Gpu, action: ActuationAction, requested: str) -> ActuationResult:
        return ActuationResult(
            index=gpu.index,
            action=action,
            requested=requested,
            applied=None,
            ok=False,
            error=f"GPU {gpu.index} ({gpu.uuid}) has fallen off the bus",
        )


def _check_ratio(ratio: float) -> None:
    if not 0.0 <= ratio <= 1.0:
        raise TelemetryError(f"utilization must be a ratio in 0..1, got {ratio}")
