"""The training-cluster simulator: run times from placements, all-or-nothing, FIFO, metrics."""

from __future__ import annotations

import numpy as np
import pytest

from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.gpu_sku import default_catalog
from voltpack.model.resources.topology import HostNicSpec, HostSpec, TopologyLevel, TopologySpec
from voltpack.model.topology import ClusterTopology
from voltpack.perf.training_models import default_parallelism, default_training_models
from voltpack.policies.topology.placers import StepTimePlacer
from voltpack.policies.topology.step_model import gang_step_model
from voltpack.sim.topology_training import (
    PlacementPolicy,
    SimConfig,
    _Runner,
    default_policies,
    pod_gpus_for,
    simulate,
    simulate_all,
)
from voltpack.sim.traces.training_jobs import TrainingJob

SKU = default_catalog().get("A100-80GB")
SPEC = TopologySpec(
    levels=[
        TopologyLevel(node_label="spine", oversubscription=1.0),
        TopologyLevel(node_label="leaf", oversubscription=4.0),
    ],
    nvlink_clique_label=None,
    default_host=HostSpec(
        gpus=8,
        numa_nodes=[[0, 1, 2, 3], [4, 5, 6, 7]],
        nics=[
            HostNicSpec(
                name=f"mlx5_{i}", nic_class="roce", line_rate_gbit_s=200, gpus=[2 * i, 2 * i + 1]
            )
            for i in range(4)
        ],
    ),
)


def topology(leaves: int = 2, hosts_per_leaf: int = 2) -> ClusterTopology:
    names = [f"n{leaf}{host}" for leaf in range(leaves) for host in range(hosts_per_leaf)]
    labels = {name: {"spine": "s0", "leaf": f"l{name[1]}"} for name in names}
    return ClusterTopology.from_labels(SPEC, names, labels, gpu_counts=dict.fromkeys(names, 8))


VOLTPACK = PlacementPolicy("voltpack", placer=StepTimePlacer())
BEST_FIT = PlacementPolicy("best-fit", strategy="best-fit")
CONFIG = SimConfig(sku=SKU, seed=7)


def test_a_jobs_run_time_is_its_steps_times_its_placements_step_time() -> None:
    topo = topology()
    job = TrainingJob("a", 10.0, 16, "megatron-18.4b", 40)
    for policy in (VOLTPACK, BEST_FIT):
        (record,) = simulate(topo, [job], policy, CONFIG).records
        assert record.start_s == 10.0
        assert record.end_s - record.start_s == pytest.approx(40 * record.step_s)
        assert record.step_s >= record.ideal_s
        assert record.nodes == 2
    model = default_training_models().get("megatron-18.4b")
    step_model = gang_step_model(topo, model, default_parallelism(model, 16), SKU)
    # voltpack keeps the two hosts under one leaf: the ideal step
    (record,) = simulate(topo, [job], VOLTPACK, CONFIG).records
    assert record.step_s == pytest.approx(step_model.ideal_s())


def test_spread_over_an_oversubscribed_uplink_runs_longer() -> None:
    topo = topology()
    model = default_training_models().get("megatron-18.4b")
    step_model = gang_step_model(topo, model, default_parallelism(model, 16), SKU)
    gpus = np.tile(np.arange(8), 2)
    same_leaf = step_model.step_s(np.repeat(np.array([0, 1]), 8), gpus)
    two_leaves = step_model.step_s(np.repeat(np.array([0, 2]), 8), gpus)
    assert two_leaves > same_leaf


def test_gangs_are_all_or_nothing_and_completions_free_their_gpus() -> None:
    topo = topology()  # 4 hosts, 32 GPUs
    jobs = [
        TrainingJob("big", 0.0, 24, "megatron-18.4b", 10),
        TrainingJob("next", 1.0, 16, "megatron-18.4b", 10),
    ]
    for policy in (VOLTPACK, BEST_FIT):
        runner = _Runner(topo, policy, CONFIG)
        result = runner.run(jobs)
        big, following = result.records
        # only 8 GPUs are free while "big" runs: "next" takes none of them, then starts whole
        assert following.start_s == pytest.approx(big.end_s)
        assert following.nodes == 2
        snapshot = runner.snapshot
        assert (snapshot.gpu_free_milli[snapshot.gpu_present] == MILLI_PER_GPU).all()


def test_fifo_without_backfill_holds_later_jobs_behind_the_head() -> None:
    topo = topology()
    jobs = [
        TrainingJob("first", 0.0, 16, "megatron-18.4b", 10),
        TrainingJob("head", 1.0, 32, "megatron-39.1b", 2),
        TrainingJob("small", 2.0, 8, "gpt-13b", 1),
    ]
    first, head, small = simulate(topo, jobs, VOLTPACK, CONFIG).records
    assert head.start_s == pytest.approx(first.end_s)
    assert small.start_s == pytest.approx(head.end_s)
    summary = simulate(topo, jobs, VOLTPACK, CONFIG).summary()
    assert summary["avg_queue_s"] > 0


def test_a_job_that_can_never_fit_is_dropped_not_blocking() -> None:
    topo = topology()
    jobs = [
        TrainingJob("huge", 0.0, 64, "llama-2-70b", 1),
        TrainingJob("fine", 5.0, 8, "gpt-13b", 3),
    ]
    result = simulate(topo, jobs, VOLTPACK, CONFIG)
    assert result.unplaced == ["huge"]
    assert [r.job_id for r in result.records] == ["fine"]
    assert result.records[0].start_s == 5.0


def test_metrics_follow_their_definitions() -> None:
    topo = topology()
    jobs = [TrainingJob(f"j{i}", 100.0 * i, 8, "gpt-13b", 2) for i in range(3)]
    result = simulate(topo, jobs, VOLTPACK, CONFIG)
    summary = result.summary()
    run_s = [r.end_s - r.start_s for r in result.records]
    makespan = max(r.end_s for r in result.records)
    assert summary["jobs"] == 3
    assert summary["avg_jct_s"] == pytest.approx(np.mean(run_s))
    assert summary["avg_queue_s"] == 0.0
    assert summary["gpu_utilization"] == pytest.approx(8 * sum(run_s) / (32 * makespan))
    assert summary["avg_step_slowdown"] == pytest.approx(1.0)


def test_runs_are_deterministic_with_a_seed_and_parallel_runs_agree() -> None:
    topo = topology(leaves=3, hosts_per_leaf=3)
    rng = np.random.default_rng(0)
    jobs = [
        TrainingJob(f"j{i}", float(i * 50), int(g), model, int(rng.integers(1, 20)))
        for i, (g, model) in enumerate(
            [(8, "gpt-13b"), (16, "megatron-18.4b"), (32, "megatron-39.1b")] * 6
        )
    ]
    policies = default_policies()
    serial = simulate_all(topo, jobs, policies, CONFIG)
    again = simulate_all(topo, jobs, policies, CONFIG)
    assert [r.records for r in serial] == [r.records for r in again]
    parallel = simulate_all(topo, jobs, policies[:2], CONFIG, processes=2)
    assert [r.records for r in parallel] == [r.records for r in serial[:2]]


def test_pod_layout_is_one_pod_per_nodes_worth() -> None:
    assert pod_gpus_for(4, 8) == 4
    assert pod_gpus_for(8, 8) == 8
    assert pod_gpus_for(64, 8) == 8
    assert pod_gpus_for(12, 8) == 6
    assert pod_gpus_for(64, 8, fixed=4) == 4
    with pytest.raises(Exception, match="pod_gpus"):
        pod_gpus_for(12, 8, fixed=8)
