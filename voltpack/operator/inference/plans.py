"""From an InferenceService's spec to the planner's request, and from its plan to status.

Pure functions over the resource model and the inference planner (no Kubernetes calls).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from voltpack.model.errors import CatalogError, InvalidRequestError, VoltpackError
from voltpack.model.gpu_sku import default_catalog
from voltpack.model.resources.inferenceservice import (
    BucketServed,
    InferenceServiceSpec,
    PlannedGroup,
    RequestSizeShare,
)
from voltpack.operator.kube.translate import node_from_k8s
from voltpack.perf.inference_profile import ProfileBook, ServingProfile, default_profile_book
from voltpack.perf.serving_capacity import ServingSlo
from voltpack.perf.serving_models import default_serving_models
from voltpack.policies.inference.buckets import RequestMix, request_mix
from voltpack.policies.inference.mix_planner import PlanRequest
from voltpack.policies.inference.plan import ServingPlan
from voltpack.policies.inference.prices import PriceList, example_prices

MIX_RESOLUTION = 10_000
"""Requests per unit share when a spec's request-size shares become a request mix."""
PLAN_TIME_LIMIT_S = 2.0
"""Solver budget of one plan in the operator's loop (the best plan found by then is used, its
gap noted in the plan)."""


def gpu_type_name(gpu_type: str) -> str:
    """The catalog name of a GPU type or alias."""
    return default_catalog().get(gpu_type).name


def price_list(spec: InferenceServiceSpec) -> PriceList:
    """The spec's prices, or voltpack's example list when it gives none."""
    return PriceList.from_mapping(dict(spec.prices)) if spec.prices else example_prices()


def check_spec(spec: InferenceServiceSpec) -> None:
    """What the schema cannot check: a known model, and a price for every allowed GPU type.
    Raises InvalidRequestError naming the field and the fix."""
    models = default_serving_models()
    if spec.model not in models:
        known = ", ".join(model.name for model in models.entries)
        raise InvalidRequestError(
            f"spec.model: unknown serving model {spec.model!r}; use one of {known}"
        )
    prices = price_list(spec)
    for index, gpu_type in enumerate(spec.gpu_types):
        try:
            prices.per_gpu_hour(gpu_type)
        except (InvalidRequestError, CatalogError):
            raise InvalidRequestError(
                f"spec.gpuTypes[{index}]: {gpu_type} has no price in voltpack's example price "
                f"list (priced: {', '.join(prices.gpu_types)}); give spec.prices"
            ) from None


def request_mix_of(sizes: Sequence[RequestSizeShare]) -> RequestMix:
    """The planner's request mix for the spec's request sizes and shares."""
    counts = [max(1, round(size.share * MIX_RESOLUTION)) for size in sizes]
    prompts = np.repeat([size.prompt_tokens for size in sizes], counts)
    outputs = np.repeat([size.output_tokens for size in sizes], counts)
    return request_mix(prompts, outputs)


def plan_request(
    spec: InferenceServiceSpec, rate_per_s: float, gpu_types: Sequence[str] | None = None
) -> PlanRequest:
    """What the planner is asked for the spec at `rate_per_s`, over `gpu_types` (default:
    the spec's allowed types)."""
    types = gpu_types if gpu_types is not None else [gpu_type_name(t) for t in spec.gpu_types]
    return PlanRequest(
        model=spec.model,
        mix=request_mix_of(spec.request_sizes),
        rate_per_s=rate_per_s,
        slo=ServingSlo(
            ttft_s=spec.slo.ttft_ms / 1000.0,
            tpot_s=spec.slo.tpot_ms / 1000.0,
            tpot_statistic=spec.slo.tpot_statistic,
        ),
        prices=price_list(spec),
        gpu_types=tuple(types),
        allow_split=spec.split == "auto",
        time_limit_s=PLAN_TIME_LIMIT_S,
    )


def cluster_gpu_shapes(nodes: Sequence[dict[str, Any]]) -> dict[str, int]:
    """GPU types the cluster's nodes carry (catalog names, from the GPU-model labels) and the
    most GPUs of each type on one node: the largest tensor-parallel replica it can place."""
    shapes: dict[str, int] = {}
    catalog = default_catalog()
    for node in nodes:
        try:
            parsed = node_from_k8s(node)
        except VoltpackError:
            continue
        if not parsed.gpu_count or parsed.gpu_model is None or parsed.gpu_model not in catalog:
            continue
        name = catalog.get(parsed.gpu_model).name
        shapes[name] = max(shapes.get(name, 0), parsed.gpu_count)
    return shapes


def plannable_types(spec: InferenceServiceSpec, shapes: dict[str, int]) -> list[str]:
    """The spec's allowed types (every priced type when it names none) that the cluster has."""
    allowed = [gpu_type_name(t) for t in spec.gpu_types] or price_list(spec).gpu_types
    return [gpu_type for gpu_type in allowed if shapes.get(gpu_type, 0) > 0]


def cluster_fingerprint(spec: InferenceServiceSpec, shapes: dict[str, int] | None) -> str:
    """What of the cluster a plan depends on: the allowed types it has, and their largest
    node ("-" when the plan does not look at the cluster)."""
    if shapes is None:
        return "-"
    relevant = sorted((t, shapes[t]) for t in plannable_types(spec, shapes))
    return fingerprint(relevant)


class ClusterProfiles(ProfileBook):
    """A profile book whose replicas fit on one node of the cluster: tensor-parallel degrees
    above the most GPUs of the type on one node are left out."""

    def __init__(self, shapes: dict[str, int], book: ProfileBook | None = None) -> None:
        # share the calibrated book's fitted state; only the feasible set is narrowed
        self.__dict__.update((book or default_profile_book()).__dict__)
        self.shapes = dict(shapes)

    def feasible_profiles(
        self, model: str, gpu_type: str, power_cap_ratio: float = 1.0
    ) -> list[ServingProfile]:
        """The profiles of the type whose replicas fit on one of its nodes."""
        largest = self.shapes.get(gpu_type_name(gpu_type), 0)
        return [
            profile
            for profile in super().feasible_profiles(model, gpu_type, power_cap_ratio)
            if profile.tensor_parallel <= largest
        ]


def spec_hash(spec: InferenceServiceSpec) -> str:
    """Fingerprint of the spec fields a plan depends on, besides the rate (which goes through
    hysteresis): model, SLO, GPU types, prices, request sizes, split."""
    relevant = {
        "model": spec.model.casefold(),
        # the statistic only when not the default: plans made before it existed keep their hash
        "slo": [spec.slo.ttft_ms, spec.slo.tpot_ms]
        + ([spec.slo.tpot_statistic] if spec.slo.tpot_statistic != "p99" else []),
        "gpuTypes": sorted(gpu_type_name(t) for t in spec.gpu_types),
        "prices": sorted((gpu_type_name(t), p) for t, p in spec.prices.items()),
        "requestSizes": [[s.prompt_tokens, s.output_tokens, s.share] for s in spec.request_sizes],
        "split": spec.split,
    }
    text = json.dumps(relevant, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def planned_groups(plan: ServingPlan) -> list[PlannedGroup]:
    """The plan's replica groups as the status shows them, cheapest-first order kept."""
    groups = []
    for group in plan.groups:
        buckets = [
            BucketServed(bucket=plan.mix.buckets[position].label, rate_per_second=round(rate, 6))
            for position, rate in sorted(group.bucket_rates_per_s.items())
        ]
        groups.append(
            PlannedGroup(
                gpu_type=group.profile.gpu_type,
                tensor_parallel=group.profile.tensor_parallel,
                role=group.role,
                replicas=group.replicas,
                cost_per_hour=round(group.cost_per_hour, 6),
                load=round(group.load, 6),
                extrapolated=group.profile.extrapolated,
                basis=group.profile.basis,
                context_tokens=(
                    group.context.tokens
                    if group.context is not None and not group.context.open_ended
                    else None
                ),
                max_batch=group.max_batch,
                prefill_chunk_tokens=(
                    group.prefill_chunk_tokens if group.role == "unified" else None
                ),
                buckets=buckets,
            )
        )
    return groups


def group_key(group: PlannedGroup) -> str:
    """A group's name in pod names and labels, e.g. `a100-80gb-tp4-prefill`, with its context
    class when bounded (`l4-tp1-decode-ctx2302`) and a unified group's prefill chunk
    (`a10-tp4-unified-chunk256`): one plan may hold groups of one profile and role that
    differ only in those."""
    slug = re.sub(r"[^a-z0-9]+", "-", group.gpu_type.lower()).strip("-")
    key = f"{slug}-tp{group.tensor_parallel}-{group.role}"
    if group.context_tokens is not None:
        key += f"-ctx{group.context_tokens}"
    if group.prefill_chunk_tokens is not None:
        key += f"-chunk{group.prefill_chunk_tokens}"
    return key


def groups_text(groups: Sequence[PlannedGroup]) -> str:
    """Text such as `2 x A10/TP1 (unified), 1 x L4/TP1 (decode)`."""
    if not groups:
        return "no replicas"
    return ", ".join(
        f"{g.replicas} x {g.gpu_type}/TP{g.tensor_parallel} ({g.role}"
        f"{'' if g.context_tokens is None else f', ctx <= {g.context_tokens:,}'})"
        for g in groups
    )


def replica_count(groups: Sequence[PlannedGroup]) -> int:
    """Replicas of all groups."""
    return sum(group.replicas for group in groups)


def fingerprint(value: object) -> str:
    """A short stable hash of JSON-able `value` (pod template labels)."""
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]
