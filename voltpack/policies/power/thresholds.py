"""POLCA-style two-threshold power policy (Patel et al., ASPLOS'24).

What POLCA does, as voltpack's issue 6 states it: when the row's power crosses 80 % of its
budget, the low-priority GPUs get their clocks locked; above 89 % more GPUs are locked (the
high-priority ones too). By default this policy does exactly that and nothing more: stage 1
locks low priority at the first lock rung, stage 2 keeps it there and locks high priority at the
first lock rung as well (a deeper lock at stage 2 is not in that description, so it is not the
default; `low_priority_rungs` can ask for it). Sources of the two thresholds: POLCA (80 % and
89 % of the budget); Microsoft's patent application US 2025/0377708 A1 describes the same two
stages (low-priority frequency capped above the first threshold, high priority capped too above
the second, uncapped a threshold percentage below). A stage is left only when power falls a
margin below the threshold that entered it (hysteresis) and the stage has been held for
`hold_s` (and no GPU's reading is late). The policy reacts to the power measured now; it
predicts nothing.

POLCA manages inference clusters, and the patent's first stage caps low-priority *inference*.
A row that also holds low-priority training may give training its own rungs
(`throughput_bound_rungs`, e.g. `[0, 0, 1]`: training is locked only at stage 2, with the high
priority); by default training is low priority like any other and takes `low_priority_rungs`,
which is how the issue states POLCA.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from voltpack.policies.power.view import DomainPlan, DomainView, clamp_rungs


class ThresholdParams(BaseModel):
    """Thresholds as shares of the budget, and the rung each priority takes per stage."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    thresholds: tuple[float, ...] = Field(
        default=(0.80, 0.89), description="stage k starts at thresholds[k-1] x budget"
    )
    release_margin: float = Field(
        default=0.05, ge=0, lt=1, description="leave a stage below (threshold - margin) x budget"
    )
    hold_s: float = Field(default=30.0, ge=0, description="shortest time spent in a stage")
    low_priority_rungs: tuple[int, ...] = Field(
        default=(0, 1, 1), description="low-priority rung at stage 0, 1, 2, ..."
    )
    high_priority_rungs: tuple[int, ...] = Field(
        default=(0, 0, 1), description="high-priority rung at stage 0, 1, 2, ..."
    )
    throughput_bound_rungs: tuple[int, ...] | None = Field(
        default=None,
        description=(
            "rung per stage of low-priority work that loses throughput when slowed (training);"
            " null: low_priority_rungs"
        ),
    )

    @model_validator(mode="after")
    def _consistent(self) -> ThresholdParams:
        stages = len(self.thresholds) + 1
        if list(self.thresholds) != sorted(self.thresholds) or not all(
            0 < t < 1 for t in self.thresholds
        ):
            raise ValueError("thresholds must be ascending shares of the budget in (0, 1)")
        for name in ("low_priority_rungs", "high_priority_rungs", "throughput_bound_rungs"):
            rungs = getattr(self, name)
            if rungs is None:
                continue
            if len(rungs) != stages:
                raise ValueError(f"{name} needs one rung per stage ({stages}), got {len(rungs)}")
            if any(r < 0 for r in rungs) or list(rungs) != sorted(rungs):
                raise ValueError(f"{name} must be non-negative and non-decreasing")
        return self


@dataclass(frozen=True)
class _Stage:
    stage: int
    since_s: float


class ThresholdPolicy:
    """Fixed thresholds with hysteresis; fixed rungs per priority and stage."""

    name: ClassVar[str] = "thresholds"
    summary: ClassVar[str] = (
        "POLCA-style: lock low priority above 80% of budget, also high priority above 89%"
    )
    Params: ClassVar[type[BaseModel]] = ThresholdParams

    def __init__(self, params: ThresholdParams | None = None) -> None:
        self.params = params or ThresholdParams()

    def plan(self, view: DomainView, memory: Any) -> DomainPlan:
        """The stage from the power measured now; every GPU at its priority's rung."""
        params = self.params
        state = memory if isinstance(memory, _Stage) else _Stage(0, view.now_s)
        share = view.power_now_w / view.budget_w
        entered = sum(1 for t in params.thresholds if share >= t)
        stage = state.stage
        if entered > stage:
            stage = entered
        elif stage > 0 and view.now_s - state.since_s >= params.hold_s and not view.any_late:
            while stage > entered and share < params.thresholds[stage - 1] - (
                params.release_margin
            ):
                stage -= 1
        new_state = state if stage == state.stage else _Stage(stage, view.now_s)
        low = np.full(len(view.rung), params.low_priority_rungs[stage], dtype=np.int64)
        if params.throughput_bound_rungs is not None and view.throughput_bound is not None:
            low[view.throughput_bound] = params.throughput_bound_rungs[stage]
        rung = np.where(view.high_priority, params.high_priority_rungs[stage], low)
        return DomainPlan(clamp_rungs(rung, view.ladders), f"stage-{stage}", new_state)
