"""The NIC-bandwidth packing experiment: the DLRM trace loader, node shapes, the policies, the
figures, the shipped dataset's acceptance figures and the benchmark script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from voltpack.model.data_files import find_data_dir
from voltpack.model.errors import TraceFormatError
from voltpack.model.host_layout import HostLayout, HostNic
from voltpack.sim.nic_packing import (
    TRACE_COLUMNS,
    DlrmInstance,
    NodeShape,
    demand_at,
    load_dlrm_trace,
    load_node_shapes,
    pack_role,
    peak_time,
    run_nic_packing,
)

ROOT = Path(__file__).resolve().parents[2]
DATASET = Path("alibaba-dlrm-2025")
HEADER = (
    "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,"
    "rdma_limit,memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,"
    "creation_time,scheduled_time,deletion_time"
)


def row(
    name: str,
    role: str = "HN",
    app: str = "app_0",
    cpu: str = "8",
    gpu: str = "1",
    rdma: str = "25",
    memory: str = "40.0",
    limit: str = "-1",
    created: str = "",
    deleted: str = "",
) -> str:
    """One CSV line in the trace's format."""
    return (
        f"{name},{role},{app},{cpu},{cpu},{gpu},{gpu},{rdma},{rdma},{memory},{memory},"
        f"100.0,100.0,{limit},{created},{created},{deleted}"
    )


def write_trace(path: Path, *rows: str) -> Path:
    """A trace file with the header and `rows`."""
    path.write_text("\n".join([HEADER, *rows]) + "\n", encoding="utf-8")
    return path


def hn_shape(nics: int = 2, max_nodes: int | None = None) -> NodeShape:
    """An 8-GPU node with `nics` RoCE NICs, NIC i on the switch of GPUs 4i, 4i+1."""
    layout = HostLayout(
        gpu_count=8,
        numa_of_gpu=(0, 0, 0, 0, 1, 1, 1, 1),
        nics=tuple(
            HostNic(
                name=f"mlx5_{i}",
                nic_class="roce",
                line_rate_gbit_s=200,
                numa_node=i % 2,
                pcie_gpus=(4 * i % 8, 4 * i % 8 + 1),
            )
            for i in range(nics)
        ),
    )
    return NodeShape(
        name="hn",
        role="HN",
        cpu_cores=128,
        memory_gib=1024,
        gpu_model="GPU",
        layout=layout,
        max_nodes=max_nodes,
    )


def instance(
    name: str, share: int, *, gpus: int = 1, cpu: int = 8, app: str = "a", limit: int | None = None
) -> DlrmInstance:
    """An HN instance alive throughout."""
    return DlrmInstance(
        name=name,
        role="HN",
        app=app,
        cpu_milli=cpu * 1000,
        memory_mib=40 * 1024,
        num_gpu=gpus,
        rdma_percent=share,
        max_per_node=limit,
        creation_time_s=None,
        deletion_time_s=None,
    )


# --- trace ----------------------------------------------------------------------------------


def test_loader_reads_requests_and_times(tmp_path: Path) -> None:
    path = write_trace(
        tmp_path / "t.csv",
        row("i0", limit="8"),
        row("i1", role="CN", cpu="64", gpu="0", rdma="100", memory="320.0", created="5.0"),
        row("i2", created="1.5", deleted="nan"),
    )
    first, second, third = load_dlrm_trace(path)
    assert (first.role, first.cpu_milli, first.memory_mib, first.num_gpu) == ("HN", 8000, 40960, 1)
    assert (first.rdma_percent, first.max_per_node, first.creation_time_s) == (25, 8, None)
    assert (second.role, second.num_gpu, second.rdma_percent, second.max_per_node) == (
        "CN",
        0,
        100,
        None,
    )
    assert (third.creation_time_s, third.deletion_time_s) == (1.5, None)
    pod = second.pod()
    assert (pod.cpu_milli, pod.num_gpu, pod.gpu_milli, pod.rdma_percent) == (64000, 0, 0, 100)
    assert first.pod(rdma_percent=0).rdma_percent == 0


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (row("i", role="XN"), "field role='XN' must be CN or HN"),
        (row("i", rdma="150"), "field rdma_request='150' must be an integer in 0..100"),
        (row("i", cpu="many"), "field cpu_request='many' is not a number"),
        (row("i", gpu="0.5"), "field gpu_request='0.5' must be an integer"),
        (row("i", limit="0"), "field max_instance_per_node=0 allows no instance"),
        (row("i", created="9", deleted="3"), "field deletion_time=3.0 is before creation_time"),
        (row("i", created="soon"), "field creation_time='soon' is not a time"),
        (row("", app="a"), "field instance_sn is empty"),
        (row("i", app=""), "field app_name is empty"),
    ],
)
def test_loader_errors_name_file_line_and_field(tmp_path: Path, line: str, words: str) -> None:
    path = write_trace(tmp_path / "bad.csv", row("ok"), line)
    with pytest.raises(TraceFormatError) as caught:
        load_dlrm_trace(path)
    assert f"{path}:3: " in str(caught.value)
    assert words in str(caught.value)


def test_loader_names_missing_columns_and_repeated_instances(tmp_path: Path) -> None:
    path = tmp_path / "short.csv"
    path.write_text("instance_sn,role\ni,HN\n", encoding="utf-8")
    with pytest.raises(TraceFormatError, match="header lacks column"):
        load_dlrm_trace(path)
    again = write_trace(tmp_path / "twice.csv", row("i"), row("i"))
    with pytest.raises(TraceFormatError, match=r"twice\.csv:3: field instance_sn='i' repeats"):
        load_dlrm_trace(again)
    assert set(TRACE_COLUMNS) <= set(HEADER.split(","))


def test_peak_time_and_demand_order(tmp_path: Path) -> None:
    path = write_trace(
        tmp_path / "t.csv",
        row("old-gone", deleted="10"),  # alive in [start, 10)
        row("late", created="20"),
        row("old"),
        row("mid", created="5", deleted="30"),
    )
    instances = load_dlrm_trace(path)
    # alive: t=0: old-gone, old (2); t=5: +mid (3); t=10: -old-gone (2); t=20: +late (3)
    assert peak_time(instances) == 5.0
    assert [i.name for i in demand_at(instances, 5.0)] == ["old-gone", "old", "mid"]
    assert [i.name for i in demand_at(instances, 25.0)] == ["old", "mid", "late"]
    assert [i.name for i in demand_at(instances, 10.0)] == ["old", "mid"]


# --- node shapes ----------------------------------------------------------------------------


def test_shipped_node_shapes_load() -> None:
    folder = find_data_dir(DATASET / "node_shapes.yaml")
    assert folder is not None
    shapes = {s.role: s for s in load_node_shapes(folder / DATASET / "node_shapes.yaml")}
    hn, cn = shapes["HN"], shapes["CN"]
    assert hn.layout.gpu_count == 8
    assert sum(nic.is_rdma for nic in hn.layout.nics) == 2
    assert cn.layout.gpu_count == 0 and sum(nic.is_rdma for nic in cn.layout.nics) == 2
    assert hn.source and cn.source


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("version: 2\nshapes: []\n", "field version"),
        (
            "version: 1\nshapes:\n  - {name: x, role: HN, cpu_cores: 8, memory_gib: 8,"
            " gpu_model: G, layout: {gpu_count: 2, nics: [{name: n, nic_class: roce,"
            " line_rate_gbit_s: 100, pcie_gpus: [5]}]}}\n",
            "field shapes.0.layout",
        ),
        (
            "version: 1\nshapes:\n  - {name: x, role: XN, cpu_cores: 8, memory_gib: 8,"
            " layout: {gpu_count: 0}}\n",
            "field shapes.0.role",
        ),
        ("version: 1\nshapes: [\n", "not valid YAML"),
    ],
)
def test_bad_node_shapes_name_the_field(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "shapes.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TraceFormatError, match=words) as caught:
        load_node_shapes(path)
    assert str(path) in str(caught.value)


# --- packing --------------------------------------------------------------------------------


def test_joint_packing_never_oversubscribes_and_strands_gpus_when_nics_are_full() -> None:
    demand = [instance(f"i{k}", 50) for k in range(8)]
    joint = pack_role("HN", demand, [hn_shape()], "joint")
    # Two NICs of 100% hold four 50% instances per node: two nodes, four GPUs stranded each.
    assert (joint.placed, joint.nodes_used, joint.oversubscribed_nics) == (8, 2, 0)
    assert (joint.gpus_free_on_used_nodes, joint.stranded_gpus) == (8, 8)
    assert joint.max_nic_load_pct == 100


def test_nic_ignorant_packing_oversubscribes() -> None:
    demand = [instance(f"i{k}", 50) for k in range(8)]
    blind = pack_role("HN", demand, [hn_shape()], "nic-ignorant")
    assert (blind.nodes_used, blind.stranded_gpus) == (1, 0)
    # 400% on two NICs of 100%: GPUs 0-3 fill NIC 0 then NIC 1 while they have room; GPUs 4-7
    # find no room anywhere and use the nearest NIC, NIC 1 (same switch or NUMA node).
    assert (blind.oversubscribed_nics, blind.nic_excess_pct_points) == (1, 200)
    assert (blind.max_nic_load_pct, blind.instances_on_oversubscribed_nics) == (300, 6)


def test_node_nic_count_gives_each_instance_a_whole_nic() -> None:
    demand = [instance(f"i{k}", 25) for k in range(8)]
    count = pack_role("HN", demand, [hn_shape()], "node-nic-count")
    assert (count.nodes_used, count.oversubscribed_nics, count.stranded_gpus) == (4, 0, 24)
    joint = pack_role("HN", demand, [hn_shape()], "joint")
    assert (joint.nodes_used, joint.stranded_gpus) == (1, 0)


def test_node_rdma_pool_can_oversubscribe_one_nic() -> None:
    # 60 + 60 + 60 + 20 = 200 fits the node's pool, but no NIC holds two 60% instances.
    demand = [instance(f"i{k}", s) for k, s in enumerate([60, 60, 60, 20])]
    pool = pack_role("HN", demand, [hn_shape()], "node-rdma-pool")
    assert pool.nodes_used == 1 and pool.oversubscribed_nics == 1
    joint = pack_role("HN", demand, [hn_shape()], "joint")
    assert joint.nodes_used == 2 and joint.oversubscribed_nics == 0


def test_max_instance_per_node_is_obeyed() -> None:
    demand = [instance(f"i{k}", 10, limit=2) for k in range(6)]
    figures = pack_role("HN", demand, [hn_shape()], "joint")
    assert figures.nodes_used == 3


def test_stranded_cpu_cores_count_what_no_shape_can_use() -> None:
    # One 120-core instance leaves 8 cores and 7 GPUs; the demand's only shape needs 120 cores.
    figures = pack_role("HN", [instance("big", 10, cpu=120)], [hn_shape()], "joint")
    assert (figures.stranded_gpus, figures.stranded_cpu_cores) == (7, 8.0)


def test_unplaceable_instances_are_counted_with_a_reason() -> None:
    demand = [instance("a", 25), instance("b", 25)]
    figures = pack_role("HN", demand, [hn_shape(nics=0, max_nodes=1)], "joint")
    assert figures.placed == 0
    assert "didn't have an RDMA NIC with 25%" in figures.unplaced_examples[0]


def test_a_role_without_a_shape_is_an_error() -> None:
    with pytest.raises(TraceFormatError, match="no shape with role CN"):
        pack_role("CN", [instance("a", 1)], [], "joint")


def test_shipped_trace_meets_the_acceptance_figures() -> None:
    folder = find_data_dir(DATASET / "disaggregated_DLRM_trace.csv")
    assert folder is not None
    instances = load_dlrm_trace(folder / DATASET / "disaggregated_DLRM_trace.csv")
    assert len(instances) == 23_871
    shapes = load_node_shapes(folder / DATASET / "node_shapes.yaml")
    joint = run_nic_packing(instances, shapes, "joint")
    count = run_nic_packing(instances, shapes, "node-nic-count", time_s=joint.time_s)
    assert joint.total("instances") == joint.total("placed") == count.total("placed")
    assert joint.total("oversubscribed_nics") == 0
    assert joint.total("stranded_gpus") <= 0.8 * count.total("stranded_gpus")


# --- the benchmark script -------------------------------------------------------------------


def test_benchmark_runs_on_any_file_of_the_format(tmp_path: Path) -> None:
    trace = write_trace(
        tmp_path / "t.csv",
        *(row(f"h{k}", rdma="50") for k in range(6)),
        *(row(f"c{k}", role="CN", cpu="64", gpu="0", rdma="100", memory="300") for k in range(3)),
    )
    folder = find_data_dir(DATASET / "node_shapes.yaml")
    assert folder is not None
    out = tmp_path / "out"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "nic_packing.py"),
            "--trace",
            str(trace),
            "--nodes",
            str(folder / DATASET / "node_shapes.yaml"),
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    figures = json.loads((out / "nic_packing.json").read_text())
    rows = {r["policy"]: r for r in figures["rows"]}
    assert rows["joint"]["oversubscribed_nics"] == 0
    assert rows["nic-ignorant"]["oversubscribed_nics"] > 0
    assert "| joint |" in (out / "nic_packing.md").read_text()
