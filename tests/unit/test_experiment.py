"""The FGD experiment protocol: inflation, per-percent condensation, and whole runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.unit.builders import cpu_node, cpu_pod, gpu_node, share_pod, whole_pod
from voltpack.model import InvalidRequestError, Node, Pod
from voltpack.policies.registry import strategy_names
from voltpack.policies.schema import policy_for_strategy
from voltpack.sim.datasets import fgd_paper_allocation_pct
from voltpack.sim.experiment import RunResult, arrival_order, inflate, per_percent, run_experiment

FGD_PAPER_BEST_FIT_DEFAULT_PCT = 93.08
"""The FGD paper's mean allocation ratio for best-fit on openb default at 130% demand."""


def demand(pods: list[Pod]) -> int:
    return sum(pod.gpu_request_milli for pod in pods)


# --- inflate ---------------------------------------------------------------------------------


def mixed_originals() -> list[Pod]:
    return [
        whole_pod("w1", 1),
        whole_pod("w2", 2),
        share_pod("s3", 300),
        share_pod("s5", 500),
        cpu_pod("c"),
    ]


def test_inflate_appends_tuned_copies_up_to_the_target() -> None:
    originals = mixed_originals()
    ordered = list(reversed(originals))
    result = inflate(ordered, originals, 10_000, 1.3, np.random.default_rng(1))
    assert result[: len(ordered)] == ordered, "originals are kept, first and in order"
    added = result[len(ordered) :]
    assert added, "the originals are far below the target"
    assert demand(result) <= 13_000
    by_name = {pod.name: pod for pod in originals}
    for i, pod in enumerate(added):
        base, _, index = pod.name.partition("-tuned-")
        assert index == str(i)
        assert pod.model_copy(update={"name": base}) == by_name[base]


def test_inflate_stops_at_the_first_draw_past_the_target() -> None:
    # With only 1-GPU pods, stopping at the first draw past the target means the demand ends
    # within one GPU of it.
    originals = [whole_pod(f"w{i}", 1) for i in range(3)]
    result = inflate(originals, originals, 10_000, 1.3, np.random.default_rng(2))
    assert demand(result) == 13_000
    assert len(result) == 13
    halfway = inflate(originals, originals, 10_000, 1.25, np.random.default_rng(2))
    assert demand(halfway) == 12_000


def test_inflate_also_appends_cpu_pods_drawn_on_the_way() -> None:
    originals = [whole_pod("w", 1), *(cpu_pod(f"c{i}") for i in range(4))]
    result = inflate(originals, originals, 4000, 1.0, np.random.default_rng(3))
    assert demand(result) == 4000
    assert any(pod.num_gpu == 0 for pod in result[len(originals) :])


def test_inflate_is_deterministic_for_a_seed() -> None:
    originals = mixed_originals()
    first = inflate(originals, originals, 20_000, 1.3, np.random.default_rng(9))
    second = inflate(originals, originals, 20_000, 1.3, np.random.default_rng(9))
    assert first == second


def test_inflate_returns_a_list_over_the_target_unchanged() -> None:
    originals = [whole_pod("w", 2), cpu_pod("c"), share_pod("s")]
    result = inflate(originals, originals, 1000, 1.3, np.random.default_rng(0))
    assert result == originals


def test_inflate_returns_a_list_at_the_target_unchanged() -> None:
    # Documented: "A list already at or above the target is returned unchanged." Exactly at the
    # target, CPU-only pods drawn before the first GPU pod must not be appended either.
    originals = [whole_pod("w", 1), *(cpu_pod(f"c{i}") for i in range(9))]
    for seed in range(5):
        result = inflate(originals, originals, 1000, 1.0, np.random.default_rng(seed))
        assert [pod.name for pod in result] == [pod.name for pod in originals], seed


@pytest.mark.parametrize(
    "originals", [[], [cpu_pod("a"), cpu_pod("b")]], ids=["no-pods", "cpu-only"]
)
def test_inflate_without_gpu_pods_returns_the_arrivals(originals: list[Pod]) -> None:
    assert inflate(originals, originals, 8000, 1.3, np.random.default_rng(0)) == originals


def test_arrival_order() -> None:
    pods = [
        cpu_pod("late").model_copy(update={"creation_time_s": 30.0}),
        cpu_pod("early").model_copy(update={"creation_time_s": 10.0}),
        cpu_pod("middle").model_copy(update={"creation_time_s": 20.0}),
    ]
    by_time = arrival_order(pods, "creation", np.random.default_rng(0))
    assert [pod.name for pod in by_time] == ["early", "middle", "late"]
    shuffled = arrival_order(pods, "shuffle", np.random.default_rng(0))
    assert sorted(pod.name for pod in shuffled) == ["early", "late", "middle"]
    assert arrival_order(pods, "shuffle", np.random.default_rng(4)) == arrival_order(
        pods, "shuffle", np.random.default_rng(4)
    )


# --- per_percent -----------------------------------------------------------------------------


def test_per_percent_averages_arrivals_rounding_to_each_percent() -> None:
    # capacity 1000 milli: 4 -> 0%, 6 and 14 -> 1%, 16 -> 2%, 30 -> 3%.
    arrived = np.array([4, 6, 14, 16, 30], dtype=np.int64)
    values = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    xs, means = per_percent(arrived, values, 1000, 3)
    assert xs == [0, 1, 2, 3]
    assert means == [1.0, 2.5, 4.0, 5.0]


def test_per_percent_falls_back_to_neighbouring_percents() -> None:
    # Nothing rounds to 0%, 2% or 4%: each takes the arrivals within one percent of it.
    # Nothing is within one percent of 5%, so 5% is left out.
    arrived = np.array([10, 30], dtype=np.int64)
    values = np.array([10.0, 20.0])
    xs, means = per_percent(arrived, values, 1000, 5)
    assert xs == [0, 1, 2, 3, 4]
    assert means == [10.0, 10.0, 15.0, 20.0, 20.0]


def test_per_percent_rounds_means_to_two_decimals() -> None:
    xs, means = per_percent(np.array([0, 0, 0]), np.array([1.0, 1.0, 2.0]), 1000, 0)
    assert (xs, means) == ([0], [1.33])


def test_per_percent_leaves_out_percents_beyond_the_last() -> None:
    xs, _ = per_percent(np.array([10, 20, 90]), np.array([1.0, 2.0, 3.0]), 1000, 2)
    assert xs == [0, 1, 2]


# --- run_experiment on a small synthetic cluster ---------------------------------------------


def small_cluster() -> list[Node]:
    return [
        gpu_node("t4-a", 4, "T4", cpu=32_000),
        gpu_node("t4-b", 4, "T4", cpu=32_000),
        gpu_node("a10", 2, "A10", cpu=16_000),
        cpu_node("cpu", cpu=64_000),
    ]


def small_workload() -> list[Pod]:
    """11 GPUs of demand for a 10-GPU cluster: inflation adds up to 2 GPUs more."""
    pods: list[Pod] = []
    for i in range(6):
        pods.append(share_pod(f"s{i}", 250 + 100 * i, cpu=2000))
        pods.append(whole_pod(f"w{i}", 1, cpu=4000))
        pods.append(cpu_pod(f"c{i}", cpu=3000))
    pods.append(whole_pod("t4-only", 2, cpu=1000, models=["T4"]))
    return pods


def without_time(result: RunResult) -> dict[str, Any]:
    data = result.to_json()
    del data["wall_time_s"]
    return data


@pytest.mark.parametrize("strategy", strategy_names())
def test_small_run_series_are_consistent(strategy: str) -> None:
    nodes, pods = small_cluster(), small_workload()
    result = run_experiment(nodes, pods, policy_for_strategy(strategy), seed=5)
    capacity = 10 * 1000
    assert result.strategy == strategy
    assert result.total_gpus == 10
    assert result.pods_arrived > len(pods)
    series = (
        result.arrived_gpu_milli,
        result.allocated_gpu_milli,
        result.frag_gpu_milli,
        result.failed_pods_series,
    )
    assert all(len(s) == result.pods_arrived for s in series)
    arrived, allocated = result.arrived_gpu_milli, result.allocated_gpu_milli
    assert (np.diff(arrived) >= 0).all()
    assert arrived[-1] <= 1.3 * capacity
    assert (allocated <= arrived).all()
    assert (allocated <= capacity).all()
    assert (np.diff(allocated) >= 0).all(), "no departures: allocation never drops"
    assert (result.frag_gpu_milli >= 0).all()
    assert (result.frag_gpu_milli <= capacity - allocated + 1e-6).all()
    assert (np.diff(result.failed_pods_series) >= 0).all()
    assert result.failed_pods == result.failed_pods_series[-1]
    assert result.failed_pods > 0, "30% more demand than GPUs: some pods must fail"
    xs = result.demand_pct
    assert xs == sorted(set(xs))
    assert xs[-1] <= 130
    arrived_pct = np.round(arrived / capacity * 100)
    assert all(np.abs(arrived_pct - x).min() <= 1 for x in xs)
    for per_pct in (result.allocation_ratio_pct, result.frag_amount_pct, result.frag_ratio_pct):
        assert len(per_pct) == len(xs)
    assert all(0 <= v <= 100 for v in result.allocation_ratio_pct)


def test_small_run_is_deterministic_for_a_seed() -> None:
    policy = policy_for_strategy("random")
    first = run_experiment(small_cluster(), small_workload(), policy, seed=11)
    second = run_experiment(small_cluster(), small_workload(), policy, seed=11)
    assert without_time(first) == without_time(second)
    others = [
        without_time(run_experiment(small_cluster(), small_workload(), policy, seed=s))
        for s in (12, 13, 14)
    ]
    assert any(other["per_arrival"] != without_time(first)["per_arrival"] for other in others)


def test_small_run_in_creation_order() -> None:
    pods = [
        pod.model_copy(update={"creation_time_s": float(len(small_workload()) - i)})
        for i, pod in enumerate(small_workload())
    ]
    result = run_experiment(
        small_cluster(), pods, policy_for_strategy("best-fit"), seed=1, order="creation"
    )
    # The last pod of the list is created first, so it is the first arrival.
    assert result.arrived_gpu_milli[0] == pods[-1].gpu_request_milli


def test_to_json_carries_the_final_figures() -> None:
    result = run_experiment(small_cluster(), small_workload(), policy_for_strategy("best-fit"), 3)
    data = result.to_json()
    assert data["final_allocation_ratio_pct"] == result.allocation_ratio_pct[-1]
    assert data["per_arrival"]["allocated_gpu_milli"] == result.allocated_gpu_milli.tolist()
    assert data["policy"] == "best-fit"
    assert data["seed"] == 3


# --- the openb regression guard --------------------------------------------------------------


def test_fgd_paper_reference_value(openb_dir: Path) -> None:
    paper = fgd_paper_allocation_pct(
        "openb_pod_list_default", "best-fit", results_dir=openb_dir / "fgd-expected-results"
    )
    assert paper == pytest.approx(FGD_PAPER_BEST_FIT_DEFAULT_PCT, abs=0.005)


def test_openb_default_best_fit_matches_the_fgd_paper(
    openb_nodes: list[Node], openb_default_pods: list[Pod]
) -> None:
    result = run_experiment(openb_nodes, openb_default_pods, policy_for_strategy("best-fit"), 42)
    assert result.total_gpus == 6212
    assert result.demand_pct[-1] == 130
    assert abs(result.final_allocation_ratio_pct - FGD_PAPER_BEST_FIT_DEFAULT_PCT) <= 1.0
    assert (result.allocated_gpu_milli <= result.arrived_gpu_milli).all()


@pytest.mark.parametrize("ratio", [float("nan"), float("inf"), 0.0, -1.0])
def test_inflate_refuses_a_ratio_that_is_not_a_positive_number(ratio: float) -> None:
    pods = [Pod(name="p", cpu_milli=1, memory_mib=1, num_gpu=1, gpu_milli=1000)]
    with pytest.raises(InvalidRequestError, match="positive number"):
        inflate(pods, pods, 1000, ratio, np.random.default_rng(0))
