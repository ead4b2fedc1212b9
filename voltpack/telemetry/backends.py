"""Choosing a GPU backend: `auto` tries NVML, then AMD SMI, then says what is missing."""

from __future__ import annotations

from typing import Literal

from voltpack.telemetry.amd import AmdSmiBackend
from voltpack.telemetry.device import BackendUnavailableError, GpuBackend
from voltpack.telemetry.nvml import NvmlBackend
from voltpack.telemetry.simulated import SimulatedBackend

BackendName = Literal["auto", "nvml", "amd", "simulated"]


def open_backend(
    name: BackendName, *, simulated_model: str = "H100-SXM", simulated_gpus: int = 8
) -> GpuBackend:
    """The backend called `name`; `auto` is NVML, else AMD, else a clear error."""
    if name == "simulated":
        return SimulatedBackend(simulated_model, simulated_gpus)
    if name == "nvml":
        return NvmlBackend()
    if name == "amd":
        return AmdSmiBackend()
    problems = []
    openers: tuple[type[NvmlBackend] | type[AmdSmiBackend], ...] = (NvmlBackend, AmdSmiBackend)
    for opener in openers:
        try:
            return opener()
        except BackendUnavailableError as error:
            problems.append(str(error))
    raise BackendUnavailableError(
        "no GPU backend available: " + "; ".join(problems) + " (use --backend simulated to try "
        "the agent without GPUs)"
    )
