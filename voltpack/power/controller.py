"""The power control loop: account each domain's power, run the policy, enforce the fail-safes.

One `step` per control interval. Inputs are arrays over the controller's GPUs (one order, fixed
when the controller is built); the clock is an argument, so the same inputs give the same
decisions. Mechanism, whatever the policy:

- **Stale telemetry fails safe.** A GPU whose last reading is older than `stale_after_s` (or
  that never reported) counts at the worst case of the loosest setting it may be running (what
  it last reported applied, or what was commanded if looser), and a stale low-priority GPU is
  commanded to its cap floor at once. If the domain's worst case still exceeds the budget, the
  fresh GPUs are stepped up (low priority first) until it does not. All of this happens on the
  first tick after the reading turns stale: within `stale_after_s + interval_s` of the last
  reading. A `TelemetryStale` event and the report's `stale_gpus` say so.
- **Emergency brake.** When the domain's measured power (fresh readings, stale GPUs at their
  last reading) reaches its budget, or when the worst case of its stale GPUs cannot be made to
  fit even with every fresh GPU stepped up, every GPU in it goes
  to its cap floor (the software analogue of a rack power brake) until power falls below
  `brake_release_fraction` of the budget and `brake_hold_s` has passed (the brake is persisted
  in the PowerBudget status, so a new leader honours it). Policies are judged by
  never needing it; the controller never relies on breaker tolerance.
- A GPU in several domains (rack and row) takes the most restrictive rung any of them asks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from voltpack.policies.power.ladder import (
    ActionLadder,
    FloatArray,
    GpuSetting,
    IntArray,
    LadderTable,
)
from voltpack.policies.power.view import (
    SHED_GROUPS,
    BoolArray,
    DomainView,
    PowerPolicy,
    shed_group_index,
)
from voltpack.power.domains import PowerDomainTree


@dataclass(frozen=True)
class GpuSlot:
    """One controllable GPU: where it is and which actions it has."""

    node: str
    index: int
    ladder: ActionLadder


@dataclass(frozen=True)
class ControllerSettings:
    """Timing and fail-safe constants (all in seconds or shares of a budget)."""

    interval_s: float = 1.0
    actuation_latency_s: float = 1.0
    late_after_s: float = 5.0
    stale_after_s: float = 15.0
    brake_release_fraction: float = 0.9
    brake_hold_s: float = 30.0
    history_s: float = 3600.0


@dataclass(frozen=True)
class Telemetry:
    """What the controller knows of each GPU at a tick (arrays in the controller's GPU order)."""

    power_w: FloatArray
    """Last reading (NaN: none ever)."""
    read_at_s: FloatArray
    """When the last reading was taken (NaN: never)."""
    high_priority: BoolArray
    """Whether the GPU runs high-priority work."""
    applied_rung: IntArray | None = None
    """The rung the agent last reported applied (None or -1: unknown, assume no action)."""
    throughput_bound: BoolArray | None = None
    """Whether the GPU's work loses throughput when slowed (training); None: all do."""


@dataclass(frozen=True)
class DomainReport:
    """One domain after a tick: for metrics, status and reports."""

    name: str
    budget_w: float
    power_w: float
    worst_case_w: float
    level: str
    braking: bool
    stale_gpus: int
    locked_gpus: int
    capped_gpus: int
    high_priority_slowed: int
    brake_since_s: float | None = None
    """When the brake started (None: not braking); persisted so a new leader honours it."""
    brake_hold_until_s: float | None = None
    """The brake is not released before this time, whoever leads then."""


@dataclass(frozen=True)
class PowerEvent:
    """Something a person should see: a Kubernetes Event on the domain's PowerBudget."""

    domain: str
    reason: str
    message: str
    warning: bool = False


@dataclass(frozen=True)
class PowerDecision:
    """Every GPU's commanded rung, the domain reports and the events of a tick."""

    rung: IntArray
    domains: tuple[DomainReport, ...]
    events: tuple[PowerEvent, ...]
    gpus: tuple[GpuSlot, ...]

    @property
    def settings(self) -> tuple[GpuSetting, ...]:
        """Every GPU's commanded setting (its ladder's setting at its rung)."""
        return tuple(gpu.ladder.settings[r] for gpu, r in zip(self.gpus, self.rung, strict=True))


@dataclass
class _DomainState:
    members: IntArray
    overhead_w: float
    history_w: list[float] = field(default_factory=list)
    unthrottled_history_w: list[float] = field(default_factory=list)
    group_unthrottled_history_w: list[FloatArray] = field(default_factory=list)
    memory: Any = None
    level: str | None = None
    braking_since_s: float | None = None
    brake_hold_until_s: float | None = None
    stale: frozenset[int] = frozenset()


class PowerController:
    """Keeps every domain of a tree under its budget through its GPUs' action ladders."""

    def __init__(
        self,
        tree: PowerDomainTree,
        gpus: Sequence[GpuSlot],
        policy: PowerPolicy,
        settings: ControllerSettings | None = None,
        node_overhead_w: dict[str, float] | None = None,
    ) -> None:
        self.tree = tree
        self.gpus = tuple(gpus)
        self.policy = policy
        self.settings = settings or ControllerSettings()
        self.ladders = LadderTable.of([gpu.ladder for gpu in self.gpus])
        self.rung: IntArray = np.zeros(len(self.gpus), dtype=np.int64)
        self._last_unthrottled_w: FloatArray = np.full(len(self.gpus), np.nan)
        overhead = node_overhead_w or {}
        nodes = np.array([gpu.node for gpu in self.gpus], dtype=object)
        self._domains: dict[str, _DomainState] = {}
        for domain in tree.domains:
            members = np.flatnonzero(np.isin(nodes, list(domain.nodes))).astype(np.int64)
            extra = sum(overhead.get(node, 0.0) for node in domain.nodes)
            self._domains[domain.name] = _DomainState(members, extra)
        self._history_len = max(2, int(self.settings.history_s / self.settings.interval_s))

    def adopt(self, previous: PowerController) -> None:
        """Carry over what `previous` knew (after the GPUs or domains changed): each GPU's
        commanded rung by (node, index), and each domain's history, policy memory, level,
        brake and stale set by domain name."""
        position = {(gpu.node, gpu.index): i for i, gpu in enumerate(self.gpus)}
        for old_index, gpu in enumerate(previous.gpus):
            new_index = position.get((gpu.node, gpu.index))
            if new_index is not None:
                self.rung[new_index] = min(previous.rung[old_index], self.ladders.top[new_index])
        for name, state in self._domains.items():
            old = previous._domains.get(name)
            if old is None:
                continue
            state.history_w = list(old.history_w)
            state.unthrottled_history_w = list(old.unthrottled_history_w)
            state.group_unthrottled_history_w = list(old.group_unthrottled_history_w)
            state.memory, state.level, state.braking_since_s, state.brake_hold_until_s = (
                old.memory, old.level, old.braking_since_s, old.brake_hold_until_s,
            )  # fmt: skip
            keys = [(previous.gpus[i].node, previous.gpus[i].index) for i in old.stale]
            state.stale = frozenset(position[k] for k in keys if k in position)

    def restore_brake(self, domain: str, since_s: float, hold_until_s: float) -> None:
        """Re-engage a brake a previous leader persisted (started `since_s`, not to be released
        before `hold_until_s`); unknown domains are ignored. A brake already on keeps the
        later of the two holds."""
        state = self._domains.get(domain)
        if state is None:
            return
        if state.braking_since_s is None:
            state.braking_since_s = since_s
            state.level = "brake"
        state.brake_hold_until_s = max(state.brake_hold_until_s or hold_until_s, hold_until_s)

    def step(
        self, now_s: float, telemetry: Telemetry, floor_rung: IntArray | None = None
    ) -> PowerDecision:
        """One control tick at time `now_s`.

        `floor_rung` (optional, per GPU): the least restrictive rung each GPU may run at for
        efficiency (phase-aware clocks, `voltpack.policies.power.phase_clocks`); the policy and
        the fail-safes may ask for more, never for less.
        """
        age_s = now_s - telemetry.read_at_s
        stale = ~(age_s <= self.settings.stale_after_s)
        late = ~stale & (age_s > self.settings.late_after_s)
        applied = telemetry.applied_rung
        loosest = np.minimum(self.rung, applied) if applied is not None else self.rung * 0
        loosest = np.maximum(loosest, 0)
        worst_w = self.ladders.at(self.ladders.bound_w, loosest)
        reading_w = np.where(np.isnan(telemetry.power_w), worst_w, telemetry.power_w)
        accounted_w = np.where(stale, worst_w, reading_w)
        unthrottled_w = self._unthrottled(accounted_w, applied)
        wanted = np.where(stale & ~telemetry.high_priority, self.ladders.top, 0).astype(np.int64)
        reports: list[DomainReport] = []
        events: list[PowerEvent] = []
        for domain in self.tree.domains:
            state = self._domains[domain.name]
            rung, report = self._step_domain(
                domain.name, domain.budget_w, state, now_s, telemetry, stale, late, reading_w,
                accounted_w, unthrottled_w, loosest, events,
            )  # fmt: skip
            wanted[state.members] = np.maximum(wanted[state.members], rung)
            reports.append(report)
        if floor_rung is not None:
            wanted = np.maximum(wanted, floor_rung)
        self.rung = np.minimum(wanted, self.ladders.top)
        return PowerDecision(self.rung.copy(), tuple(reports), tuple(events), self.gpus)

    @property
    def unthrottled_w(self) -> FloatArray:
        """Each GPU's power at the last tick had it not been slowed (NaN before the first)."""
        return self._last_unthrottled_w.copy()

    def _unthrottled(self, accounted_w: FloatArray, applied: IntArray | None) -> FloatArray:
        """Each GPU's power had it not been slowed: its reading scaled back from the rung it
        was read at; a capped reading hides the demand, so a capped GPU keeps its last estimate
        from an uncapped reading."""
        read_at = np.maximum(applied, 0) if applied is not None else self.rung
        estimate = self.ladders.estimate_w(accounted_w, read_at, np.zeros_like(read_at))
        capped = read_at >= self.ladders.top
        known = ~np.isnan(self._last_unthrottled_w)
        estimate = np.where(capped & known, self._last_unthrottled_w, estimate)
        self._last_unthrottled_w = estimate
        return estimate

    def _step_domain(
        self,
        name: str,
        budget_w: float,
        state: _DomainState,
        now_s: float,
        telemetry: Telemetry,
        stale: BoolArray,
        late: BoolArray,
        reading_w: FloatArray,
        accounted_w: FloatArray,
        unthrottled_w: FloatArray,
        loosest: IntArray,
        events: list[PowerEvent],
    ) -> tuple[IntArray, DomainReport]:
        members = state.members
        power_w = float(accounted_w[members].sum()) + state.overhead_w
        for history, value_w in (
            (state.history_w, power_w),
            (state.unthrottled_history_w, float(unthrottled_w[members].sum()) + state.overhead_w),
        ):
            history.append(value_w)
            del history[: -self._history_len]
        groups = shed_group_index(
            telemetry.high_priority[members],
            None if telemetry.throughput_bound is None else telemetry.throughput_bound[members],
        )
        state.group_unthrottled_history_w.append(
            np.bincount(groups, weights=unthrottled_w[members], minlength=SHED_GROUPS).astype(
                np.float64
            )
        )
        del state.group_unthrottled_history_w[: -self._history_len]
        view = DomainView(
            name=name,
            budget_w=budget_w,
            now_s=now_s,
            interval_s=self.settings.interval_s,
            actuation_latency_s=self.settings.actuation_latency_s,
            history_w=np.array(state.history_w),
            unthrottled_w=unthrottled_w[members],
            unthrottled_history_w=np.array(state.unthrottled_history_w),
            group_unthrottled_history_w=np.array(state.group_unthrottled_history_w),
            power_w=accounted_w[members],
            rung=self.rung[members],
            high_priority=telemetry.high_priority[members],
            stale=stale[members],
            ladders=self.ladders.subset(members),
            late=late[members],
            throughput_bound=(
                None if telemetry.throughput_bound is None else telemetry.throughput_bound[members]
            ),
        )
        measured_w = float(reading_w[members].sum()) + state.overhead_w
        self._update_brake(name, budget_w, state, now_s, measured_w, power_w, events)
        if state.braking_since_s is not None:
            rung: IntArray = view.ladders.top.copy()
            level = "brake"
        else:
            plan = self.policy.plan(view, state.memory)
            state.memory = plan.memory
            rung = np.clip(plan.rung, 0, view.ladders.top).astype(np.int64)
            level = plan.level
        worst_w = power_w
        stale_now = frozenset(int(i) for i in members[view.stale])
        if stale_now:
            stale_mask = view.stale
            rung = np.where(stale_mask & ~view.high_priority, view.ladders.top, rung)
            rung, worst_w = self._fit_worst_case(view, rung, loosest[members], state, budget_w)
            if worst_w > budget_w and state.braking_since_s is None:
                self._start_brake(state, now_s)
                level = "brake"
                rung = view.ladders.top.copy()
                events.append(
                    PowerEvent(
                        name,
                        "EmergencyBrake",
                        f"worst case {worst_w:.0f} W with {len(stale_now)} GPUs without "
                        f"telemetry exceeds the budget {budget_w:.0f} W: every GPU capped",
                        warning=True,
                    )
                )
        self._stale_events(name, state, stale_now, events)
        if state.level is not None and level != state.level:
            events.append(
                PowerEvent(
                    name,
                    "PowerLevelChanged",
                    f"{state.level} -> {level} at {power_w:.0f} W of {budget_w:.0f} W",
                    warning=level == "brake",
                )
            )
        state.level = level
        top = view.ladders.top
        slowed = rung > 0
        report = DomainReport(
            name=name,
            budget_w=budget_w,
            power_w=power_w,
            worst_case_w=worst_w,
            level=level,
            braking=state.braking_since_s is not None,
            stale_gpus=len(stale_now),
            locked_gpus=int(np.sum(slowed & (rung < top))),
            capped_gpus=int(np.sum(slowed & (rung >= top))),
            high_priority_slowed=int(np.sum(slowed & view.high_priority)),
            brake_since_s=state.braking_since_s,
            brake_hold_until_s=state.brake_hold_until_s,
        )
        return rung, report

    def _update_brake(
        self,
        name: str,
        budget_w: float,
        state: _DomainState,
        now_s: float,
        measured_w: float,
        accounted_w: float,
        events: list[PowerEvent],
    ) -> None:
        """Brake when measured power reaches the budget; release once even the worst case
        (stale GPUs at their worst) is below the release level and the hold has passed."""
        if state.braking_since_s is None and measured_w >= budget_w:
            self._start_brake(state, now_s)
            events.append(
                PowerEvent(
                    name,
                    "EmergencyBrake",
                    f"power {measured_w:.0f} W reached the budget {budget_w:.0f} W: "
                    "every GPU capped at its floor",
                    warning=True,
                )
            )
        elif (
            state.braking_since_s is not None
            and accounted_w < self.settings.brake_release_fraction * budget_w
            and now_s - state.braking_since_s >= self.settings.brake_hold_s
            and now_s >= (state.brake_hold_until_s or now_s)
        ):
            state.braking_since_s = None
            state.brake_hold_until_s = None
            events.append(
                PowerEvent(name, "BrakeReleased", f"power {accounted_w:.0f} W, brake released")
            )

    def _start_brake(self, state: _DomainState, now_s: float) -> None:
        state.braking_since_s = now_s
        state.brake_hold_until_s = now_s + self.settings.brake_hold_s

    def _fit_worst_case(
        self,
        view: DomainView,
        rung: IntArray,
        loosest: IntArray,
        state: _DomainState,
        budget_w: float,
    ) -> tuple[IntArray, float]:
        """Step fresh GPUs up (low priority first) until the worst case fits the budget."""
        ladders = view.ladders
        stale_w = float(ladders.at(ladders.bound_w, loosest)[view.stale].sum())

        def worst(r: IntArray) -> float:
            fresh_w = ladders.estimate_w(view.power_w, view.rung, r)[~view.stale].sum()
            return float(fresh_w) + stale_w + state.overhead_w

        rung = rung.copy()
        for group in view.shed_groups():
            while worst(rung) > budget_w:
                movable = np.flatnonzero(group & ~view.stale & (rung < ladders.top))
                if movable.size == 0:
                    break
                rung[movable] += 1
        return rung, worst(rung)

    def _stale_events(
        self, name: str, state: _DomainState, stale_now: frozenset[int], events: list[PowerEvent]
    ) -> None:
        if stale_now == state.stale:
            return
        if stale_now - state.stale:
            gpus = ", ".join(
                f"{self.gpus[i].node}/{self.gpus[i].index}" for i in sorted(stale_now)[:8]
            )
            events.append(
                PowerEvent(
                    name,
                    "TelemetryStale",
                    f"{len(stale_now)} GPUs without fresh telemetry ({gpus}); counted at their "
                    "worst case, low-priority ones capped",
                    warning=True,
                )
            )
        elif not stale_now:
            events.append(PowerEvent(name, "TelemetryRecovered", "all GPUs report again"))
        state.stale = stale_now
