"""Choosing a GPU backend: `auto` tries NVML, then AMD SMI, then says what is missing."""

from __future__ import annotations

from typing import Literal

from voltpack.telemetry.amd import AmdSmiBackend
from voltpack.telemetry.device import BackendUnavailableError, GpuBackend
from voltpack.telemetry.faults import DEFAULT_XID_HOLD_S
from voltpack.telemetry.nvml import NvmlBackend
from voltpack.telemetry.simulated import SimulatedBackend

BackendName = Literal["auto", "nvml", "amd", "simulated"]


def open_backend(
    name: BackendName,
    *,
    simulated_model: str = "H100-SXM",
    simulated_gpus: int = 8,
    xid_hold_s: float = DEFAULT_XID_HOLD_S,
) -> GpuBackend:
    """The backend called `name`; `auto` is NVML, else AMD, else a clear error.

    `xid_hold_s`: an XID not raised again for this long (and no GPU reset seen) clears.
    """
    if name == "simulated":
        return SimulatedBackend(simulated_model, simulated_gpus, xid_hold_s=xid_hold_s)
    if name == "nvml":
        return NvmlBackend(xid_hold_s=xid_hold_s)
    if name == "amd":
        return AmdSmiBackend(xid_hold_s=xid_hold_s)
    problems = []
    openers: tuple[type[NvmlBackend] | type[AmdSmiBackend], ...] = (NvmlBackend, AmdSmiBackend)
    for opener in openers:
        try:
            return opener(xid_hold_s=xid_hold_s)
        except BackendUnavailableError as error:
            problems.append(str(error))
    raise BackendUnavailableError(
        "no GPU backend available: " + "; ".join(problems) + " (use --backend simulated to try "
        "the agent without GPUs)"
    )
