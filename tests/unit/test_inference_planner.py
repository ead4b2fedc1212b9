"""Serving capacity and the GPU-type mix planner (MILP) against Mélange's formulation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voltpack.model.errors import InvalidRequestError
from voltpack.perf.inference_profile import default_profile_book
from voltpack.perf.links import PerfModelError
from voltpack.perf.serving_capacity import (
    ReplicaSettings,
    RequestSize,
    ServingSlo,
    capacity_table,
    decode_operating_points,
    replica_capacity,
)
from voltpack.policies.inference.buckets import request_mix
from voltpack.policies.inference.melange import melange_plan, solve_melange
from voltpack.policies.inference.mix_planner import (
    CapacityTables,
    InfeasiblePlanError,
    PlanRequest,
    ReplicaOption,
    best_single_type_plan,
    plan_service,
    solve_plan,
)
from voltpack.policies.inference.prices import PriceList, example_prices

SLO = ServingSlo(ttft_s=4.0, tpot_s=0.12)


def _mix(seed: int = 0, requests: int = 400):
    rng = np.random.default_rng(seed)
    prompts = rng.lognormal(6.5, 0.9, requests).clip(1, 8000).astype(int)
    outputs = rng.lognormal(4.5, 0.8, requests).clip(1, 1500).astype(int)
    return request_mix(prompts, outputs)


def test_capacity_grows_with_a_looser_slo_and_names_the_bound() -> None:
    profile = default_profile_book().profile("llama2-70b", "H100-SXM", 4)
    size = RequestSize(1000, 200, 2000)
    tight = replica_capacity(profile, size, ServingSlo(4.0, 0.035))
    loose = replica_capacity(profile, size, ServingSlo(4.0, 0.2))
    assert 0 < tight.rate_per_s < loose.rate_per_s
    assert tight.limit == "tpot"


def test_lone_request_over_the_slo_has_zero_capacity_and_says_why() -> None:
    profile = default_profile_book().profile("llama2-70b", "A100-80GB", 8)
    capacity = replica_capacity(profile, RequestSize(500, 100, 500), ServingSlo(4.0, 0.02))
    assert capacity.rate_per_s == 0
    assert capacity.limit == "tpot"
    assert "over the TPOT SLO of 20.0 ms" in capacity.detail


def test_prefill_only_replica_serves_more_prompts_than_a_unified_one() -> None:
    profile = default_profile_book().profile("llama2-70b", "H100-SXM", 8)
    size = RequestSize(1500, 300, 3000)
    prefill = ReplicaSettings(max_prefill_utilisation=0.5)
    unified = ReplicaSettings(max_batch=32, prefill_chunk_tokens=1024, max_prefill_utilisation=0.5)
    assert replica_capacity(profile, size, SLO, "prefill", settings=prefill).rate_per_s > (
        replica_capacity(profile, size, SLO, "unified", settings=unified).rate_per_s
    )


def test_a_utilisation_cap_trades_capacity_for_ttft() -> None:
    profile = default_profile_book().profile("llama2-70b", "H100-SXM", 4)
    size = RequestSize(500, 20, 600)
    high = ReplicaSettings(max_batch=32, prefill_chunk_tokens=1024, max_prefill_utilisation=0.8)
    low = ReplicaSettings(max_batch=32, prefill_chunk_tokens=1024, max_prefill_utilisation=0.3)
    fast = replica_capacity(profile, size, SLO, settings=high)
    slow = replica_capacity(profile, size, SLO, settings=low)
    assert 0 < slow.rate_per_s < fast.rate_per_s
    long_prompts = RequestSize(3000, 20, 3000)
    assert replica_capacity(profile, long_prompts, SLO, settings=high).rate_per_s == 0
    refused = replica_capacity(profile, long_prompts, SLO, settings=high)
    assert "80% prompt load" in refused.detail and refused.limit == "ttft"
    assert replica_capacity(profile, long_prompts, SLO, settings=low).rate_per_s > 0


def test_kv_transfer_lowers_decode_capacity_at_a_tight_tpot() -> None:
    profile = default_profile_book().profile("llama2-70b", "H100-SXM", 4)
    size = RequestSize(4000, 20, 4000)
    slo = ServingSlo(4.0, 0.04)
    fast = capacity_table(profile, [size], slo, "decode", np.array([0.0]))[0]
    slow = capacity_table(profile, [size], slo, "decode", np.array([0.2]))[0]
    assert slow.rate_per_s < fast.rate_per_s


def test_tpot_at_capacity_is_within_the_slo() -> None:
    profile = default_profile_book().profile("llama2-70b", "H100-SXM", 2)
    size = RequestSize(800, 250, 1500)
    capacity = replica_capacity(profile, size, SLO)
    points = decode_operating_points(profile, [size], "unified", ReplicaSettings())
    column = int(np.argmin(np.abs(points.rate_per_s[0] - capacity.rate_per_s)))
    assert points.tpot_s[0, column] <= SLO.tpot_s
    assert points.ttft_s[0, column] <= SLO.ttft_s
    assert points.tpot_s[0, -1] > SLO.tpot_s or capacity.limit != "tpot"


def _request(rate: float = 6.0, **kwargs: object) -> PlanRequest:
    return PlanRequest("llama2-70b", _mix(), rate, SLO, example_prices(), **kwargs)  # type: ignore[arg-type]


def test_plan_covers_every_bucket_and_each_group_load_fits() -> None:
    plan = plan_service(_request())
    served = {b: 0.0 for b in range(len(plan.mix.buckets))}
    for group in plan.groups:
        assert group.load <= group.replicas + 1e-6
        if group.role != "decode":
            for bucket, rate in group.bucket_rates_per_s.items():
                served[bucket] += rate
    for position, bucket in enumerate(plan.mix.buckets):
        assert served[position] == pytest.approx(bucket.share * plan.rate_per_s, rel=1e-6)


def test_voltpack_never_costs_more_than_melange_or_the_best_single_type() -> None:
    for rate in (2.0, 12.0):
        request = _request(rate)
        plan = plan_service(request)
        single = best_single_type_plan(request)
        melange = melange_plan(request)
        assert plan.cost_per_hour <= melange.cost_per_hour + 1e-6
        assert melange.cost_per_hour <= single.cost_per_hour + 1e-6


def _tables(capacity: np.ndarray, prices: np.ndarray) -> CapacityTables:
    profile = default_profile_book().profile("llama2-70b", "H100-SXM", 2)
    options = tuple(ReplicaOption(profile, ReplicaSettings(), float(p)) for p in prices)
    return CapacityTables(options={"unified": options}, capacity={"unified": capacity}, details={})


@settings(max_examples=25, deadline=None)
@given(
    st.integers(min_value=0, max_value=10_000),
    st.integers(min_value=1, max_value=4),
    st.integers(min_value=1, max_value=3),
)
def test_integer_slice_counts_reach_melanges_binary_optimum(
    seed: int, slices: int, configs: int
) -> None:
    rng = np.random.default_rng(seed)
    mix = _mix(seed, 60)
    capacity = rng.uniform(0.2, 3.0, size=(configs, len(mix.buckets)))
    prices = rng.uniform(1.0, 10.0, size=configs)
    request = PlanRequest(
        "llama2-70b", mix, float(rng.uniform(0.5, 8)), SLO, example_prices(), slices=slices
    )
    tables = _tables(capacity, prices)
    binary = solve_melange(request, tables)
    counts = solve_plan(request, tables, roles=("unified",), integer_slices=True)
    shares = solve_plan(request, tables, roles=("unified",))
    assert counts.cost_per_hour == pytest.approx(binary.cost_per_hour, rel=1e-6)
    assert shares.cost_per_hour <= counts.cost_per_hour + 1e-6


def test_impossible_slo_names_the_bucket_and_the_bound() -> None:
    request = PlanRequest("llama2-70b", _mix(), 4.0, ServingSlo(4.0, 0.001), example_prices())
    with pytest.raises(InfeasiblePlanError, match=r"TPOT 1 ms.*prompt .*over the TPOT SLO"):
        plan_service(request)


def test_unpriced_type_and_bad_rate_are_refused() -> None:
    with pytest.raises(InvalidRequestError, match="no price for GPU type MI300X"):
        plan_service(_request(gpu_types=("MI300X",)))
    with pytest.raises(InvalidRequestError, match="rate_per_s must be positive"):
        _request(rate=0.0)


def test_allowed_types_are_respected_and_split_can_be_forbidden() -> None:
    plan = plan_service(_request(12.0, gpu_types=("H100-SXM",), allow_split=False))
    assert set(plan.gpus_by_type()) == {"H100-SXM"}
    assert not plan.split
    assert not plan.extrapolated


def test_price_list_from_a_mapping_resolves_aliases() -> None:
    prices = PriceList.from_mapping({"H100": 2.0})
    assert prices.per_gpu_hour("H100-SXM") == 2.0
    with pytest.raises(InvalidRequestError, match="priced twice"):
        PriceList.from_mapping({"H100": 2.0, "H100-SXM": 3.0})


def test_a_decode_pool_covers_the_buckets_shortest_output() -> None:
    # the second token of a short request waits for the KV transfer and for the decode
    # batch's next step: over one token that costs a whole step on top of its own
    profile = default_profile_book().profile("llama2-70b", "H100-SXM", 4)
    slo = ServingSlo(4.0, 0.04)
    mean_only = RequestSize(500, 100, 800)
    with_short = RequestSize(500, 100, 800, min_output_tokens=2)
    transfer = np.array([0.005])
    loose = capacity_table(profile, [mean_only], slo, "decode", transfer)[0]
    short = capacity_table(profile, [with_short], slo, "decode", transfer)[0]
    assert 0 <= short.rate_per_s < loose.rate_per_s
    assert short.limit == "tpot"
    ones = request_mix(np.array([300, 300, 300]), np.array([1, 1, 1])).buckets[0].size
    assert ones.min_output_tokens is None and ones.shortest_decoded_output == float("inf")
    mixed = request_mix(np.array([300, 300]), np.array([1, 9])).buckets[0].size
    assert mixed.min_output_tokens == 9
    with pytest.raises(PerfModelError):
        RequestSize(500, 100, 800, min_output_tokens=1)
