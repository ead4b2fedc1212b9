"""What-if simulations (`/simulations`): started, polled, their reports."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from voltpack.api.background import RunQueueFullError
from voltpack.api.dependencies import ApiDependencies
from voltpack.api.problems import ApiProblemError
from voltpack.api.routers import resource_router
from voltpack.api.routers.access import CanGet, CanSimulate, record_audit
from voltpack.api.simulations import SimulationRequest
from voltpack.api.sources import SimulationRun

router = resource_router("simulations")


class SimulationView(BaseModel):
    """A what-if simulation run."""

    id: str
    status: str
    progress: float
    created_at_s: float
    request: dict[str, Any]
    error: str | None = None

    @classmethod
    def of(cls, run: SimulationRun) -> SimulationView:
        """The view of `run`."""
        return cls(
            id=run.id,
            status=run.status,
            progress=run.progress,
            created_at_s=run.created_at_s,
            request=run.request,
            error=run.error,
        )


def _find_run(deps: ApiDependencies, run_id: str) -> SimulationRun:
    run = deps.simulations.get(run_id, deps.history)
    if run is None:
        raise ApiProblemError(404, "not-found", "No such simulation", f"run {run_id!r} is unknown")
    return run


@router.post("/simulations", response_model=SimulationView, status_code=202)
def submit_simulation(body: SimulationRequest, caller: CanSimulate) -> SimulationView:
    """Start a what-if simulation (a training trace, policies, seeds); poll it by id. At
    most a few run or wait at once: beyond, 429 with Retry-After."""
    try:
        run = caller.deps.simulations.submit(body, caller.principal.user, caller.deps.history)
    except ValueError as exc:
        raise ApiProblemError(422, "invalid-simulation", "Invalid simulation", str(exc)) from None
    except RunQueueFullError as exc:
        raise ApiProblemError(
            429, "too-many-simulations", "Too many simulations", str(exc),
            headers={"Retry-After": str(exc.retry_after_s)},
        ) from None  # fmt: skip
    record_audit(caller, "simulation.submit", run.id, "queued", trace=body.trace)
    return SimulationView.of(run)


@router.get("/simulations/{run_id}", response_model=SimulationView)
def simulation(run_id: str, caller: CanGet) -> SimulationView:
    """A simulation's status and progress."""
    return SimulationView.of(_find_run(caller.deps, run_id))


@router.get("/simulations/{run_id}/report")
def simulation_report(run_id: str, caller: CanGet) -> dict[str, Any]:
    """A finished simulation's report (409 while it runs)."""
    run = _find_run(caller.deps, run_id)
    if run.status != "done" or run.report is None:
        raise ApiProblemError(
            409,
            "not-finished",
            "Not finished",
            f"run {run_id} is {run.status}" + (f": {run.error}" if run.error else ""),
        )
    return run.report
