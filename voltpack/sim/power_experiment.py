"""How many servers a row can host under its power budget: POLCA's experiment.

For a policy, add servers (with the same per-server workload) until a constraint breaks:
high-priority p50 latency within 1% and p99 within 5% of the same servers uncapped,
low-priority training throughput loss at most 5%, no emergency brake, and no excursion over
the budget longer than the control interval plus the actuation latency plus the telemetry
delay; plus voltpack's own goal for low-priority requests (their p50 and p99 latency within
`Limits.low_p50_increase_pct` / `low_p99_increase_pct` of uncapped) and a breaker that does not
trip. The search assumes the constraints get harder as servers are added (it steps up until
the first failure); every evaluated point is reported.

Each outcome also reports its safety (brakes, seconds over budget, the longest excursion, the
breaker's heat margin, the row's peak second and peak 60-s average against the budget) and its
energy: per completed request (inference servers) and per training iteration (training
servers), from the energy each server drew (`RowRun.server_energy_j`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from voltpack.model.errors import InvalidRequestError
from voltpack.policies.schema import PowerSpec
from voltpack.power.breaker import BreakerCurve
from voltpack.sim.power_row import RowRun, RowScenario, RowWorkload, build_workload, run_row
from voltpack.sim.traces.service_mix import RowTraffic

J_PER_KWH = 3.6e6
J_PER_WH = 3600.0
PEAK_WINDOW_S = 60
"""The averaging window of the row's second peak figure (`peak_60s_share_of_budget`)."""


@dataclass(frozen=True)
class Limits:
    """The constraints a deployable row must meet."""

    p50_increase_pct: float = 1.0
    p99_increase_pct: float = 5.0
    low_priority_loss_pct: float = 5.0
    """Throughput loss of low-priority work: training iterations and low-priority requests
    completed within the run, each against the uncapped run."""
    low_p50_increase_pct: float | None = None
    """Low-priority request p50 latency against the same servers uncapped, if required. Not
    one of POLCA's constraints (POLCA bounds only low-priority throughput), so off by default:
    the benchmark keeps POLCA's constraints unchanged and reports low-priority latency beside
    every result; set it to require a low-priority latency goal as well."""
    low_p99_increase_pct: float | None = None
    """Low-priority request p99 latency against the same servers uncapped, if required (as
    `low_p50_increase_pct`)."""


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
    low_p99_increase_pct: float
    brakes: int
    actions: int
    longest_excursion_s: int
    """Longest run of consecutive seconds over the budget."""
    allowed_excursion_s: int
    seconds_over_budget: int
    """Seconds over the budget in all."""
    breaker_tripped: bool
    """Whether the row's power would have tripped a UL 489-style breaker (`BreakerCurve`)."""
    breaker_heat_peak_share: float
    """Largest heat the breaker accumulated over the run / the heat that trips it
    (`BreakerCurve.heat_peak_share`): 0 never over the budget, 1 trips."""
    breaker_margin_share: float
    """`1 - breaker_heat_peak_share`: the share of the breaker's trip heat left unused."""
    peak_share_of_budget: float
    """The row's peak second / its budget."""
    peak_60s_share_of_budget: float
    """The row's peak average over consecutive 60-s windows / its budget (the resolution of
    `--anchor-resolution-s 60`; a run shorter than 60 s: its mean)."""
    energy_kwh: float
    """Energy the whole row drew over the run."""
    inference_energy_kwh: float
    """Energy the inference servers drew (both priorities, idle seconds included)."""
    training_energy_kwh: float
    """Energy the training servers drew."""
    requests_completed: int
    """Requests of both priorities completed within the run (arrival + latency <= duration)."""
    energy_per_request_wh: float | None
    """`inference_energy_kwh` per request completed within the run (None: none completed)."""
    energy_per_iteration_wh: float | None
    """`training_energy_kwh` per training iteration, counted per server as
    `RowRun.training_iterations` counts them (one synchronous iteration of a job of k servers
    is k server-iterations); None: no training."""
    ok: bool

    def as_dict(self) -> dict[str, Any]:
        """Plain values for JSON."""
        return asdict(self)

    def margins(self, limits: Limits) -> dict[str, float]:
        """Room left under each constraint (negative: broken). The breaker's margin is a share
        of its trip heat, 0 once it trips (`breaker_tripped`), never negative."""
        return {
            "p50_pct": limits.p50_increase_pct - self.p50_increase_pct,
            "p99_pct": limits.p99_increase_pct - self.p99_increase_pct,
            "training_loss_pct": limits.low_priority_loss_pct - self.training_loss_pct,
            "low_inference_loss_pct": limits.low_priority_loss_pct - self.low_inference_loss_pct,
            **_optional_margin(
                "low_p50_pct", limits.low_p50_increase_pct, self.low_p50_increase_pct
            ),
            **_optional_margin(
                "low_p99_pct", limits.low_p99_increase_pct, self.low_p99_increase_pct
            ),
            "brakes": -float(self.brakes),
            "excursion_s": float(self.allowed_excursion_s - self.longest_excursion_s),
            "breaker_margin_share": self.breaker_margin_share,
        }


@dataclass(frozen=True)
class EnergySplit:
    """A run's energy between inference and training servers, and the work each completed."""

    inference_j: float
    training_j: float
    requests_completed: int
    """Requests of both priorities completed within the run."""
    training_iterations: float
    """Server-iterations, as `RowRun.training_iterations`."""

    @property
    def per_request_wh(self) -> float | None:
        """Inference energy per completed request (None: no request completed)."""
        if self.requests_completed == 0:
            return None
        return self.inference_j / J_PER_WH / self.requests_completed

    @property
    def per_iteration_wh(self) -> float | None:
        """Training energy per server-iteration (None: no training)."""
        if self.training_iterations <= 0:
            return None
        return self.training_j / J_PER_WH / self.training_iterations


def energy_split(run: RowRun, workload: RowWorkload) -> EnergySplit:
    """Split `run`'s energy by the servers' role (`workload`: inference first, then training)
    and count the requests completed within the run, both priorities the same way as
    `RowRun.low_completed` (arrival + latency <= duration). `RowRun.latency_s` holds every
    high-priority request, also those finishing after the run: those are not counted, though
    the energy they drew within the run is (short runs read a little high)."""
    servers = workload.scenario.servers
    if run.server_energy_j.shape != (servers,):
        raise InvalidRequestError(
            f"energy_split: RowRun.server_energy_j has shape {run.server_energy_j.shape}, "
            f"expected ({servers},), one energy per server; the run must record it "
            "(power_row's run_stepped / run_uncapped)"
        )
    n_inf, n_high = workload.n_inference, workload.n_high
    arrival_s = (
        np.concatenate([s.arrival_s for s in workload.inference[:n_high]])
        if n_high
        else np.zeros(0)
    )
    if arrival_s.shape != run.latency_s.shape:
        raise InvalidRequestError(
            f"energy_split: RowRun.latency_s has {run.latency_s.size} high-priority latencies "
            f"but the workload's {n_high} high-priority servers have {arrival_s.size} "
            "requests; pass the workload the run was made from"
        )
    high_done = int(np.sum(arrival_s + run.latency_s <= workload.scenario.duration_s))
    return EnergySplit(
        inference_j=float(run.server_energy_j[:n_inf].sum()),
        training_j=float(run.server_energy_j[n_inf:].sum()),
        requests_completed=high_done + run.low_completed,
        training_iterations=run.training_iterations,
    )


def window_peak_w(power_w: np.ndarray, window_s: int) -> float:
    """Peak of a per-second power series averaged over consecutive `window_s` windows from
    the start (the calibration anchor's windows); a series shorter than one window: its mean."""
    if window_s < 1:
        raise InvalidRequestError(f"window_s={window_s} must be at least 1 s")
    windows = power_w.size // window_s
    if windows == 0:
        return float(power_w.mean())
    return float(power_w[: windows * window_s].reshape(windows, window_s).mean(axis=1).max())


def _optional_margin(name: str, limit: float | None, value: float) -> dict[str, float]:
    """`{name: limit - value}`, or nothing when the limit is not required."""
    return {} if limit is None else {name: limit - value}


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


def _quantile_increase_pct(run_s: np.ndarray, baseline_s: np.ndarray, q: float) -> float:
    """Increase of the `q` quantile of `run_s` over that of `baseline_s` (0: no requests)."""
    if not run_s.size or not baseline_s.size:
        return 0.0
    return _increase_pct(float(np.quantile(run_s, q)), float(np.quantile(baseline_s, q)))


def compare(
    run: RowRun,
    baseline: RowRun,
    workload: RowWorkload,
    policy: str,
    allowed_s: int,
    limits: Limits,
) -> RowOutcome:
    """The constraints of `run` against the uncapped `baseline` of the same servers
    (`workload`: what both ran), with the run's safety and energy figures."""
    over = run.row_power_w > run.budget_w
    longest = longest_run(over)
    p50 = _increase_pct(float(np.median(run.latency_s)), float(np.median(baseline.latency_s)))
    p99 = _increase_pct(
        float(np.quantile(run.latency_s, 0.99)), float(np.quantile(baseline.latency_s, 0.99))
    )
    loss = _loss_pct(run.training_iterations, baseline.training_iterations)
    low_loss = _loss_pct(run.low_completed, baseline.low_completed)
    low_p50 = _quantile_increase_pct(run.low_latency_s, baseline.low_latency_s, 0.5)
    low_p99 = _quantile_increase_pct(run.low_latency_s, baseline.low_latency_s, 0.99)
    heat_share = BreakerCurve().heat_peak_share(run.row_power_w, run.budget_w, 1.0)
    tripped = heat_share >= 1.0
    energy = energy_split(run, workload)
    ok = (
        not tripped
        and p50 <= limits.p50_increase_pct
        and p99 <= limits.p99_increase_pct
        and loss <= limits.low_priority_loss_pct
        and low_loss <= limits.low_priority_loss_pct
        and (limits.low_p50_increase_pct is None or low_p50 <= limits.low_p50_increase_pct)
        and (limits.low_p99_increase_pct is None or low_p99 <= limits.low_p99_increase_pct)
        and run.brakes == 0
        and longest <= allowed_s
    )
    return RowOutcome(
        servers=workload.scenario.servers,
        policy=policy,
        p50_increase_pct=p50,
        p99_increase_pct=p99,
        training_loss_pct=loss,
        low_inference_loss_pct=low_loss,
        low_p50_increase_pct=low_p50,
        low_p99_increase_pct=low_p99,
        brakes=run.brakes,
        actions=run.actions,
        longest_excursion_s=longest,
        allowed_excursion_s=allowed_s,
        seconds_over_budget=int(over.sum()),
        breaker_tripped=tripped,
        breaker_heat_peak_share=heat_share,
        breaker_margin_share=1.0 - heat_share,
        peak_share_of_budget=float(run.row_power_w.max() / run.budget_w),
        peak_60s_share_of_budget=window_peak_w(run.row_power_w, PEAK_WINDOW_S) / run.budget_w,
        energy_kwh=float(run.row_power_w.sum() / J_PER_KWH),
        inference_energy_kwh=energy.inference_j / J_PER_KWH,
        training_energy_kwh=energy.training_j / J_PER_KWH,
        requests_completed=energy.requests_completed,
        energy_per_request_wh=energy.per_request_wh,
        energy_per_iteration_wh=energy.per_iteration_wh,
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
        outcomes.append(compare(run, baseline, workload, name, allowed, limits))
    return outcomes


def uncapped_outcome(scenario: RowScenario, trace: RowTraffic, limits: Limits) -> RowOutcome:
    """No oversubscription: the servers the budget was provisioned for, never capped."""
    workload = build_workload(replace(scenario, servers=scenario.budget_servers), trace)
    baseline = run_row(workload, None)
    return compare(baseline, baseline, workload, "none", 0, limits)
