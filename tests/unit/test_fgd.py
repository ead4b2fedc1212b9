"""FGD: the fragmentation gradient is exact, its cache never goes stale, and the strategy
places pods where fragmentation grows least."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.builders import cpu_pod, gpu_node, scheduler_for, share_pod, snapshot_of, whole_pod
from voltpack.model import MILLI_PER_GPU, Pod, PolicyError
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.policies.fragmentation import FragmentationModel, TypicalPods
from voltpack.policies.fragmentation_gradient import FragmentationGradient
from voltpack.policies.registry import make_strategy
from voltpack.policies.schema import parse_policy
from voltpack.policies.strategies.fgd import FgdStrategy, exact_fits, typical_share_sizes
from voltpack.policies.strategy import pick_best_fit_gpus
from voltpack.scheduler.filter import filter_nodes

WORKLOAD = [
    share_pod("a", 810, cpu=3000),
    share_pod("b", 470, cpu=2000),
    share_pod("c", 470, cpu=2000),
    share_pod("d", 320, cpu=1000),
    whole_pod("e", 1, cpu=8000),
    whole_pod("f", 1, cpu=8000),
    whole_pod("g", 2, cpu=16000),
    cpu_pod("h", cpu=12000),
]


def brute_force_delta(
    snapshot: ClusterSnapshot, typical: TypicalPods, pod: Pod, node: int
) -> float:
    """Fragmentation change of placing `pod` on `node`, by placing it on a copy and measuring."""
    model = FragmentationModel(typical, snapshot.gpu_models)
    rows = np.array([node])
    before = model.snapshot_frag_milli(snapshot, rows)[0]
    trial = snapshot.copy()
    if pod.is_gpu_sharing:
        # the best GPU: the one giving the least fragmentation after
        afters = []
        for gpu in range(int(snapshot.gpu_count[node])):
            if snapshot.gpu_free_milli[node, gpu] >= pod.gpu_milli:
                attempt = snapshot.copy()
                attempt.allocate(node, pod, [gpu])
                afters.append(model.snapshot_frag_milli(attempt, rows)[0])
        return min(afters) - before
    trial.allocate(node, pod, pick_best_fit_gpus(snapshot, node, pod))
    return float(model.snapshot_frag_milli(trial, rows)[0] - before)


node_free = st.lists(st.sampled_from([0, 30, 190, 320, 530, 680, 1000]), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(
    nodes=st.lists(
        st.tuples(node_free, st.integers(0, 40_000), st.sampled_from(["T4", "G2"])),
        min_size=1,
        max_size=5,
    ),
    pod=st.sampled_from([*WORKLOAD, share_pod("tiny", 50, cpu=500), whole_pod("four", 4)]),
)
def test_gradient_equals_brute_force(nodes: list[tuple[list[int], int, str]], pod: Pod) -> None:
    snapshot = snapshot_of(
        *(
            gpu_node(f"n{i}", len(free), model, cpu=40_000, cpu_free=cpu, gpu_free=free)
            for i, (free, cpu, model) in enumerate(nodes)
        )
    )
    typical = TypicalPods.from_pods(WORKLOAD, coverage=1.0)
    gradient = FragmentationGradient(typical, snapshot.gpu_models)
    candidates = np.flatnonzero(filter_nodes(snapshot, pod).feasible)
    result = gradient.gradient(snapshot, pod, candidates)
    for position, node in enumerate(candidates):
        expected = brute_force_delta(snapshot, typical, pod, int(node))
        assert result.delta_milli()[position] == pytest.approx(expected, abs=1e-6)


def test_cache_follows_changes_of_the_snapshot() -> None:
    rng = np.random.default_rng(7)
    snapshot = snapshot_of(*(gpu_node(f"n{i}", 4, cpu=64_000) for i in range(6)))
    typical = TypicalPods.from_pods(WORKLOAD, coverage=1.0)
    cached = FragmentationGradient(typical, snapshot.gpu_models)
    probe = share_pod("probe", 470, cpu=2000)
    everyone = np.arange(snapshot.node_count)
    for step in range(40):
        pod = WORKLOAD[step % len(WORKLOAD)]
        feasible = np.flatnonzero(filter_nodes(snapshot, pod).feasible)
        if feasible.size == 0:
            break
        node = int(rng.choice(feasible))
        snapshot.allocate(node, pod, pick_best_fit_gpus(snapshot, node, pod))
        fresh = FragmentationGradient(typical, snapshot.gpu_models)
        feasible_probe = everyone[filter_nodes(snapshot, probe).feasible]
        assert np.array_equal(
            cached.gradient(snapshot, probe, feasible_probe).delta_weighted,
            fresh.gradient(snapshot, probe, feasible_probe).delta_weighted,
        )


def test_no_change_scores_exactly_fifty() -> None:
    # A CPU-only pod on a node with plenty of CPU changes no shape's feasibility.
    snapshot = snapshot_of(gpu_node("n0", 4, cpu=128_000), gpu_node("n1", 4, cpu=128_000))
    strategy = make_strategy("fgd")
    strategy.prime(WORKLOAD)
    scores = strategy.score(snapshot, cpu_pod(cpu=1000), np.arange(2), np.random.default_rng(0))
    assert scores.tolist() == [50, 50]


def test_share_goes_to_the_gpu_it_completes() -> None:
    # GPU 1 has 470 free: a 470 pod completes it; on an idle GPU it would leave a 530 sliver.
    snapshot = snapshot_of(gpu_node("n0", 3, gpu_free=[1000, 470, 1000], cpu=64_000))
    strategy = make_strategy("fgd")
    strategy.prime(WORKLOAD)
    assert strategy.pick_gpus(snapshot, 0, share_pod("x", 470), np.random.default_rng(0)) == (1,)


def test_fgd_prefers_the_node_where_fragmentation_shrinks() -> None:
    # n-frag holds a 470 sliver (a fragment for 810 pods and whole GPUs); n-idle is untouched.
    snapshot = snapshot_of(
        gpu_node("n-idle", 2, cpu=64_000), gpu_node("n-frag", 2, gpu_free=[470, 0], cpu=64_000)
    )
    scheduler = scheduler_for("fgd", snapshot, "n-idle")
    scheduler.strategy.prime(WORKLOAD)
    decision = scheduler.schedule_pod(snapshot, share_pod("x", 470), np.random.default_rng(0))
    assert decision.placements[0].node == "n-frag"


def test_observed_shapes_follow_arrivals() -> None:
    strategy = make_strategy("fgd", {"window_pods": 10, "refresh_every_pods": 1})
    assert isinstance(strategy, FgdStrategy)
    snapshot = snapshot_of(gpu_node("n0", 1, cpu=64_000), gpu_node("n1", 1, gpu_free=[600]))
    for index in range(10):
        strategy.observe_arrival(share_pod(f"s{index}", 600))
    # Only 600-milli pods seen: the 600 free on n1 is fully usable; taking 400 of n0 is not.
    typical = strategy.gradient(snapshot, share_pod("q", 600), np.arange(2))
    assert typical.delta_milli()[1] < typical.delta_milli()[0]
    for index in range(10):
        strategy.observe_arrival(whole_pod(f"w{index}", 1))
    # The window now holds only whole-GPU pods: the 600 on n1 is a fragment already.
    after = strategy.gradient(snapshot, share_pod("q", 600), np.arange(2))
    assert after.delta_milli()[1] < 0


def test_primed_shapes_ignore_arrivals() -> None:
    strategy = make_strategy("fgd", {"shapes": "primed", "refresh_every_pods": 1})
    strategy.prime([share_pod("s", 600)])
    snapshot = snapshot_of(gpu_node("n0", 1, gpu_free=[600]))
    before = strategy.gradient(snapshot, share_pod("q", 600), np.arange(1)).delta_milli()
    for index in range(50):
        strategy.observe_arrival(whole_pod(f"w{index}", 1))
    after = strategy.gradient(snapshot, share_pod("q", 600), np.arange(1)).delta_milli()
    assert before.tolist() == after.tolist()


def test_fgd_with_no_shapes_yet_still_schedules() -> None:
    snapshot = snapshot_of(gpu_node("n0", 2), gpu_node("n1", 2))
    scheduler = scheduler_for("fgd", snapshot)
    decision = scheduler.schedule_pod(snapshot, whole_pod("w", 1), np.random.default_rng(0))
    assert decision.placed
    assert snapshot.gpu_free_milli.sum() == 3 * MILLI_PER_GPU


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ("{shapes: trace}", ["spec.scoring.params.shapes", "'trace'", "observed", "primed"]),
        ("{coverage: 1.5}", ["spec.scoring.params.coverage", "1.5"]),
        ("{window_pods: 3}", ["spec.scoring.params.window_pods", "3"]),
        ("{lookahead: 2}", ["spec.scoring.params.lookahead", "not a known field"]),
    ],
)
def test_bad_fgd_params_are_named(params: str, words: list[str]) -> None:
    text = (
        "apiVersion: voltpack.io/v1alpha1\nkind: SchedulingPolicy\nmetadata: {name: x}\n"
        f"spec: {{scoring: {{strategy: fgd, params: {params}}}}}\n"
    )
    with pytest.raises(PolicyError) as error:
        parse_policy(text, "p.yaml")
    for word in words:
        assert word in str(error.value)


def test_params_for_a_strategy_without_params_are_refused() -> None:
    with pytest.raises(PolicyError, match=r"spec\.scoring\.params\.alpha"):
        make_strategy("best-fit", {"alpha": 1})


def test_exact_fits_and_share_sizes() -> None:
    typical = TypicalPods.from_pods(WORKLOAD, coverage=1.0)
    sizes = typical_share_sizes(typical)
    assert sizes.tolist() == [320, 470, 810]
    snapshot = snapshot_of(gpu_node("n0", 3, gpu_free=[470, 790, 1000], cpu=64_000))
    pod = share_pod("x", 470)
    rows = np.zeros(3, dtype=np.int64)
    fits = exact_fits(snapshot, pod, rows, np.array([0, 1, 2]), sizes)
    assert fits.tolist() == [True, True, False]  # leaves 0, 320 (a typical share), 530


def test_exact_fit_levels_prefer_the_node_left_with_a_fit() -> None:
    # n-a: a 790 GPU (470 leaves 320, a typical share); n-b: a 900 GPU (470 leaves 430).
    snapshot = snapshot_of(
        gpu_node("n-a", 1, gpu_free=[790], cpu=64_000),
        gpu_node("n-b", 1, gpu_free=[900], cpu=64_000),
    )
    pod = share_pod("x", 470)
    plain = make_strategy("fgd", {"shapes": "primed"})
    bonus = make_strategy("fgd", {"shapes": "primed", "exact_fit_levels": 10})
    for strategy in (plain, bonus):
        strategy.prime(WORKLOAD)
    rng = np.random.default_rng(0)
    base = plain.score(snapshot, pod, np.arange(2), rng)
    scored = bonus.score(snapshot, pod, np.arange(2), rng)
    assert scored.tolist() == [min(int(base[0]) + 10, 100), int(base[1])]
    # whole-GPU and CPU-only pods are scored as without the bonus
    for other in (whole_pod("w", 1), cpu_pod(cpu=1000)):
        rows = np.flatnonzero(filter_nodes(snapshot, other).feasible)
        assert (
            plain.score(snapshot, other, rows, rng).tolist()
            == bonus.score(snapshot, other, rows, rng).tolist()
        )


@pytest.mark.parametrize("levels", [-1, 101])
def test_bad_exact_fit_levels_are_named(levels: int) -> None:
    with pytest.raises(PolicyError, match=r"spec\.scoring\.params\.exact_fit_levels"):
        make_strategy("fgd", {"exact_fit_levels": levels})
