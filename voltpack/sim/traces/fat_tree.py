"""A generated three-tier fat tree, as a topology CSV and its Topology YAML (issue 32).

The second topology the topology benchmark reports, of another shape than Lingjun's: hosts under
leaf switches, leaves grouped into pods under spine switches, pods joined by one core layer. The
files are those `load_csv_topology` reads (`voltpack/sim/traces/topology_files.py`): a CSV with a
host column then one column per switch level, top first (`host,core,spine,leaf`), and a
`Topology` whose levels state each one's oversubscription and whose `defaultHost` gives the
inside of a host. Everything is drawn from the shape, nothing at random: the same shape gives the
same bytes.

Defaults, and why (`data/generated-fat-tree/README.md` repeats them):

- 4 pods x 16 leaves x 16 hosts = 1,024 hosts of 8 GPUs (8,192 GPUs): about the 1,000 nodes the
  issue's decision-speed goal names, with the 16-host leaves of its example.
- oversubscription 1:1 at the leaves, 4:1 at the spines' uplinks to the core (the issue's
  example). AI back-end fabrics are built non-blocking at the leaf (NVIDIA's DGX SuperPOD
  reference architecture is a full fat tree), and operators who save on optics and switches do
  so at the upper tier, where traffic between pods is rarer. The core has no uplinks: its value
  (1.0) would only matter for hosts sharing no level, which one core cannot give.
- hosts like an H100 HGX / DGX H100: 8 GPUs in one NVSwitch domain, two NUMA nodes of 4 GPUs,
  8 x 400 Gbit/s InfiniBand NICs, one per GPU on its PCIe switch (DGX H100 has eight
  single-port ConnectX-7 at 400 Gbit/s for the compute fabric; Alibaba HPN's hosts also give
  each GPU its own 400 Gbit/s NIC).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

import yaml

from voltpack.model.errors import InvalidRequestError
from voltpack.model.resources import API_GROUP, API_VERSION

NicClass = Literal["infiniband", "roce", "ethernet"]
LEVEL_COLUMNS = ("core", "spine", "leaf")
"""The CSV's switch-level columns, top first (they are also the Topology's node labels)."""
HOST_COLUMN = "host"
DEFAULT_FOLDER = "data/generated-fat-tree"
REGENERATE_COMMAND = "python benchmarks/make_fat_tree.py"


@dataclass(frozen=True)
class FatTreeShape:
    """The fabric and the hosts of a generated fat tree; see the module's docstring."""

    pods: int = 4
    leaves_per_pod: int = 16
    hosts_per_leaf: int = 16
    core_oversubscription: float = 1.0
    spine_oversubscription: float = 4.0
    """Downlink over uplink capacity of a pod's spines (to the core)."""
    leaf_oversubscription: float = 1.0
    """Downlink over uplink capacity of a leaf (to its pod's spines)."""
    gpus_per_host: int = 8
    numa_nodes_per_host: int = 2
    nics_per_host: int = 8
    nic_rate_gbit_s: float = 400.0
    nic_class: NicClass = "infiniband"
    name: str = "generated-fat-tree"

    def __post_init__(self) -> None:
        for counted in ("pods", "leaves_per_pod", "hosts_per_leaf", "gpus_per_host"):
            if getattr(self, counted) < 1:
                raise InvalidRequestError(f"fat tree: {counted} must be at least 1")
        for ratio in ("core_oversubscription", "spine_oversubscription", "leaf_oversubscription"):
            if getattr(self, ratio) < 1.0:
                raise InvalidRequestError(
                    f"fat tree: {ratio} must be at least 1.0 (downlink over uplink capacity; "
                    "1.0 = non-blocking)"
                )
        if self.numa_nodes_per_host < 1 or self.gpus_per_host % self.numa_nodes_per_host:
            raise InvalidRequestError(
                f"fat tree: numa_nodes_per_host ({self.numa_nodes_per_host}) must divide "
                f"gpus_per_host ({self.gpus_per_host})"
            )
        if self.nics_per_host < 1 or self.gpus_per_host % self.nics_per_host:
            raise InvalidRequestError(
                f"fat tree: nics_per_host ({self.nics_per_host}) must divide gpus_per_host "
                f"({self.gpus_per_host}): each NIC serves the GPUs on its PCIe switch"
            )
        if self.nic_rate_gbit_s <= 0:
            raise InvalidRequestError("fat tree: nic_rate_gbit_s must be positive")
        if self.nic_class not in ("infiniband", "roce", "ethernet"):
            raise InvalidRequestError(
                f"fat tree: nic_class {self.nic_class!r} is not infiniband, roce or ethernet"
            )

    @property
    def leaves(self) -> int:
        """Leaves in the whole tree."""
        return self.pods * self.leaves_per_pod

    @property
    def hosts(self) -> int:
        """Hosts in the whole tree."""
        return self.leaves * self.hosts_per_leaf


def _width(count: int) -> int:
    return len(str(max(count - 1, 0)))


def fat_tree_rows(shape: FatTreeShape) -> list[tuple[str, str, str, str]]:
    """`(host, core, spine, leaf)` per host, pod by pod, leaf by leaf."""
    pod_w, leaf_w, host_w = _width(shape.pods), _width(shape.leaves), _width(shape.hosts)
    rows = []
    for host in range(shape.hosts):
        leaf = host // shape.hosts_per_leaf
        pod = leaf // shape.leaves_per_pod
        rows.append(
            (f"ft-host-{host:0{host_w}d}", "c0", f"p{pod:0{pod_w}d}", f"l{leaf:0{leaf_w}d}")
        )
    return rows


def fat_tree_csv(shape: FatTreeShape) -> str:
    """The topology CSV: `host,core,spine,leaf`, one line per host."""
    lines = [",".join((HOST_COLUMN, *LEVEL_COLUMNS))]
    lines += [",".join(row) for row in fat_tree_rows(shape)]
    return "\n".join(lines) + "\n"


def fat_tree_topology(shape: FatTreeShape) -> dict[str, Any]:
    """The `Topology` object (as a mapping) that states the levels and the host layout."""
    gpus = list(range(shape.gpus_per_host))
    per_numa = shape.gpus_per_host // shape.numa_nodes_per_host
    per_nic = shape.gpus_per_host // shape.nics_per_host
    nics = []
    for index in range(shape.nics_per_host):
        nic_gpus = gpus[index * per_nic : (index + 1) * per_nic]
        nics.append(
            {
                "name": f"mlx5_{index}",
                "nicClass": shape.nic_class,
                "lineRateGbitS": shape.nic_rate_gbit_s,
                "numaNode": nic_gpus[0] // per_numa,
                "gpus": nic_gpus,
            }
        )
    ratios = (
        shape.core_oversubscription,
        shape.spine_oversubscription,
        shape.leaf_oversubscription,
    )
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "Topology",
        "metadata": {"name": shape.name},
        "spec": {
            "levels": [
                {"nodeLabel": label, "name": label, "oversubscription": float(ratio)}
                for label, ratio in zip(LEVEL_COLUMNS, ratios, strict=True)
            ],
            "nvlinkCliqueLabel": None,
            "defaultHost": {
                "gpus": shape.gpus_per_host,
                "nvlinkDomains": [gpus],
                "numaNodes": [
                    gpus[i * per_numa : (i + 1) * per_numa]
                    for i in range(shape.numa_nodes_per_host)
                ],
                "nics": nics,
            },
        },
    }


def _assumptions(shape: FatTreeShape) -> list[str]:
    gpus, hosts = shape.gpus_per_host, shape.hosts
    per_nic = gpus // shape.nics_per_host
    nic = f"{shape.nics_per_host} x {shape.nic_rate_gbit_s:g} Gbit/s {shape.nic_class} NICs"
    return [
        f"{shape.pods} pods x {shape.leaves_per_pod} leaves x {shape.hosts_per_leaf} hosts = "
        f"{hosts:,} hosts of {gpus} GPUs ({hosts * gpus:,} GPUs); one core layer joins the pods",
        "oversubscription (downlink over uplink capacity): "
        f"leaf {shape.leaf_oversubscription:g}:1, "
        f"spine (pod uplinks to the core) {shape.spine_oversubscription:g}:1, "
        f"core {shape.core_oversubscription:g}:1 "
        "(the core has no uplinks; with one core its value is never used)",
        f"hosts: {gpus} GPUs in one NVSwitch domain, {shape.numa_nodes_per_host} NUMA nodes, "
        f"{nic}, each serving {per_nic} GPU(s) on its PCIe switch",
        "no multi-node NVLink (nvlinkCliqueLabel: null)",
    ]


def fat_tree_yaml(shape: FatTreeShape) -> str:
    """The Topology YAML, with a header saying it is generated and what it assumes."""
    header = [
        f"# Generated by `{REGENERATE_COMMAND}` (voltpack/sim/traces/fat_tree.py); do not edit,",
        "# change the shape and regenerate. A three-tier fat tree; topo.csv beside this file lists",
        "# each host's core, spine (pod) and leaf switch. ASSUMPTIONS (see README.md):",
        *(f"# - {line}" for line in _assumptions(shape)),
    ]
    out = io.StringIO()
    yaml.safe_dump(fat_tree_topology(shape), out, sort_keys=False, default_flow_style=None)
    return "\n".join(header) + "\n" + out.getvalue()


def fat_tree_readme(shape: FatTreeShape, folder: str = DEFAULT_FOLDER) -> str:
    """README of the generated `folder`: what it is, how it is made, every assumption."""
    crossing = [
        ("the same leaf", 1.0),
        ("the same pod, another leaf", shape.leaf_oversubscription),
        ("another pod", shape.leaf_oversubscription * shape.spine_oversubscription),
    ]
    defaults = FatTreeShape()
    changed = [
        f"--{f.name.replace('_', '-')} {getattr(shape, f.name)}"
        for f in fields(FatTreeShape)
        if getattr(shape, f.name) != getattr(defaults, f.name)
    ]
    if folder != DEFAULT_FOLDER:
        changed.append(f"--out {folder}")
    lines = [
        "# Generated three-tier fat tree",
        "",
        "GENERATED, not measured: a synthetic cluster for the topology benchmark's second",
        'topology (issue 32, "How it is measured"), of another shape than Lingjun\'s. Made by',
        "",
        "```",
        REGENERATE_COMMAND + (" " + " ".join(changed) if changed else ""),
        "```",
        "",
        "(`voltpack/sim/traces/fat_tree.py`, `generate_fat_tree`; the same shape gives the same",
        "bytes). Files: `topo.csv` (a host column, then its `core`, `spine` and `leaf` switch, top",
        "first: the format of `data/alibaba-lingjun-2023/topo.csv`) and `topology.yaml` (the",
        "levels' oversubscription and the host layout). Use them as",
        "",
        "```",
        f"python benchmarks/topology_training.py --topology {folder}/topo.csv --gpu H100-SXM",
        "```",
        "",
        "(`topology.yaml` beside the CSV is found by itself; `--topology-spec` names another).",
        "",
        "## Assumptions",
        "",
        *(f"- {line}" for line in _assumptions(shape)),
        "",
        "Why the default values:",
        "",
        "- About 1,000 hosts, the scale of the issue's decision-speed goal, with the 16-host",
        "  leaves and 4:1 spine oversubscription of the issue's example of a second topology.",
        "- Non-blocking leaves: AI back-end fabrics are built as full fat trees at the leaf",
        "  (NVIDIA's DGX SuperPOD reference architecture); operators who save on optics and",
        "  switches oversubscribe the upper tier, where traffic between pods is rarest. A leaf",
        "  here stands for the set of switches one group of hosts hangs off (in a rail-optimised",
        "  fabric, one switch per rail).",
        "- Hosts like an H100 HGX / DGX H100: eight single-port 400 Gbit/s ConnectX-7 NICs for the",
        "  compute fabric, one per GPU, GPUs 0-3 on one CPU socket and 4-7 on the other. Alibaba",
        "  HPN's hosts (SIGCOMM'24) also give each of 8 GPUs its own 400 Gbit/s (2 x 200) NIC.",
        "  Lingjun's assumed hosts have 4 x 200 Gbit/s RoCE, so the two topologies differ in the",
        "  host too, not only in the tree.",
        "",
        "## What traffic sees",
        "",
        "The bandwidth divisor (`ClusterTopology.crossing_factor`) for traffic between two hosts:",
        "",
        "| hosts in | divisor |",
        "|---|---|",
        *(f"| {where} | {factor:g} |" for where, factor in crossing),
        "",
        f"Domains: 1 core, {shape.pods} pods (spine level), {shape.leaves} leaves.",
        "",
    ]
    return "\n".join(lines)


def generate_fat_tree(
    folder: Path, shape: FatTreeShape | None = None, shown_folder: str | None = None
) -> list[Path]:
    """Write `topo.csv`, `topology.yaml` and `README.md` of `shape` into `folder`; their paths.

    `shown_folder` is how the README names the folder in its commands (default: `folder`).
    """
    chosen = shape or FatTreeShape()
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in (
        ("topo.csv", fat_tree_csv(chosen)),
        ("topology.yaml", fat_tree_yaml(chosen)),
        ("README.md", fat_tree_readme(chosen, shown_folder or folder.as_posix())),
    ):
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
