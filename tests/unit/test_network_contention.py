"""The flow-level network model: the fabric's links, a gang's flows, max-min sharing between
gangs, and the simulator's fluid run times under contention."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.test_topology_training_sim import topology
from voltpack.model.domain_tree import DomainTree
from voltpack.model.gpu_sku import default_catalog
from voltpack.model.resources.topology import TopologySpec
from voltpack.model.topology import ClusterTopology
from voltpack.perf.contention import NO_SLOWDOWN, RunningNetwork, network_slowdowns
from voltpack.perf.link_sharing import max_min_fair_rates_gbit_s
from voltpack.perf.network_flows import GroupKind, fabric_links, gang_flows
from voltpack.perf.training_models import default_parallelism, default_training_models
from voltpack.policies.topology.contended_step_model import ContendedStepModel, RunningGangs
from voltpack.policies.topology.placers import StepTimePlacer
from voltpack.policies.topology.step_model import TopologyStepModel, gang_step_model
from voltpack.policies.topology.step_time_placement import place_by_step_time
from voltpack.scheduler.wait_or_place import WaitRule
from voltpack.sim.topology_training import PlacementPolicy, SimConfig, simulate
from voltpack.sim.traces.training_jobs import TrainingJob

SKU = default_catalog().get("A100-80GB")
# `topology(leaves, hosts_per_leaf)`: 8-GPU hosts with 4 x 200 Gbit/s RoCE NICs, leaf uplinks
# 4:1 under one spine (the simulator tests' cluster)


def step_model(
    topo: ClusterTopology, name: str = "megatron-18.4b", gpus: int = 16
) -> TopologyStepModel:
    model = default_training_models().get(name)
    return gang_step_model(topo, model, default_parallelism(model, gpus), SKU)


def ranks(*nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Ranks packed in order: 8 per node on the given nodes."""
    return np.repeat(np.array(nodes, dtype=np.int64), 8), np.tile(
        np.arange(8, dtype=np.int64), len(nodes)
    )


def test_the_fabric_has_nics_and_uplinks_at_their_oversubscribed_capacity() -> None:
    topo = topology()
    fabric = fabric_links(topo)
    nic = 4 * 200.0
    assert fabric.capacity_gbit_s[fabric.nic_out].tolist() == [nic] * 4
    assert fabric.capacity_gbit_s[fabric.nic_in].tolist() == [nic] * 4
    leaf = 1  # the deepest level; two hosts under each leaf
    assert fabric.ports[leaf].tolist() == [1, 1]  # no ECMP stated: one aggregate uplink
    assert fabric.capacity_gbit_s[fabric.up[leaf][:, 0]].tolist() == [2 * nic / 4.0] * 2
    spine = 0  # above the 4:1 leaves: the spine's own 1:1 times the leaves' 4:1
    assert fabric.capacity_gbit_s[fabric.up[spine][:, 0]].tolist() == [4 * nic / 4.0]
    assert fabric.nic_gbit_s_per_gpu.tolist() == [100.0] * 4


def test_a_gang_inside_one_leaf_crosses_only_nics_and_one_across_leaves_climbs() -> None:
    topo = topology()
    fabric = fabric_links(topo)
    parallelism = default_parallelism(default_training_models().get("megatron-18.4b"), 16)
    inside = gang_flows(topo, *ranks(0, 1), parallelism)
    across = gang_flows(topo, *ranks(0, 2), parallelism)
    uplinks = {int(i) for ids in fabric.up + fabric.down for i in ids.reshape(-1) if i >= 0}
    assert inside.count > 0 and across.count > 0
    assert not set(inside.paths[inside.paths >= 0].tolist()) & uplinks
    assert set(across.paths[across.paths >= 0].tolist()) & set(fabric.up[1].reshape(-1).tolist())
    # tensor groups stay on NVLink: only data-parallel flows, one per direction between the
    # two nodes, each aggregating the 8 rings (one per tensor rank) at 100 Gbit/s each
    assert set(across.kind.tolist()) == {int(GroupKind.DATA)}
    assert across.count == 2
    assert across.weight.tolist() == [8.0, 8.0]
    assert across.demand_gbit_s.tolist() == [800.0, 800.0]


def test_a_lone_gang_inside_a_leaf_runs_as_fast_as_without_the_model() -> None:
    topo = topology()
    model = step_model(topo)
    nodes, gpus = ranks(0, 1)
    gang = model.placed(nodes, gpus)
    (slowdowns,) = network_slowdowns(fabric_links(topo), [gang.network])
    assert slowdowns == NO_SLOWDOWN
    assert gang.step_s(slowdowns) == pytest.approx(model.step_s(nodes, gpus))


def test_two_gangs_across_one_oversubscribed_uplink_halve_each_others_share() -> None:
    topo = topology()
    model = step_model(topo)
    first = model.placed(*ranks(0, 2))
    second = model.placed(*ranks(1, 3))
    fabric = fabric_links(topo)
    (alone,) = network_slowdowns(fabric, [first.network])
    together = network_slowdowns(fabric, [first.network, second.network])
    data = int(GroupKind.DATA)
    # alone: 800 Gbit/s asked through a 400 Gbit/s uplink; together: 1,600 through it
    assert alone[data] == pytest.approx(2.0)
    assert together[0][data] == pytest.approx(2.0 * alone[data])
    assert together[1][data] == pytest.approx(together[0][data])
    assert first.step_s(together[0]) > first.step_s(alone) > first.step_s()


def test_weight_counts_as_that_many_flows() -> None:
    capacity = [300.0]
    as_two = max_min_fair_rates_gbit_s(capacity, [[0], [0], [0]])
    weighted = max_min_fair_rates_gbit_s(capacity, [[0], [0]], weight=[2.0, 1.0])
    assert weighted.tolist() == pytest.approx([as_two[0] + as_two[1], as_two[2]])


def test_the_scored_step_charges_a_candidate_for_the_neighbours_it_slows() -> None:
    topo = topology()
    model = step_model(topo)
    running = RunningGangs(topo)
    running.add("a", model.placed(*ranks(0, 2)))
    running.resolve()
    scorer = ContendedStepModel(model, running)
    own_s, inflicted = scorer.evaluate(*ranks(1, 3))
    assert inflicted > 0
    assert scorer.score_s(*ranks(1, 3)) == pytest.approx(own_s * (1.0 + inflicted))
    assert scorer.step_s(*ranks(1, 3)) == pytest.approx(own_s)
    quiet_s, quiet_inflicted = ContendedStepModel(model, RunningGangs(topo)).evaluate(*ranks(1, 3))
    assert quiet_inflicted == 0.0
    assert own_s > quiet_s


def test_without_contention_a_jobs_end_is_fixed_when_it_starts() -> None:
    topo = topology()
    best_fit = PlacementPolicy("best-fit", strategy="best-fit")
    jobs = [
        TrainingJob("a", 0.0, 16, "megatron-18.4b", 2000),
        TrainingJob("b", 10.0, 16, "megatron-18.4b", 50),
    ]
    for record in simulate(topo, jobs, best_fit, SimConfig(sku=SKU)).records:
        steps = 2000 if record.job_id == "a" else 50
        assert record.end_s - record.start_s == pytest.approx(steps * record.step_s)
        assert record.step_s == record.start_step_s


def test_a_start_that_slows_a_running_job_is_charged_and_moves_its_end() -> None:
    topo = topology(leaves=3, hosts_per_leaf=2)
    steps = 1000
    # 24 GPUs need 3 hosts, so each job spans two leaves; the middle leaf's uplink is shared
    first = TrainingJob("a", 0.0, 24, "megatron-18.4b", steps)
    second = TrainingJob("b", 100.0, 24, "megatron-18.4b", steps)
    policy = PlacementPolicy("voltpack", placer=StepTimePlacer())
    config = SimConfig(sku=SKU, contention=True)
    records = {r.job_id: r for r in simulate(topo, [first, second], policy, config).records}
    a, b = records["a"], records["b"]
    assert a.nodes == 3 and b.nodes == 3
    # a ran alone for 100 s, then shared an uplink with b: it ends later than alone, and
    # its average step is slower than its step at start
    assert a.end_s > a.start_s + steps * a.start_step_s
    assert a.step_s > a.start_step_s
    assert b.inflicted > 0
    assert a.inflicted == 0.0
    # without contention both run at their start step to the end
    off = {r.job_id: r for r in simulate(topo, [first, second], policy, SimConfig(sku=SKU)).records}
    assert off["a"].end_s == pytest.approx(off["a"].start_s + steps * off["a"].step_s)


def test_equally_tight_leaves_go_quietest_uplink_first() -> None:
    topo = topology(leaves=3, hosts_per_leaf=2)
    slots = np.ones(topo.node_count, dtype=np.int64)
    gpus = np.full(topo.node_count, 8, dtype=np.int64)
    plain = DomainTree.build(topo, slots, gpus, gpus)
    chosen, _ = place_by_step_time(plain, 2)
    assert (chosen.level, chosen.domain) == (1, 0)  # ties: the first leaf
    busy = (np.zeros(1), np.array([0.5, 0.0, 0.9]), np.zeros(topo.node_count))
    told = DomainTree.build(topo, slots, gpus, gpus, link_busy=busy)
    chosen, compared = place_by_step_time(told, 2)
    assert (chosen.level, chosen.domain) == (1, 1)
    assert [c.domain for c in compared if c.level == 1] == [1, 0, 2]


def test_running_gangs_report_how_busy_each_uplink_is() -> None:
    topo = topology(leaves=3, hosts_per_leaf=2)
    model = step_model(topo, gpus=24)
    running = RunningGangs(topo)
    running.add("a", model.placed(*ranks(0, 1, 2)))  # leaf 0 whole, one host of leaf 1
    spine, leaf, nics = running.link_busy()
    assert leaf[0] > 0 and leaf[1] > 0 and leaf[2] == 0.0
    assert nics[[0, 1, 2]].min() > 0 and nics[[3, 4, 5]].max() == 0.0
    assert spine.tolist() == [0.0]  # one spine: nothing climbs above it


def hashed_topology(leaves: int = 2, hosts_per_leaf: int = 2) -> ClusterTopology:
    """`topology()`'s cluster with its leaves non-blocking but hashing flows over 200 Gbit/s
    uplink ports (ECMP)."""
    plain = topology(leaves, hosts_per_leaf)
    levels = [
        plain.levels[0],
        plain.levels[1].model_copy(update={"oversubscription": 1.0, "ecmp_port_gbit_s": 200.0}),
    ]
    spec = TopologySpec(levels=levels, nvlink_clique_label=None)
    labels = {
        name: {"spine": "s0", "leaf": plain.domain_label(1, int(plain.domain[1, row]))}
        for row, name in enumerate(plain.node_names)
    }
    return ClusterTopology.from_labels(
        spec, plain.node_names, labels, hosts=dict(zip(plain.node_names, plain.hosts, strict=True))
    )


def test_a_hashing_level_splits_its_uplinks_into_ports_and_hops_into_port_sized_parts() -> None:
    topo = hashed_topology()
    fabric = fabric_links(topo)
    # two hosts of 800 Gbit/s under a 1:1 leaf: 1,600 Gbit/s of uplink as 8 ports of 200
    assert fabric.ports[1].tolist() == [8, 8]
    assert fabric.capacity_gbit_s[fabric.up[1][0]].tolist() == [200.0] * 8
    assert fabric.ports[0].tolist() == [1]  # the spine does not hash
    parallelism = default_parallelism(default_training_models().get("gpt-13b"), 16)
    flows = gang_flows(topo, *ranks(0, 2), parallelism)
    # every part asks at most one port's worth, and the parts add up to the hops' asks
    assert flows.demand_gbit_s.max() <= 200.0 * flows.weight.max()
    assert (flows.demand_gbit_s / flows.weight).max() <= 200.0
    unhashed = gang_flows(topology(), *ranks(0, 2), parallelism)
    assert flows.demand_gbit_s.sum() == pytest.approx(unhashed.demand_gbit_s.sum())


def test_hashed_flows_can_collide_where_a_balanced_uplink_of_the_same_capacity_does_not() -> None:
    data = int(GroupKind.DATA)
    worst = {}
    for name, topo in (("balanced", topology(2, 4)), ("hashed", hashed_topology(2, 4))):
        model = step_model(topo, gpus=16)
        gangs = [model.placed(*ranks(a, b)).network for a, b in ((0, 4), (1, 5), (2, 6), (3, 7))]
        worst[name] = max(s[data] for s in network_slowdowns(fabric_links(topo), gangs))
    # balanced at 4:1, the four gangs' 3,200 Gbit/s through 800: exactly 4x; hashed at 1:1
    # (3,200 through 3,200 of ports) some port still carries more than its share
    assert worst["balanced"] == pytest.approx(4.0)
    assert worst["hashed"] > 1.0


def test_backfill_and_waiting_run_under_contention_and_every_job_completes() -> None:
    topo = topology(leaves=3, hosts_per_leaf=2)
    jobs = [
        TrainingJob(f"j{i}", 30.0 * i, gpus, "megatron-18.4b", 200)
        for i, gpus in enumerate((24, 16, 8, 24, 8, 16, 8))
    ]
    policy = PlacementPolicy("voltpack", placer=StepTimePlacer())
    config = SimConfig(sku=SKU, contention=True, backfill=True, wait_rule=WaitRule(600.0, 0.05))
    result = simulate(topo, jobs, policy, config)
    assert sorted(r.job_id for r in result.records) == sorted(j.job_id for j in jobs)
    for record in result.records:
        assert record.end_s > record.start_s >= record.arrival_s
        assert record.step_s >= record.ideal_s * (1.0 - 1e-9)


def test_solving_per_group_of_link_sharing_gangs_equals_one_solve_of_all() -> None:
    topo = hashed_topology(leaves=3, hosts_per_leaf=4)
    model = step_model(topo, gpus=16)
    rng = np.random.default_rng(3)
    network = RunningNetwork(topo)
    gangs = {}
    for index in range(5):
        a, b = rng.choice(topo.node_count, size=2, replace=False)
        gangs[index] = model.placed(*ranks(int(a), int(b))).network
        network.add(index, gangs[index])
    together = network_slowdowns(fabric_links(topo), list(gangs.values()))
    grouped = network.slowdowns()
    assert np.allclose([grouped[i] for i in gangs], together)
    assert max(max(s) for s in together) > 1.0  # some gangs do contend
    # asked again (answers kept), and after one gang leaves
    assert network.slowdowns() == grouped
    network.remove(2)
    rest = [gangs[i] for i in gangs if i != 2]
    after = network.slowdowns()
    assert np.allclose(
        [after[i] for i in gangs if i != 2], network_slowdowns(fabric_links(topo), rest)
    )
