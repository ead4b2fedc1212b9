"""Pieces shared by voltpack's resource models."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

API_GROUP = "voltpack.io"
API_VERSION = "v1alpha1"


class ResourceModel(BaseModel):
    """Base of spec/status models: camelCase in YAML, snake_case in Python, no unknown fields."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class Condition(ResourceModel):
    """A Kubernetes-style status condition."""

    type: str = Field(min_length=1, description="e.g. Scheduled, Ready, BudgetExceeded")
    status: Literal["True", "False", "Unknown"]
    reason: str = Field(default="", description="CamelCase machine-readable reason")
    message: str = Field(default="", description="human-readable detail")
    last_transition_time: str | None = Field(
        default=None, description="RFC 3339 time the condition last changed"
    )
    observed_generation: int | None = Field(default=None, ge=0)


@dataclass(frozen=True)
class ResourceKind:
    """A custom resource kind: names, scope, and its spec and status models."""

    kind: str
    plural: str
    short_names: tuple[str, ...]
    namespaced: bool
    spec: type[ResourceModel]
    status: type[ResourceModel]
    description: str

    @property
    def singular(self) -> str:
        """Lower-case kind, as Kubernetes names the singular resource."""
        return self.kind.lower()
