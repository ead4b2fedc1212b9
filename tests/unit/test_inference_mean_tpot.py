"""Mélange's mean-TPOT SLO beside the per-request one: the capacity model sizes for the mean
iteration, and the simulator judges the mean over requests."""

from __future__ import annotations

import numpy as np
import pytest

from voltpack.model.errors import VoltpackError
from voltpack.perf.inference_profile import default_profile_book
from voltpack.perf.serving_capacity import (
    ReplicaSettings,
    RequestSize,
    ServingSlo,
    batch_cap,
    capacity_table,
    tpot_met,
)
from voltpack.policies.inference.buckets import request_mix
from voltpack.policies.inference.mix_planner import PlanRequest, plan_service
from voltpack.policies.inference.prices import example_prices
from voltpack.sim.serving import scale_to_rate, simulate_serving
from voltpack.sim.traces.melange_workloads import regime_workload
from voltpack.sim.traces.trace_windows import first_requests

P99 = ServingSlo(4.0, 0.12)
MEAN = ServingSlo(4.0, 0.12, "mean")


def test_an_unknown_tpot_statistic_is_refused_naming_the_choices() -> None:
    with pytest.raises(VoltpackError, match="p99, mean"):
        ServingSlo(4.0, 0.12, "p90")  # type: ignore[arg-type]
    assert ServingSlo(4.0, 0.12) == P99 and not P99.tpot_is_mean and MEAN.tpot_is_mean


def test_the_mean_iteration_gives_every_option_at_least_the_per_request_capacity() -> None:
    book = default_profile_book()
    sizes = [RequestSize(300, 150, 1000), RequestSize(1500, 400, 2000), RequestSize(100, 30, 200)]
    for gpu_type in ("L4", "A10", "A100-80GB", "H100-SXM"):
        profile = book.profile("llama2-7b", gpu_type, 1)
        assert batch_cap(profile, MEAN, 1000.0, 512) >= batch_cap(profile, P99, 1000.0, 512)
        for role, settings in (
            ("unified", ReplicaSettings(max_batch=32, prefill_chunk_tokens=512)),
            ("decode", ReplicaSettings(max_batch=32)),
        ):
            strict = capacity_table(profile, sizes, P99, role, settings=settings)  # type: ignore[arg-type]
            loose = capacity_table(profile, sizes, MEAN, role, settings=settings)  # type: ignore[arg-type]
            for per_request, mean in zip(strict, loose, strict=True):
                assert mean.rate_per_s >= per_request.rate_per_s - 1e-9
    # an L4 at TPOT 120 ms: the full batch with a chunk misses, the mean iteration does not
    l4 = book.profile("llama2-7b", "L4", 1)
    assert batch_cap(l4, MEAN, 1000.0, 1024) > batch_cap(l4, P99, 1000.0, 1024)


def test_the_mean_objective_holds_for_all_served_requests_or_for_none() -> None:
    tpot = np.array([0.05, 0.2, 0.08, np.nan])
    outputs = np.array([10, 10, 1, 10])
    served = np.array([True, True, True, False])
    assert tpot_met(tpot, outputs, served, P99).tolist() == [True, False, True, False]
    # mean over the decoding served requests: (0.05 + 0.2) / 2 = 0.125 > 0.12
    assert not tpot_met(tpot, outputs, served, MEAN).any()
    tpot[1] = 0.18  # mean 0.115
    assert tpot_met(tpot, outputs, served, MEAN).tolist() == [True, True, True, False]


def test_a_mean_tpot_plan_is_no_dearer_and_is_judged_on_its_mean() -> None:
    window = scale_to_rate(first_requests(regime_workload("arena"), 600), 6.0)
    mix = request_mix(window.prompt_tokens, window.output_tokens)
    types = ("L4", "A10", "A100-80GB", "H100-SXM")
    strict = plan_service(PlanRequest("llama2-7b", mix, 6.0, P99, example_prices(), types))
    loose = plan_service(PlanRequest("llama2-7b", mix, 6.0, MEAN, example_prices(), types))
    assert loose.cost_per_hour <= strict.cost_per_hour + 1e-9
    result = simulate_serving(loose, window)
    assert np.isfinite(result.tpot_mean_s)
    met = result.tpot_mean_s <= MEAN.tpot_s
    ttft_share = 100 * float(np.mean(result.served & (result.ttft_s <= MEAN.ttft_s)))
    assert result.slo_attainment_pct == pytest.approx(ttft_share if met else 0.0)
