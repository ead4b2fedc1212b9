"""What-if simulations submitted through the API, run one at a time, each in a child process
(`simulation_process`: seconds to minutes of CPU that must not hold the API's interpreter).

A request names a shipped training trace (under `data/gavel/`, no other paths), a cluster and
allocation policies; the run replays the trace once per policy and reports `summarize`'s
figures. Runs are kept in memory and, when a history store is configured, saved there.

Both are bounded (`BoundedRuns`): at most `max_active` runs queued or running (a submission
beyond gets `RunQueueFullError`, which the API answers with 429 and Retry-After), and at most
`max_finished` finished runs kept in memory, the oldest forgotten first (the history store, if
any, still has them).
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from voltpack.api.background import BoundedRuns
from voltpack.api.simulation_process import SimulationFailedError, simulate_in_child
from voltpack.api.sources import SimulationRun, SourceUnavailableError
from voltpack.model.errors import InvalidRequestError
from voltpack.perf.throughput_table import load_gavel_throughputs
from voltpack.policies.hetero.registry import allocation_policy_names, make_allocation_policy
from voltpack.sim.datasets import data_dir
from voltpack.sim.hetero import RoundConfig, RoundSimulator, parse_gavel_cluster, summarize
from voltpack.sim.traces.gavel import load_gavel_trace

if TYPE_CHECKING:
    from voltpack.api.sources import History

log = logging.getLogger(__name__)
_TRACE_NAME = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*\.trace$")


class SimulationRequest(BaseModel):
    """A training what-if: trace, cluster, policies."""

    model_config = ConfigDict(extra="forbid")

    trace: str = Field(
        default="generated/gavel_gen_120jobs_lam1200_seed0.trace",
        max_length=200,
        description="a trace under data/gavel/, e.g. msr-seed0/103959.trace",
    )
    cluster: str = Field(default="8:8:8", description="GPUs as V100:P100:K80")
    policies: list[str] = Field(
        default_factory=lambda: ["max_min_fairness_perf", "shortest_remaining_perf"],
        min_length=1,
        max_length=12,
    )
    round_s: float = Field(default=360.0, ge=10, le=86_400)
    seeds: list[int] = Field(
        default_factory=lambda: [0],
        min_length=1,
        max_length=10,
        description="one run per seed (tie-breaking and random model choices)",
    )

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, value: list[int]) -> list[int]:
        if any(seed < 0 or seed >= 2**31 for seed in value) or len(set(value)) != len(value):
            raise ValueError("seeds must be distinct integers in [0, 2^31)")
        return value

    @field_validator("trace")
    @classmethod
    def _trace_name(cls, value: str) -> str:
        if not _TRACE_NAME.match(value) or ".." in value.split("/"):
            raise ValueError("must be a relative .trace path under data/gavel/ without '..'")
        return value

    @field_validator("cluster")
    @classmethod
    def _cluster(cls, value: str) -> str:
        try:
            parse_gavel_cluster(value)
        except InvalidRequestError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("policies")
    @classmethod
    def _policies(cls, value: list[str]) -> list[str]:
        unknown = [p for p in value if p not in allocation_policy_names()]
        if unknown:
            raise ValueError(
                f"unknown policies {unknown}; allowed: {', '.join(allocation_policy_names())}"
            )
        return value


DEFAULT_MAX_ACTIVE = 8
"""Runs queued or running at once; more are refused until one finishes."""
DEFAULT_MAX_FINISHED = 100
"""Finished runs kept in memory; older ones are forgotten (the history store keeps them)."""
RETRY_AFTER_S = 30
"""What a refused submission is told to wait: about one small run."""


class SimulationRunner:
    """Runs submitted simulations one at a time; keeps their state, within bounds."""

    def __init__(
        self,
        workers: int = 1,
        max_active: int = DEFAULT_MAX_ACTIVE,
        max_finished: int = DEFAULT_MAX_FINISHED,
    ) -> None:
        self._runs: BoundedRuns[SimulationRun] = BoundedRuns(
            "simulations",
            workers=workers,
            max_active=max_active,
            max_finished=max_finished,
            retry_after_s=RETRY_AFTER_S,
        )

    def submit(
        self, request: SimulationRequest, user: str, history: History | None
    ) -> SimulationRun:
        """Queue a run; ValueError when the trace does not exist, RunQueueFullError when
        `max_active` runs are queued or running."""
        path = _trace_path(request.trace)
        self._runs.reserve()
        run = SimulationRun(
            id=uuid.uuid4().hex[:16],
            created_at_s=time.time(),
            request=request.model_dump(),
            user=user,
        )
        if history is not None:
            try:
                run.id = history.create_simulation(run)
            except SourceUnavailableError:
                pass  # kept in memory meanwhile
            except BaseException:
                self._runs.release()
                raise
        self._runs.start(
            run,
            lambda kept: self._execute(kept, request, path, history),
            lambda kept: self._cancelled(kept, history),
        )
        return run

    def get(self, run_id: str, history: History | None) -> SimulationRun | None:
        """A run by id, from memory or the history."""
        run = self._runs.get(run_id)
        if run is None and history is not None:
            try:
                return history.load_simulation(run_id)
            except Exception:  # an unreachable store means 'not found here'
                return None
        return run

    def shutdown(self) -> None:
        """Stop accepting runs; wait for the running one."""
        self._runs.shutdown()

    def _cancelled(self, run: SimulationRun, history: History | None) -> None:
        run.status, run.error = "failed", "the API shut down before it ran"
        self._save(run, history)

    def _execute(
        self, run: SimulationRun, request: SimulationRequest, path: Path, history: History | None
    ) -> None:
        run.status = "running"
        self._save(run, history)

        def progress(share: float) -> None:
            run.progress = share
            self._save(run, history)

        try:
            run.report = simulate_in_child(request, path, progress)
            run.status = "done"
        except SimulationFailedError as exc:
            run.status, run.error = "failed", str(exc)
        except Exception as exc:  # never leave a run 'running' and counted
            run.status, run.error = "failed", f"{type(exc).__name__}: the server logged it"
            log.exception("simulation %s failed", run.id)
        self._save(run, history)

    @staticmethod
    def _save(run: SimulationRun, history: History | None) -> None:
        if history is None:
            return
        # the run goes on in memory; the store counts what it drops
        with contextlib.suppress(Exception):
            history.save_simulation(run)


def simulate(
    request: SimulationRequest, path: Path, progress: Callable[[float], None]
) -> dict[str, Any]:
    """Replay the trace at `path` once per policy and seed; the report. `progress(share)` after
    each replay. Raises VoltpackError, LookupError or ValueError on bad input."""
    table = load_gavel_throughputs(data_dir() / "gavel" / "simulation_throughputs.json")
    jobs = load_gavel_trace(path)
    gpus = parse_gavel_cluster(request.cluster)
    results: dict[str, dict[str, float | None]] = {}
    per_seed: dict[str, dict[str, dict[str, float | None]]] = {}
    total = len(request.policies) * len(request.seeds)
    done = 0
    for name in request.policies:
        per_seed[name] = {}
        for seed in request.seeds:
            config = RoundConfig(round_s=request.round_s, seed=seed, gavel_compatible=False)
            policy = make_allocation_policy(name, seed)
            simulator = RoundSimulator(policy, table, gpus, config)
            per_seed[name][str(seed)] = _finite(summarize(simulator.run(jobs)))
            done += 1
            progress(done / total)
        runs = list(per_seed[name].values())
        results[name] = {key: _mean([r[key] for r in runs]) for key in runs[0]}
    return {
        "trace": request.trace,
        "cluster": request.cluster,
        "seeds": request.seeds,
        "results": results,
        "per_seed": per_seed,
    }


def _finite(figures: dict[str, float]) -> dict[str, float | None]:
    """JSON-safe figures: a value that is not finite (no data) becomes None."""
    return {key: value if math.isfinite(value) else None for key, value in figures.items()}


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _trace_path(name: str) -> Path:
    root = (data_dir() / "gavel").resolve()
    path = (root / name).resolve()
    if root not in path.parents or not path.is_file():
        raise ValueError(f"trace {name!r} is not a file under data/gavel/")
    return path
