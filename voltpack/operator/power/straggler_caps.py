"""What a deliberate power cap explains of a rank's step time, from the GPUNode specs.

The power loop writes each capped GPU's limit into its node's `GPUNode` spec; a rank on such a
GPU is expected to be slower by the power model's `cap_slowdown`, and the straggler detector
discounts that much. A rank on several GPUs takes its slowest one (a collective waits for it).

The agent writes each GPU's power draw, SM clock and utilisation into the `GPUNode` status;
`GpuReadings` gives a rank's mean of each over its GPUs, the evidence a Straggler Event shows
beside the gang's medians (an SM clock below its peers' without a cap points at throttling; a GPU
less busy than its peers, at a delay off the GPU; one drawing far less, at either).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from voltpack.model.errors import VoltpackError
from voltpack.operator.scheduling.step_reports import RankReport
from voltpack.perf.gpu_power import GpuPowerModel, power_model_for
from voltpack.policies.stragglers import cap_slowdown

NAN = float("nan")


class CapSlowdowns:
    """`expected(report)`: the step-time multiplier the caps explain for a rank (>= 1)."""

    def __init__(
        self, gpunodes: Iterable[Mapping[str, Any]], node_gpu_models: Mapping[str, str]
    ) -> None:
        """`node_gpu_models`: each node's GPU model name (catalog name or alias)."""
        self._limits: dict[tuple[str, int], float] = {}
        for gpunode in gpunodes:
            name = str((gpunode.get("metadata") or {}).get("name") or "")
            for setting in (gpunode.get("spec") or {}).get("gpus") or []:
                limit = setting.get("powerLimitW")
                if isinstance(limit, int | float) and limit > 0:
                    self._limits[(name, int(setting.get("index", -1)))] = float(limit)
        self._models = dict(node_gpu_models)
        self._power: dict[str, GpuPowerModel | None] = {}

    def _model(self, node: str) -> GpuPowerModel | None:
        sku = self._models.get(node)
        if sku is None:
            return None
        if sku not in self._power:
            try:
                self._power[sku] = power_model_for(sku)
            except VoltpackError:  # an undisclosed or unknown GPU: no cap can be explained
                self._power[sku] = None
        return self._power[sku]

    def expected(self, report: RankReport) -> float:
        """The slowest capped GPU's expected slowdown for the rank; 1.0 when none is capped."""
        if report.node is None:
            return 1.0
        limits = [
            self._limits[(report.node, gpu)]
            for gpu in report.gpu_indices
            if (report.node, gpu) in self._limits
        ]
        model = self._model(report.node)
        if not limits or model is None:
            return 1.0
        return max(1.0, float(cap_slowdown(model, min(limits))))


@dataclass(frozen=True)
class RankReadings:
    """The mean of a rank's GPUs' last published readings (NaN where none is known)."""

    power_w: float = NAN
    sm_clock_mhz: float = NAN
    utilization: float = NAN
    """0..1."""


_STATUS_FIELDS = {
    "power_w": "powerDrawW",
    "sm_clock_mhz": "smClockMhz",
    "utilization": "utilizationRatio",
}


class GpuReadings:
    """`of(report)`: a rank's GPUs' power draw, SM clock and utilisation as the agents last
    published them in the `GPUNode` statuses, each the mean over the rank's GPUs."""

    def __init__(self, gpunodes: Iterable[Mapping[str, Any]]) -> None:
        self._values: dict[str, dict[tuple[str, int], float]] = {
            name: {} for name in _STATUS_FIELDS
        }
        for gpunode in gpunodes:
            name = str((gpunode.get("metadata") or {}).get("name") or "")
            for gpu in (gpunode.get("status") or {}).get("gpus") or []:
                key = (name, int(gpu.get("index", -1)))
                for signal, status_field in _STATUS_FIELDS.items():
                    value = gpu.get(status_field)
                    if (
                        isinstance(value, int | float)
                        and not isinstance(value, bool)
                        and value >= 0
                    ):
                        self._values[signal][key] = float(value)

    def of(self, report: RankReport) -> RankReadings:
        """Each reading NaN when the rank's node or GPUs are unknown or publish none of it."""
        if report.node is None:
            return RankReadings()
        means = {}
        for signal, values in self._values.items():
            found = [
                values[(report.node, gpu)]
                for gpu in report.gpu_indices
                if (report.node, gpu) in values
            ]
            means[signal] = float(np.mean(found)) if found else NAN
        return RankReadings(**means)
