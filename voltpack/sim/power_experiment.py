"""How many servers a row can host under its power budget: POLCA's experiment.

For a policy, add servers (with the same per-server workload) until a constraint breaks:
high-priority p50 latency within 1% and p99 within 5% of the same servers uncapped,
low-priority training throughput loss at most 5%, no emergency brake, and no excursion over
the budget longer than the control interval plus the actuation latency plus the telemetry
delay. The search assumes the constraints get harder as servers are added (it steps up until
the first failure); every evaluated point is reported.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from voltpack.policies.schema import PowerSpec
from voltpack.power.breaker import BreakerCurve
from voltpack.sim.power_row import RowRun, RowScenario, build_workload, run_row
from voltpack.sim.traces.service_mix import RowTraffic

J_PER_KWH = 3.6e6


@dataclass(frozen=True)
class Limits:
    """The constraints a deployable row must meet."""

    p50_increase_pct: float = 1.0
    p99_increase_pct: float = 5.0
    low_priority_loss_pct: float = 5.0
    """Throughput loss of low-priority work: training iterations and low-priority requests
    completed within the run, each against the uncapped run."""


@dataclass(frozen=True)
class RowOutcome:
    """One policy at one server count, against the same servers uncapped."""

    servers: int
    policy: str
    p50_increase_pct: float
    p99_increase_pct: float
    training_loss_pct: float
    low_inference_loss_pct: float
    low_p50_increase_pct: float
    brakes: int
    actions: int
    longest_excursion_s: int
    allowed_excursion_s: int
    seconds_over_budget: int
    breaker_tripped: bool
    """Whether the row's power would have tripped a UL 489-style breaker (`BreakerCurve`)."""
    peak_share_of_budget: float
    energy_kwh: float
    ok: bool

    def as_dict(self) -> dict[str, Any]:
        """Plain values for JSON."""
        return asdict(self)

    def margins(self, limits: Limits) -> dict[str, float]:
        """Room left under each constraint (negative: broken)."""
        return {
            "p50_pct": limits.p50_increase_pct - self.p50_increase_pct,
            "p99_pct": limits.p99_increase_pct - self.p99_increase_pct,
            "training_loss_pct": limits.low_priority_loss_pct - self.training_loss_pct,
            "low_inference_loss_pct": limits.low_priority_loss_pct - self.low_inference_loss_pct,
            "brakes": -float(self.brakes),
            "excursion_s": float(self.allowed_excursion_s - self.longest_excursion_s),
        }


def longest_run(mask: np.ndarray) -> int:
    """Length of the longest run of True in a 1-D boolean array."""
    best = run = 0
    for flag in mask.tolist():
        run = run + 1 if flag else 0
        best = max(best, run)
    return best


def _loss_pct(value: float, reference: float) -> float:
    return 100.0 * (1.0 - value / reference) if reference > 0 else 0.0


def _increase_pct(value: float, reference: float) -> float:
    return 100.0 * (value / reference - 1.0) if reference > 0 else 0.0


def compare(
    run: RowRun, baseline: RowRun, servers: int, policy: str, allowed_s: int, limits: Limits
) -> RowOutcome:
    """The constraints of `run` against the uncapped `baseline` of the same servers."""
    over = run.row_power_w > run.budget_w
    longest = longest_run(over)
    p50 = _increase_pct(float(np.median(run.latency_s)), float(np.median(baseline.latency_s)))
    p99 = _increase_pct(
        float(np.quantile(run.latency_s, 0.99)), float(np.quantile(baseline.latency_s, 0.99))
    )
    loss = _loss_pct(run.training_iterations, baseline.training_iterations)
    low_loss = _loss_pct(run.low_completed, baseline.low_completed)
    low_p50 = (
        _increase_pct(float(np.median(run.low_latency_s)), float(np.median(baseline.low_latency_s)))
        if run.low_latency_s.size
        else 0.0
    )
    tripped = BreakerCurve().first_trip_s(run.row_power_w, run.budget_w, 1.0) < float("inf")
    ok = (
        not tripped
        and p50 <= limits.p50_increase_pct
        and p99 <= limits.p99_increase_pct
        and loss <= limits.low_priority_loss_pct
        and low_loss <= limits.low_priority_loss_pct
        and run.brakes == 0
        and longest <= allowed_s
    )
    return RowOutcome(
        servers=servers,
        policy=policy,
        p50_increase_pct=p50,
        p99_increase_pct=p99,
        training_loss_pct=loss,
        low_inference_loss_pct=low_loss,
        low_p50_increase_pct=low_p50,
        brakes=run.brakes,
        actions=run.actions,
        longest_excursion_s=longest,
        allowed_excursion_s=allowed_s,
        seconds_over_budget=int(over.sum()),
        breaker_tripped=tripped,
        peak_share_of_budget=float(run.row_power_w.max() / run.budget_w),
        energy_kwh=float(run.row_power_w.sum() / J_PER_KWH),
        ok=ok,
    )


def allowed_excursion_s(spec: PowerSpec, scenario: RowScenario) -> int:
    """Seconds a row may stay over budget: detection, telemetry delay and actuation."""
    return int(np.ceil(spec.interval_s + spec.actuation_latency_s + scenario.telemetry_delay_s))


def evaluate(
    scenario: RowScenario, trace: RowTraffic, specs: dict[str, PowerSpec], limits: Limits
) -> list[RowOutcome]:
    """Every policy in `specs` on one scenario (one uncapped baseline shared by all)."""
    workload = build_workload(scenario, trace)
    baseline = run_row(workload, None)
    outcomes = []
    for name, spec in specs.items():
        run = run_row(workload, spec)
        allowed = allowed_excursion_s(spec, scenario)
        outcomes.append(compare(run, baseline, scenario.servers, name, allowed, limits))
    return outcomes


def uncapped_outcome(scenario: RowScenario, trace: RowTraffic, limits: Limits) -> RowOutcome:
    """No oversubscription: the servers the budget was provisioned for, never capped."""
    workload = build_workload(replace(scenario, servers=scenario.budget_servers), trace)
    baseline = run_row(workload, None)
    return compare(baseline, baseline, scenario.budget_servers, "none", 0, limits)
