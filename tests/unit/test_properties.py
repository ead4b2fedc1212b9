"""Properties of the scheduling core on random small clusters and workloads, for every strategy.

(a) no node is ever over-allocated, the free arrays always equal capacity minus what the
    placements took, and a pod fails only when no node can hold it;
(b) a gang with min_member == its size is placed whole or not at all (and then the snapshot is
    exactly as before);
(c) the same seed gives the same decisions;
(d) the simulator with departures gives every resource back once all pods have left.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.builders import assert_empty, assert_state_equal, state_of
from voltpack.model import MILLI_PER_GPU, Decision, Node, Placement, Pod, PodGroup
from voltpack.model.snapshot import ClusterSnapshot, gpu_pod_kind
from voltpack.policies.registry import make_strategy, strategy_names
from voltpack.scheduler.placement import Scheduler
from voltpack.sim.engine import EventKind, SimEvent, Simulator

MODELS = ("T4", "V100M16", "A10")
SEEDS = st.integers(0, 2**32 - 1)
FAST = settings(max_examples=40, deadline=None)
every_strategy = pytest.mark.parametrize("strategy", strategy_names())


# --- generators ------------------------------------------------------------------------------


@st.composite
def nodes_st(draw: st.DrawFn) -> list[Node]:
    """1-6 nodes with 0-8 GPUs each, of random models."""
    nodes = []
    for i in range(draw(st.integers(1, 6))):
        gpus = draw(st.integers(0, 8))
        nodes.append(
            Node.empty(
                name=f"node-{i}",
                cpu_milli=draw(st.integers(0, 16)) * 4000,
                memory_mib=draw(st.integers(0, 16)) * 8192,
                gpu_count=gpus,
                gpu_model=draw(st.sampled_from(MODELS)) if gpus else None,
            )
        )
    return nodes


@st.composite
def pod_st(draw: st.DrawFn, name: str) -> Pod:
    """A CPU-only pod, a GPU share, or 1/2/4/8 whole GPUs, maybe restricted to some models."""
    kind = draw(st.sampled_from(["cpu", "share", "whole"]))
    cpu = draw(st.integers(0, 32)) * 1000
    memory = draw(st.integers(0, 16)) * 4096
    if kind == "cpu":
        return Pod(name=name, cpu_milli=cpu, memory_mib=memory)
    models = tuple(
        draw(st.lists(st.sampled_from((*MODELS, "H100")), max_size=2, unique=True))
        if draw(st.booleans())
        else ()
    )
    if kind == "share":
        milli = draw(st.sampled_from([100, 250, 300, 500, 700, 999]) | st.integers(1, 999))
        return Pod(
            name=name,
            cpu_milli=cpu,
            memory_mib=memory,
            num_gpu=1,
            gpu_milli=milli,
            gpu_models=models,
        )
    return Pod(
        name=name,
        cpu_milli=cpu,
        memory_mib=memory,
        num_gpu=draw(st.sampled_from([1, 2, 4, 8])),
        gpu_milli=MILLI_PER_GPU,
        gpu_models=models,
    )


@st.composite
def pods_st(draw: st.DrawFn, prefix: str = "pod", max_size: int = 25) -> list[Pod]:
    count = draw(st.integers(1, max_size))
    return [draw(pod_st(f"{prefix}-{i}")) for i in range(count)]


@st.composite
def timed_pods_st(draw: st.DrawFn) -> list[Pod]:
    """Pods that arrive at 0-50 s and leave 0-30 s after their creation."""
    pods = []
    for pod in draw(pods_st()):
        created = float(draw(st.integers(0, 50)))
        lifetime = float(draw(st.integers(0, 30)))
        pods.append(
            pod.model_copy(
                update={"creation_time_s": created, "deletion_time_s": created + lifetime}
            )
        )
    return pods


# --- an independent account of what the placements took --------------------------------------


def fits_somewhere(snapshot: ClusterSnapshot, pod: Pod) -> bool:
    """Brute force: does any node have the CPU, memory, model and GPUs the pod needs?"""
    allowed = {m.casefold() for m in pod.gpu_models}
    for row in range(snapshot.node_count):
        if snapshot.cpu_free_milli[row] < pod.cpu_milli:
            continue
        if snapshot.memory_free_mib[row] < pod.memory_mib:
            continue
        if pod.num_gpu == 0:
            return True
        model = snapshot.node_gpu_model[row]
        if allowed and (model < 0 or snapshot.gpu_models[model].casefold() not in allowed):
            continue
        count = int(snapshot.gpu_count[row])
        fitting = sum(snapshot.gpu_free_milli[row, g] >= pod.gpu_milli for g in range(count))
        if fitting >= pod.num_gpu:
            return True
    return False


@dataclass
class Ledger:
    """What the placements took, node by node, counted apart from the snapshot."""

    snapshot: ClusterSnapshot
    cpu: np.ndarray = field(init=False)
    memory: np.ndarray = field(init=False)
    gpu: np.ndarray = field(init=False)
    kinds: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.cpu = np.zeros_like(self.snapshot.cpu_free_milli)
        self.memory = np.zeros_like(self.snapshot.memory_free_mib)
        self.gpu = np.zeros_like(self.snapshot.gpu_free_milli)
        self.kinds = np.zeros_like(self.snapshot.gpu_pod_kinds)

    def record(self, decision: Decision, pods: dict[str, Pod], sign: int = 1) -> None:
        snapshot = self.snapshot
        for placement in decision.placements:
            pod = pods[placement.pod]
            row = snapshot.node_index(placement.node)
            gpus = placement.gpu_indices
            assert len(gpus) == pod.num_gpu == len(set(gpus)), placement
            assert all(0 <= g < snapshot.gpu_count[row] for g in gpus), placement
            assert placement.gpu_milli == pod.gpu_milli
            if pod.num_gpu and pod.gpu_models:
                model = snapshot.gpu_models[snapshot.node_gpu_model[row]]
                assert model.casefold() in {m.casefold() for m in pod.gpu_models}, placement
            self.cpu[row] += sign * pod.cpu_milli
            self.memory[row] += sign * pod.memory_mib
            for g in gpus:
                self.gpu[row, g] += sign * pod.gpu_milli
            if pod.num_gpu:
                self.kinds[row, gpu_pod_kind(pod)] += sign

    def check(self) -> None:
        """The snapshot is within capacity and its free amounts are capacity minus the ledger."""
        snapshot = self.snapshot
        assert (snapshot.cpu_free_milli >= 0).all()
        assert (snapshot.memory_free_mib >= 0).all()
        assert (snapshot.gpu_free_milli >= 0).all()
        assert (snapshot.cpu_free_milli <= snapshot.cpu_capacity_milli).all()
        assert (snapshot.memory_free_mib <= snapshot.memory_capacity_mib).all()
        gpu_capacity = np.where(snapshot.gpu_present, MILLI_PER_GPU, 0)
        assert (snapshot.gpu_free_milli <= gpu_capacity).all()
        np.testing.assert_array_equal(
            snapshot.cpu_capacity_milli - snapshot.cpu_free_milli, self.cpu
        )
        np.testing.assert_array_equal(
            snapshot.memory_capacity_mib - snapshot.memory_free_mib, self.memory
        )
        np.testing.assert_array_equal(gpu_capacity - snapshot.gpu_free_milli, self.gpu)
        np.testing.assert_array_equal(snapshot.gpu_pod_kinds, self.kinds)


def new_scheduler(strategy: str, snapshot: ClusterSnapshot, rng: np.random.Generator) -> Scheduler:
    return Scheduler.with_random_ranks(make_strategy(strategy), snapshot.node_count, rng)


# --- (a) no over-allocation ------------------------------------------------------------------


@every_strategy
@FAST
@given(nodes=nodes_st(), pods=pods_st(), seed=SEEDS)
def test_placements_never_over_allocate_and_account_exactly(
    strategy: str, nodes: list[Node], pods: list[Pod], seed: int
) -> None:
    snapshot = ClusterSnapshot.from_nodes(nodes)
    rng = np.random.default_rng(seed)
    scheduler = new_scheduler(strategy, snapshot, rng)
    ledger = Ledger(snapshot)
    by_name = {pod.name: pod for pod in pods}
    for pod in pods:
        could_fit = fits_somewhere(snapshot, pod)
        decision = scheduler.schedule_pod(snapshot, pod, rng)
        assert decision.subject == pod.name
        assert decision.placed == could_fit, decision.reason
        assert len(decision.placements) == int(decision.placed)
        ledger.record(decision, by_name)
        ledger.check()


# --- (b) gangs are all or nothing ------------------------------------------------------------


@every_strategy
@FAST
@given(
    nodes=nodes_st(),
    residents=pods_st(prefix="resident", max_size=10),
    members=pods_st(prefix="member", max_size=5),
    seed=SEEDS,
)
def test_full_gang_is_placed_whole_or_not_at_all(
    strategy: str, nodes: list[Node], residents: list[Pod], members: list[Pod], seed: int
) -> None:
    snapshot = ClusterSnapshot.from_nodes(nodes)
    rng = np.random.default_rng(seed)
    scheduler = new_scheduler(strategy, snapshot, rng)
    ledger = Ledger(snapshot)
    by_name = {pod.name: pod for pod in [*residents, *members]}
    for pod in residents:
        ledger.record(scheduler.schedule_pod(snapshot, pod, rng), by_name)
    before = state_of(snapshot)
    group = PodGroup(name="gang", pods=tuple(members), min_member=len(members))
    decision = scheduler.schedule_group(snapshot, group, rng)
    assert decision.subject == "gang"
    if decision.placed:
        assert [p.pod for p in decision.placements] == [pod.name for pod in members]
        ledger.record(decision, by_name)
    else:
        assert decision.placements == ()
        assert_state_equal(snapshot, before)
    ledger.check()


@every_strategy
@FAST
@given(
    nodes=nodes_st(),
    members=pods_st(prefix="member", max_size=6),
    data=st.data(),
    seed=SEEDS,
)
def test_gang_places_what_one_by_one_would_when_min_member_fit(
    strategy: str, nodes: list[Node], members: list[Pod], data: st.DataObject, seed: int
) -> None:
    """A gang decides like placing its pods one by one, then keeps them iff >= min_member."""
    min_member = data.draw(st.integers(1, len(members)))
    snapshot = ClusterSnapshot.from_nodes(nodes)
    ranks = np.random.default_rng(seed).permutation(snapshot.node_count)
    before = state_of(snapshot)

    one_by_one = snapshot.copy()
    single = Scheduler(make_strategy(strategy), ranks)
    rng = np.random.default_rng(seed + 1)
    singles = [single.schedule_pod(one_by_one, pod, rng) for pod in members]
    fitted = [d.placements[0] for d in singles if d.placed]

    gang = Scheduler(make_strategy(strategy), ranks)
    group = PodGroup(name="gang", pods=tuple(members), min_member=min_member)
    decision = gang.schedule_group(snapshot, group, np.random.default_rng(seed + 1))
    assert decision.placed == (len(fitted) >= min_member)
    if decision.placed:
        assert decision.placements == tuple(fitted)
        assert_state_equal(snapshot, state_of(one_by_one))
    else:
        assert decision.placements == ()
        assert_state_equal(snapshot, before)
    ledger = Ledger(snapshot)
    ledger.record(decision, {pod.name: pod for pod in members})
    ledger.check()


# --- (c) determinism -------------------------------------------------------------------------


def run_pods(strategy: str, nodes: list[Node], pods: list[Pod], seed: int) -> list[Decision]:
    snapshot = ClusterSnapshot.from_nodes(nodes)
    rng = np.random.default_rng(seed)
    scheduler = new_scheduler(strategy, snapshot, rng)
    return [scheduler.schedule_pod(snapshot, pod, rng) for pod in pods]


@every_strategy
@FAST
@given(nodes=nodes_st(), pods=pods_st(), seed=SEEDS)
def test_same_seed_gives_same_decisions(
    strategy: str, nodes: list[Node], pods: list[Pod], seed: int
) -> None:
    assert run_pods(strategy, nodes, pods, seed) == run_pods(strategy, nodes, pods, seed)


# --- (d) the simulator gives everything back -------------------------------------------------


@every_strategy
@FAST
@given(
    nodes=nodes_st(),
    pods=timed_pods_st(),
    retry=st.booleans(),
    seed=SEEDS,
)
def test_simulator_returns_every_resource_when_all_pods_depart(
    strategy: str, nodes: list[Node], pods: list[Pod], retry: bool, seed: int
) -> None:
    snapshot = ClusterSnapshot.from_nodes(nodes)
    rng = np.random.default_rng(seed)
    ledger = Ledger(snapshot)
    by_name = {pod.name: pod for pod in pods}
    times: list[float] = []
    running: dict[str, Placement] = {}

    def observe(current: ClusterSnapshot, event: SimEvent) -> None:
        assert current is snapshot
        times.append(event.time_s)
        if event.kind == EventKind.DEPARTURE:
            ledger.record(
                Decision(
                    subject=event.pod.name,
                    placed=True,
                    placements=(running.pop(event.pod.name),),
                    reason="departure",
                ),
                by_name,
                sign=-1,
            )
        elif event.decision is not None and event.decision.placed:
            running[event.pod.name] = event.decision.placements[0]
            ledger.record(event.decision, by_name)
        ledger.check()

    simulator = Simulator(
        snapshot,
        new_scheduler(strategy, snapshot, rng),
        rng,
        retry_pending=retry,
        observers=[observe],
    )
    decisions = simulator.run(pods, with_departures=True)
    assert times == sorted(times), "events are processed in time order"
    placed = Counter(d.subject for d in decisions if d.placed)
    assert all(count == 1 for count in placed.values()), "a pod is placed at most once"
    if not retry:
        assert [d.subject for d in decisions] == [
            p.name for p in sorted(pods, key=lambda p: p.creation_time_s)
        ]
    assert running == {}
    assert_empty(snapshot)
