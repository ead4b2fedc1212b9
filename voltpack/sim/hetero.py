"""Round-based simulation of heterogeneity-aware training scheduling (Gavel's job model).

Jobs run `total_steps` iterations on `scale_factor` GPUs of one model at a time, at the
throughput the table gives for that model. Time advances in rounds (`round_s`): before each
round the allocation policy's shares become concrete placements through the round mechanism
(`voltpack.scheduler.rounds`); a job that runs in a round does min(rate x round, remaining)
steps. Arrivals are admitted at round boundaries; the allocation is recomputed when jobs arrive
or finish, at most once per `allocation_interval_s`. A job that starts on a model it did not run
on in the previous round pays `restart_cost_s` (checkpoint and restart). `gavel_compatible`
keeps two quirks of Gavel's simulator so its published numbers can be reproduced: a job that
arrived since the last allocation takes GPUs without running, and a round's execution time is
counted from the previous round's end.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from voltpack.model.errors import InvalidRequestError
from voltpack.perf.throughput_table import ThroughputTable
from voltpack.policies.hetero.allocation import AllocationInput, FloatArray
from voltpack.policies.hetero.registry import AllocationPolicy
from voltpack.scheduler.rounds import RoundChoice, round_priorities, select_round
from voltpack.sim.traces.gavel import GavelJob

GAVEL_MODEL_ORDER = ("v100", "p100", "k80")


def parse_gavel_cluster(text: str) -> dict[str, int]:
    """'V:P:K' (e.g. '8:8:8') as GPU counts of v100, p100 and k80; InvalidRequestError if not."""
    parts = text.split(":")
    if len(parts) != len(GAVEL_MODEL_ORDER) or not all(p.isdigit() and len(p) < 6 for p in parts):
        raise InvalidRequestError(
            f"cluster {text!r}: expected V100:P100:K80 GPU counts, e.g. 8:8:8"
        )
    counts = dict(zip(GAVEL_MODEL_ORDER, map(int, parts), strict=True))
    if sum(counts.values()) == 0:
        raise InvalidRequestError(f"cluster {text!r}: needs at least one GPU")
    return counts


@dataclass(frozen=True)
class RoundConfig:
    """How the mechanism runs."""

    round_s: float = 1920.0
    allocation_interval_s: float = 1920.0
    restart_cost_s: float = 0.0
    seed: int = 0
    gavel_compatible: bool = True
    non_preemptible: frozenset[int] = frozenset()
    """Trace indices of jobs that, once started, keep their GPUs until they finish."""


@dataclass
class JobResult:
    """What happened to one job."""

    index: int
    job_type: str
    scale_factor: int
    arrival_s: float
    finish_s: float
    preemptions: int
    restarts: int
    isolated_duration_s: float
    """Time the job would take on its isolated fair share (for finish-time fairness)."""

    @property
    def jct_s(self) -> float:
        """Job completion time: finish minus arrival."""
        return self.finish_s - self.arrival_s


@dataclass
class SimulationResult:
    """Per-job results and cluster figures of one run."""

    policy: str
    jobs: list[JobResult]
    makespan_s: float
    gpu_busy_s: float
    gpu_count: int
    first_arrival_s: float
    solve_times_s: list[float] = field(default_factory=list)

    @property
    def utilization(self) -> float:
        """GPU-seconds in use over GPU-seconds available from the first arrival to the end."""
        span = self.makespan_s - self.first_arrival_s
        return self.gpu_busy_s / (self.gpu_count * span) if span > 0 else 0.0


@dataclass
class _Active:
    index: int
    job: GavelJob
    rates: FloatArray
    steps_done: int = 0
    job_time_s: FloatArray = field(default_factory=lambda: np.zeros(0))
    deficit_s: FloatArray = field(default_factory=lambda: np.zeros(0))
    allocation: FloatArray | None = None
    last_model: int | None = None
    ran_last_round: bool = False
    preemptions: int = 0
    restarts: int = 0
    isolated_rate: float = 0.0

    @property
    def remaining(self) -> int:
        return self.job.total_steps - self.steps_done


@dataclass
class _Running:
    start_s: float
    finish_s: float
    active: _Active
    model: int
    steps: int


def _rates(table: ThroughputTable, job: GavelJob, models: Sequence[str]) -> FloatArray:
    return np.array([table.rate(job.job_type, m, job.scale_factor) for m in models])


class RoundSimulator:
    """Replays a Gavel-format trace on a heterogeneous cluster with one allocation policy."""

    def __init__(
        self,
        policy: AllocationPolicy,
        table: ThroughputTable,
        cluster: dict[str, int],
        config: RoundConfig | None = None,
    ) -> None:
        if not cluster or any(n < 0 for n in cluster.values()) or sum(cluster.values()) == 0:
            raise InvalidRequestError(f"cluster {cluster}: needs at least one GPU, none negative")
        self.policy = policy
        self.table = table
        self.config = config or RoundConfig()
        known = [m for m in GAVEL_MODEL_ORDER if m in cluster]
        self.models = tuple(known + sorted(m for m in cluster if m not in GAVEL_MODEL_ORDER))
        self.capacity = np.array([cluster[m] for m in self.models], dtype=np.int64)

    def run(self, trace: Sequence[GavelJob]) -> SimulationResult:
        """Run every job of `trace` to completion; raise InvalidRequestError if one never fits."""
        for index, job in enumerate(trace):
            if job.scale_factor > int(self.capacity.max()):
                raise InvalidRequestError(
                    f"job {index} ({job.job_type}) needs {job.scale_factor} GPUs of one model; "
                    f"the largest model pool has {int(self.capacity.max())}"
                )
            rates = _rates(self.table, job, self.models)
            if not ((rates > 0) & (job.scale_factor <= self.capacity)).any():
                raise InvalidRequestError(
                    f"job {index} ({job.job_type} on {job.scale_factor} GPUs) has no measured "
                    f"throughput on any GPU model with enough GPUs here ({', '.join(self.models)})"
                )
        if self.policy.reset is not None:
            self.policy.reset()
        return _Run(self, trace).execute()


class _Run:
    """The state of one simulation (Gavel's simulate loop, with voltpack's mechanism)."""

    def __init__(self, sim: RoundSimulator, trace: Sequence[GavelJob]) -> None:
        self.sim = sim
        self.cfg = sim.config
        self.models = sim.models
        self.queue = list(enumerate(trace))
        self.active: dict[int, _Active] = {}
        self.running: list[_Running] = []
        self.results: list[JobResult] = []
        self.model_time_s = np.zeros(len(self.models))
        self.now_s = 0.0
        self.last_reset_s = 0.0
        self.need_allocation = False
        self.round_start_s = 0.0
        self.round_end_s: float | None = None
        self.gpu_busy_s = 0.0
        self.solve_times_s: list[float] = []
        self.total = len(trace)
        self.shuffler = random.Random(self.cfg.seed + 5)
        self.idle_rounds = 0

    def execute(self) -> SimulationResult:
        first_arrival = self.queue[0][1].arrival_s if self.queue else 0.0
        if self.queue:
            self.now_s = self.queue[0][1].arrival_s
        while len(self.results) < self.total:
            self._advance()
            self._finish_round()
            self._admit()
            self._start_round()
        return SimulationResult(
            policy=self.sim.policy.name,
            jobs=sorted(self.results, key=lambda r: r.index),
            makespan_s=self.now_s,
            gpu_busy_s=self.gpu_busy_s,
            gpu_count=int(self.sim.capacity.sum()),
            first_arrival_s=first_arrival,
            solve_times_s=self.solve_times_s,
        )

    def _advance(self) -> None:
        if not self.queue and not self.running:
            self.last_reset_s = 0.0
        if self.running:
            end = max(r.finish_s for r in self.running)
            if self.round_end_s is not None:
                self.round_start_s = self.round_end_s
            self.round_end_s = end
            self.now_s = end
        elif self.queue:
            self.now_s = max(self.now_s, self.queue[0][1].arrival_s)
        elif self.active:
            # Nothing runs and nothing arrives: the reset above lets the next round allocate
            # (as Gavel does); a second idle round in a row means nothing ever can run.
            self.idle_rounds += 1
            if self.idle_rounds > 1:
                raise RuntimeError(
                    f"{len(self.active)} jobs are active but none can be scheduled "
                    f"(policy {self.sim.policy.name})"
                )

    def _finish_round(self) -> None:
        if self.running:
            self.idle_rounds = 0
        for run in self.running:
            active = run.active
            start = self.round_start_s if self.cfg.gavel_compatible else run.start_s
            elapsed = run.finish_s - start
            active.steps_done += run.steps
            active.job_time_s[run.model] += elapsed
            self.model_time_s[run.model] += elapsed
            self.gpu_busy_s += (run.finish_s - run.start_s) * active.job.scale_factor
            if active.remaining <= 0:
                self._complete(active, run.finish_s)
        self.running = []

    def _complete(self, active: _Active, finish_s: float) -> None:
        del self.active[active.index]
        self.need_allocation = True
        isolated = (
            active.job.total_steps / active.isolated_rate if active.isolated_rate > 0 else 0.0
        )
        self.results.append(
            JobResult(
                index=active.index,
                job_type=active.job.job_type,
                scale_factor=active.job.scale_factor,
                arrival_s=active.job.arrival_s,
                finish_s=finish_s,
                preemptions=active.preemptions,
                restarts=active.restarts,
                isolated_duration_s=isolated,
            )
        )

    def _admit(self) -> None:
        half_round = self.cfg.round_s / 2
        while self.queue and self.queue[0][1].arrival_s <= self.now_s:
            index, job = self.queue.pop(0)
            self.active[index] = _Active(
                index=index,
                job=job,
                rates=_rates(self.sim.table, job, self.models),
                job_time_s=np.full(len(self.models), half_round),
                deficit_s=np.zeros(len(self.models)),
            )
            self.need_allocation = True

    def _problem(self, jobs: list[_Active]) -> AllocationInput:
        return AllocationInput(
            gpu_models=self.models,
            capacity_gpus=self.sim.capacity,
            throughputs_steps_per_s=np.array([a.rates for a in jobs]).reshape(
                len(jobs), len(self.models)
            ),
            scale_factors=np.array([a.job.scale_factor for a in jobs], dtype=np.int64),
            priority_weights=np.array([a.job.priority_weight for a in jobs]),
            steps_remaining=np.array([float(a.remaining) for a in jobs]),
            time_since_arrival_s=np.array([self.now_s - a.job.arrival_s for a in jobs]),
            job_ids=tuple(a.index for a in jobs),
        )

    def _reset_and_allocate(self, jobs: list[_Active]) -> None:
        half_round = self.cfg.round_s / 2
        elapsed = self.now_s - self.last_reset_s
        self.model_time_s[:] = 0.0
        for active in jobs:
            received = active.job_time_s - half_round
            should = (
                active.allocation * elapsed
                if active.allocation is not None
                else np.zeros(len(self.models))
            )
            active.deficit_s += should - received
            active.job_time_s[:] = half_round
            self.model_time_s += half_round
        self.last_reset_s = self.now_s
        started = time.perf_counter()
        problem = self._problem(jobs)
        allocation = self.sim.policy.allocate(problem)
        self.solve_times_s.append(time.perf_counter() - started)
        for row, active in enumerate(jobs):
            active.allocation = allocation[row]
            if active.isolated_rate == 0.0:
                active.isolated_rate = _isolated_rate(problem, row)
        self.need_allocation = False

    def _start_round(self) -> None:
        jobs = [self.active[i] for i in sorted(self.active)]
        if not jobs:
            return
        interval_over = self.now_s - self.last_reset_s >= self.cfg.allocation_interval_s
        may_reallocate = interval_over or self.last_reset_s == 0 or not self.cfg.gavel_compatible
        if self.need_allocation and may_reallocate:
            self._reset_and_allocate(jobs)
        allocation = np.array(
            [a.allocation if a.allocation is not None else np.zeros(len(self.models)) for a in jobs]
        )
        job_time = np.array([a.job_time_s for a in jobs])
        deficits = np.array([a.deficit_s for a in jobs])
        priorities = round_priorities(allocation, job_time, self.model_time_s)
        order = list(range(len(self.models)))
        if not self.sim.policy.heterogeneity_aware:
            self.shuffler.shuffle(order)
        unallocated = np.array([a.allocation is None for a in jobs])
        pinned = [
            (row, a.last_model)
            for row, a in enumerate(jobs)
            if a.index in self.cfg.non_preemptible and a.ran_last_round and a.last_model is not None
        ]
        runnable = np.array([a.rates > 0 for a in jobs]) & (
            np.array([a.job.scale_factor for a in jobs])[:, None] <= self.sim.capacity[None, :]
        )
        choices = select_round(
            priorities,
            deficits,
            allocation,
            np.array([a.job.scale_factor for a in jobs], dtype=np.int64),
            self.sim.capacity,
            runnable,
            order,
            pinned=pinned,
            skip_zero_priority=self.sim.policy.whole_gpus_in_order,
            unallocated=unallocated if self.cfg.gavel_compatible else None,
        )
        self._launch(jobs, choices)

    def _launch(self, jobs: list[_Active], choices: list[RoundChoice]) -> None:
        chosen = {c.job: c.model for c in choices if c.runs}
        for row, active in enumerate(jobs):
            if row not in chosen:
                if active.ran_last_round:
                    active.preemptions += 1
                active.ran_last_round = False
                continue
            model = chosen[row]
            kept = active.ran_last_round and active.last_model == model
            cost = 0.0
            if active.steps_done > 0 and not kept:
                active.restarts += 1
                cost = self.cfg.restart_cost_s
            rate = float(active.rates[model])
            budget_s = max(self.cfg.round_s - cost, 0.0)
            steps = max(min(int(rate * budget_s), active.remaining), 1)
            active.last_model = model
            active.ran_last_round = True
            self.running.append(
                _Running(self.now_s, self.now_s + cost + steps / rate, active, model, steps)
            )


def _isolated_rate(problem: AllocationInput, row: int) -> float:
    """The job's throughput on an equal 1/n share of every model's GPUs (for fairness)."""
    share = problem.capacity_gpus / max(problem.job_count, 1) / problem.scale_factors[row]
    return float((problem.throughputs_steps_per_s[row] * np.minimum(share, 1.0)).sum())


def summarize(result: SimulationResult) -> dict[str, float]:
    """Average and p99 JCT, makespan, utilization, preemptions and the finish-time fairness.

    Finish-time fairness rho = JCT / the time the job would take on an equal 1/n share of the
    cluster, n being the number of active jobs when it was first allocated (Themis, NSDI'20).
    """
    jct = np.array([job.jct_s for job in result.jobs])
    isolated = np.array([job.isolated_duration_s for job in result.jobs])
    rho = np.divide(jct, isolated, out=np.full_like(jct, np.nan), where=isolated > 0)
    rho = rho[np.isfinite(rho)]
    solves = np.array(result.solve_times_s) if result.solve_times_s else np.zeros(1)
    return {
        "jobs": float(len(result.jobs)),
        "avg_jct_s": float(jct.mean()),
        "p99_jct_s": float(np.percentile(jct, 99)),
        "makespan_s": float(result.makespan_s),
        "utilization": float(result.utilization),
        "preemptions": float(sum(job.preemptions for job in result.jobs)),
        "restarts": float(sum(job.restarts for job in result.jobs)),
        "ftf_rho_median": float(np.median(rho)) if rho.size else float("nan"),
        "ftf_rho_p90": float(np.percentile(rho, 90)) if rho.size else float("nan"),
        "ftf_rho_max": float(rho.max()) if rho.size else float("nan"),
        "ftf_share_rho_above_1": float((rho > 1).mean()) if rho.size else float("nan"),
        "solve_median_s": float(np.median(solves)),
        "solves": float(len(result.solve_times_s)),
    }
