"""The cluster topology: domains from labels, shared levels, crossing factors, file loaders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voltpack.model.errors import InvalidRequestError, TraceFormatError
from voltpack.model.host_layout import HostLayout, HostNic, NicDistance
from voltpack.model.resources.gpunode import Nic
from voltpack.model.resources.gpunode import Topology as GpuNodeTopology
from voltpack.model.resources.topology import TopologyLevel, TopologySpec
from voltpack.model.topology import ClusterTopology, host_layout_from_gpunode
from voltpack.sim.traces.topology_files import (
    load_csv_topology,
    read_topology_csv,
    read_topology_spec,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "alibaba-lingjun-2023"

SPEC = TopologySpec(
    levels=[
        TopologyLevel(node_label="spine", oversubscription=1.0),
        TopologyLevel(node_label="leaf", oversubscription=2.0),
    ]
)

#      s1              s2
#    l1    l2          l1      <- "l1" under s2 is another leaf than l1 under s1
#   a  b    c          d   e (no leaf label)
LABELS = {
    "a": {"spine": "s1", "leaf": "l1"},
    "b": {"spine": "s1", "leaf": "l1"},
    "c": {"spine": "s1", "leaf": "l2"},
    "d": {"spine": "s2", "leaf": "l1"},
    "e": {"spine": "s2"},
}


def small() -> ClusterTopology:
    return ClusterTopology.from_labels(SPEC, list(LABELS), LABELS)


def test_domains_are_paths_so_equal_leaf_names_under_other_spines_stay_apart() -> None:
    topo = small()
    assert topo.domain_names[1][:3] == ("s1/l1", "s1/l2", "s2/l1")
    assert topo.domain[1, topo.node_index("a")] != topo.domain[1, topo.node_index("d")]
    assert topo.unlabelled_nodes == (4,)
    # every leaf's parent is its spine
    assert [topo.domain_names[0][p] for p in topo.parent[1][:3]] == ["s1", "s1", "s2"]


def test_common_level_and_crossing_factor() -> None:
    topo = small()
    pairs_a = np.array([0, 0, 0, 0, 3])
    pairs_b = np.array([0, 1, 2, 3, 4])
    common = topo.common_level(pairs_a, pairs_b)
    # same node, same leaf, same spine only, nothing shared, same spine (e has no leaf)
    assert common.tolist() == [2, 1, 0, -1, 0]
    assert topo.crossing_factor(common).tolist() == [1.0, 1.0, 2.0, 2.0, 2.0]


def test_level_lookup_names_the_known_levels() -> None:
    topo = small()
    assert topo.level_index("leaf") == 1
    with pytest.raises(InvalidRequestError, match="its levels are: spine, leaf"):
        topo.level_index("rack")


def test_aligned_to_reorders_rows() -> None:
    topo = small()
    again = topo.aligned_to(["e", "d", "c", "b", "a"])
    assert again.domain[:, 4].tolist() == topo.domain[:, 0].tolist()
    assert again.unlabelled_nodes == (0,)
    with pytest.raises(InvalidRequestError, match="does not know node 'zz'"):
        topo.aligned_to(["a", "zz"])


def test_host_layout_from_gpunode_status_and_nic_distance() -> None:
    status = GpuNodeTopology(
        nvlink_domains=[[0, 1, 2, 3], [4, 5, 6, 7]],
        numa_nodes=[[0, 1, 2, 3], [4, 5, 6, 7]],
        nics=[
            Nic(name="mlx5_0", nic_class="infiniband", bandwidth_gbps=400, numa_node=0, gpus=[0]),
            Nic(name="eth0", nic_class="ethernet", bandwidth_gbps=None, gpus=[]),
        ],
    )
    layout = host_layout_from_gpunode(status, 8)
    assert [nic.name for nic in layout.nics] == ["mlx5_0"]  # no line rate: left out
    nic = layout.nics[0]
    assert layout.nic_distance(0, nic) is NicDistance.SAME_PCIE_SWITCH
    assert layout.nic_distance(1, nic) is NicDistance.SAME_NUMA
    assert layout.nic_distance(5, nic) is NicDistance.SAME_HOST
    assert layout.nvlink_domain_of() == (0, 0, 0, 0, 1, 1, 1, 1)


def test_host_layout_refuses_gpus_it_does_not_have() -> None:
    with pytest.raises(ValueError, match="names GPUs \\[9\\]"):
        HostLayout(
            gpu_count=8,
            nics=(HostNic(name="n", nic_class="roce", line_rate_gbit_s=100, pcie_gpus=(9,)),),
        )


def test_lingjun_topology_loads_with_its_spec() -> None:
    spec = read_topology_spec(DATA / "topology.yaml")
    topo = load_csv_topology(DATA / "topo.csv", spec)
    assert topo.node_count == 847
    assert [topo.domain_count(level) for level in range(3)] == [1, 3, 119]
    assert topo.hosts[0].gpu_count == 8 and len(topo.hosts[0].nics) == 4


def test_topology_csv_errors_name_line_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "topo.csv"
    bad.write_text("ip,DSW,ASW\nh1,G1,S1\nh2,G1\n")
    with pytest.raises(TraceFormatError, match=":3: expected 3 fields"):
        read_topology_csv(bad)
    bad.write_text("ip,DSW,ASW\nh1,G1,\n")
    with pytest.raises(TraceFormatError, match=":2: field ASW is empty"):
        read_topology_csv(bad)
    bad.write_text("ip,DSW,ASW\nh1,G1,S1\n")
    spec = TopologySpec(levels=[TopologyLevel(node_label="PSW", oversubscription=1.0)])
    with pytest.raises(TraceFormatError, match="nodeLabel 'PSW' is not a column"):
        load_csv_topology(bad, spec)


def test_topology_yaml_errors_name_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "t.yaml"
    bad.write_text("levels:\n  - nodeLabel: leaf\n    oversubscription: 0.5\n")
    with pytest.raises(TraceFormatError, match=r"spec\.levels\.0\.oversubscription"):
        read_topology_spec(bad)
    bad.write_text("apiVersion: v1\nkind: Node\n")
    with pytest.raises(TraceFormatError, match="kind Topology"):
        read_topology_spec(bad)
