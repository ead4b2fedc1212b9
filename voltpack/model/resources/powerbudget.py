"""PowerBudget: a power domain selected by node labels and its budget.

How the domain is kept under budget (the power policy, thresholds, timing, clock ladders) is
cluster-wide configuration in the policy file (`spec.power`); a PowerBudget says only which
nodes share a feed and how many watts that feed may carry.
"""

from __future__ import annotations

from pydantic import Field

from voltpack.model.resources.common import Condition, ResourceModel


class NodeSelector(ResourceModel):
    """Nodes whose labels include all of `match_labels`."""

    match_labels: dict[str, str] = Field(default_factory=dict)


class PowerBudgetSpec(ResourceModel):
    """A power domain and its limit."""

    node_selector: NodeSelector
    budget_w: float = Field(gt=0, description="power budget of the domain in watts")
    parent: str | None = Field(default=None, description="enclosing domain (row, site)")
    node_overhead_w: float = Field(
        default=0.0, ge=0, description="non-GPU power of each node (CPUs, fans, NICs), watts"
    )


class BrakeStatus(ResourceModel):
    """A domain's emergency brake while it is on: a new leader keeps it until `holdUntil`."""

    since: str = Field(description="RFC 3339 time the brake started")
    hold_until: str = Field(description="RFC 3339 time before which it is never released")


class PowerBudgetStatus(ResourceModel):
    """The domain as the power manager last saw and controlled it."""

    power_w: float | None = Field(default=None, ge=0, description="accounted power, watts")
    worst_case_w: float | None = Field(
        default=None, ge=0, description="power if stale GPUs draw their worst case"
    )
    level: str | None = Field(default=None, description="policy level: normal, shedding, brake")
    locked_gpus: int = Field(default=0, ge=0)
    capped_gpus: int = Field(default=0, ge=0)
    stale_gpus: int = Field(default=0, ge=0)
    brake: BrakeStatus | None = Field(default=None, description="the emergency brake, while on")
    accepted_spec: PowerBudgetSpec | None = Field(
        default=None,
        description="the last spec the power manager accepted; an invalid spec is controlled "
        "by it until fixed (fail closed)",
    )
    conditions: list[Condition] = Field(default_factory=list)
