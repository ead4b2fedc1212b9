"""The policy file: versioned YAML, validated with errors that name the field and the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from voltpack.forecast.default_model import DEFAULT_MODEL
from voltpack.forecast.names import forecaster_names
from voltpack.model import safe_yaml
from voltpack.model.echo import short_repr, shorten
from voltpack.model.errors import CatalogError, PolicyError, PowerConfigError
from voltpack.model.text_files import read_user_text
from voltpack.perf.gpu_power import power_model_for
from voltpack.policies.fair_share import make_ordering
from voltpack.policies.hetero.registry import allocation_policy_names
from voltpack.policies.power.consolidation import ConsolidationParams
from voltpack.policies.power.ladder import ActionLadder
from voltpack.policies.power.phase_clocks import PhaseClockParams
from voltpack.policies.power.registry import make_power_policy
from voltpack.policies.preference_weights import PreferenceWeights
from voltpack.policies.registry import describe_validation_errors, make_strategy, strategy_names

API_VERSION = "voltpack.io/v1alpha1"
KIND = "SchedulingPolicy"
MAX_STALE_AFTER_S = 600.0
"""The longest `spec.power.stale_after_s`: beyond it a silent agent would go uncounted for so
long that the stale fail-safe is as good as off."""


MAX_WAIT_FOR_BETTER_PLACEMENT_S = 86_400.0
"""The longest `spec.topology.max_wait_for_better_placement_s`: a day; beyond it waiting for a
better domain is starvation by another name."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Metadata(_Strict):
    """Who the policy is: a name used in reports."""

    name: str = Field(min_length=1, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class ScoringSpec(_Strict):
    """Which strategy ranks feasible nodes and picks the GPUs inside the chosen one."""

    strategy: str = Field(description="a strategy name; `voltpack policy strategies` lists them")
    params: dict[str, Any] = Field(
        default_factory=dict, description="the strategy's own parameters, validated by it"
    )
    preferences: PreferenceWeights = Field(
        default_factory=PreferenceWeights,
        description="weights of the pods' soft constraints (preferred affinity, spread, taints)",
    )


class GpuPowerActions(_Strict):
    """The power actions of one GPU SKU: clock locks (descending) and the power-cap floor."""

    lock_clocks_mhz: tuple[int, ...] = Field(min_length=1, description="descending SM clocks")
    floor_power_w: float = Field(gt=0, description="the power cap of the last rung")


class PowerDomainSpec(_Strict):
    """A power domain declared in the policy file (nodes chosen by labels)."""

    name: str = Field(min_length=1)
    budget_w: float = Field(gt=0)
    match_labels: dict[str, str] = Field(default_factory=dict)
    parent: str | None = None


class PowerEfficiencySpec(_Strict):
    """Work done with less energy, whatever the budget: low-priority inference routed to as few
    servers as keep its latency goals (`routing`), and inference servers clocked by their phase
    mix (`phase_clocks`); each off unless given. The operator publishes the routing as router
    weights on the InferenceService and the clocks through the GPUNode specs."""

    routing: ConsolidationParams | None = Field(
        default=None, description="pack low-priority requests onto fewer servers"
    )
    phase_clocks: PhaseClockParams | None = Field(
        default=None, description="lock decode-heavy servers at lower clocks"
    )
    training_caps_tdp_share: tuple[float, ...] | None = Field(
        default=None,
        description="throughput-bound work (training) is slowed by power caps at these shares "
        "of TDP (descending, in (0, 1)), then the floor, instead of by clock locks",
    )
    phase_clocks_high_priority: bool = Field(
        default=False,
        description="also clock high-priority servers by phase mix (default: low priority only)",
    )

    @model_validator(mode="after")
    def _caps_descending(self) -> PowerEfficiencySpec:
        shares = self.training_caps_tdp_share
        if shares is not None and (
            not shares
            or list(shares) != sorted(set(shares), reverse=True)
            or not all(0 < s < 1 for s in shares)
        ):
            raise ValueError(
                "training_caps_tdp_share must be strictly descending shares of TDP in (0, 1), "
                f"e.g. [0.9, 0.8, 0.7]; got {list(shares)}"
            )
        return self


class PowerForecastSpec(_Strict):
    """The power forecast the scheduler's placement headroom takes into account: each domain's
    recorded power is forecast every `refresh_s` (at most `horizon_s`, so forecasts overlap),
    and for `horizon_s` after each refresh a placement must also leave room under the `level`
    quantile of the domain's peak over that time. On by default wherever the operator keeps a
    history store; `enabled: false` places by measured power only."""

    enabled: bool = Field(default=True, description="needs the operator's history store")
    model: str = Field(
        default=DEFAULT_MODEL, description="a forecaster name (default: the benchmark's best)"
    )
    horizon_s: float = Field(default=900.0, gt=0, le=86_400)
    level: float = Field(default=0.99, gt=0.5, lt=1.0)
    refresh_s: float = Field(default=300.0, gt=0)
    history_s: float = Field(
        default=7 * 86_400.0,
        gt=0,
        description="recorded power the forecaster fits on (a daily season needs two days)",
    )

    @model_validator(mode="after")
    def _known_model(self) -> PowerForecastSpec:
        if self.refresh_s > self.horizon_s:
            raise ValueError(
                f"refresh_s ({self.refresh_s:g}) must be at most horizon_s ({self.horizon_s:g}): "
                "a forecast stops counting after its horizon"
            )
        if self.model not in forecaster_names():
            raise ValueError(
                f"unknown forecaster {self.model!r}; known: {sorted(forecaster_names())}"
            )
        return self


class PowerSpec(_Strict):
    """How the power manager keeps power domains under budget."""

    policy: str = Field(default="headroom", description="a power-policy name")
    params: dict[str, Any] = Field(default_factory=dict)
    interval_s: float = Field(default=1.0, gt=0, description="control interval")
    actuation_latency_s: float = Field(
        default=1.0, ge=0, description="time until a setting takes effect (in-band NVML ~1 s)"
    )
    late_after_s: float = Field(
        default=5.0,
        gt=0,
        allow_inf_nan=False,
        description="telemetry older is late: the policy gives nothing back",
    )
    stale_after_s: float = Field(
        default=15.0,
        gt=0,
        le=MAX_STALE_AFTER_S,
        allow_inf_nan=False,
        description="telemetry older is stale: counted at its worst case (at most "
        f"{MAX_STALE_AFTER_S:.0f} s, so the fail-safe cannot be switched off)",
    )
    brake_release_fraction: float = Field(default=0.9, gt=0, lt=1)
    brake_hold_s: float = Field(default=30.0, ge=0)
    high_priority_min: int = Field(
        default=1000, description="pods with at least this priority are high priority"
    )
    gpus: dict[str, GpuPowerActions] = Field(
        default_factory=dict, description="per GPU SKU; others get derived defaults"
    )
    domains: list[PowerDomainSpec] = Field(default_factory=list)
    forecast: PowerForecastSpec = Field(default_factory=PowerForecastSpec)
    efficiency: PowerEfficiencySpec = Field(default_factory=PowerEfficiencySpec)

    @model_validator(mode="after")
    def _late_before_stale(self) -> PowerSpec:
        if self.late_after_s >= self.stale_after_s:
            raise ValueError("late_after_s must be below stale_after_s")
        return self


class QueueingSpec(_Strict):
    """How gangs are ordered between queues and when running gangs may be preempted."""

    ordering: str = Field(default="fair-share", description="a queue-ordering name")
    params: dict[str, Any] = Field(default_factory=dict)
    min_runtime_s: float = Field(
        default=60.0, ge=0, description="a gang runs at least this long before it is preempted"
    )
    reclaim: bool = Field(
        default=True, description="gangs within their queue's guarantee reclaim borrowed GPUs"
    )
    priority_preemption: bool = Field(
        default=True, description="gangs preempt lower-priority preemptible gangs of their queue"
    )
    priority_victims: Literal["preemptible", "any"] = Field(
        default="preemptible",
        description=(
            "which lower-priority running pods of its queue a pending pod may preempt: only "
            "gangs annotated voltpack.io/preemptible=true, and only for GPUs (preemptible); or "
            "any pod, for any resource, as kube-scheduler does (any: set it when voltpack "
            "replaces kube-scheduler; pods with preemptionPolicy Never never preempt)"
        ),
    )


class AllocationSpec(_Strict):
    """Heterogeneity-aware training allocation in the operator (docs/hetero.md); off by default.

    With a `policy`, GPUJobs that name their job type (annotation `voltpack.io/job-type`) and
    accept more than one GPU model get the model the allocation gives them the largest share
    of; preemptible ones are moved between models at round boundaries.
    """

    policy: str | None = Field(
        default=None,
        description="an allocation-policy name (`voltpack policy strategies`); none: off",
    )
    round_s: float = Field(
        default=360.0, gt=0, description="round length: how often the allocation is acted on"
    )
    restart_cost_s: float = Field(
        default=0.0,
        ge=0,
        description="time a job loses when moved (checkpoint and restart); a move must gain more",
    )
    min_runtime_s: float = Field(
        default=600.0, ge=0, description="a job runs at least this long before it is moved"
    )
    throughputs: str | None = Field(
        default=None,
        description="Gavel-format throughput file; none: the shipped Gavel table",
    )

    @property
    def enabled(self) -> bool:
        """True when an allocation policy is named."""
        return self.policy is not None


class TopologyPolicySpec(_Strict):
    """How the operator places gangs with a topology request (docs/topology.md)."""

    placer: Literal["voltpack", "kueue", "kai"] = Field(
        default="voltpack",
        description="gang placement: voltpack (predicted step time), kueue (BestFit) or kai",
    )
    name: str | None = Field(
        default=None,
        min_length=1,
        description="the Topology object to use when there are several (default: first by name)",
    )
    max_wait_for_better_placement_s: float = Field(
        default=600.0,
        ge=0,
        le=MAX_WAIT_FOR_BETTER_PLACEMENT_S,
        description="the longest a gang that fits now may wait for a better placement, counted "
        "from when it first could have started; 0: never wait",
    )
    min_completion_gain: float = Field(
        default=0.05,
        ge=0,
        lt=1,
        description="a gang waits only when that cuts its completion time (from now) by at "
        "least this fraction",
    )


class RecoverySpec(_Strict):
    """How GPU faults are isolated and the gangs they hit recovered (docs/elastic-training.md)."""

    isolation: Literal["gpu", "node"] = Field(
        default="gpu",
        description="what a GPU fault cordons: that GPU, or its whole node; faults that call for "
        "a reboot or a host fault always cordon the node",
    )
    shrink: bool = Field(
        default=True,
        description="elastic GPUJobs (minWorkers < workers) shrink in place instead of restarting",
    )
    max_restarts: int = Field(
        default=3, ge=1, description="re-placements of one gang allowed within budget_window_s"
    )
    budget_window_s: float = Field(default=3600.0, gt=0)
    backoff_s: float = Field(
        default=60.0,
        ge=0,
        description="wait before a gang's second re-placement in a window; doubles for each more",
    )


class PolicySpec(_Strict):
    """What the policy asks the scheduler and the power manager to do."""

    scoring: ScoringSpec
    power: PowerSpec = Field(default_factory=PowerSpec)
    queueing: QueueingSpec = Field(default_factory=QueueingSpec)
    allocation: AllocationSpec = Field(default_factory=AllocationSpec)
    topology: TopologyPolicySpec = Field(default_factory=TopologyPolicySpec)
    recovery: RecoverySpec = Field(default_factory=RecoverySpec)


class PolicyFile(_Strict):
    """A scheduling policy file (`apiVersion: voltpack.io/v1alpha1`, `kind: SchedulingPolicy`)."""

    api_version: Literal["voltpack.io/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["SchedulingPolicy"]
    metadata: Metadata
    spec: PolicySpec


def parse_policy(text: str, origin: str = "<policy>") -> PolicyFile:
    """Parse and validate policy YAML; raise PolicyError naming the field, value and fix.

    The YAML is read with bounded nesting and alias expansion (`voltpack.model.safe_yaml`), and
    errors show at most 200 characters of a bad value."""
    try:
        raw = safe_yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PolicyError(f"{origin}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise PolicyError(
            f"{origin}: a policy file is a YAML mapping with apiVersion, kind, metadata and spec"
        )
    try:
        policy = PolicyFile.model_validate(raw)
    except ValidationError as exc:
        problems = describe_validation_errors(exc.errors())
        raise PolicyError(f"{origin}: {problems}") from None
    strategy = policy.spec.scoring.strategy
    if strategy not in strategy_names():
        raise PolicyError(
            f"{origin}: field spec.scoring.strategy: value {short_repr(strategy)} is not allowed; "
            f"allowed values: {', '.join(strategy_names())}"
        )
    allocation = policy.spec.allocation.policy
    if allocation is not None and allocation not in allocation_policy_names():
        raise PolicyError(
            f"{origin}: field spec.allocation.policy: value {short_repr(allocation)} is not "
            "allowed; "
            f"allowed values: {', '.join(allocation_policy_names())}"
        )
    try:
        make_strategy(strategy, policy.spec.scoring.params)
        make_power_policy(policy.spec.power.policy, policy.spec.power.params)
        make_ordering(policy.spec.queueing.ordering, policy.spec.queueing.params)
        check_gpu_actions(policy.spec.power)
    except PolicyError as exc:
        raise PolicyError(f"{origin}: {exc}") from None
    return policy


def check_gpu_actions(power: PowerSpec) -> None:
    """Every `spec.power.gpus` entry names a known GPU and fits its clock and power range."""
    for sku, actions in power.gpus.items():
        try:
            ActionLadder.build(
                sku, power_model_for(sku), actions.lock_clocks_mhz, actions.floor_power_w
            )
        except (CatalogError, PowerConfigError) as exc:
            raise PolicyError(f"field spec.power.gpus.{shorten(sku)}: {exc}") from None


def load_policy(path: Path) -> PolicyFile:
    """Read and validate a policy file."""
    return parse_policy(read_user_text(path, "policy file", PolicyError), str(path))


def policy_for_strategy(strategy: str) -> PolicyFile:
    """The smallest valid policy that selects `strategy` (used by the demo and tests)."""
    return parse_policy(
        f"apiVersion: {API_VERSION}\nkind: {KIND}\nmetadata: {{name: {strategy}}}\n"
        f"spec: {{scoring: {{strategy: {strategy}}}}}\n"
    )


def example_policy_path(name: str) -> Path:
    """The example policy file shipped as `voltpack/policies/examples/<name>.yaml`."""
    path = Path(__file__).resolve().parent / "examples" / f"{name}.yaml"
    if not path.is_file():
        raise PolicyError(f"no example policy called {name!r} (looked for {path})")
    return path
