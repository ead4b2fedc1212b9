"""A row of eight-GPU servers under one power budget, second by second (POLCA's setup).

Inference servers replay the Azure LLM 2023 trace (one service, or a mix of its services:
`voltpack.sim.traces.service_mix`) with a diurnal rate; a share of them serve
low-priority inference (POLCA's mix: batch or internal requests), the rest high-priority
inference. Training servers (low priority) run synchronous jobs whose power drops at every
iteration boundary. Servers are ordered high-priority inference, low-priority inference,
training. Each
second the servers draw what the perf models say at their applied clocks and caps; the power
controller (the same `voltpack.power` code the operator runs) sees the row's telemetry
`telemetry_delay_s` late and its settings take effect `actuation_latency_s` after it decides.
Each server is one control unit: its eight GPUs serve one tensor-parallel instance (or one
data-parallel replica) and are set together.

After the run, request latencies come from the realised clock timeline and training progress
from the iterations completed; both are compared with the same servers uncapped.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from voltpack.model.errors import InvalidRequestError
from voltpack.perf.gpu_power import GpuPowerModel, ServerPowerModel, power_model_for
from voltpack.perf.llm_inference import (
    InferenceLoad,
    InferenceProfile,
    bin_requests,
    default_inference_profile,
    inference_busy,
    power_from_busy_w,
    request_latency_s,
)
from voltpack.perf.training import (
    TrainingProfile,
    default_training_profile,
    training_power_w,
    training_progress,
)
from voltpack.policies.power.consolidation import ConsolidationParams
from voltpack.policies.power.ladder import ActionLadder, FloatArray, capped_ladder
from voltpack.policies.power.phase_clocks import PhaseClockParams, phase_clock_rungs
from voltpack.policies.power.registry import make_power_policy
from voltpack.policies.schema import PowerSpec
from voltpack.power.controller import GpuSlot, PowerController, Telemetry
from voltpack.power.domains import PowerDomain, PowerDomainTree
from voltpack.power.setup import default_actions, settings_from_spec
from voltpack.sim.power_routing import route_pool
from voltpack.sim.traces.azure_llm import LlmRequests, diurnal_request_stream
from voltpack.sim.traces.service_mix import RowTraffic, as_mix

GPU_SKU = "A100-80GB"


@dataclass(frozen=True)
class RowScenario:
    """What the row runs; `servers` is the knob an oversubscription study turns."""

    servers: int
    budget_servers: int = 40
    """The budget is the provisioned power of this many servers."""
    training_share: float = 0.1
    """Share of servers running low-priority training (the rest: inference)."""
    low_priority_inference_share: float = 0.3
    """Share of the inference servers whose requests are low priority."""
    duration_s: int = 86_400
    mean_rate_per_s: float = 0.362
    """Mean inference requests per second per inference server over the day. Default: what
    `voltpack.sim.power_calibration.calibrate_rate_per_s` gives for the Azure conversation
    trace, seed 0, one day, 40 servers (uncapped row peak 0.790 of provisioned, POLCA's
    row-level anchor); recompute it for another trace, seed, duration or diurnal curve (the
    power_oversubscription benchmark does, on every run)."""
    peak_to_trough: float = 2.0
    servers_per_training_job: int = 8
    training_iteration_s_range: tuple[float, float] = (2.0, 5.0)
    """Each training job's iteration time at max clock (s), drawn uniformly from this range
    per job from the seed, so jobs of different models and batch sizes drift in phase
    against each other. A scenario range, not calibrated: the training profile's 3 s sits
    in the middle; synchronous training swings "every second or two" (Uptime Institute,
    "Electrical considerations with large AI compute") and a summary of Choukse et al.
    (arXiv 2508.14318) places production swings at 0.2-3 Hz, i.e. periods up to 5 s; the
    lower end stays at 2 s so the 1 s bins still show the communication dip. (3.0, 3.0):
    identical jobs whose phases never drift, the model before issue 35."""
    telemetry_delay_s: int = 1
    seed: int = 0


@dataclass(frozen=True)
class ServerCurve:
    """A whole server as one control unit: power vs activity and clock of its GPUs."""

    gpu: GpuPowerModel
    server: ServerPowerModel
    coupling: float

    @property
    def tdp_w(self) -> float:
        """Server power with every GPU at its TDP."""
        return float(self.server.power_w(self.gpu.tdp_w, self.gpu, self.coupling))

    @property
    def max_clock_mhz(self) -> float:
        """The GPUs' max SM clock."""
        return self.gpu.max_clock_mhz

    @property
    def min_clock_mhz(self) -> float:
        """The GPUs' min SM clock."""
        return self.gpu.min_clock_mhz

    def power_w(self, activity: Any, clock_mhz: Any) -> Any:
        """Server power when its GPUs run work of `activity` at `clock_mhz`."""
        return self.server.power_w(self.gpu.power_w(activity, clock_mhz), self.gpu, self.coupling)


@dataclass
class RowWorkload:
    """The row's servers: who they are and what they are asked to do."""

    scenario: RowScenario
    inference: list[LlmRequests]
    load: InferenceLoad
    training_phase: FloatArray
    training_iteration_s: FloatArray
    """Per training server: its job's iteration time at max clock (s)."""
    inference_profile: InferenceProfile = field(default_factory=default_inference_profile)
    training_profile: TrainingProfile = field(default_factory=default_training_profile)
    services: tuple[int, ...] = ()
    """The service (index into the traffic's traces) each inference server runs (empty:
    one service)."""
    low_active_per_window: np.ndarray | None = None
    """Low-priority servers the router kept active per routing window, summed over the
    services' pools (None: not consolidated)."""

    @property
    def n_inference(self) -> int:
        """Number of inference servers."""
        return len(self.inference)

    @property
    def budget_w(self) -> float:
        """The row's budget: the provisioned power of `budget_servers` servers."""
        return self.scenario.budget_servers * self.inference_profile.server.provisioned_w

    @property
    def n_training(self) -> int:
        """Number of training servers."""
        return self.scenario.servers - self.n_inference

    @property
    def n_high(self) -> int:
        """Number of high-priority inference servers (the first ones)."""
        low = round(self.n_inference * self.scenario.low_priority_inference_share)
        return self.n_inference - low


def build_workload(scenario: RowScenario, traffic: RowTraffic) -> RowWorkload:
    """Per-server request streams and training jobs' phases and iteration times,
    deterministic in the seed (the iteration times are drawn last, so the streams and
    phases are those of a row with identical jobs).

    `traffic`: one trace every inference server replays, or a `ServiceMix` whose services
    share the inference servers (`ServiceMix.services_of`); every server has the same mean
    request rate, `scenario.mean_rate_per_s`.
    """
    shortest_s, longest_s = scenario.training_iteration_s_range
    if not 0 < shortest_s <= longest_s < np.inf:
        raise InvalidRequestError(
            f"training_iteration_s_range={scenario.training_iteration_s_range} must be "
            "(shortest, longest) seconds with 0 < shortest <= longest"
        )
    rng = np.random.default_rng(scenario.seed)
    n_training = round(scenario.servers * scenario.training_share)
    n_inference = scenario.servers - n_training
    mix = as_mix(traffic)
    services = tuple(mix.services_of(n_inference))
    streams = [
        diurnal_request_stream(
            mix.traces[service],
            scenario.duration_s,
            scenario.mean_rate_per_s,
            rng,
            scenario.peak_to_trough,
        )
        for service in services
    ]
    profile = default_inference_profile()
    n_high = n_inference - round(n_inference * scenario.low_priority_inference_share)
    streams = _routed_streams(streams, services, n_high, scenario.duration_s, profile, None)[0]
    loads = [
        bin_requests(
            s.arrival_s, s.prompt_tokens, s.output_tokens, 1.0, scenario.duration_s, profile
        )
        for s in streams
    ]
    jobs = max(1, -(-n_training // scenario.servers_per_training_job))
    job_phase = rng.random(jobs)
    job_of = np.arange(n_training) // scenario.servers_per_training_job
    job_iteration_s = rng.uniform(shortest_s, longest_s, jobs)
    load = InferenceLoad.stack(loads) if loads else _no_load(scenario.duration_s)
    return RowWorkload(
        scenario, streams, load, job_phase[job_of].astype(np.float64),
        job_iteration_s[job_of].astype(np.float64), services=services,
    )  # fmt: skip


def _routed_streams(
    streams: list[LlmRequests], services: tuple[int, ...], n_high: int, duration_s: float,
    profile: InferenceProfile, routing: ConsolidationParams | None,
) -> tuple[list[LlmRequests], np.ndarray | None]:  # fmt: skip
    """The low-priority servers' requests dealt by each service's router (one pool per
    service); high-priority streams unchanged. Also the active servers per routing window."""
    out = list(streams)
    labels = services or (0,) * len(streams)
    active: np.ndarray | None = None
    for service in dict.fromkeys(labels[n_high:]):
        members = [i for i in range(n_high, len(streams)) if labels[i] == service]
        pool = route_pool([streams[i] for i in members], duration_s, profile, routing)
        for index, stream in zip(members, pool.streams, strict=True):
            out[index] = stream
        counts = pool.active_per_window
        active = counts if active is None else active + counts
    return out, active


def routed_workload(workload: RowWorkload, routing: ConsolidationParams | None) -> RowWorkload:
    """The row with each service's low-priority requests dealt over the servers the
    consolidation policy keeps active (`routing`), or round-robin over all of them (None: the
    router every pool has; `build_workload` deals them so, and the uncapped reference runs
    with it)."""
    scenario, profile = workload.scenario, workload.inference_profile
    streams, active = _routed_streams(
        workload.inference, workload.services, workload.n_high, scenario.duration_s, profile,
        routing,
    )  # fmt: skip
    if workload.n_high == workload.n_inference:
        return workload
    loads = [
        bin_requests(s.arrival_s, s.prompt_tokens, s.output_tokens, 1.0, scenario.duration_s,
                     profile)
        for s in streams
    ]  # fmt: skip
    return replace(
        workload,
        inference=streams,
        load=InferenceLoad.stack(loads),
        low_active_per_window=active if routing is not None else None,
    )


def _no_load(duration_s: int) -> InferenceLoad:
    """The `[0, bin]` load of a row without inference servers."""
    empty = np.zeros((0, duration_s))
    return InferenceLoad(1.0, np.zeros((0, duration_s), dtype=np.int64), empty, empty.copy())


@dataclass(frozen=True)
class RowRun:
    """What one run of the row produced, second by second and per request."""

    row_power_w: FloatArray
    budget_w: float
    clock_mhz: FloatArray
    """[server, second] applied SM clock."""
    power_limit_w: FloatArray
    """[server, second] applied per-GPU power limit (NaN: none)."""
    actions: int
    """Rung increases commanded (clock locks and caps)."""
    brakes: int
    latency_s: FloatArray
    """High-priority request latencies."""
    low_latency_s: FloatArray
    """Low-priority request latencies."""
    low_completed: int
    """Low-priority requests completed within the run."""
    training_iterations: float
    server_energy_j: FloatArray = field(default_factory=lambda: np.zeros(0))
    """[server] energy each server drew over the run (J); empty: not recorded."""


def _ladders(
    spec: PowerSpec, workload: RowWorkload
) -> tuple[ActionLadder, ActionLadder, dict[float, float]]:
    """The inference and training servers' ladders (server watts), and each cap's per-GPU
    limit by the server-level limit it stands for."""
    gpu = power_model_for(GPU_SKU)
    actions = spec.gpus.get(GPU_SKU) or default_actions(GPU_SKU, gpu)
    curves = (
        ServerCurve(gpu, workload.inference_profile.server,
                    workload.inference_profile.non_gpu_load_coupling),
        ServerCurve(gpu, workload.training_profile.server,
                    workload.training_profile.non_gpu_load_coupling),
    )  # fmt: skip

    def server_w(curve: ServerCurve, gpu_w: float) -> float:
        return float(curve.server.power_w(gpu_w, gpu, curve.coupling))

    ladders = [
        ActionLadder.build(
            GPU_SKU, curve, actions.lock_clocks_mhz, server_w(curve, actions.floor_power_w)
        )
        for curve in curves
    ]
    gpu_cap_of = {server_w(curve, actions.floor_power_w): actions.floor_power_w for curve in curves}
    shares = spec.efficiency.training_caps_tdp_share
    if shares is not None:
        caps_gpu_w = [share * gpu.tdp_w for share in shares] + [actions.floor_power_w]
        caps_server_w = [server_w(curves[1], cap) for cap in caps_gpu_w]
        ladders[1] = capped_ladder(GPU_SKU, curves[1], caps_server_w)
        gpu_cap_of.update(zip(caps_server_w, caps_gpu_w, strict=True))
    return ladders[0], ladders[1], gpu_cap_of


def run_row(workload: RowWorkload, spec: PowerSpec | None) -> RowRun:
    """Run the row for the scenario's duration; `spec` None runs it uncapped.

    Uncapped, nothing feeds back (every clock stays at max), so the whole run is computed in
    one vectorised pass (`run_uncapped`); with a policy the row steps second by second.
    """
    if spec is None:
        return run_uncapped(workload)
    if spec.efficiency.routing is not None:
        workload = routed_workload(workload, spec.efficiency.routing)
    return run_stepped(workload, spec)


def run_stepped(workload: RowWorkload, spec: PowerSpec | None) -> RowRun:
    """The row second by second under the controller (`spec` None: no controller)."""
    scenario = workload.scenario
    gpu = power_model_for(GPU_SKU)
    n_inf, n = workload.n_inference, scenario.servers
    duration = scenario.duration_s
    budget_w = workload.budget_w
    clock, limit, row_power = _blank_timelines(workload, gpu)
    phase = workload.training_phase.copy()
    backlog = np.zeros(n_inf)
    prefill_history = np.zeros((n_inf, 0))
    controller, gpu_cap_of = (
        _controller(spec, workload, budget_w) if spec is not None else (None, {})
    )
    settings = settings_from_spec(spec) if spec is not None else None
    latency_ticks = round(settings.actuation_latency_s) if settings else 0
    delay = scenario.telemetry_delay_s
    pending: deque[np.ndarray] = deque(np.zeros(n, dtype=np.int64) for _ in range(latency_ticks))
    applied = np.zeros(n, dtype=np.int64)
    readings: deque[tuple[FloatArray, np.ndarray]] = deque()
    high = np.arange(n) < workload.n_high
    training = np.arange(n) >= n_inf
    actions = brakes = 0
    rung_clock, rung_limit = _rung_tables(controller, gpu, gpu_cap_of, n)
    phase_clocks = _PhaseClocks.of(spec, workload, gpu) if spec is not None else None
    floor_rung = np.zeros(n, dtype=np.int64)
    server_energy_j = np.zeros(n)
    for t in range(duration):
        clock[:, t] = rung_clock[np.arange(n), applied]
        limit[:, t] = rung_limit[np.arange(n), applied]
        lim = limit[:, t]
        busy = inference_busy(
            workload.load.bins(t, t + 1), clock[:n_inf, t : t + 1],
            workload.inference_profile, gpu,
            None if np.isnan(lim[:n_inf]).all() else np.where(
                np.isnan(lim[:n_inf]), np.inf, lim[:n_inf])[:, None],
            initial_backlog_s=backlog, previous_prefill_share=prefill_history,
        )  # fmt: skip
        backlog = busy.backlog_end_s
        if phase_clocks is not None:
            floor_rung = phase_clocks.observe(
                t, busy.prefill_share[:, 0], busy.decode_share[:, 0], n
            )
        prefill_history = np.concatenate([prefill_history, busy.prefill_share], axis=1)[:, -60:]
        power = np.empty(n)
        power[:n_inf] = power_from_busy_w(busy, workload.inference_profile, gpu)[:, 0]
        if n > n_inf:
            train_limit = lim[n_inf:]
            train_limit_arg = (
                None if np.isnan(train_limit).all()
                else np.where(np.isnan(train_limit), np.inf, train_limit)[:, None]
            )  # fmt: skip
            power[n_inf:] = training_power_w(
                1, clock[n_inf:, t : t + 1], 1.0, workload.training_profile, gpu,
                train_limit_arg, start_phase=phase, iteration_s=workload.training_iteration_s,
            )[:, 0]  # fmt: skip
            phase = (phase + training_progress(
                clock[n_inf:, t : t + 1], 1.0, workload.training_profile, gpu,
                train_limit_arg, workload.training_iteration_s,
            )[:, 0]) % 1.0  # fmt: skip
        row_power[t] = power.sum()
        server_energy_j += power  # 1-s steps: W x 1 s
        readings.append((power, applied.copy()))
        if controller is None:
            continue
        if len(readings) > delay:
            seen, read_at_rung = readings.popleft()
            decision = controller.step(
                float(t),
                Telemetry(seen, np.full(n, float(t - delay)), high, read_at_rung, training),
                floor_rung if phase_clocks is not None else None,
            )
            actions += int(np.sum(decision.rung > controller_previous(pending, applied)))
            brakes += sum(1 for e in decision.events if e.reason == "EmergencyBrake")
            pending.append(decision.rung.copy())
        else:
            pending.append(applied.copy())
        applied = pending.popleft()
    latency = _latencies(workload, clock[:n_inf], limit[:n_inf], gpu)
    iterations = (
        float(training_progress(clock[n_inf:], 1.0, workload.training_profile, gpu,
                                np.where(np.isnan(limit[n_inf:]), np.inf, limit[n_inf:]),
                                workload.training_iteration_s).sum())
        if n > n_inf else 0.0
    )  # fmt: skip
    return _finish(
        workload, row_power, budget_w, clock, limit, actions, brakes, latency, iterations,
        server_energy_j,
    )  # fmt: skip


@dataclass
class _PhaseClocks:
    """The phase-aware clock floors of the row's inference servers, chosen every window from
    the phase mix each server ran over it (`voltpack.policies.power.phase_clocks`)."""

    params: PhaseClockParams
    lock_clocks_mhz: tuple[int, ...]
    clocked: np.ndarray
    """Inference servers whose clocks follow their phase mix."""
    gpu: GpuPowerModel
    profile: InferenceProfile
    prefill_sum: FloatArray
    decode_sum: FloatArray
    floor: np.ndarray

    @classmethod
    def of(cls, spec: PowerSpec, workload: RowWorkload, gpu: GpuPowerModel) -> _PhaseClocks | None:
        """None when the spec sets no phase-aware clocks."""
        params = spec.efficiency.phase_clocks
        if params is None:
            return None
        actions = spec.gpus.get(GPU_SKU) or default_actions(GPU_SKU, gpu)
        first = 0 if spec.efficiency.phase_clocks_high_priority else workload.n_high
        clocked = np.arange(first, workload.n_inference)
        zeros = np.zeros(workload.n_inference)
        return cls(params, tuple(actions.lock_clocks_mhz), clocked, gpu,
                   workload.inference_profile, zeros, zeros.copy(),
                   np.zeros(workload.scenario.servers, dtype=np.int64))  # fmt: skip

    def observe(self, t: int, prefill: FloatArray, decode: FloatArray, servers: int) -> np.ndarray:
        """Add second `t`'s phase shares; at a window's end, choose the next floors."""
        self.prefill_sum += prefill
        self.decode_sum += decode
        window = max(1, round(self.params.window_s))
        if (t + 1) % window == 0:
            rung = phase_clock_rungs(
                self.prefill_sum[self.clocked] / window, self.decode_sum[self.clocked] / window,
                self.lock_clocks_mhz, self.gpu, self.profile, self.params,
            )  # fmt: skip
            self.floor = np.zeros(servers, dtype=np.int64)
            self.floor[self.clocked] = rung
            self.prefill_sum[:] = 0.0
            self.decode_sum[:] = 0.0
        return self.floor


def run_uncapped(workload: RowWorkload) -> RowRun:
    """The row with every clock at max and no cap, all seconds at once.

    Equal (to rounding) to stepping the row second by second without a controller: inference
    busy shares over the whole horizon are what the chunked per-second run computes
    (`inference_busy` chunks join exactly), and training phases advance by the same
    iterations per second.
    """
    scenario = workload.scenario
    gpu = power_model_for(GPU_SKU)
    n_inf, n = workload.n_inference, scenario.servers
    duration = scenario.duration_s
    budget_w = workload.budget_w
    clock, limit, row_power = _blank_timelines(workload, gpu)
    server_energy_j = np.zeros(n)
    if n_inf:
        busy = inference_busy(workload.load, clock[:n_inf], workload.inference_profile, gpu)
        inference_w = power_from_busy_w(busy, workload.inference_profile, gpu)
        row_power += inference_w.sum(axis=0)
        server_energy_j[:n_inf] = inference_w.sum(axis=1)
    iterations = 0.0
    if n > n_inf:
        training_w = training_power_w(
            duration, clock[n_inf:], 1.0, workload.training_profile, gpu,
            start_phase=workload.training_phase, iteration_s=workload.training_iteration_s,
        )  # fmt: skip
        row_power += training_w.sum(axis=0)
        server_energy_j[n_inf:] = training_w.sum(axis=1)
        iterations = float(
            training_progress(
                clock[n_inf:], 1.0, workload.training_profile, gpu,
                iteration_s=workload.training_iteration_s,
            ).sum()
        )  # fmt: skip
    latency = _latencies(workload, clock[:n_inf], limit[:n_inf], gpu)
    return _finish(
        workload, row_power, budget_w, clock, limit, 0, 0, latency, iterations, server_energy_j
    )


def _blank_timelines(
    workload: RowWorkload, gpu: GpuPowerModel
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """`[server, second]` SM clocks at max and power limits unset (NaN), and the row's power
    per second at zero."""
    n, duration = workload.scenario.servers, workload.scenario.duration_s
    return (
        np.full((n, duration), gpu.max_clock_mhz),
        np.full((n, duration), np.nan),
        np.zeros(duration),
    )


def _finish(
    workload: RowWorkload, row_power: FloatArray, budget_w: float, clock: FloatArray,
    limit: FloatArray, actions: int, brakes: int, latency: list[FloatArray], iterations: float,
    server_energy_j: FloatArray | None = None,
) -> RowRun:  # fmt: skip
    """Split latencies by priority and count the low-priority requests done in time."""
    n_high, n_inf = workload.n_high, workload.n_inference
    duration = workload.scenario.duration_s
    high_latency = np.concatenate(latency[:n_high]) if n_high else np.zeros(0)
    low_latency = np.concatenate(latency[n_high:]) if n_inf > n_high else np.zeros(0)
    low_done = sum(
        int(np.sum(stream.arrival_s + lat <= duration))
        for stream, lat in zip(workload.inference[n_high:], latency[n_high:], strict=True)
    )
    return RowRun(
        row_power, budget_w, clock, limit, actions, brakes, high_latency, low_latency, low_done,
        iterations, np.zeros(0) if server_energy_j is None else server_energy_j,
    )  # fmt: skip


def controller_previous(pending: deque[np.ndarray], applied: np.ndarray) -> np.ndarray:
    """The last commanded rungs (the newest pending, or what is applied)."""
    return pending[-1] if pending else applied


def _controller(
    spec: PowerSpec, workload: RowWorkload, budget_w: float
) -> tuple[PowerController, dict[float, float]]:
    """One control unit per server in one row domain; also each cap's per-GPU limit."""
    inference, training, gpu_cap_of = _ladders(spec, workload)
    n = workload.scenario.servers
    slots = [
        GpuSlot(f"server-{i}", 0, inference if i < workload.n_inference else training)
        for i in range(n)
    ]
    tree = PowerDomainTree([PowerDomain("row", budget_w, frozenset(s.node for s in slots))])
    policy = make_power_policy(spec.policy, spec.params)
    return PowerController(tree, slots, policy, settings_from_spec(spec)), gpu_cap_of


def _rung_tables(
    controller: PowerController | None,
    gpu: GpuPowerModel,
    gpu_cap_of: dict[float, float],
    servers: int,
) -> tuple[FloatArray, FloatArray]:
    """[server, rung] -> applied SM clock and per-GPU power limit (NaN: none)."""
    if controller is None:
        return np.full((servers, 1), gpu.max_clock_mhz), np.full((servers, 1), np.nan)
    width = int(controller.ladders.top.max()) + 1
    clocks = np.full((len(controller.gpus), width), gpu.max_clock_mhz)
    limits = np.full((len(controller.gpus), width), np.nan)
    for row, slot in enumerate(controller.gpus):
        for rung, setting in enumerate(slot.ladder.settings):
            if setting.locked_clock_mhz is not None:
                clocks[row, rung] = setting.locked_clock_mhz
            if setting.power_limit_w is not None:
                limits[row, rung] = gpu_cap_of[setting.power_limit_w]
    return clocks, limits


def _latencies(
    workload: RowWorkload, clock: FloatArray, limit: FloatArray, gpu: GpuPowerModel
) -> list[FloatArray]:
    """Each inference server's request latencies under its realised clocks and caps."""
    out = []
    for i, stream in enumerate(workload.inference):
        lim = limit[i]
        out.append(
            request_latency_s(
                stream.arrival_s, stream.prompt_tokens, stream.output_tokens, clock[i], 1.0,
                workload.inference_profile, gpu,
                None if np.isnan(lim).all() else np.where(np.isnan(lim), np.inf, lim),
            )
        )  # fmt: skip
    return out
