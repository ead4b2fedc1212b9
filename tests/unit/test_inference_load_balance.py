"""The planner keeps its fleet and spreads the traffic: no group loaded past what an even
split gives (`voltpack.policies.inference.load_balance`)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse import csr_array

from voltpack.perf.serving_capacity import ServingSlo
from voltpack.policies.inference.buckets import request_mix
from voltpack.policies.inference.load_balance import balanced_solution
from voltpack.policies.inference.mix_planner import PlanRequest, plan_service
from voltpack.policies.inference.prices import example_prices


def test_one_bucket_over_two_equal_groups_is_split_evenly() -> None:
    # columns: replicas A, slices on A, replicas B, slices on B; 8 slices of rate 1/8 each,
    # capacity 1 per replica: a slice loads 0.125
    matrix = csr_array(
        np.array(
            [
                [0.0, 1.0, 0.0, 1.0],  # every slice served once
                [-1.0, 0.125, 0.0, 0.0],  # A's load <= its replicas
                [0.0, 0.0, -1.0, 0.125],  # B's load <= its replicas
            ]
        )
    )
    lower = np.array([8.0, -np.inf, -np.inf])
    upper = np.array([8.0, 0.0, 0.0])
    column_upper = np.array([np.inf, 8.0, np.inf, 8.0])
    lopsided = np.array([1.0, 8.0, 1.0, 0.0])  # A full, B idle: what a MILP may return
    balanced = balanced_solution(matrix, lower, upper, column_upper, [0, 2], lopsided)
    assert balanced[[0, 2]].tolist() == [1.0, 1.0]  # the fleet is kept
    assert balanced[1] == pytest.approx(4.0) and balanced[3] == pytest.approx(4.0)


def test_a_groups_load_never_exceeds_its_replicas_and_the_cost_is_the_milps() -> None:
    rng = np.random.default_rng(3)
    prompts = rng.integers(50, 3000, 400)
    outputs = rng.integers(2, 600, 400)
    mix = request_mix(prompts, outputs)
    slo = ServingSlo(ttft_s=2.0, tpot_s=0.08)
    plan = plan_service(PlanRequest("llama2-70b", mix, 9.0, slo, example_prices()))
    for group in plan.groups:
        load = sum(rate / group.capacity_per_s[b] for b, rate in group.bucket_rates_per_s.items())
        assert load <= group.replicas * (1 + 1e-6)
    served = {}
    for group in plan.groups:
        if group.role != "decode":
            for bucket, rate in group.bucket_rates_per_s.items():
                served[bucket] = served.get(bucket, 0.0) + rate
    for position, bucket in enumerate(mix.buckets):
        assert abs(served[position] - bucket.share * 9.0) < 1e-6
