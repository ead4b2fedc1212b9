"""voltpack's power policy: keep the predicted peak under a target, shedding only what is needed.

Each tick the policy predicts the domain's power one actuation horizon ahead (now plus a high
quantile of the rises seen over that horizon in the recent past), and when the prediction passes
`target_fraction` of the budget it raises GPUs one rung at a time until the estimated saving
covers the excess: first low-priority work that loses only latency when slowed (request-driven
inference), then low-priority work that loses throughput (training), and high priority only
when no low-priority GPU has anything left to give. Within a group it fills level by level:
every GPU of the group reaches rung k before any goes to rung k + 1 (power falls faster than
speed as the clock drops, so many shallow locks cost less speed per watt than a few deep ones),
and at one level the GPUs that save the most watts go first. When the prediction falls below
`release_fraction` of the budget, nothing was raised for `hold_s` and no reading is late, it
steps GPUs back down in the reverse order (high priority first, deepest rung first), never more
than keeps the prediction under the release level.

The rises are measured on the domain's unthrottled power (each reading scaled back to no
action; a capped GPU keeps its last uncapped estimate, `voltpack.power.controller`), so the jump
a release itself causes is not mistaken for the workload rising; measured on the power as drawn,
every release widened the predicted rise, which held more GPUs slowed, a loop that ended with
high priority capped while the row drew 56 % of its budget (52 servers, issue 6 benchmark). The
readings lag the commands by the actuation latency, so the policy judges the commanded rungs by
their estimated power (a step already taken is neither repeated nor undone before it shows).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from voltpack.policies.power.ladder import FloatArray, IntArray
from voltpack.policies.power.view import BoolArray, DomainPlan, DomainView

SAVING_EPSILON_W = 0.5
"""A step that saves less than this has nothing to give."""
MAX_RISE_ROUNDS = 3
"""Rounds of shedding for the excess the room-limited rise leaves after a first round."""


class HeadroomParams(BaseModel):
    """Target and release levels as shares of the budget, and the prediction's quantile."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    target_fraction: float = Field(default=0.97, gt=0, le=1)
    release_fraction: float = Field(default=0.92, gt=0, lt=1)
    hold_s: float = Field(default=30.0, ge=0)
    rise_quantile: float = Field(default=0.999, gt=0.5, le=1)
    window_s: float = Field(default=3600.0, gt=0, description="past used for the rise quantile")
    refresh_s: float = Field(
        default=30.0, gt=0, description="how often the rise quantile is recomputed"
    )
    room_limited_rises: bool = Field(
        default=True,
        description="count each shed group's rises only up to the room its GPUs have left",
    )
    rebalance: bool = Field(
        default=True, description="after the hold, trade low-priority watts for high priority"
    )

    @model_validator(mode="after")
    def _ordered(self) -> HeadroomParams:
        if self.release_fraction >= self.target_fraction:
            raise ValueError("release_fraction must be below target_fraction")
        return self


@dataclass(frozen=True)
class _Memory:
    last_raise_s: float
    rise_w: float = 0.0
    rise_at_s: float = -np.inf
    group_rises_w: FloatArray | None = None
    """`[sample, shed group]` rises over the horizon in the window (when groups are known)."""


def predicted_rise_w(history_w: FloatArray, horizon_ticks: int, quantile: float) -> float:
    """A high quantile of the rise over `horizon_ticks` ticks in `history_w` (0 if too short)."""
    if horizon_ticks < 1 or len(history_w) <= horizon_ticks:
        return 0.0
    rises = history_w[horizon_ticks:] - history_w[:-horizon_ticks]
    return max(0.0, float(np.quantile(rises, quantile)))


class HeadroomPolicy:
    """Predict, then shed the fewest watts needed, cheapest GPUs and low priority first."""

    name: ClassVar[str] = "headroom"
    summary: ClassVar[str] = "predict the next peak; shed only the watts needed, low priority first"
    Params: ClassVar[type[BaseModel]] = HeadroomParams

    def __init__(self, params: HeadroomParams | None = None) -> None:
        self.params = params or HeadroomParams()

    def rise_w(self, view: DomainView) -> float:
        """The rise of the unthrottled power to expect over one control interval plus the
        actuation latency."""
        horizon = int(np.ceil((view.interval_s + view.actuation_latency_s) / view.interval_s))
        window = max(horizon + 1, int(self.params.window_s / view.interval_s))
        return predicted_rise_w(view.rise_history_w[-window:], horizon, self.params.rise_quantile)

    def group_rises_w(self, view: DomainView) -> FloatArray | None:
        """`[sample, shed group]` rises of each group's unthrottled power over one interval
        plus the actuation latency, in the recent window (None: groups not known)."""
        history = view.group_unthrottled_history_w
        if history is None or history.ndim != 2:
            return None
        horizon = int(np.ceil((view.interval_s + view.actuation_latency_s) / view.interval_s))
        window = max(horizon + 1, int(self.params.window_s / view.interval_s))
        recent = history[-window:]
        if len(recent) <= horizon:
            return np.zeros((0, history.shape[1]))
        return np.asarray(recent[horizon:] - recent[:-horizon], dtype=np.float64)

    def rise_at_w(self, view: DomainView, state: _Memory, rung: IntArray) -> float:
        """The rise to expect with the GPUs at `rung`: each group's past rises, no larger than
        the group can still rise there (capped GPUs cannot follow their workload up), summed
        per sample, at the rise quantile. Without groups: the domain's rise quantile."""
        rises = state.group_rises_w
        if rises is None:
            return state.rise_w
        if rises.shape[0] == 0:
            return 0.0
        total = np.minimum(rises, view.room_w(rung)).sum(axis=1)
        return max(0.0, float(np.quantile(total, self.params.rise_quantile)))

    def plan(self, view: DomainView, memory: Any) -> DomainPlan:
        """Raise to cover the predicted excess, or release within the release level."""
        state = memory if isinstance(memory, _Memory) else _Memory(-np.inf)
        if view.now_s - state.rise_at_s >= self.params.refresh_s:
            state = replace(
                state, rise_w=self.rise_w(view), rise_at_s=view.now_s,
                group_rises_w=(
                    self.group_rises_w(view) if self.params.room_limited_rises else None
                ),
            )  # fmt: skip
        # The readings lag the commands by the actuation latency: judge the commanded rungs
        # by their estimated power, so a step already taken is neither repeated nor undone;
        # release only when the measured power agrees.
        rise_w = self.rise_at_w(view, state, view.rung)
        predicted = view.commanded_power_w + rise_w
        release_judged = max(predicted, view.power_now_w + rise_w)
        target = self.params.target_fraction * view.budget_w
        release = self.params.release_fraction * view.budget_w
        rung = view.rung.copy()
        if predicted > target:
            rung = raise_rungs(view, rung, predicted - target)
            for _ in range(MAX_RISE_ROUNDS):
                # Shedding leaves the shed GPUs less room to rise: the excess left may be
                # smaller than first predicted, or, where the estimate fell short, larger.
                excess = commanded_at_w(view, rung) + self.rise_at_w(view, state, rung) - target
                if excess <= SAVING_EPSILON_W:
                    break
                stepped = raise_rungs(view, rung, excess)
                if np.array_equal(stepped, rung):
                    break
                rung = stepped
            changed = bool(np.any(rung != view.rung))
            state = replace(state, last_raise_s=view.now_s) if changed else state
            level = "shedding"
        elif (
            release_judged < release
            and view.now_s - state.last_raise_s >= self.params.hold_s
            and not view.any_late
        ):
            rung = release_rungs(view, rung, release - release_judged)
            level = "releasing" if np.any(rung != view.rung) else "normal"
        else:
            if (
                self.params.rebalance
                and view.now_s - state.last_raise_s >= self.params.hold_s
                and not view.any_late
            ):
                rung = rebalance_rungs(view, rung)
            level = "holding" if np.any(rung > 0) else "normal"
        return DomainPlan(rung, level, state)


def rebalance_rungs(view: DomainView, rung: IntArray) -> IntArray:
    """While holding (after the hold), hand watts back to a later shed group (high priority
    first) when earlier groups can give the same watts: each GPU of the later group on its
    deepest rung steps down one when the earlier groups' extra shedding covers the increase.
    So a high-priority GPU slowed while low priority still ran (after a start at the floor,
    or a burst that passed) is not left slowed while the domain stays in the band between
    the release and target levels."""
    groups = view.shed_groups()
    for later in range(len(groups) - 1, 0, -1):
        raised = np.flatnonzero(groups[later] & (rung > 0) & ~view.stale)
        if raised.size == 0:
            continue
        raised = raised[rung[raised] == rung[raised].max()]
        down = rung.copy()
        down[raised] -= 1
        increase_w = float(np.sum(view.estimate_w(down)) - np.sum(view.estimate_w(rung)))
        earlier = np.logical_or.reduce(groups[:later])
        shed = raise_rungs(view, down, increase_w, only=earlier)
        saved_w = float(np.sum(view.estimate_w(down)) - np.sum(view.estimate_w(shed)))
        if saved_w >= increase_w:
            return shed
    return rung


def commanded_at_w(view: DomainView, rung: IntArray) -> float:
    """The domain's estimated power once `rung` has taken effect."""
    return view.power_now_w + float(np.sum(view.estimate_w(rung)) - np.sum(view.power_w))


def raise_rungs(
    view: DomainView, rung: IntArray, need_w: float, only: BoolArray | None = None
) -> IntArray:
    """Step GPUs up until the estimated saving covers `need_w`: low priority first, and
    within a group the GPUs on the lowest rung first (`only`: GPUs that may be stepped)."""
    rung = rung.copy()
    for shed_group in view.shed_groups():
        group = shed_group if only is None else shed_group & only
        while need_w > 0:
            now_w = view.estimate_w(rung)
            up = np.minimum(rung + 1, view.ladders.top)
            saving = now_w - view.estimate_w(up)
            candidates = np.flatnonzero(group & (rung < view.ladders.top) & ~view.stale)
            candidates = candidates[saving[candidates] > SAVING_EPSILON_W]
            if candidates.size == 0:
                break
            candidates = candidates[rung[candidates] == rung[candidates].min()]
            order = candidates[np.argsort(-saving[candidates], kind="stable")]
            total = np.cumsum(saving[order])
            count = int(np.searchsorted(total, need_w)) + 1
            chosen = order[:count]
            rung[chosen] = up[chosen]
            need_w -= float(total[min(count, len(total)) - 1])
        if need_w <= 0:
            break
    return rung


def release_rungs(view: DomainView, rung: IntArray, room_w: float) -> IntArray:
    """Step GPUs down one rung while the estimated increase fits in `room_w`: high priority
    first, and within a group the GPUs on the highest rung first."""
    rung = rung.copy()
    for group in reversed(view.shed_groups()):
        while True:
            candidates = np.flatnonzero(group & (rung > 0) & ~view.stale)
            if candidates.size == 0:
                break
            candidates = candidates[rung[candidates] == rung[candidates].max()]
            down = np.maximum(rung - 1, 0)
            increase = view.estimate_w(down) - view.estimate_w(rung)
            order = candidates[np.argsort(increase[candidates], kind="stable")]
            total = np.cumsum(np.maximum(increase[order], 0.0))
            count = int(np.searchsorted(total, room_w, side="right"))
            chosen = order[:count]
            rung[chosen] = down[chosen]
            room_w -= float(total[count - 1]) if count else 0.0
            if count < candidates.size:
                return rung
    return rung
