"""Power domains: budgets and headroom, forecasts, manual caps (`/power/domains`)."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import Query

from voltpack.api.caps import ManualCap, check_cap
from voltpack.api.forecast_memo import domain_forecast
from voltpack.api.forecasts import PowerForecastView
from voltpack.api.problems import ApiProblemError
from voltpack.api.routers import resource_router
from voltpack.api.routers.access import CanCap, CanGet, record_audit
from voltpack.api.routers.reading import history_of, read
from voltpack.forecast.default_model import DEFAULT_MODEL
from voltpack.forecast.registry import forecaster_names
from voltpack.model.admin import PowerDomainView
from voltpack.model.errors import ForecastError

router = resource_router("power")


@router.get("/power/domains", response_model=list[PowerDomainView])
def power_domains(caller: CanGet) -> list[PowerDomainView]:
    """Power domains with budget, power, headroom and the actions in effect."""
    return read(caller.deps.cluster.power_domains)


@router.get("/power/domains/{name}/forecast", response_model=PowerForecastView)
def power_forecast(
    name: str,
    caller: CanGet,
    horizon_s: Annotated[float, Query(gt=0, le=7 * 86_400)] = 3600.0,
    level: Annotated[float, Query(gt=0.5, lt=1.0)] = 0.99,
    history_days: Annotated[float, Query(gt=0, le=60)] = 14.0,
    model: Annotated[str, Query(max_length=64)] = DEFAULT_MODEL,
    budget_w: Annotated[float | None, Query(gt=0)] = None,
) -> PowerForecastView:
    """The domain's peak power over the next `horizon_s` (quantiles, from its stored
    history) and the headroom the `level` quantile leaves under its budget."""
    if model not in forecaster_names():
        raise ApiProblemError(
            422, "invalid-model", "Unknown forecaster",
            f"model {model!r} is not one of {sorted(forecaster_names())}",
        )  # fmt: skip
    since_s = time.time() - history_days * 86_400
    try:
        return read(
            lambda: domain_forecast(
                history_of(caller.deps), caller.deps.forecast_memo, name, since_s=since_s,
                history_days=history_days, horizon_s=horizon_s, level=level,
                budget_w=budget_w, model=model,
            )
        )  # fmt: skip
    except ForecastError as exc:
        raise ApiProblemError(
            422, "cannot-forecast", "Cannot forecast this domain", str(exc)
        ) from None


@router.post("/power/domains/{name}/cap", response_model=PowerDomainView)
def cap_domain(name: str, body: ManualCap, caller: CanCap) -> PowerDomainView:
    """Cap a domain by hand below its budget (cap_w null removes the manual cap); the cap
    must lie between the sum of its GPUs' minimum power limits and its budget."""
    if body.cap_w is not None:
        cap_w = body.cap_w
        read(
            lambda: check_cap(
                cap_w,
                caller.deps.cluster.power_domains(),
                caller.deps.cluster.domain_gpu_models,
                name,
            )
        )
    try:
        view = read(lambda: caller.deps.cluster.set_manual_cap(name, body.cap_w))
    except KeyError:
        record_audit(caller, "power.cap", name, "not-found", cap_w=body.cap_w)
        raise ApiProblemError(
            404, "not-found", "No such power domain", f"power domain {name!r} is unknown"
        ) from None
    record_audit(caller, "power.cap", name, "applied", cap_w=body.cap_w)
    return view
