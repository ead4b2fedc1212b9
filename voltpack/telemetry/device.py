"""The one protocol every GPU backend implements (NVML, AMD SMI, simulated).

Units are in the names: watts, joules, bytes, MHz, degrees Celsius, ratios in 0..1. A backend
reports what the device cannot tell as None, never as 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from voltpack.model.errors import VoltpackError
from voltpack.telemetry.faults import ActiveFault

Vendor = Literal["nvidia", "amd", "simulated"]
LinkKind = Literal["nvlink", "xgmi", "pcie-switch", "pcie-host-bridge", "cross-socket", "unknown"]
ActuationAction = Literal["set-power-limit", "reset-power-limit", "lock-clocks", "unlock-clocks"]


class TelemetryError(VoltpackError):
    """A backend cannot start or a device call failed in a way the user should see."""


class BackendUnavailableError(TelemetryError):
    """The vendor library or driver is missing; the message says what to install."""


class GpuLostError(TelemetryError):
    """The GPU fell off the bus (or was removed); the agent marks it unhealthy."""


@dataclass(frozen=True)
class GpuInventory:
    """What a GPU is: fixed for the life of the agent."""

    index: int
    uuid: str
    name: str
    vendor: Vendor
    pci_bus_id: str | None = None
    memory_total_bytes: int | None = None
    mig_enabled: bool | None = None
    numa_node: int | None = None


@dataclass(frozen=True)
class PowerLimitRange:
    """The power caps the driver accepts, and its default, in watts."""

    min_w: float
    max_w: float
    default_w: float


@dataclass(frozen=True)
class GpuSample:
    """One reading of a GPU. Counters (`energy_j`, `*_total`) only grow."""

    index: int
    uuid: str
    healthy: bool = True
    utilization_ratio: float | None = None
    memory_used_bytes: int | None = None
    power_w: float | None = None
    energy_j: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    temperature_c: float | None = None
    throttle_reasons: tuple[str, ...] = ()
    ecc_errors_total: int | None = None
    xid_errors_total: int | None = None
    last_xid: int | None = None
    faults: tuple[ActiveFault, ...] = ()
    """Active fault signals after this reading (see `voltpack.telemetry.faults`)."""
    xid_counts: tuple[tuple[int, int], ...] = ()
    """(XID, events seen since the agent started) for each XID seen, by XID number."""


@dataclass(frozen=True)
class ActuationResult:
    """What a setting change asked for and what the device reports afterwards (read back)."""

    index: int
    action: ActuationAction
    requested: str
    applied: str | None
    ok: bool
    error: str | None = None


@dataclass(frozen=True)
class GpuLink:
    """How two GPUs reach each other, best first: nvlink > pcie-switch > host-bridge > smp."""

    gpu_a: int
    gpu_b: int
    kind: LinkKind
    links: int = 0


@dataclass(frozen=True)
class Topology:
    """GPU-to-GPU links and NUMA placement of one node."""

    links: tuple[GpuLink, ...] = ()
    numa_node_of_gpu: dict[int, int] = field(default_factory=dict)


class GpuBackend(Protocol):
    """A vendor's GPUs on this node. Every method may raise TelemetryError (or GpuLostError)."""

    vendor: Vendor

    def inventory(self) -> list[GpuInventory]:
        """Every GPU, in index order."""
        ...

    def sample(self, index: int) -> GpuSample:
        """A fresh reading of one GPU."""
        ...

    def faults(self, index: int) -> tuple[ActiveFault, ...]:
        """Active fault signals of one GPU as of its last `sample()`; never raises. A GPU whose
        `sample()` raised GpuLostError has a `fell-off-bus` fault here."""
        ...

    def power_limit_range(self, index: int) -> PowerLimitRange:
        """The caps the driver accepts for one GPU."""
        ...

    def set_power_limit(self, index: int, watts: float) -> ActuationResult:
        """Cap the GPU's power; read the limit back; report, never raise, a refusal."""
        ...

    def reset_power_limit(self, index: int) -> ActuationResult:
        """Back to the driver's default cap."""
        ...

    def lock_clocks(self, index: int, min_mhz: int, max_mhz: int) -> ActuationResult:
        """Lock the SM clock to a range; report, never raise, a refusal."""
        ...

    def unlock_clocks(self, index: int) -> ActuationResult:
        """Let the driver manage clocks again."""
        ...

    def topology(self) -> Topology:
        """Links between this backend's GPUs."""
        ...

    def close(self) -> None:
        """Release the vendor library."""
        ...
