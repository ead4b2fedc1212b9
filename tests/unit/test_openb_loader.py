"""The openb CSV loader: the shipped files load, malformed files fail with file:line: field."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from voltpack.model import MILLI_PER_GPU, Node, Pod, TraceFormatError
from voltpack.sim.traces.openb import load_nodes, load_pods

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time"
)
GOOD_NODE = "node-a,64000,262144,2,T4"
GOOD_POD = "pod-a,8000,30517,1,500,,LS,Running,10,20,10"

POD_LISTS = {
    "openb_pod_list_default.csv": 8152,
    "openb_pod_list_cpu050.csv": 7439,
    "openb_pod_list_cpu250.csv": 9420,
    "openb_pod_list_gpushare40.csv": 8152,
    "openb_pod_list_gpushare80.csv": 8152,
    "openb_pod_list_gpuspec10.csv": 8152,
    "openb_pod_list_gpuspec33.csv": 8152,
    "openb_pod_list_multigpu20.csv": 8324,
    "openb_pod_list_multigpu50.csv": 9061,
}


def write(tmp_path: Path, lines: list[str], name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def trace_error(load: Callable[[Path], list[Node] | list[Pod]], path: Path, line: int) -> str:
    """Load `path`, expect a TraceFormatError at `line`, return the message after 'path:line:'."""
    with pytest.raises(TraceFormatError) as error:
        load(path)
    message = str(error.value)
    prefix = f"{path}:{line}:"
    assert message.startswith(prefix), f"expected the message to start with {prefix!r}: {message}"
    return message[len(prefix) :]


# --- the shipped files -----------------------------------------------------------------------


def test_openb_gpu_cluster_loads(openb_nodes: list[Node]) -> None:
    assert len(openb_nodes) == 1213
    assert sum(node.gpu_count for node in openb_nodes) == 6212
    assert len({node.name for node in openb_nodes}) == 1213
    first = openb_nodes[0]
    assert first.name == "openb-node-0000"
    assert (first.cpu_milli, first.memory_mib, first.gpu_count, first.gpu_model) == (
        64000,
        262144,
        2,
        "P100",
    )
    assert all(g.milli_free == MILLI_PER_GPU for node in openb_nodes for g in node.gpus)
    assert all(node.gpu_model for node in openb_nodes if node.gpu_count)


def test_openb_all_node_list_includes_cpu_only_nodes(openb_dir: Path) -> None:
    nodes = load_nodes(openb_dir / "openb_node_list_all_node.csv")
    assert len(nodes) == 1523
    cpu_only = [node for node in nodes if node.gpu_count == 0]
    assert len(cpu_only) == 1523 - 1213
    assert all(node.gpu_model is None for node in cpu_only)
    assert sum(node.gpu_count for node in nodes) == 6212


def test_openb_default_pods_load(openb_default_pods: list[Pod]) -> None:
    pods = openb_default_pods
    assert len(pods) == 8152
    first, second = pods[0], pods[1]
    assert (first.name, first.cpu_milli, first.memory_mib) == ("openb-pod-0000", 12000, 16384)
    assert (first.num_gpu, first.gpu_milli, first.qos) == (1, 1000, "LS")
    assert (first.creation_time_s, first.deletion_time_s) == (0.0, 12537496.0)
    assert (second.num_gpu, second.gpu_milli, second.is_gpu_sharing) == (1, 460, True)
    assert any(pod.num_gpu == 0 for pod in pods)
    assert all(pod.gpu_milli == 0 for pod in pods if pod.num_gpu == 0)
    assert any(pod.num_gpu == 8 for pod in pods)


@pytest.mark.parametrize(("name", "count"), list(POD_LISTS.items()))
def test_every_openb_pod_list_loads(openb_dir: Path, name: str, count: int) -> None:
    pods = load_pods(openb_dir / name)
    assert len(pods) == count
    assert len({pod.name for pod in pods}) == count


def test_five_column_pod_list_loads_with_defaults(openb_dir: Path) -> None:
    path = openb_dir / "openb_pod_list_multigpu20.csv"
    assert path.read_text(encoding="utf-8").splitlines()[0].count(",") == 4
    pods = load_pods(path)
    assert all(pod.qos == "BE" for pod in pods)
    assert all(pod.gpu_models == () for pod in pods)
    assert all(pod.creation_time_s == 0.0 and pod.deletion_time_s is None for pod in pods)
    assert sum(pod.num_gpu > 1 for pod in pods) > 0


def test_gpu_spec_lists_accepted_models(openb_dir: Path) -> None:
    pods = load_pods(openb_dir / "openb_pod_list_gpuspec33.csv")
    constrained = [pod for pod in pods if pod.gpu_models]
    assert constrained
    assert any(len(pod.gpu_models) > 1 for pod in constrained)
    assert all(model and "|" not in model for pod in constrained for model in pod.gpu_models)


def test_gpu_spec_is_split_on_bars_and_trimmed(tmp_path: Path) -> None:
    path = write(tmp_path, [POD_HEADER, "p,1,1,1,1000,V100M16| T4 |,BE,Running,1,,1"])
    [pod] = load_pods(path)
    assert pod.gpu_models == ("V100M16", "T4")
    assert pod.deletion_time_s is None


def test_cpu_only_pod_gets_no_gpu_share(tmp_path: Path) -> None:
    path = write(tmp_path, [POD_HEADER, "p,1,1,0,500,,BE,Running,1,2,1"])
    [pod] = load_pods(path)
    assert (pod.num_gpu, pod.gpu_milli) == (0, 0)


# --- malformed files -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("node-b,lots,262144,2,T4", "cpu_milli"),
        ("node-b,64000,1.5,2,T4", "memory_mib"),
        ("node-b,64000,262144,two,T4", "gpu"),
        ("node-b,64000,262144,,T4", "gpu"),
    ],
)
def test_non_integer_node_field(tmp_path: Path, row: str, field: str) -> None:
    path = write(tmp_path, [NODE_HEADER, GOOD_NODE, row])
    rest = trace_error(load_nodes, path, 3)
    assert f"field {field}=" in rest
    assert "not an integer" in rest


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("pod-b,abc,30517,1,500,,LS,Running,10,20,10", "cpu_milli"),
        ("pod-b,8000,30517,x,500,,LS,Running,10,20,10", "num_gpu"),
        ("pod-b,8000,30517,1,0.5,,LS,Running,10,20,10", "gpu_milli"),
    ],
)
def test_non_integer_pod_field(tmp_path: Path, row: str, field: str) -> None:
    path = write(tmp_path, [POD_HEADER, GOOD_POD, GOOD_POD.replace("pod-a", "pod-c"), row])
    rest = trace_error(load_pods, path, 4)
    assert f"field {field}=" in rest
    assert "not an integer" in rest


@pytest.mark.parametrize("field", ["creation_time", "deletion_time"])
def test_non_numeric_time_field(tmp_path: Path, field: str) -> None:
    row = "pod-b,8000,30517,1,500,,LS,Running,10,20,10"
    row = (
        row.replace(",10,20,", ",soon,20,")
        if field == "creation_time"
        else row.replace(",10,20,", ",10,later,")
    )
    path = write(tmp_path, [POD_HEADER, row])
    rest = trace_error(load_pods, path, 2)
    assert f"field {field}=" in rest
    assert "not a number" in rest


def test_negative_node_value(tmp_path: Path) -> None:
    path = write(tmp_path, [NODE_HEADER, GOOD_NODE, "node-b,64000,-1,2,T4"])
    rest = trace_error(load_nodes, path, 3)
    assert "field memory_mib=-1" in rest
    assert "negative" in rest


def test_negative_pod_value(tmp_path: Path) -> None:
    path = write(tmp_path, [POD_HEADER, "pod-b,-8000,30517,1,500,,LS,Running,10,20,10"])
    rest = trace_error(load_pods, path, 2)
    assert "field cpu_milli=-8000" in rest
    assert "negative" in rest


@pytest.mark.parametrize(
    ("load", "header", "missing"),
    [
        (load_nodes, "sn,cpu_milli,gpu,model", "memory_mib"),
        (load_nodes, "sn,cpu_milli,memory_mib,gpu", "model"),
        (load_pods, "name,memory_mib,num_gpu,gpu_milli", "cpu_milli"),
        (load_pods, "name,cpu_milli,memory_mib,gpus,gpu_milli", "num_gpu"),
    ],
    ids=["node-memory", "node-model", "pod-cpu", "pod-num-gpu-misspelt"],
)
def test_missing_required_column(
    tmp_path: Path, load: Callable[[Path], list[Node] | list[Pod]], header: str, missing: str
) -> None:
    path = write(tmp_path, [header, "x,1,1,1"])
    rest = trace_error(load, path, 1)
    assert "header lacks column" in rest
    assert missing in rest


def test_empty_file_lacks_every_column(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("", encoding="utf-8")
    rest = trace_error(load_nodes, path, 1)
    assert "sn, cpu_milli, memory_mib, gpu, model" in rest


def test_node_row_with_too_few_fields(tmp_path: Path) -> None:
    path = write(tmp_path, [NODE_HEADER, GOOD_NODE, "node-b,64000,262144"])
    rest = trace_error(load_nodes, path, 3)
    assert "fields" in rest
    # The loader promises to name the field: here the first one the row lacks.
    assert "gpu" in rest


def test_row_with_too_many_fields(tmp_path: Path) -> None:
    path = write(tmp_path, [NODE_HEADER, GOOD_NODE, GOOD_NODE.replace("node-a", "node-b") + ",9"])
    rest = trace_error(load_nodes, path, 3)
    assert "expected 5 fields" in rest


def test_pod_row_without_its_optional_fields_is_rejected(tmp_path: Path) -> None:
    # The header declares 11 columns; a row of 5 is as malformed as a row of 3.
    path = write(tmp_path, [POD_HEADER, GOOD_POD, "pod-b,8000,30517,1,500"])
    rest = trace_error(load_pods, path, 3)
    assert "expected 11 fields" in rest


def test_duplicate_node_name(tmp_path: Path) -> None:
    path = write(tmp_path, [NODE_HEADER, GOOD_NODE, "node-b,1,1,0,", GOOD_NODE])
    rest = trace_error(load_nodes, path, 4)
    assert "field sn='node-a'" in rest
    assert "repeats" in rest


def test_empty_node_name(tmp_path: Path) -> None:
    path = write(tmp_path, [NODE_HEADER, " ,1,1,0,"])
    rest = trace_error(load_nodes, path, 2)
    assert "field sn is empty" in rest


def test_gpus_without_model(tmp_path: Path) -> None:
    path = write(tmp_path, [NODE_HEADER, GOOD_NODE, "node-b,64000,262144,4,"])
    rest = trace_error(load_nodes, path, 3)
    assert "field model is empty" in rest
    assert "gpu=4" in rest


def test_share_of_several_gpus(tmp_path: Path) -> None:
    path = write(tmp_path, [POD_HEADER, GOOD_POD, "pod-b,8000,30517,2,500,,LS,Running,10,20,10"])
    rest = trace_error(load_pods, path, 3)
    assert "gpu_milli=500" in rest
    assert "num_gpu=2" in rest


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("pod-b,8000,30517,1,1500,,LS,Running,10,20,10", "gpu_milli"),
        ("pod-b,8000,30517,1,0,,LS,Running,10,20,10", "gpu_milli"),
        (",8000,30517,1,500,,LS,Running,10,20,10", "name"),
    ],
    ids=["share-above-one-gpu", "gpu-without-share", "empty-name"],
)
def test_invalid_pod_request(tmp_path: Path, row: str, field: str) -> None:
    path = write(tmp_path, [POD_HEADER, row])
    rest = trace_error(load_pods, path, 2)
    assert field in rest


def test_line_numbers_count_the_header(tmp_path: Path) -> None:
    rows = [GOOD_NODE.replace("node-a", f"node-{i}") for i in range(5)]
    path = write(tmp_path, [NODE_HEADER, *rows, "node-x,64000,bad,2,T4"])
    rest = trace_error(load_nodes, path, 7)
    assert "field memory_mib='bad'" in rest


@pytest.mark.parametrize("load", [load_nodes, load_pods], ids=["nodes", "pods"])
def test_nonexistent_file(tmp_path: Path, load: Callable[[Path], list[Node] | list[Pod]]) -> None:
    path = tmp_path / "missing.csv"
    with pytest.raises(TraceFormatError) as error:
        load(path)
    message = str(error.value)
    assert message.startswith(f"{path}:")
    assert "cannot open" in message


def test_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes((NODE_HEADER + "\nn\xf6de-a,64000,262144,2,T4\n").encode("latin-1"))
    with pytest.raises(TraceFormatError) as error:
        load_nodes(path)
    assert str(path) in str(error.value)
