"""Context classes: replicas sized for the contexts they serve, a router that respects them,
and baselines with the same rights as voltpack's planner."""

from __future__ import annotations

import numpy as np
import pytest

from voltpack.model.errors import InvalidRequestError
from voltpack.perf.inference_profile import default_profile_book
from voltpack.perf.links import PerfModelError
from voltpack.perf.serving_capacity import RequestSize, ServingSlo
from voltpack.policies.inference.buckets import request_mix
from voltpack.policies.inference.context_classes import (
    ContextClass,
    bucket_context_tokens,
    context_classes,
)
from voltpack.policies.inference.melange import melange_plan
from voltpack.policies.inference.mix_planner import (
    PlanRequest,
    allowed_profiles,
    best_single_type_plan,
    capacity_tables,
    plan_service,
    replica_options,
)
from voltpack.policies.inference.plan import ReplicaGroup, ServingPlan
from voltpack.policies.inference.prices import example_prices
from voltpack.policies.inference.routing import route_requests
from voltpack.sim.serving import simulate_serving
from voltpack.sim.traces.azure_llm import LlmRequests

SLO = ServingSlo(ttft_s=4.0, tpot_s=0.12)


def _short_heavy_mix(seed: int = 0, requests: int = 600):
    """Mostly short chat requests, a few long documents (the regime classes are for)."""
    rng = np.random.default_rng(seed)
    short = requests * 9 // 10
    prompts = np.concatenate(
        [rng.integers(20, 500, short), rng.integers(3000, 7000, requests - short)]
    )
    outputs = np.concatenate(
        [rng.integers(10, 300, short), rng.integers(100, 900, requests - short)]
    )
    return request_mix(prompts, outputs)


def test_a_bucket_bound_holds_every_request_it_can_hold() -> None:
    mix = request_mix(np.array([300, 400, 9000, 12000]), np.array([20, 30, 1500, 2000]))
    closed = next(b for b in mix.buckets if b.prompt_range == (256, 512))
    assert bucket_context_tokens(closed) == 511 + 31  # edges are exclusive
    open_ended = next(b for b in mix.buckets if b.prompt_range[1] is None)
    assert bucket_context_tokens(open_ended) == 12000 + 2000  # the longest seen of each


def test_classes_are_few_sorted_cover_every_bucket_and_end_open() -> None:
    mix = _short_heavy_mix()
    bounds = [bucket_context_tokens(b) for b in mix.buckets]
    for limit in (1, 2, 3, 4):
        classes = context_classes(mix, limit)
        assert 1 <= len(classes) <= limit
        assert [c.tokens for c in classes] == sorted({c.tokens for c in classes})
        assert classes[-1].open_ended and classes[-1].tokens == max(bounds)
        assert not any(c.open_ended for c in classes[:-1])
        assert set(bounds) >= {c.tokens for c in classes}  # each class is some bucket's bound
    assert context_classes(mix, 1) == (ContextClass(max(bounds), open_ended=True),)
    with pytest.raises(InvalidRequestError, match="context class limit"):
        context_classes(mix, 0)
    with pytest.raises(InvalidRequestError, match="context_classes must be at least 1"):
        PlanRequest("llama2-7b", mix, 1.0, SLO, example_prices(), context_classes=0)


def test_a_short_class_gets_a_larger_batch_that_still_meets_the_tpot_at_its_longest() -> None:
    mix = _short_heavy_mix()
    slo = ServingSlo(ttft_s=4.0, tpot_s=0.04)
    request = PlanRequest("llama2-7b", mix, 8.0, slo, example_prices(), gpu_types=("H100-SXM",))
    profiles = allowed_profiles(request, default_profile_book())
    classes = context_classes(mix)
    assert len(classes) == 3
    for role in ("unified", "decode"):
        batches: dict[str, list[int]] = {}
        for option in replica_options(request, profiles, role, classes):
            context = option.context
            assert context is not None
            settings = option.settings
            # the worst iteration: a full batch at the class's longest context, plus a chunk
            worst = option.profile.mixed_step_s(
                np.array([float(settings.max_batch)]),
                np.array([settings.max_batch * float(context.tokens)]),
                np.array([float(settings.prefill_chunk_tokens or 0)]),
            )[0]
            assert worst <= slo.tpot_s
            key = f"{option.profile.label} chunk {settings.prefill_chunk_tokens}"
            batches.setdefault(key, []).append(settings.max_batch)
        for caps in batches.values():
            assert caps == sorted(caps, reverse=True)  # classes come shortest first
        # llama2-7b on one H100: sized for the longest context a small batch, for the short
        # requests a large one
        one_gpu = [caps for key, caps in batches.items() if "H100-SXM/TP1" in key]
        assert any(caps[0] >= 4 * caps[-1] for caps in one_gpu)
    tables = capacity_tables(request, profiles)
    bounds = np.array([bucket_context_tokens(b) for b in mix.buckets])
    for role in ("unified", "decode"):
        for option, capacity in zip(tables.options[role], tables.capacity[role], strict=True):
            assert option.context is not None
            if not option.context.open_ended:
                assert (capacity[bounds > option.context.tokens] == 0).all()
                assert (capacity[bounds <= option.context.tokens] > 0).any()


def test_a_plan_sends_each_bucket_only_to_classes_that_hold_it_and_classes_pay() -> None:
    mix = _short_heavy_mix()
    single = PlanRequest("llama2-7b", mix, 8.0, SLO, example_prices(), context_classes=1)
    classes = PlanRequest("llama2-7b", mix, 8.0, SLO, example_prices())
    one = plan_service(single)
    several = plan_service(classes)
    bounds = [bucket_context_tokens(b) for b in mix.buckets]
    for group in several.groups:
        assert group.role == "prefill" or group.context is not None
        if group.context is not None:
            assert group.context.label in group.label
            for bucket in group.bucket_rates_per_s:
                assert group.context.covers(bounds[bucket])
    # one class is the largest of several: never cheaper, here dearer
    assert several.cost_per_hour < one.cost_per_hour


def _two_class_plan(roles: tuple[str, str] = ("unified", "unified")) -> ServingPlan:
    """Bucket 0 holds requests of prompt 0-128; group 0 is sized for contexts <= 200 and
    planned for the bucket, group 1 (open-ended) only able to serve it."""
    mix = request_mix(np.array([100, 120]), np.array([50, 60]), (0, 128), (0,))
    profile = default_profile_book().profile("llama2-7b", "H100-SXM", 1)
    short = ReplicaGroup(profile, roles[0], 1, 8.0, {0: 1.0}, {0: 2.0}, context=ContextClass(200))
    long = ReplicaGroup(
        profile, roles[1], 1, 8.0, {}, {0: 1.0}, context=ContextClass(400, open_ended=True)
    )
    return ServingPlan("llama2-7b", SLO, 1.0, mix, (short, long), "test")


def test_the_router_never_puts_a_request_on_a_replica_sized_for_shorter_ones() -> None:
    plan = _two_class_plan()
    # bucket 0 (prompt 0-128, output open-ended): 150 tokens fit the short class; 100 + 900
    # tokens (longer than the plan saw) do not
    prompts = np.array([100, 100, 110, 100])
    outputs = np.array([50, 900, 60, 700])
    for seed in range(5):
        routes = route_requests(plan, prompts, outputs, seed)
        assert routes.front.tolist() == [0, 1, 0, 1]
        assert 0 not in routes.alternatives[1] and 0 not in routes.alternatives[3]
        assert routes.alternatives[0] == (1,)  # the long class may take a short request
        assert not routes.unrouted.any()
    replay = simulate_serving(
        plan,
        LlmRequests(np.array([0.0, 0.0, 0.1, 0.1]), prompts, outputs),
    )
    assert replay.groups[0].requests <= 2  # the engine may start a short one on group 1
    assert replay.requests_served == 4


def test_a_request_no_group_covers_is_unrouted_and_decode_pools_respect_classes() -> None:
    plan = _two_class_plan()
    bounded = ServingPlan(
        plan.model,
        plan.slo,
        plan.rate_per_s,
        plan.mix,
        (plan.groups[0],),
        "test",
    )
    routes = route_requests(bounded, np.array([100, 100]), np.array([50, 900]), 0)
    assert routes.front.tolist() == [0, -1]
    assert routes.unrouted.tolist() == [False, True]
    # a prefill pool in front of a short and an open-ended decode pool
    profile = default_profile_book().profile("llama2-7b", "H100-SXM", 1)
    prefill = ReplicaGroup(profile, "prefill", 1, 8.0, {0: 1.0}, {0: 5.0})
    split = ServingPlan(
        plan.model,
        plan.slo,
        plan.rate_per_s,
        plan.mix,
        (prefill, *_two_class_plan(("decode", "decode")).groups),
        "test",
    )
    routes = route_requests(split, np.array([100, 100]), np.array([50, 900]), 0)
    assert routes.front.tolist() == [0, 0]
    assert routes.decode.tolist() == [1, 2]


@pytest.mark.parametrize(
    ("model", "rate", "tpot_s"),
    [("llama2-7b", 2.0, 0.12), ("llama2-7b", 12.0, 0.04), ("llama2-70b", 6.0, 0.12)],
)
def test_voltpack_is_never_dearer_than_baselines_with_the_same_rights(
    model: str, rate: float, tpot_s: float
) -> None:
    mix = _short_heavy_mix(seed=3, requests=300)
    types = ("L4", "A10", "A100-80GB", "H100-SXM")
    request = PlanRequest(
        model, mix, rate, ServingSlo(4.0, tpot_s), example_prices(), gpu_types=types, slices=4
    )
    plan = plan_service(request)
    unified = best_single_type_plan(request)
    split = best_single_type_plan(request, split=True)
    melange = melange_plan(request)
    melange_split = melange_plan(request, split=True)
    gap = 1 + 2e-4  # two solves, each within HiGHS's relative gap of 1e-4
    assert plan.cost_per_hour <= split.cost_per_hour * gap
    assert plan.cost_per_hour <= melange_split.cost_per_hour * gap
    assert split.cost_per_hour <= unified.cost_per_hour * gap
    assert melange_split.cost_per_hour <= melange.cost_per_hour * gap
    assert len(split.gpus_by_type()) == 1
    assert melange_split.formulation == "melange-split"
    assert split.formulation.startswith("single:")


def test_baselines_only_split_when_the_request_allows_it() -> None:
    mix = _short_heavy_mix(seed=4, requests=200)
    request = PlanRequest(
        "llama2-70b",
        mix,
        6.0,
        SLO,
        example_prices(),
        gpu_types=("A100-80GB", "H100-SXM"),
        allow_split=False,
        slices=2,
    )
    assert not best_single_type_plan(request, split=True).split
    assert not melange_plan(request, split=True).split


def test_a_request_size_may_record_its_longest_output() -> None:
    size = RequestSize(100, 40, 200, max_output_tokens=90)
    assert size.max_output_tokens == 90
    with pytest.raises(PerfModelError, match="max_output_tokens"):
        RequestSize(100, 40, 200, max_output_tokens=30)
