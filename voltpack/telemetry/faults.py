"""Fault signals of one node's GPUs and how long each stays active.

A backend observes two kinds of signal on every `sample()`:

* **level** signals (ECC uncorrected errors since the last reset, row remapping pending or
  failed, the GPU fell off the bus, hardware thermal slowdown, hardware power brake): active
  while the device reports them, cleared on the first observation that does not;
* **event** signals (XIDs, delivered once through NVML's event set, and NVLink error counters
  that grew since the previous sample): latched. Such a fault stays active until the GPU is
  reset (`FaultTracker.reset`: the driver's energy counter went backwards, or the GPU answers
  again after being lost) or until it has not been raised again for `xid_hold_s` seconds
  (default `DEFAULT_XID_HOLD_S`); while latched it keeps the most severe action it was raised
  with.

`FaultTracker` keeps, per GPU, each active fault with the wall-clock time it was first and last
seen, and a running count of XIDs by code (for `voltpack_gpu_xid_errors_by_code_total`). It is
thread-safe: the metrics loop and the GPUNode publisher share one backend.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from voltpack.model.resources.gpunode import (
    FAULT_ACTION_ORDER,
    FaultAction,
    FaultSignalKind,
    most_severe,
)

ACTION_ORDER = FAULT_ACTION_ORDER
"""Least to most severe: the GPUNode contract's order."""

LATCHED_SIGNALS: frozenset[str] = frozenset({"xid", "nvlink"})
"""Event signals: latched until a reset or the hold time (see the module docstring)."""

DEFAULT_XID_HOLD_S = 900.0
"""An XID not raised again for this long (and no reset seen) clears: 15 minutes."""


@dataclass(frozen=True)
class FaultSignal:
    """One signal as a backend sees it now (no history)."""

    signal: FaultSignalKind
    action: FaultAction
    message: str
    code: int | None = None

    @property
    def key(self) -> tuple[str, int | None]:
        """Identity of the fault: the same signal and code is the same fault."""
        return (self.signal, self.code)


@dataclass(frozen=True)
class ActiveFault:
    """A fault signal that is active, with Unix times it was first and last seen."""

    signal: FaultSignalKind
    action: FaultAction
    message: str
    code: int | None
    first_seen_s: float
    last_seen_s: float


def worst_action(faults: Iterable[ActiveFault | FaultSignal]) -> FaultAction:
    """The most severe action of `faults` ("none" when there are none)."""
    return most_severe(f.action for f in faults)


class FaultTracker:
    """Active faults per GPU index, with first/last seen and the XID hold rule."""

    def __init__(
        self, *, xid_hold_s: float = DEFAULT_XID_HOLD_S, clock: Callable[[], float] = time.time
    ) -> None:
        if xid_hold_s <= 0:
            raise ValueError(f"xid_hold_s must be positive, got {xid_hold_s}")
        self.xid_hold_s = xid_hold_s
        self._clock = clock
        self._lock = threading.Lock()
        self._active: dict[int, dict[tuple[str, int | None], ActiveFault]] = {}
        self._xid_counts: dict[int, dict[int, int]] = {}

    def observe(
        self,
        index: int,
        level: Iterable[FaultSignal] = (),
        events: Iterable[FaultSignal] = (),
    ) -> tuple[ActiveFault, ...]:
        """Record one observation of GPU `index`; returns its active faults afterwards.

        `level` is every level signal present now (absent ones clear); `events` are the events
        delivered since the last observation (XIDs), latched until reset or hold expiry.
        """
        now = self._clock()
        with self._lock:
            faults = self._active.setdefault(index, {})
            current = {signal.key: signal for signal in level}
            for key, fault in list(faults.items()):
                if fault.signal in LATCHED_SIGNALS:
                    if now - fault.last_seen_s > self.xid_hold_s:
                        del faults[key]
                elif key not in current:
                    del faults[key]
            for signal in current.values():
                self._touch(faults, signal, now)
            counts = self._xid_counts.setdefault(index, {})
            for event in events:
                self._touch(faults, event, now)
                if event.signal == "xid" and event.code is not None:
                    counts[event.code] = counts.get(event.code, 0) + 1
            return self._sorted(faults)

    def reset(self, index: int) -> None:
        """The GPU was reset (or came back): its latched faults (XIDs, NVLink) clear."""
        with self._lock:
            faults = self._active.get(index, {})
            for key in [k for k, f in faults.items() if f.signal in LATCHED_SIGNALS]:
                del faults[key]

    def active(self, index: int) -> tuple[ActiveFault, ...]:
        """The active faults of GPU `index`, as of its last observation (XID hold applied)."""
        now = self._clock()
        with self._lock:
            faults = self._active.get(index, {})
            return tuple(
                f
                for f in self._sorted(faults)
                if f.signal not in LATCHED_SIGNALS or now - f.last_seen_s <= self.xid_hold_s
            )

    def xid_counts(self, index: int) -> dict[int, int]:
        """XID events seen on GPU `index` since start, by XID number."""
        with self._lock:
            return dict(self._xid_counts.get(index, {}))

    @staticmethod
    def _touch(
        faults: dict[tuple[str, int | None], ActiveFault], signal: FaultSignal, now: float
    ) -> None:
        old = faults.get(signal.key)
        if old is None:
            faults[signal.key] = ActiveFault(
                signal.signal, signal.action, signal.message, signal.code, now, now
            )
        else:
            action = signal.action
            if signal.signal in LATCHED_SIGNALS:
                action = max(action, old.action, key=ACTION_ORDER.index)
            faults[signal.key] = replace(
                old, action=action, message=signal.message, last_seen_s=now
            )

    @staticmethod
    def _sorted(faults: dict[tuple[str, int | None], ActiveFault]) -> tuple[ActiveFault, ...]:
        return tuple(sorted(faults.values(), key=lambda f: (f.signal, f.code or 0)))


# -- the level signals, as every backend reports them -----------------------------------------


def ecc_signal(uncorrected_volatile: int | None) -> list[FaultSignal]:
    """Uncorrected ECC errors since the last reset (volatile): the GPU needs a reset."""
    if not uncorrected_volatile:
        return []
    return [
        FaultSignal(
            "ecc",
            "reset",
            f"{uncorrected_volatile} uncorrected ECC error(s) since the last GPU reset",
        )
    ]


def row_remap_signals(pending: bool, failure: bool) -> list[FaultSignal]:
    """Row remapping: pending needs a reset to take effect; a failure means replace the GPU."""
    if failure:
        return [
            FaultSignal(
                "row-remap", "replace", "row remapping failed: no spare rows left in a bank"
            )
        ]
    if pending:
        return [FaultSignal("row-remap", "reset", "row remapping pending: a GPU reset applies it")]
    return []


def nvlink_signal(grown: dict[str, int]) -> list[FaultSignal]:
    """NVLink error counters that grew since the previous sample (by counter name).

    Replay and CRC errors are retried by the link and only watched ("none"); recovery errors
    (the link had to be retrained) ask for a reset, as XID 74 does.
    """
    if not grown:
        return []
    action: FaultAction = "reset" if grown.get("recovery") else "none"
    detail = ", ".join(f"{name} +{count}" for name, count in sorted(grown.items()))
    return [FaultSignal("nvlink", action, f"NVLink errors grew: {detail}")]


def fell_off_bus_signal(message: str) -> FaultSignal:
    """The GPU does not answer (NVML_ERROR_GPU_IS_LOST): the node must be rebooted."""
    return FaultSignal("fell-off-bus", "reboot", message)


THROTTLE_SIGNALS: dict[str, FaultSignal] = {
    "hw-thermal-slowdown": FaultSignal(
        "thermal", "none", "hardware thermal slowdown: the GPU is too hot"
    ),
    "hw-power-brake-slowdown": FaultSignal(
        "power-brake", "none", "hardware power brake: the board's power supply asserted it"
    ),
}
"""Clock event (throttle) reasons that are fault signals; none of them calls for an action by
itself (the GPU works, slower), but they explain a straggler and are published."""


def throttle_signals(reasons: Iterable[str]) -> list[FaultSignal]:
    """The fault signals among a GPU's throttle reasons."""
    return [THROTTLE_SIGNALS[r] for r in sorted(set(reasons)) if r in THROTTLE_SIGNALS]
