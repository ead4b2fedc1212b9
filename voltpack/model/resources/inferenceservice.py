"""InferenceService: an LLM served within latency SLOs by the cheapest mix of GPU types.

The operator plans the fleet (GPU types, tensor-parallel degrees, unified or split
prefill/decode replicas) for the service's request rate and request-size mix, creates the
replica pods for voltpack to place, and re-plans when the rate moves past a relative threshold
(hysteresis) or the spec changes. The rate is the spec's expected `ratePerSecond` until a
metrics adapter reports the measured rate in the `voltpack.io/observed-rate-per-second`
annotation; then `scaling` says how that measurement becomes the planning rate.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from voltpack.model.errors import CatalogError
from voltpack.model.gpu_sku import default_catalog
from voltpack.model.resources.common import Condition, ResourceModel

OBSERVED_RATE_ANNOTATION = "voltpack.io/observed-rate-per-second"
"""On an InferenceService: the measured request rate (requests per second), kept current by a
metrics adapter; the operator samples it into a short history."""
OBSERVED_SLO_ATTAINMENT_ANNOTATION = "voltpack.io/observed-slo-attainment"
"""On an InferenceService: the measured share (0..1) of requests that met both SLOs."""
PRIORITY_VALUES = {"high": 1000, "normal": 0, "low": -1000}
"""Pod priority of each `spec.priority`; `high` is the power manager's default
`high_priority_min`, so high-priority replicas are the last to be capped."""
RateSourceKind = Literal["spec", "annotation", "vllm"]
"""What a planning rate was measured from."""
SHARE_TOLERANCE = 0.01
"""How far the request-size shares may sum from 1."""


class ServiceSlo(ResourceModel):
    """Latency objectives: time to first token (the planner covers its 99th percentile) and
    mean time per output token, in milliseconds."""

    ttft_ms: float = Field(gt=0, le=600_000, description="time to first token, ms")
    tpot_ms: float = Field(gt=0, le=60_000, description="mean time per output token, ms")
    tpot_statistic: Literal["p99", "mean"] = Field(
        default="p99",
        description="p99: every request's own TPOT within tpotMs (sized for the high batch "
        "and the worst iteration); mean: the mean TPOT over requests within tpotMs (Mélange's "
        "SLO, sized for the mean iteration)",
    )


class RequestSizeShare(ResourceModel):
    """A class of requests: prompt and output tokens, and its share of all requests."""

    prompt_tokens: int = Field(ge=1, le=1_000_000, description="prompt tokens")
    output_tokens: int = Field(ge=1, le=1_000_000, description="output tokens")
    share: float = Field(gt=0, le=1, description="share of all requests (shares sum to 1)")


class MetricsEndpoint(ResourceModel):
    """Where each replica serves its vLLM Prometheus metrics (rateSource: vllm): the pod's
    IP (status.podIP), this port and path."""

    port: int = Field(default=8000, ge=1, le=65535, description="vLLM's port (default 8000)")
    path: str = Field(
        default="/metrics", pattern=r"^/[^\s]*$", max_length=1024, description="metrics path"
    )
    timeout_seconds: float = Field(
        default=1.0, gt=0, le=30, description="how long one scrape may take"
    )


class ServiceScaling(ResourceModel):
    """How a measured request rate becomes the rate the fleet is planned for.

    The rate is measured from `rateSource`: the `voltpack.io/observed-rate-per-second`
    annotation (`annotation`), or the replicas' own vLLM request counters (`vllm`, scraped
    from each Running replica's `metrics` endpoint), into a history of `sampleSeconds` slots.
    `forecast` plans for the `quantile` of the forecast rate over the next `horizonMinutes`;
    `reactive` plans for the latest measurement; `burst` for the smallest rate at which a
    fleet draining prompts at that rate starts `burstQuantile` of the requests of the last
    `burstWindowMinutes` within the TTFT SLO (bursts count per request, as attainment does;
    use `sampleSeconds` well below the TTFT SLO, a coarser slot smooths bursts inside it).
    A new plan is made only when that rate leaves +-`replanRateChange` of the rate the
    current plan was made for.
    """

    mode: Literal["forecast", "reactive", "burst"] = "forecast"
    rate_source: Literal["annotation", "vllm"] = Field(
        default="annotation",
        description="annotation: voltpack.io/observed-rate-per-second; vllm: the replicas' "
        "vllm:request_success_total and in-flight gauges",
    )
    quantile: float = Field(default=0.9, ge=0.5, lt=1.0, description="forecast quantile")
    horizon_minutes: float = Field(
        default=15.0, gt=0, le=1440, description="how far ahead the forecast must cover"
    )
    sample_seconds: float = Field(
        default=60.0, ge=1, le=3600, description="step of the measured-rate history"
    )
    forecaster: Literal["naive", "seasonal_naive", "ets", "auto"] = Field(
        default="seasonal_naive",
        description="a forecaster of voltpack.forecast (seasonal_naive: a daily season)",
    )
    replan_rate_change: float = Field(
        default=0.1, gt=0, lt=1, description="relative rate change that triggers a new plan"
    )
    burst_quantile: float = Field(
        default=0.99,
        ge=0.5,
        lt=1.0,
        description="burst mode: share of requests to start within the TTFT SLO",
    )
    burst_window_minutes: float = Field(
        default=60.0, gt=0, le=2880, description="burst mode: how much history the rate covers"
    )
    metrics: MetricsEndpoint = Field(default_factory=MetricsEndpoint)


class EnvVar(ResourceModel):
    """An environment variable of the replica container."""

    name: str = Field(min_length=1, max_length=253, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    value: str = ""


class ReplicaContainer(ResourceModel):
    """The serving container of every replica pod (the operator adds GPUs and env)."""

    image: str = Field(min_length=1, description="container image, e.g. vllm/vllm-openai:v0.6.3")
    command: list[str] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list)
    env: list[EnvVar] = Field(default_factory=list)
    cpu_milli: int | None = Field(default=None, ge=1, description="CPU request, milli-CPU")
    memory_mib: int | None = Field(default=None, ge=1, description="memory request, MiB")


class InferenceServiceSpec(ResourceModel):
    """What the service must serve, how fast, on which GPU types, at which prices."""

    model: str = Field(
        min_length=1, description="a model of voltpack's serving-model catalog, e.g. llama2-70b"
    )
    slo: ServiceSlo
    rate_per_second: float = Field(
        gt=0, le=1e6, description="expected requests per second (until a rate is measured)"
    )
    request_sizes: list[RequestSizeShare] = Field(
        min_length=1, max_length=100, description="the request-size mix"
    )
    gpu_types: list[str] = Field(
        default_factory=list,
        max_length=32,
        description="allowed GPU types (catalog names or aliases); empty: every priced type",
    )
    prices: dict[str, Annotated[float, Field(gt=0, le=10_000)]] = Field(
        default_factory=dict,
        description="USD per GPU-hour by GPU type; empty: voltpack's example price list",
    )
    split: Literal["auto", "never"] = Field(
        default="auto", description="auto: the planner may split prefill and decode pools"
    )
    priority: Literal["high", "normal", "low"] = Field(
        default="high", description="replica pods' priority (high: capped last)"
    )
    priority_class_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        description="a PriorityClass for the replica pods instead of `priority` (API servers "
        "with the Priority admission plugin refuse a pod priority without one)",
    )
    scaling: ServiceScaling = Field(default_factory=ServiceScaling)
    container: ReplicaContainer

    @field_validator("gpu_types")
    @classmethod
    def _known_gpu_types(cls, gpu_types: list[str]) -> list[str]:
        names = []
        for index, gpu_type in enumerate(gpu_types):
            names.append(_catalog_name(f"gpuTypes[{index}]", gpu_type))
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"gpuTypes names {repeated[0]} twice; keep one")
        return gpu_types

    @field_validator("prices")
    @classmethod
    def _known_priced_types(cls, prices: dict[str, float]) -> dict[str, float]:
        names: dict[str, str] = {}
        for gpu_type in prices:
            name = _catalog_name(f"prices.{gpu_type}", gpu_type)
            if name in names:
                raise ValueError(
                    f"prices name {name} twice ({names[name]} and {gpu_type}); keep one"
                )
            names[name] = gpu_type
        return prices

    @model_validator(mode="after")
    def _consistent(self) -> InferenceServiceSpec:
        total = sum(size.share for size in self.request_sizes)
        if abs(total - 1.0) > SHARE_TOLERANCE:
            raise ValueError(
                f"requestSizes: the shares sum to {total:g}; make them sum to 1 "
                f"(within {SHARE_TOLERANCE:g})"
            )
        if self.prices:
            catalog = default_catalog()
            priced = {catalog.get(gpu_type).name for gpu_type in self.prices}
            for index, gpu_type in enumerate(self.gpu_types):
                if catalog.get(gpu_type).name not in priced:
                    raise ValueError(
                        f"gpuTypes[{index}]: {gpu_type} has no price in prices; add one or "
                        "leave prices empty to use voltpack's example list"
                    )
        return self


def _catalog_name(where: str, gpu_type: str) -> str:
    try:
        return default_catalog().get(gpu_type).name
    except CatalogError as exc:
        raise ValueError(f"{where}: {exc}") from None


class BucketServed(ResourceModel):
    """Requests of one size bucket a replica group is planned to serve."""

    bucket: str = Field(description="e.g. prompt 512-1024, output 128-256")
    rate_per_second: float = Field(ge=0)


class PlannedGroup(ResourceModel):
    """Replicas of one GPU type, tensor-parallel degree and role."""

    gpu_type: str
    tensor_parallel: int = Field(ge=1)
    role: Literal["unified", "prefill", "decode"]
    replicas: int = Field(ge=0)
    ready_replicas: int = Field(default=0, ge=0, description="replicas bound to a node")
    cost_per_hour: float = Field(ge=0, description="USD per hour of the group's GPUs")
    load: float = Field(default=0.0, ge=0, description="planned load, in replicas")
    extrapolated: bool = Field(description="the profile has no measured point behind it")
    basis: str = Field(default="", description="what the group's performance profile rests on")
    context_tokens: int | None = Field(
        default=None,
        ge=2,
        description="the longest context (prompt + output tokens) the replicas are sized for "
        "and routed; absent: any length",
    )
    max_batch: int | None = Field(
        default=None, ge=1, description="the batch cap that keeps the TPOT SLO"
    )
    prefill_chunk_tokens: int | None = Field(
        default=None, ge=1, description="chunked-prefill size of unified replicas"
    )
    buckets: list[BucketServed] = Field(default_factory=list)


class ServiceRouting(ResourceModel):
    """Router weights of the service's unified replicas (spec.power.efficiency.routing of the
    policy file; low-priority services only): new requests go to the first `activeReplicas`,
    the others drain and idle. Also on each replica pod as `voltpack.io/router-weight`."""

    active_replicas: int = Field(ge=1, description="replicas that take new requests")
    replicas: int = Field(ge=1, description="replicas in the routed pool")
    weights: dict[str, Annotated[float, Field(ge=0, le=1)]] = Field(
        description="pod name -> share of new requests (sums to 1)"
    )
    since: str = Field(description="RFC 3339: when the active set last changed")
    shrink_candidate_since: str | None = Field(
        default=None, description="RFC 3339: since when a smaller set would do (the hold)"
    )
    reason: str = Field(default="", description="Consolidated, AllReplicas or a fail-safe")
    message: str = Field(default="", description="why, with the measured demand")


class ReplicaPhase(ResourceModel):
    """A replica's phase mix over the last `phase_clocks.window_s`: share of wall time its
    GPUs spent in prefill and in decode (from its vLLM token counters)."""

    prefill_share: float = Field(ge=0, le=1)
    decode_share: float = Field(ge=0, le=1)
    observed_at: str = Field(description="RFC 3339: the scrape the mix ends at")


class InferenceServiceStatus(ResourceModel):
    """The plan in effect, its predicted cost, the rate it was made for, and why."""

    phase: Literal["Pending", "Scaling", "Ready", "Infeasible", "Invalid"] = "Pending"
    conditions: list[Condition] = Field(default_factory=list)
    plan: list[PlannedGroup] = Field(default_factory=list)
    split: bool | None = Field(default=None, description="prefill and decode pools apart")
    replicas: int = Field(default=0, ge=0, description="replicas of the plan in effect")
    ready_replicas: int = Field(default=0, ge=0)
    predicted_cost_per_hour: float | None = Field(default=None, ge=0, description="USD")
    predicted_slo_attainment: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="share of requests within both SLOs when the planner replays the plan "
        "(Poisson arrivals at the planning rate, the spec's size mix)",
    )
    predicted_slo_attainment_basis: str | None = Field(
        default=None, description="how the predicted attainment was obtained"
    )
    planning_rate_per_second: float | None = Field(
        default=None, ge=0, description="the request rate the plan in effect was made for"
    )
    rate_source: str | None = Field(default=None, description="where that rate came from")
    rate_source_kind: RateSourceKind | None = Field(
        default=None,
        description="what that rate was measured from: spec (ratePerSecond), annotation, or "
        "vllm (the replicas' request counters)",
    )
    latest_rate_per_second: float | None = Field(
        default=None, ge=0, description="the planning rate computed last (re-planned past +-10%)"
    )
    observed_rate_per_second: float | None = Field(default=None, ge=0)
    observed_slo_attainment: float | None = Field(default=None, ge=0, le=1)
    observed_requests_waiting: float | None = Field(
        default=None, ge=0, description="vllm:num_requests_waiting summed over the replicas"
    )
    spec_hash: str | None = Field(
        default=None, description="fingerprint of the spec fields the plan was made from"
    )
    last_plan_time: str | None = Field(default=None, description="RFC 3339")
    observed_generation: int | None = Field(default=None, ge=0)
    routing: ServiceRouting | None = Field(
        default=None, description="router weights of the replicas (power-aware routing)"
    )
    replica_phases: dict[str, ReplicaPhase] | None = Field(
        default=None, description="pod name -> its phase mix (phase-aware clocks)"
    )
