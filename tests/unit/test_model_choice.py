"""Live training jobs: the allocation read job by job (model order and reasons), and the
queue cycle placing a gang on its allocation's models in order."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.builders import gpu_node, occupy, scheduler_for, snapshot_of, whole_pod
from voltpack.model import PodGroup
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.perf.throughput_table import ThroughputTable, load_gavel_throughputs
from voltpack.policies.fair_share import FairShareOrdering
from voltpack.policies.hetero.model_choice import (
    ModelChoice,
    TrainingJob,
    allocate_models,
    job_rates,
)
from voltpack.policies.hetero.registry import make_allocation_policy
from voltpack.scheduler.preemption import PreemptionRules
from voltpack.scheduler.queue_cycle import PendingGang, QueueCyclePlan, schedule_queues
from voltpack.scheduler.queues import DEFAULT_QUEUE, QueueTree
from voltpack.sim.datasets import data_dir

RESNET = "ResNet-18 (batch size 256)"
RECOMMENDATION = "Recommendation (batch size 1024)"


@pytest.fixture(scope="module")
def gavel() -> ThroughputTable:
    return load_gavel_throughputs(data_dir() / "gavel" / "simulation_throughputs.json")


def test_table_names_cluster_models_by_catalog_alias(gavel: ThroughputTable) -> None:
    assert gavel.model_name("V100M16") == "v100"
    assert gavel.model_name("Tesla-K80") == "k80"
    assert gavel.model_name("v100") == "v100"
    assert gavel.model_name("A100") == "A100"  # not measured: estimated under its own name
    assert gavel.model_name("no-such-gpu") == "no-such-gpu"


def test_a_job_alone_gets_its_fastest_model_first(gavel: ThroughputTable) -> None:
    policy = make_allocation_policy("max_min_fairness_perf")
    jobs = [TrainingJob(0, "d/resnet", RESNET, 1), TrainingJob(1, "d/rec", RECOMMENDATION, 1)]
    result = allocate_models(policy, gavel, jobs, {"V100M16": 1, "K80": 1})
    assert result.choices["d/resnet"].models == ("V100M16", "K80")
    assert result.choices["d/rec"].models == ("K80", "V100M16")
    assert result.choices["d/resnet"].shares["V100M16"] > 0.5


def test_the_reason_names_model_share_and_speed_up(gavel: ThroughputTable) -> None:
    policy = make_allocation_policy("max_min_fairness_perf")
    jobs = [TrainingJob(0, "d/resnet", RESNET, 1)]
    choice = allocate_models(policy, gavel, jobs, {"V100M16": 4, "K80": 4}).choices["d/resnet"]
    speed_up = gavel.rate(RESNET, "v100", 1) / gavel.rate(RESNET, "k80", 1)
    reason = choice.reason("V100M16")
    assert reason.startswith("job d/resnet: V100M16 (allocation ")
    assert f"{speed_up:.1f}x the throughput of K80" in reason


def test_accepted_models_limit_the_choice(gavel: ThroughputTable) -> None:
    job = TrainingJob(0, "d/j", RESNET, 1, accepted_models=("K80", "P100"))
    assert set(job_rates(gavel, job, ["V100M16", "K80", "P100"])) == {"K80", "P100"}
    only = ModelChoice("d/j", ("K80",), {"K80": 1.0}, {"K80": 2.0})
    assert only.reason("K80") == "job d/j: K80 (allocation 1.00, the only model it runs on)"


def test_an_observed_throughput_changes_the_order(gavel: ThroughputTable) -> None:
    policy = make_allocation_policy("max_min_fairness_perf")
    jobs = [TrainingJob(0, "d/j", RECOMMENDATION, 1)]
    cluster = {"V100M16": 1, "K80": 1}
    before = allocate_models(policy, gavel, jobs, cluster).choices["d/j"]
    # one report of 40 steps/s on the V100 (table: 13.3): the moving average passes the K80's 20
    faster_v100 = gavel.observed(RECOMMENDATION, gavel.model_name("V100M16"), 1, 40.0)
    after = allocate_models(policy, faster_v100, jobs, cluster).choices["d/j"]
    assert before.best == "K80"
    assert after.best == "V100M16"


def test_no_jobs_or_no_gpus_give_no_choices(gavel: ThroughputTable) -> None:
    policy = make_allocation_policy("max_min_fairness_perf")
    assert allocate_models(policy, gavel, [], {"K80": 2}).choices == {}
    jobs = [TrainingJob(0, "d/j", RESNET, 1)]
    assert allocate_models(policy, gavel, jobs, {"K80": 0}).choices == {}


def _gang(name: str, workers: int, models: tuple[str, ...]) -> PodGroup:
    pods = tuple(whole_pod(f"{name}-{i}", 1, models=models) for i in range(workers))
    return PodGroup(name=name, pods=pods, min_member=workers)


def _schedule(snapshot: ClusterSnapshot, gangs: list[PendingGang]) -> QueueCyclePlan:
    # the tie-break prefers the K80 node: without the allocation, a gang would land there
    scheduler = scheduler_for("best-fit", snapshot, "k80-node")
    return schedule_queues(
        scheduler, snapshot, QueueTree.build({}), gangs, [], FairShareOrdering(),
        PreemptionRules(), 0.0, np.random.default_rng(0),
    )  # fmt: skip


def test_a_gang_goes_to_its_allocations_model_with_the_reason() -> None:
    snapshot = snapshot_of(gpu_node("k80-node", 4, "K80"), gpu_node("v100-node", 4, "V100M16"))
    choice = ModelChoice(
        "g", ("V100M16", "K80"), {"V100M16": 0.8, "K80": 0.2}, {"V100M16": 10.0, "K80": 1.0}
    )
    plan = _schedule(snapshot, [PendingGang(_gang("g", 2, ()), DEFAULT_QUEUE, model_choice=choice)])
    decision = plan.decisions[0]
    assert decision.placed
    assert {p.node for p in decision.placements} == {"v100-node"}
    assert decision.reason.startswith(
        "job g: V100M16 (allocation 0.80, 10.0x the throughput of K80)"
    )


def test_without_a_choice_the_same_gang_lands_elsewhere() -> None:
    snapshot = snapshot_of(gpu_node("k80-node", 4, "K80"), gpu_node("v100-node", 4, "V100M16"))
    plan = _schedule(snapshot, [PendingGang(_gang("g", 2, ()), DEFAULT_QUEUE)])
    assert {p.node for p in plan.decisions[0].placements} == {"k80-node"}


def test_the_next_model_when_the_first_cannot_take_the_whole_gang() -> None:
    snapshot = snapshot_of(gpu_node("k80-node", 4, "K80"), gpu_node("v100-node", 4, "V100M16"))
    occupy(snapshot, "v100-node", whole_pod("busy", 3), [0, 1, 2])
    choice = ModelChoice(
        "g", ("V100M16", "K80"), {"V100M16": 0.8, "K80": 0.2}, {"V100M16": 10.0, "K80": 1.0}
    )
    plan = _schedule(snapshot, [PendingGang(_gang("g", 2, ()), DEFAULT_QUEUE, model_choice=choice)])
    decision = plan.decisions[0]
    assert {p.node for p in decision.placements} == {"k80-node"}
    assert "job g: K80 (allocation 0.20" in decision.reason
    assert "V100M16 had no room for the whole gang now" in decision.reason
