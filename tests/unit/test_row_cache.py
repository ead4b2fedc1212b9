"""Per-node values kept on a snapshot between decisions (`model/row_cache.py`, the FGD
gradient's cache): after any sequence of allocations, releases, copies and marked direct writes,
they equal the values computed afresh from the arrays."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.builders import cpu_pod, gpu_node, share_pod, snapshot_of, whole_pod
from voltpack.model import Pod
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.policies.cpu_stranding import free_gpu_milli
from voltpack.policies.fragmentation import TypicalPods
from voltpack.policies.fragmentation_gradient import FragmentationGradient
from voltpack.policies.strategy import pick_best_fit_gpus
from voltpack.scheduler.filter import filter_nodes, fitting_gpu_count

PODS = [
    share_pod("a", 810, cpu=3000),
    share_pod("b", 470, cpu=2000),
    share_pod("d", 320, cpu=1000),
    whole_pod("e", 1, cpu=8000),
    whole_pod("g", 2, cpu=16000),
    cpu_pod("h", cpu=12000),
]
TYPICAL = TypicalPods.from_pods(PODS, coverage=1.0)


def afresh_free_gpu_milli(snapshot: ClusterSnapshot) -> np.ndarray:
    return np.where(snapshot.gpu_present, snapshot.gpu_free_milli, 0).sum(axis=1)


def afresh_fitting(snapshot: ClusterSnapshot, milli: int) -> np.ndarray:
    return (snapshot.gpu_present & (snapshot.gpu_free_milli >= milli)).sum(axis=1)


def check_against_afresh(snapshot: ClusterSnapshot, kept: FragmentationGradient) -> None:
    every = np.arange(snapshot.node_count)
    assert np.array_equal(free_gpu_milli(snapshot, every), afresh_free_gpu_milli(snapshot))
    for milli in (320, 810, 1000):
        assert np.array_equal(fitting_gpu_count(snapshot, milli), afresh_fitting(snapshot, milli))
    for probe in PODS:
        feasible = np.flatnonzero(filter_nodes(snapshot, probe).feasible)
        fresh = FragmentationGradient(TYPICAL, snapshot.gpu_models)
        held = kept.gradient(snapshot, probe, feasible)
        new = fresh.gradient(snapshot, probe, feasible)
        assert np.array_equal(held.delta_weighted, new.delta_weighted)
        assert np.array_equal(held.best_gpu, new.best_gpu)


OPS = st.lists(
    st.tuples(st.sampled_from(["place", "release", "copy", "switch", "fault"]), st.integers(0, 99)),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(ops=OPS)
def test_kept_values_equal_values_computed_afresh(ops: list[tuple[str, int]]) -> None:
    snapshots = [snapshot_of(*(gpu_node(f"n{i}", 4, cpu=64_000) for i in range(5)))]
    current = 0
    placed: list[tuple[int, int, Pod, tuple[int, ...]]] = []  # (snapshot, node, pod, gpus)
    kept = FragmentationGradient(TYPICAL, snapshots[0].gpu_models)
    for op, pick in ops:
        snapshot = snapshots[current]
        if op == "place":
            pod = PODS[pick % len(PODS)]
            feasible = np.flatnonzero(filter_nodes(snapshot, pod).feasible)
            if feasible.size:
                node = int(feasible[pick % feasible.size])
                gpus = pick_best_fit_gpus(snapshot, node, pod)
                snapshot.allocate(node, pod, gpus)
                placed.append((current, node, pod, gpus))
        elif op == "release":
            mine = [p for p in placed if p[0] == current]
            if mine:
                entry = mine[pick % len(mine)]
                placed.remove(entry)
                snapshot.release(entry[1], entry[2], entry[3])
        elif op == "copy":
            snapshots.append(snapshot.copy())
            placed += [(len(snapshots) - 1, n, p, g) for s, n, p, g in placed if s == current]
            current = len(snapshots) - 1
        elif op == "switch":
            current = pick % len(snapshots)
        else:  # a GPU taken out by a direct write, as a fault or a DRA claim does it
            node, gpu = pick % snapshot.node_count, pick % 4
            snapshot.gpu_free_milli[node, gpu] = 0
            snapshot.mark_changed([node])
            placed = [p for p in placed if not (p[0] == current and p[1] == node)]
        check_against_afresh(snapshots[current], kept)


def test_a_copy_keeps_its_own_values() -> None:
    snapshot = snapshot_of(*(gpu_node(f"n{i}", 4) for i in range(3)))
    every = np.arange(3)
    before = free_gpu_milli(snapshot, every).copy()
    scratch = snapshot.copy()
    scratch.allocate(0, PODS[3], (0,))
    assert free_gpu_milli(scratch, every)[0] == before[0] - 1000
    assert np.array_equal(free_gpu_milli(snapshot, every), before)
    assert scratch.token != snapshot.token
