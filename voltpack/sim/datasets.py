"""Where the public traces shipped with voltpack live, and the published anchors beside them."""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

from voltpack.model.data_files import DATA_DIR_ENV, data_dir_candidates, find_data_dir
from voltpack.model.errors import VoltpackError

OPENB_NODES = "openb_node_list_gpu_node.csv"
OPENB_DEFAULT_PODS = "openb_pod_list_default.csv"

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
