"""Domain types (Pod, PodGroup, Node, Gpu) and the ClusterSnapshot arrays built from them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from tests.unit.builders import (
    assert_empty,
    assert_state_equal,
    cpu_node,
    cpu_pod,
    gpu_node,
    share_pod,
    snapshot_of,
    state_of,
    whole_pod,
)
from voltpack.model import Gpu, InvalidRequestError, Node, Pod, PodGroup
from voltpack.model.snapshot import NO_GPU_MODEL, ClusterSnapshot

POD_NAME = "pod-under-test"


# --- Pod -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"gpu_milli": 500}, ["gpu_milli=500", "num_gpu"]),
        ({"num_gpu": 1}, ["num_gpu=1", "gpu_milli"]),
        ({"num_gpu": 2, "gpu_milli": 500}, ["gpu_milli=500", "num_gpu=2"]),
        ({"cpu_milli": -1}, ["cpu_milli", "greater than or equal to 0"]),
    ],
    ids=[
        "gpu-milli-without-num-gpu",
        "num-gpu-without-gpu-milli",
        "share-with-several-gpus",
        "negative-cpu",
    ],
)
def test_invalid_pod_is_rejected_naming_the_pod(fields: dict[str, Any], words: list[str]) -> None:
    values: dict[str, Any] = {"name": POD_NAME, "cpu_milli": 1000, "memory_mib": 1024}
    values.update(fields)
    with pytest.raises(ValidationError) as error:
        Pod(**values)
    message = str(error.value)
    for word in words:
        assert word in message
    assert POD_NAME in message, f"the error does not say which pod is wrong: {message}"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"memory_mib": -5}, "memory_mib"),
        ({"num_gpu": -1}, "num_gpu"),
        ({"num_gpu": 1, "gpu_milli": 1001}, "gpu_milli"),
        ({"num_gpu": 1, "gpu_milli": -1}, "gpu_milli"),
    ],
    ids=["negative-memory", "negative-num-gpu", "more-than-one-gpu", "negative-gpu-milli"],
)
def test_out_of_range_pod_field_is_rejected_naming_the_field(
    fields: dict[str, Any], field: str
) -> None:
    values: dict[str, Any] = {"name": POD_NAME, "cpu_milli": 1000, "memory_mib": 1024}
    values.update(fields)
    with pytest.raises(ValidationError) as error:
        Pod(**values)
    assert [e["loc"] for e in error.value.errors()] == [(field,)]


def test_pod_rejects_unknown_fields_and_empty_name() -> None:
    with pytest.raises(ValidationError, match="colour"):
        Pod(name="p", cpu_milli=1, memory_mib=1, colour="red")  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="name"):
        Pod(name="", cpu_milli=1, memory_mib=1)


@pytest.mark.parametrize(
    ("num_gpu", "gpu_milli", "sharing", "request_milli"),
    [
        (0, 0, False, 0),
        (1, 1, True, 1),
        (1, 500, True, 500),
        (1, 999, True, 999),
        (1, 1000, False, 1000),
        (2, 1000, False, 2000),
        (8, 1000, False, 8000),
    ],
)
def test_gpu_sharing_and_request(
    num_gpu: int, gpu_milli: int, sharing: bool, request_milli: int
) -> None:
    pod = Pod(name="p", cpu_milli=1, memory_mib=1, num_gpu=num_gpu, gpu_milli=gpu_milli)
    assert pod.is_gpu_sharing is sharing
    assert pod.gpu_request_milli == request_milli


def test_pod_is_immutable() -> None:
    pod = cpu_pod()
    with pytest.raises(ValidationError):
        pod.cpu_milli = 5  # type: ignore[misc]


# --- PodGroup --------------------------------------------------------------------------------


def test_pod_group_min_member_above_pod_count_is_rejected() -> None:
    with pytest.raises(ValidationError) as error:
        PodGroup(name="gang-x", pods=(cpu_pod("a"), cpu_pod("b")), min_member=3)
    message = str(error.value)
    assert "gang-x" in message
    assert "min_member=3" in message
    assert "2 pods" in message


@pytest.mark.parametrize(
    "fields",
    [{"pods": (), "min_member": 1}, {"pods": (cpu_pod("a"),), "min_member": 0}],
    ids=["no-pods", "min-member-zero"],
)
def test_pod_group_needs_pods_and_positive_min_member(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        PodGroup(name="g", **fields)


def test_valid_pod_group() -> None:
    group = PodGroup(name="g", pods=(cpu_pod("a"), cpu_pod("b")), min_member=2)
    assert [p.name for p in group.pods] == ["a", "b"]


# --- Node and Gpu ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"gpus": (Gpu(index=0),)}, ["node-x", "no gpu_model"]),
        ({"gpu_model": "T4", "gpus": (Gpu(index=1),)}, ["node-x", "GPU indices"]),
        (
            {"gpu_model": "T4", "gpus": (Gpu(index=0), Gpu(index=0))},
            ["node-x", "GPU indices"],
        ),
        ({"cpu_milli_free": 1001}, ["node-x", "cpu_milli_free"]),
        ({"memory_mib_free": 2049}, ["node-x", "memory_mib_free"]),
        ({"cpu_milli": -1}, ["cpu_milli"]),
        ({"name": ""}, ["name"]),
    ],
    ids=[
        "gpus-without-model",
        "indices-not-from-zero",
        "repeated-index",
        "more-cpu-free-than-capacity",
        "more-memory-free-than-capacity",
        "negative-cpu",
        "empty-name",
    ],
)
def test_invalid_node_is_rejected(fields: dict[str, Any], words: list[str]) -> None:
    values: dict[str, Any] = {"name": "node-x", "cpu_milli": 1000, "memory_mib": 2048}
    values.update(fields)
    with pytest.raises(ValidationError) as error:
        Node(**values)
    for word in words:
        assert word in str(error.value)


@pytest.mark.parametrize("milli_free", [-1, 1001])
def test_gpu_free_share_must_be_within_one_gpu(milli_free: int) -> None:
    with pytest.raises(ValidationError, match="milli_free"):
        Gpu(index=0, milli_free=milli_free)


def test_empty_node_has_idle_gpus_and_drops_model_without_gpus() -> None:
    node = Node.empty(name="n", cpu_milli=4000, memory_mib=8192, gpu_count=3, gpu_model="T4")
    assert node.gpu_count == 3
    assert [g.index for g in node.gpus] == [0, 1, 2]
    assert all(g.milli_free == 1000 for g in node.gpus)
    assert node.cpu_milli_free is None
    bare = Node.empty(name="m", cpu_milli=4000, memory_mib=8192, gpu_count=0, gpu_model="T4")
    assert bare.gpu_model is None
    assert bare.gpu_count == 0


# --- ClusterSnapshot -------------------------------------------------------------------------


def mixed_nodes() -> list[Node]:
    return [
        gpu_node("a", 2, "V100M16", cpu=64_000, memory=262_144, gpu_free=[1000, 250]),
        cpu_node("b", cpu=32_000, memory=65_536),
        gpu_node("c", 4, "T4", cpu=16_000, memory=65_536, cpu_free=4000, memory_free=1024),
        gpu_node("d", 1, "A10", gpu_free=[0]),
    ]


def test_snapshot_arrays_from_nodes() -> None:
    snapshot = ClusterSnapshot.from_nodes(mixed_nodes())
    assert snapshot.node_names == ("a", "b", "c", "d")
    assert snapshot.gpu_models == ("A10", "T4", "V100M16")
    assert snapshot.node_gpu_model.tolist() == [2, NO_GPU_MODEL, 1, 0]
    assert snapshot.gpu_count.tolist() == [2, 0, 4, 1]
    assert snapshot.gpu_present.tolist() == [
        [True, True, False, False],
        [False, False, False, False],
        [True, True, True, True],
        [True, False, False, False],
    ]
    assert snapshot.gpu_free_milli.tolist() == [
        [1000, 250, 0, 0],
        [0, 0, 0, 0],
        [1000, 1000, 1000, 1000],
        [0, 0, 0, 0],
    ]
    assert snapshot.cpu_free_milli.tolist() == [64_000, 32_000, 4000, 32_000]
    assert snapshot.memory_free_mib.tolist() == [262_144, 65_536, 1024, 131_072]
    assert snapshot.gpu_pod_kinds.shape == (4, 5)
    assert snapshot.node_count == 4
    assert snapshot.total_gpus == 7
    assert snapshot.max_node_cpu_milli == 64_000
    assert snapshot.max_node_gpu_milli == 4000
    assert snapshot.allocated_gpu_milli() == 750 + 1000
    assert snapshot.node_index("c") == 2


def test_snapshot_round_trips_through_nodes() -> None:
    nodes = mixed_nodes()
    # to_nodes states every free amount explicitly; from_nodes reads None as "all free".
    explicit = [
        node.model_copy(
            update={
                "cpu_milli_free": node.cpu_milli
                if node.cpu_milli_free is None
                else node.cpu_milli_free,
                "memory_mib_free": node.memory_mib
                if node.memory_mib_free is None
                else node.memory_mib_free,
            }
        )
        for node in nodes
    ]
    back = ClusterSnapshot.from_nodes(nodes).to_nodes()
    assert back == explicit
    assert ClusterSnapshot.from_nodes(back).to_nodes() == explicit


def test_round_trip_keeps_allocations() -> None:
    snapshot = snapshot_of(*mixed_nodes())
    snapshot.allocate(2, share_pod("s", 300, cpu=500, memory=100), [3])
    again = ClusterSnapshot.from_nodes(snapshot.to_nodes())
    for name in ("cpu_free_milli", "memory_free_mib", "gpu_free_milli", "gpu_present"):
        np.testing.assert_array_equal(getattr(again, name), getattr(snapshot, name))
    assert again.to_nodes()[2].gpus[3].milli_free == 700


def test_empty_cluster_snapshot() -> None:
    snapshot = ClusterSnapshot.from_nodes([])
    assert snapshot.node_count == 0
    assert snapshot.total_gpus == 0
    assert snapshot.max_node_cpu_milli == 0
    assert snapshot.to_nodes() == []


def test_duplicate_node_names_are_rejected() -> None:
    # Decisions and the simulator address nodes by name (node_index), so two nodes with one
    # name make the simulator release a pod's resources on the wrong node.
    with pytest.raises((InvalidRequestError, ValueError), match="dup"):
        ClusterSnapshot.from_nodes([gpu_node("dup", 1), gpu_node("dup", 1)])


def test_allocate_takes_resources_and_counts_the_pod_kind() -> None:
    snapshot = snapshot_of(gpu_node("n", 4, cpu=8000, memory=4096))
    snapshot.allocate(0, share_pod("s", 300, cpu=1000, memory=512), [2])
    snapshot.allocate(0, whole_pod("w", 2, cpu=2000, memory=1024), [0, 1])
    snapshot.allocate(0, cpu_pod("c", cpu=500, memory=256), [])
    assert snapshot.cpu_free_milli.tolist() == [8000 - 3500]
    assert snapshot.memory_free_mib.tolist() == [4096 - 1792]
    assert snapshot.gpu_free_milli.tolist() == [[0, 0, 700, 1000]]
    assert snapshot.gpu_pod_kinds.tolist() == [[1, 0, 1, 0, 0]]
    assert snapshot.allocated_gpu_milli() == 2300


@pytest.mark.parametrize(
    ("pod", "gpus", "words"),
    [
        (cpu_pod("big-cpu", cpu=8001), [], ["8000 CPU milli free", "big-cpu", "8001"]),
        (cpu_pod("big-mem", memory=4097), [], ["4096 MiB free", "big-mem", "4097"]),
        (share_pod("too-much", 800), [1], ["GPU 1", "800", "too-much"]),
        (whole_pod("taken", 1), [1], ["GPU 1", "1000"]),
        (whole_pod("short", 2), [0], ["2 distinct GPUs"]),
        (whole_pod("repeat", 2), [0, 0], ["2 distinct GPUs"]),
        (share_pod("absent", 100), [2], ["GPU 2"]),
        (share_pod("negative", 100), [-1], ["GPU -1"]),
        (cpu_pod("gpus-for-cpu-pod"), [0], ["0 distinct GPUs"]),
    ],
    ids=[
        "cpu",
        "memory",
        "gpu-share",
        "whole-gpu-partly-used",
        "too-few-gpus",
        "repeated-gpu",
        "gpu-beyond-node",
        "negative-gpu-index",
        "gpus-for-cpu-pod",
    ],
)
def test_allocate_refuses_over_allocation_and_leaves_state_unchanged(
    pod: Pod, gpus: list[int], words: list[str]
) -> None:
    snapshot = snapshot_of(
        gpu_node("n", 2, cpu=8000, memory=4096, gpu_free=[1000, 500]), gpu_node("wide", 4)
    )
    before = state_of(snapshot)
    with pytest.raises(InvalidRequestError) as error:
        snapshot.allocate(0, pod, gpus)
    for word in words:
        assert word in str(error.value)
    assert_state_equal(snapshot, before)


def test_release_gives_back_exactly_what_allocate_took() -> None:
    snapshot = snapshot_of(gpu_node("n", 4), cpu_node("m"))
    pods = [
        (0, share_pod("s", 300), (1,)),
        (0, whole_pod("w", 2), (2, 3)),
        (1, cpu_pod("c"), ()),
        (0, share_pod("t", 700), (1,)),
    ]
    for node, pod, gpus in pods:
        snapshot.allocate(node, pod, gpus)
    assert snapshot.gpu_free_milli[0].tolist() == [1000, 0, 0, 0]
    for node, pod, gpus in reversed(pods):
        snapshot.release(node, pod, gpus)
    assert_empty(snapshot)


def test_release_of_more_than_allocated_is_refused_and_leaves_state_unchanged() -> None:
    snapshot = snapshot_of(gpu_node("n", 2))
    snapshot.allocate(0, share_pod("s", 300), [0])
    before = state_of(snapshot)
    with pytest.raises(InvalidRequestError, match="returns more than was allocated"):
        snapshot.release(0, whole_pod("never-placed", 1), [1])
    # Like allocate, a refused release must not change the snapshot.
    assert_state_equal(snapshot, before)


def test_copy_is_independent() -> None:
    snapshot = snapshot_of(gpu_node("n", 2))
    copy = snapshot.copy()
    copy.allocate(0, whole_pod("w", 1), [0])
    assert_empty(snapshot)
    assert copy.gpu_free_milli[0].tolist() == [0, 1000]
    assert copy.gpu_pod_kinds[0, 1] == 1
