"""Node taints and pod tolerations, matched as component-helpers' `ToleratesTaint` does.

A toleration with operator `Exists` and an empty key tolerates every taint (of its effect, or of
any effect when it names none); `Equal` compares the value; an empty effect matches every
effect. `NoSchedule` and `NoExecute` taints keep pods that do not tolerate them away (a filter);
`PreferNoSchedule` only lowers a node's score.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
FILTERING_EFFECTS: frozenset[str] = frozenset({"NoSchedule", "NoExecute"})
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
"""The taint a cordoned node stands for: a pod that tolerates it may use a cordoned node."""


class Taint(BaseModel):
    """One taint of a node."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    value: str = ""
    effect: TaintEffect


class Toleration(BaseModel):
    """One toleration of a pod."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: TaintEffect | None = None
    toleration_seconds: int | None = None

    @model_validator(mode="after")
    def _check(self) -> Toleration:
        if self.operator == "Exists" and self.value:
            raise ValueError(f"operator Exists takes no value, got value {self.value!r}")
        if not self.key and self.operator != "Exists":
            raise ValueError("an empty key needs operator Exists")
        return self

    def tolerates(self, taint: Taint) -> bool:
        """Whether this toleration tolerates `taint`."""
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


def tolerated(taint: Taint, tolerations: Iterable[Toleration]) -> bool:
    """Whether any of `tolerations` tolerates `taint`."""
    return any(toleration.tolerates(taint) for toleration in tolerations)
