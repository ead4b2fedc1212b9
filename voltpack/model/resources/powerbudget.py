"""PowerBudget: a power domain selected by node labels and its budget."""

from __future__ import annotations

from pydantic import Field

from voltpack.model.resources.common import Condition, ResourceModel


class NodeSelector(ResourceModel):
    """Nodes whose labels include all of `match_labels`."""

    match_labels: dict[str, str] = Field(default_factory=dict)


class PowerPolicy(ResourceModel):
    """How the power manager keeps the domain under budget."""

    headroom_fraction: float = Field(
        default=0.05, ge=0, le=0.5, description="share of the budget kept free"
    )
    stale_telemetry_s: float = Field(
        default=30, gt=0, description="after this, a node counts at its worst-case power"
    )
    min_power_limit_fraction: float = Field(
        default=0.5, gt=0, le=1, description="lowest cap as a share of a GPU's TDP"
    )


class PowerBudgetSpec(ResourceModel):
    """A power domain and its limit."""

    node_selector: NodeSelector
    budget_w: float = Field(gt=0, description="power budget of the domain in watts")
    parent: str | None = Field(default=None, description="enclosing domain (row, site)")
    policy: PowerPolicy = Field(default_factory=PowerPolicy)


class PowerBudgetStatus(ResourceModel):
    """The domain's power as last measured."""

    power_w: float | None = Field(default=None, ge=0)
    capped_gpus: int = Field(default=0, ge=0)
    conditions: list[Condition] = Field(default_factory=list)
