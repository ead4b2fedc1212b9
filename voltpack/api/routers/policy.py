"""The active policy file: read, validate, apply (`/policy`, `/policy/validate`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from voltpack.api.problems import ApiProblemError
from voltpack.api.routers import resource_router
from voltpack.api.routers.access import CanApply, CanDryRun, CanGet, record_audit
from voltpack.api.routers.reading import read
from voltpack.model.errors import PolicyError
from voltpack.policies.schema import parse_policy

router = resource_router("policy")


class PolicyText(BaseModel):
    """A policy file's YAML text."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=1_000_000)


class PolicyValidation(BaseModel):
    """Whether a policy file is valid, and if not, what is wrong (naming the field)."""

    valid: bool
    name: str | None = None
    errors: list[str] = Field(default_factory=list)


class ActivePolicy(BaseModel):
    """The policy the scheduler runs."""

    name: str
    text: str
    policy: dict[str, Any]


@router.get("/policy", response_model=ActivePolicy)
def active_policy(caller: CanGet) -> ActivePolicy:
    """The active policy file."""
    policy, text = read(caller.deps.policies.active)
    return ActivePolicy(name=policy.metadata.name, text=text, policy=policy.model_dump())


@router.post("/policy/validate", response_model=PolicyValidation)
def validate_policy(body: PolicyText, _: CanDryRun) -> PolicyValidation:
    """Validate a policy file; errors name the field and the allowed values."""
    try:
        policy = parse_policy(body.text, "request body")
    except PolicyError as exc:
        return PolicyValidation(valid=False, errors=[str(exc)])
    return PolicyValidation(valid=True, name=policy.metadata.name)


@router.put("/policy", response_model=ActivePolicy)
def apply_policy(body: PolicyText, caller: CanApply) -> ActivePolicy:
    """Validate and apply a policy file; the scheduler picks it up on its next cycle."""
    try:
        policy = parse_policy(body.text, "request body")
    except PolicyError as exc:
        record_audit(caller, "policy.apply", "?", "invalid", error=str(exc))
        raise ApiProblemError(422, "invalid-policy", "Invalid policy file", str(exc)) from None
    read(lambda: caller.deps.policies.apply(policy, body.text))
    record_audit(caller, "policy.apply", policy.metadata.name, "applied")
    return ActivePolicy(name=policy.metadata.name, text=body.text, policy=policy.model_dump())
