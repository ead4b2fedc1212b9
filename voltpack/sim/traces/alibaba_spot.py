"""Loader for the node inventory of Alibaba's 2026 spot-GPU trace (`node_info_df.csv`).

Columns: `gpu_model,gpu_capacity_num,cpu_num,node_name` (GPUs per node, vCPUs per node). The
dataset gives no memory: each node gets `MEMORY_MIB_PER_VCPU` per vCPU, a stated assumption
(8 GiB per vCPU is a DGX A100's 2 TiB for its 256 hardware threads). GPU models keep the
dataset's names (`A10`, `A100-SXM4-80GB`, `H800`, `A800-SXM4-80GB`, and the undisclosed
`GPU-series-1`, `GPU-series-2`). Nodes are named `spot-node-NNNN` after `node_name`. A malformed
row raises TraceFormatError naming the file, the line and the field.
"""

from __future__ import annotations

from pathlib import Path

from voltpack.model.cluster import Node
from voltpack.model.csv_rows import csv_rows
from voltpack.model.errors import TraceFormatError
from voltpack.sim.traces.openb import count_field

INVENTORY_FILE = "node_info_df.csv"
COLUMNS = ("gpu_model", "gpu_capacity_num", "cpu_num", "node_name")
MEMORY_MIB_PER_VCPU = 8 * 1024
"""Assumed: the dataset has no memory column (see the module docstring)."""


def node_name(number: str) -> str:
    """The Kubernetes node name of the dataset's `node_name` (a number)."""
    return f"spot-node-{int(number):04d}" if number.isdigit() else f"spot-node-{number}"


def load_spot_nodes(path: Path) -> list[Node]:
    """Read the spot trace's node inventory into empty nodes."""
    nodes: list[Node] = []
    seen: set[str] = set()
    for line, row in csv_rows(path, COLUMNS):
        number = row["node_name"].strip()
        if not number:
            raise TraceFormatError(f"{path}:{line}: field node_name is empty")
        name = node_name(number)
        if name in seen:
            raise TraceFormatError(f"{path}:{line}: field node_name={number!r} repeats a node")
        seen.add(name)
        gpus = count_field(path, line, row, "gpu_capacity_num")
        model = row["gpu_model"].strip() or None
        if gpus and model is None:
            raise TraceFormatError(f"{path}:{line}: field gpu_model is empty but GPUs={gpus}")
        vcpus = count_field(path, line, row, "cpu_num")
        nodes.append(
            Node.empty(
                name=name,
                cpu_milli=vcpus * 1000,
                memory_mib=vcpus * MEMORY_MIB_PER_VCPU,
                gpu_count=gpus,
                gpu_model=model,
            )
        )
    return nodes
