"""A tiny plant for controller tests: GPUs whose power follows demand and the applied rung.

Settings take effect `latency_ticks` after they are commanded; telemetry of a GPU in a gap is
not refreshed. Power at a rung is the ladder's own model (what the perf model says a GPU at
that clock or cap draws), so the test checks the controller's logic, not the model.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from voltpack.policies.power.ladder import FloatArray, IntArray
from voltpack.power.controller import PowerController, PowerDecision, Telemetry


@dataclass
class Plant:
    controller: PowerController
    high_priority: np.ndarray
    latency_ticks: int = 1
    interval_s: float = 1.0
    applied: IntArray = field(init=False)
    pending: deque[IntArray] = field(init=False)
    read_at_s: FloatArray = field(init=False)
    reading_w: FloatArray = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.controller.gpus)
        self.applied = np.zeros(n, dtype=np.int64)
        self.pending = deque(np.zeros(n, dtype=np.int64) for _ in range(self.latency_ticks))
        self.read_at_s = np.full(n, np.nan)
        self.reading_w = np.full(n, np.nan)

    def power_w(self, activity: FloatArray) -> FloatArray:
        ladders = self.controller.ladders
        idle = ladders.at(ladders.idle_w, self.applied)
        full = ladders.at(ladders.full_w, self.applied)
        return np.minimum(
            idle + activity * (full - idle), ladders.at(ladders.limit_w, self.applied)
        )

    def tick(
        self, t: int, activity: FloatArray, reporting: np.ndarray
    ) -> tuple[float, PowerDecision]:
        """Power now (W), then one controller step on what telemetry shows."""
        now_s = t * self.interval_s
        power = self.power_w(activity)
        self.reading_w = np.where(reporting, power, self.reading_w)
        self.read_at_s = np.where(reporting, now_s, self.read_at_s)
        decision = self.controller.step(
            now_s,
            Telemetry(self.reading_w.copy(), self.read_at_s.copy(), self.high_priority,
                      np.where(reporting, self.applied, -1)),
        )  # fmt: skip
        self.pending.append(decision.rung.copy())
        self.applied = self.pending.popleft()
        return float(power.sum()), decision
