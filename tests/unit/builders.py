"""Small hand-built clusters and pods for the unit tests (real voltpack types, no doubles)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from voltpack.model import MILLI_PER_GPU, Gpu, Node, Pod
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.policies.registry import make_strategy
from voltpack.scheduler.placement import Scheduler


def gpu_node(
    name: str,
    gpus: int = 4,
    model: str = "T4",
    *,
    cpu: int = 32_000,
    memory: int = 131_072,
    gpu_free: Sequence[int] | None = None,
    cpu_free: int | None = None,
    memory_free: int | None = None,
) -> Node:
    """A node with `gpus` GPUs of `model`; `gpu_free` gives each GPU's free milli (default all)."""
    free = list(gpu_free) if gpu_free is not None else [MILLI_PER_GPU] * gpus
    return Node(
        name=name,
        cpu_milli=cpu,
        memory_mib=memory,
        gpu_model=model if free else None,
        gpus=tuple(Gpu(index=i, milli_free=f) for i, f in enumerate(free)),
        cpu_milli_free=cpu_free,
        memory_mib_free=memory_free,
    )


def cpu_node(name: str, *, cpu: int = 32_000, memory: int = 131_072) -> Node:
    """A node without GPUs."""
    return Node.empty(name=name, cpu_milli=cpu, memory_mib=memory, gpu_count=0, gpu_model=None)


def cpu_pod(name: str = "cpu-pod", cpu: int = 1000, memory: int = 1024) -> Pod:
    """A pod that asks for no GPU."""
    return Pod(name=name, cpu_milli=cpu, memory_mib=memory)


def share_pod(
    name: str = "share-pod",
    milli: int = 500,
    *,
    cpu: int = 1000,
    memory: int = 1024,
    models: Sequence[str] = (),
) -> Pod:
    """A pod that asks for `milli` of one GPU."""
    return Pod(
        name=name,
        cpu_milli=cpu,
        memory_mib=memory,
        num_gpu=1,
        gpu_milli=milli,
        gpu_models=tuple(models),
    )


def whole_pod(
    name: str = "whole-pod",
    count: int = 1,
    *,
    cpu: int = 1000,
    memory: int = 1024,
    models: Sequence[str] = (),
) -> Pod:
    """A pod that asks for `count` whole GPUs."""
    return Pod(
        name=name,
        cpu_milli=cpu,
        memory_mib=memory,
        num_gpu=count,
        gpu_milli=MILLI_PER_GPU,
        gpu_models=tuple(models),
    )


def snapshot_of(*nodes: Node) -> ClusterSnapshot:
    """A snapshot of the given nodes, in that order."""
    return ClusterSnapshot.from_nodes(list(nodes))


def ranks_preferring(snapshot: ClusterSnapshot, *names: str) -> np.ndarray:
    """Tie-break ranks under which `names` win ties in that order, before every other node."""
    order = [snapshot.node_index(n) for n in names]
    order += [i for i in range(snapshot.node_count) if i not in order]
    ranks = np.empty(snapshot.node_count, dtype=np.int64)
    ranks[order] = np.arange(snapshot.node_count)
    return ranks


def scheduler_for(strategy: str, snapshot: ClusterSnapshot, *prefer: str) -> Scheduler:
    """A scheduler with the named strategy whose tie-break favours the `prefer` nodes."""
    return Scheduler(
        strategy=make_strategy(strategy), tie_break_rank=ranks_preferring(snapshot, *prefer)
    )


def occupy(snapshot: ClusterSnapshot, node: str, pod: Pod, gpus: Sequence[int] = ()) -> None:
    """Allocate `pod` on `node` directly (so the snapshot also records the pod's kind)."""
    snapshot.allocate(snapshot.node_index(node), pod, gpus)


STATE_FIELDS = ("cpu_free_milli", "memory_free_mib", "gpu_free_milli", "gpu_pod_kinds")


def state_of(snapshot: ClusterSnapshot) -> dict[str, np.ndarray]:
    """Copies of every array a scheduling decision can change."""
    return {name: getattr(snapshot, name).copy() for name in STATE_FIELDS}


def assert_state_equal(snapshot: ClusterSnapshot, expected: dict[str, np.ndarray]) -> None:
    """The snapshot's mutable arrays equal `expected` (as returned by `state_of`)."""
    for name in STATE_FIELDS:
        np.testing.assert_array_equal(getattr(snapshot, name), expected[name], err_msg=name)


def assert_empty(snapshot: ClusterSnapshot) -> None:
    """Nothing is allocated on the snapshot: every free amount equals its capacity."""
    np.testing.assert_array_equal(snapshot.cpu_free_milli, snapshot.cpu_capacity_milli)
    np.testing.assert_array_equal(snapshot.memory_free_mib, snapshot.memory_capacity_mib)
    np.testing.assert_array_equal(
        snapshot.gpu_free_milli, np.where(snapshot.gpu_present, MILLI_PER_GPU, 0)
    )
    assert not snapshot.gpu_pod_kinds.any()
