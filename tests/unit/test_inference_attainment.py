"""The planner's request-level check of a plan: predicted SLO attainment."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from voltpack.model.errors import InvalidRequestError
from voltpack.perf.serving_capacity import ServingSlo
from voltpack.policies.inference.attainment import predicted_attainment
from voltpack.policies.inference.buckets import request_mix
from voltpack.policies.inference.mix_planner import PlanRequest, plan_service
from voltpack.policies.inference.prices import example_prices


def _plan(rate_per_s: float = 4.0):
    rng = np.random.default_rng(1)
    prompts = rng.lognormal(6.5, 0.8, 500).clip(1, 6000).astype(int)
    outputs = rng.lognormal(4.5, 0.8, 500).clip(1, 1000).astype(int)
    slo = ServingSlo(ttft_s=3.0, tpot_s=0.1)
    request = PlanRequest(
        "llama2-7b", request_mix(prompts, outputs), rate_per_s, slo, example_prices(), ("A10",)
    )
    return plan_service(request)


def test_a_plan_at_its_own_rate_is_predicted_to_meet_the_slo_and_repeatably() -> None:
    plan = _plan()
    first = predicted_attainment(plan, requests=1500)
    assert first.ratio >= 0.99
    assert first.requests == 1350  # the first 10% warm the replicas up
    assert "Poisson" in first.basis and "4/s" in first.basis
    assert predicted_attainment(plan, requests=1500) == first


def test_an_overloaded_plan_is_predicted_to_miss_and_says_which_bound() -> None:
    plan = _plan()
    overloaded = dataclasses.replace(plan, rate_per_s=plan.rate_per_s * 3)
    predicted = predicted_attainment(overloaded, requests=1500)
    assert predicted.ratio < 0.9
    assert predicted.ttft_misses + predicted.tpot_misses >= (1 - predicted.ratio) * 1350


def test_bad_checks_are_refused() -> None:
    plan = _plan()
    with pytest.raises(InvalidRequestError, match="at least 100"):
        predicted_attainment(plan, requests=10)
    with pytest.raises(InvalidRequestError, match="without replica groups"):
        predicted_attainment(dataclasses.replace(plan, groups=()))
