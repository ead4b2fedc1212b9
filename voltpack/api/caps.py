"""Hand-set power caps: a strictly typed body, and a range each domain can actually honour.

A cap is a number of watts: JSON `true` or `"12000"` is refused rather than read as 1 W or
12 kW. It must lie between the least the domain's GPUs can be capped to (the sum of their
catalog minimum power limits; GPUs of a model the catalog lacks count 0 W) and the domain's
budget (a manual cap only ever lowers the budget the power loop keeps to).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pydantic import BaseModel, ConfigDict, Field

from voltpack.api.problems import ApiProblemError
from voltpack.model.admin import PowerDomainView
from voltpack.model.gpu_sku import default_catalog

MAX_CAP_W = 1e8
"""100 MW: larger than any power domain a cap could be meant for."""


class ManualCap(BaseModel):
    """A hand-set power cap for a domain, in watts (null removes it)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    cap_w: float | None = Field(
        default=None,
        gt=0,
        le=MAX_CAP_W,
        allow_inf_nan=False,
        description="watts (a JSON number), between the domain's GPU floor and its budget",
    )


def gpu_floor_w(models: Iterable[str]) -> float:
    """The sum of the catalog's minimum power limits of GPUs of these `models`."""
    catalog = default_catalog()
    return sum(catalog.get(m).min_power_limit_w or 0.0 for m in models if m in catalog)


def check_cap(
    cap_w: float,
    domains: Iterable[PowerDomainView],
    gpu_models: Callable[[str], list[str] | None],
    name: str,
) -> None:
    """ApiProblemError 422 when `cap_w` is outside what domain `name` can honour; nothing
    when the domain is unknown (the caller answers 404). `gpu_models` gives the model of each
    of a domain's GPUs."""
    domain = next((d for d in domains if d.name == name), None)
    if domain is None:
        return
    if cap_w > domain.budget_w:
        raise ApiProblemError(
            422,
            "cap-out-of-range",
            "Cap above the budget",
            f"field cap_w: {cap_w:g} W is above the budget of power domain {name} "
            f"({domain.budget_w:g} W) and would cap nothing; give at most {domain.budget_w:g} "
            "W, or change the PowerBudget",
        )
    floor_w = gpu_floor_w(gpu_models(name) or [])
    if cap_w < floor_w:
        raise ApiProblemError(
            422,
            "cap-out-of-range",
            "Cap below what the GPUs can be capped to",
            f"field cap_w: {cap_w:g} W is below {floor_w:g} W, the sum of the minimum power "
            f"limits of the GPUs in power domain {name}; give at least {floor_w:g} W",
        )
