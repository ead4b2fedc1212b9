"""Where the public traces shipped with voltpack live, and the published anchors beside them."""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

from voltpack.model.cluster import Node
from voltpack.model.data_files import DATA_DIR_ENV, data_dir_candidates, find_data_dir
from voltpack.model.errors import VoltpackError
from voltpack.sim.traces.alibaba_spot import INVENTORY_FILE, load_spot_nodes
from voltpack.sim.traces.openb import load_nodes

OPENB_NODES = "openb_node_list_gpu_node.csv"
OPENB_DEFAULT_PODS = "openb_pod_list_default.csv"
INVENTORIES = {
    "openb": "openb's 2023 cluster: 1,213 nodes, 6,212 GPUs (T4, P100, V100, A10, G2, G3)",
    "alibaba-spot-2026": "Alibaba's 2026 spot-GPU cluster: 4,278 nodes, 10,412 GPUs (A10, "
    "A100-SXM4-80GB, H800, A800-SXM4-80GB, GPU-series-1/2)",
}
"""Cluster inventories the emulator can serve, by name (`voltpack emulator --inventory`)."""
DEFAULT_INVENTORY = "openb"

FGD_PAPER_POLICY = {
    "random": "01-Random",
    "dot-product": "02-DotProd",
    "gpu-clustering": "03-GpuClustering",
    "gpu-packing": "04-GpuPacking",
    "best-fit": "05-BestFit",
    "fgd": "06-FGD",
}
"""voltpack strategy name -> the policy's name in the FGD paper's result files."""


def data_dir() -> Path:
    """The `data/` folder: `$VOLTPACK_DATA_DIR`, or the one beside the source tree."""
    found = find_data_dir(Path("openb") / OPENB_NODES)
    if found is None:
        looked = ", ".join(map(str, data_dir_candidates()))
        raise VoltpackError(
            f"cannot find voltpack's data folder (looked in {looked}); "
            f"set {DATA_DIR_ENV} to the folder that holds openb/{OPENB_NODES}"
        )
    return found


def openb_dir() -> Path:
    """The folder of the openb trace files."""
    return data_dir() / "openb"


def inventory_nodes(name: str) -> list[Node]:
    """The nodes of a shipped inventory (`INVENTORIES`), empty."""
    if name == "openb":
        return load_nodes(openb_dir() / OPENB_NODES)
    if name == "alibaba-spot-2026":
        return load_spot_nodes(data_dir() / "alibaba-spot-2026" / INVENTORY_FILE)
    raise VoltpackError(f"inventory: {name!r} is not one of {', '.join(sorted(INVENTORIES))}")


def fgd_paper_allocation_pct(
    workload: str, strategy: str, demand_pct: int = 130, results_dir: Path | None = None
) -> float | None:
    """The FGD paper's mean allocation ratio (%) over its seeds at `demand_pct` arrived demand.

    `workload` is a pod-list stem such as `openb_pod_list_default`; None when the paper has no
    such run.
    """
    paper_policy = FGD_PAPER_POLICY.get(strategy)
    if paper_policy is None:
        return None
    folder = results_dir or openb_dir() / "fgd-expected-results"
    path = folder / "analysis_allo_discrete.csv"
    if not path.is_file():
        return None
    with path.open(newline="", encoding="utf-8") as handle:
        values = [
            float(row[str(demand_pct)])
            for row in csv.DictReader(handle)
            if row["workload"] == workload
            and row["sc_policy"] == paper_policy
            and row.get(str(demand_pct))
        ]
    return statistics.fmean(values) if values else None
