"""Sizing a plan on its own planning window: the replay of the window's real requests, the
rate raised until a plan meets the SLO there, and voltpack's candidates."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from voltpack.model.errors import InvalidRequestError
from voltpack.perf.serving_capacity import ServingSlo
from voltpack.policies.inference.attainment import window_attainment
from voltpack.policies.inference.buckets import request_mix
from voltpack.policies.inference.mix_planner import PlanRequest, plan_service
from voltpack.policies.inference.prices import example_prices
from voltpack.policies.inference.scaling import backlog_planning_rate_per_s
from voltpack.policies.inference.window_sizing import (
    RATE_STEP,
    WINDOW_GOAL,
    candidate_plans,
    plan_service_on_window,
    size_on_window,
    window_from_slots,
)
from voltpack.sim.serving import scale_to_rate, simulate_serving
from voltpack.sim.traces.melange_workloads import regime_workload
from voltpack.sim.traces.trace_windows import first_requests

SLO = ServingSlo(ttft_s=4.0, tpot_s=0.12)


def _window(rate_per_s: float = 6.0):
    return scale_to_rate(first_requests(regime_workload("arena"), 900), rate_per_s)


def _request(window, rate_per_s: float) -> PlanRequest:
    mix = request_mix(window.prompt_tokens, window.output_tokens)
    return PlanRequest("llama2-7b", mix, rate_per_s, SLO, example_prices(), ("A10", "L4"))


def _arrays(window):
    return window.arrival_s, np.asarray(window.prompt_tokens), np.asarray(window.output_tokens)


def test_the_window_replay_is_the_serving_simulators_attainment() -> None:
    window = _window()
    plan = plan_service(_request(window, 6.0))
    replayed = window_attainment(plan, *_arrays(window))
    assert replayed.ratio == pytest.approx(simulate_serving(plan, window).slo_attainment_pct / 100)
    assert replayed.requests == window.arrival_s.size and "as they arrived" in replayed.basis
    with pytest.raises(InvalidRequestError, match="one prompt and output"):
        window_attainment(plan, window.arrival_s, np.ones(3, dtype=np.int64), np.ones(3))


def test_a_plan_for_too_low_a_rate_is_remade_for_the_least_rate_that_meets_the_window() -> None:
    window = _window()
    # 60% of the window's burst-aware rate: the plan made for it falls behind
    low_per_s = 0.6 * backlog_planning_rate_per_s(window.arrival_s, window.prompt_tokens, 4.0)
    made: list[float] = []

    def make(rate_per_s: float):
        made.append(rate_per_s)
        return [plan_service(_request(window, rate_per_s))]

    sized = size_on_window(make, low_per_s, *_arrays(window))
    assert window_attainment(make(low_per_s)[0], *_arrays(window)).ratio < WINDOW_GOAL
    assert sized.met and sized.window_attainment >= WINDOW_GOAL
    assert sized.rate_factor > 1 and sized.plan.rate_per_s == pytest.approx(
        low_per_s * sized.rate_factor
    )
    # the least such rate: the plan one step lower missed
    lower = plan_service(_request(window, sized.plan.rate_per_s / RATE_STEP))
    assert window_attainment(lower, *_arrays(window)).ratio < WINDOW_GOAL
    assert sized.plans_tried == round(np.log(sized.rate_factor) / np.log(RATE_STEP)) + 1


def test_when_no_rate_up_to_the_cap_meets_the_window_the_closest_plan_is_kept() -> None:
    window = _window()
    sized = size_on_window(
        lambda rate: [plan_service(_request(window, rate))], 0.5, *_arrays(window)
    )
    assert not sized.met and sized.window_attainment < WINDOW_GOAL
    with pytest.raises(InvalidRequestError):
        size_on_window(lambda rate: [], 1.0, *_arrays(window))
    with pytest.raises(InvalidRequestError):
        size_on_window(lambda rate: [], 0.0, *_arrays(window))


def test_voltpack_keeps_the_cheapest_candidate_that_meets_its_window() -> None:
    window = _window()
    request = _request(window, 6.0)
    candidates = candidate_plans(request)
    costs = [plan.cost_per_hour for plan in candidates]
    assert costs == sorted(costs) and len(candidates) == 3
    sized = plan_service_on_window(request, *_arrays(window))
    assert sized.met
    if sized.rate_factor == 1.0:
        passing = [
            plan
            for plan in candidates
            if window_attainment(plan, *_arrays(window)).ratio >= WINDOW_GOAL
        ]
        assert sized.plan.cost_per_hour == min(plan.cost_per_hour for plan in passing)
    more = replace(request, rate_per_s=request.rate_per_s * sized.rate_factor)
    assert sized.plan.cost_per_hour >= plan_service(more).cost_per_hour - 1e-9


def test_slot_counts_become_requests_spread_over_their_slots_with_the_mixs_sizes() -> None:
    mix = request_mix(np.array([100, 100, 2000]), np.array([50, 50, 400]))
    arrival_s, prompts, outputs = window_from_slots(np.array([2.0, 0.0, 4.0]), 10.0, mix)
    assert arrival_s.tolist() == [2.5, 7.5, 21.25, 23.75, 26.25, 28.75]
    sizes = {(int(p), int(o)) for p, o in zip(prompts, outputs, strict=True)}
    assert sizes <= {
        (round(b.size.prompt_tokens), round(b.size.output_tokens)) for b in mix.buckets
    }
    # more than the cap: the busiest stretch of slots that holds at most that many
    counts = np.array([1.0] * 50 + [30.0, 30.0, 30.0] + [1.0] * 50)
    arrival_s, _, _ = window_from_slots(counts, 1.0, mix, max_requests=60)
    assert arrival_s.size == 60 and np.ptp(arrival_s) < 2.0
    with pytest.raises(InvalidRequestError):
        window_from_slots(np.array([1.0, -1.0]), 1.0, mix)
    with pytest.raises(InvalidRequestError):
        window_from_slots(np.array([1.0]), 0.0, mix)
