"""The generated fat tree (issue 32's second topology) loads as the Lingjun CSV does, with the
domains and bandwidth divisors its shape states, the same bytes every time, and the committed
copy in data/generated-fat-tree/ is what the generator makes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from voltpack.model.errors import InvalidRequestError
from voltpack.model.topology import ClusterTopology
from voltpack.sim.traces.fat_tree import FatTreeShape, generate_fat_tree
from voltpack.sim.traces.topology_files import load_csv_topology, read_topology_spec

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "data" / "generated-fat-tree"


def _load(folder: Path) -> ClusterTopology:
    return load_csv_topology(folder / "topo.csv", read_topology_spec(folder / "topology.yaml"))


def _factor(topo: ClusterTopology, a: int, b: int) -> float:
    return float(topo.crossing_factor(topo.common_level(a, b))[0])


def test_the_default_tree_has_1024_eight_gpu_hosts_in_4_pods_of_16_leaves(tmp_path: Path) -> None:
    generate_fat_tree(tmp_path)
    topo = _load(tmp_path)
    assert topo.node_count == 1024
    assert [level.node_label for level in topo.levels] == ["core", "spine", "leaf"]
    assert [topo.domain_count(i) for i in range(3)] == [1, 4, 64]
    assert [level.oversubscription for level in topo.levels] == [1.0, 4.0, 1.0]
    assert not topo.unlabelled_nodes
    # every leaf holds 16 hosts, every pod 16 leaves
    assert np.bincount(topo.domain[2]).tolist() == [16] * 64
    assert np.bincount(topo.parent[2]).tolist() == [16] * 4
    host = topo.hosts[0]
    assert all(h == host for h in topo.hosts)
    assert host.gpu_count == 8 and len(host.nics) == 8
    assert {nic.line_rate_gbit_s for nic in host.nics} == {400.0}
    assert {nic.nic_class for nic in host.nics} == {"infiniband"}


def test_crossing_factors_are_1_within_a_pod_and_4_between_pods(tmp_path: Path) -> None:
    generate_fat_tree(tmp_path)
    topo = _load(tmp_path)
    same_leaf, other_leaf, other_pod = 1, 16, 256  # from host 0
    assert _factor(topo, 0, 0) == 1.0
    assert _factor(topo, 0, same_leaf) == 1.0
    assert _factor(topo, 0, other_leaf) == 1.0
    assert _factor(topo, 0, other_pod) == 4.0
    assert _factor(topo, 255, 256) == 4.0  # last host of pod 0, first of pod 1


def test_another_shape_gives_its_counts_and_products(tmp_path: Path) -> None:
    shape = FatTreeShape(
        pods=3,
        leaves_per_pod=2,
        hosts_per_leaf=5,
        leaf_oversubscription=2.0,
        spine_oversubscription=3.0,
        nics_per_host=4,
        nic_rate_gbit_s=200.0,
        nic_class="roce",
    )
    generate_fat_tree(tmp_path, shape)
    topo = _load(tmp_path)
    assert topo.node_count == 30
    assert [topo.domain_count(i) for i in range(3)] == [1, 3, 6]
    assert _factor(topo, 0, 4) == 1.0  # same leaf
    assert _factor(topo, 0, 5) == 2.0  # same pod, other leaf: the leaf's uplinks
    assert _factor(topo, 0, 10) == 6.0  # other pod: leaf and spine uplinks
    nics = topo.hosts[0].nics
    assert [nic.pcie_gpus for nic in nics] == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert [nic.numa_node for nic in nics] == [0, 0, 1, 1]
    assert "--pods 3" in (tmp_path / "README.md").read_text()


def test_the_same_shape_gives_the_same_bytes(tmp_path: Path) -> None:
    first = generate_fat_tree(tmp_path / "a", shown_folder="x")
    second = generate_fat_tree(tmp_path / "b", shown_folder="x")
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_the_committed_copy_is_what_the_generator_makes(tmp_path: Path) -> None:
    made = generate_fat_tree(tmp_path, shown_folder="data/generated-fat-tree")
    for path in made:
        assert (COMMITTED / path.name).read_bytes() == path.read_bytes(), (
            f"data/generated-fat-tree/{path.name} is stale: run python benchmarks/make_fat_tree.py"
        )


def test_the_committed_copy_loads_as_the_benchmark_loads_it() -> None:
    topo = _load(COMMITTED)
    assert topo.node_count == 1024 and [topo.domain_count(i) for i in range(3)] == [1, 4, 64]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"hosts_per_leaf": 0}, "hosts_per_leaf must be at least 1"),
        ({"spine_oversubscription": 0.5}, "spine_oversubscription must be at least 1.0"),
        ({"nics_per_host": 3}, "nics_per_host (3) must divide gpus_per_host (8)"),
        ({"numa_nodes_per_host": 3}, "numa_nodes_per_host (3) must divide gpus_per_host (8)"),
    ],
)
def test_an_impossible_shape_is_refused_naming_the_parameter(
    change: dict[str, float], named: str
) -> None:
    with pytest.raises(InvalidRequestError, match=named.replace("(", r"\(").replace(")", r"\)")):
        FatTreeShape(**change)  # type: ignore[arg-type]


def test_the_script_writes_the_folder_it_is_given(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "make_fat_tree.py"),
            "--pods",
            "2",
            "--leaves-per-pod",
            "2",
            "--hosts-per-leaf",
            "2",
            "--out",
            str(tmp_path / "ft"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert _load(tmp_path / "ft").node_count == 8
    refused = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "make_fat_tree.py"), "--nics-per-host", "3"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert refused.returncode != 0 and "nics_per_host (3) must divide" in refused.stderr
    assert "Traceback" not in refused.stderr
