"""What bandwidth and latency a parallel group's collectives achieve over one kind of link.

A `LinkSpeed` is per GPU and per direction, and *effective*: what a NCCL collective or
send/receive achieves, not the line rate. The step-time model takes, for each parallel group
(tensor, pipeline, data), the slowest link the group crosses in a concrete placement.

Constants and where they come from ("estimate" marks an engineering judgement that no
published figure pins down; the sources bound it):

- `NVLINK_EFFICIENCY` 0.82: ASTRA-sim's validation on an HGX-H100 (astra-sim.github.io,
  "Validation on GPU Systems - NCCL over HGX-H100"): NCCL ring all-reduce over NVSwitch peaked
  at 741 GB/s of the 900 GB/s bidirectional NVLink per GPU, i.e. 0.82.
- `PCIE_EFFICIENCY` 0.80: estimate; PCIe x16 carries ~80 % of its raw rate as payload after
  TLP/DLLP framing at the 256 B payload size GPUs use.
- `CROSS_NUMA_FACTOR` 25 / 56: Azure's published NCCL all-reduce test as quoted in voltpack
  issue 19: 56 GB/s bus bandwidth with GPU and NIC aligned against 25 GB/s with the traffic
  crossing NUMA nodes. Used for a NIC on another NUMA node (`NicDistance.SAME_HOST`) and for
  GPU-to-GPU PCIe traffic across sockets (the same inter-socket hop).
- `SAME_NUMA_FACTOR` 0.70: estimate, between aligned (1.0) and cross-NUMA (0.45): a NIC on the
  GPU's NUMA node but behind another PCIe switch is past NCCL's default GPUDirect-RDMA level
  (`NCCL_NET_GDR_LEVEL=PXB`), so data is staged through host memory but stays on one socket
  (NVIDIA/nccl issue 465: "if we have to go through the CPU for NIC-GPU communication, we
  will use simple GPU->CPU and CPU->NIC communication").
- `NIC_CLASS_EFFICIENCY` (achievable share of the line rate for collectives):
  - infiniband 0.90: estimate bounded by measurements: RDMA writes reach 0.90-0.98 of line
    rate (ib_write_bw ~180 of 200 Gbit/s in NVIDIA/nccl-tests issues 62 and 112; 392 of
    400 Gbit/s in NVIDIA/nccl issue 2409); NCCL's protocol and chunking cost a few percent more.
  - roce 0.85: estimate: the same RDMA transport as InfiniBand over lossless Ethernet, whose
    congestion control (PFC/DCQCN) costs a few percent under all-reduce load. Holmes
    (Yang et al., ICPP'24, arXiv 2312.03549) measured the same job slower on RoCE than on
    InfiniBand (160 vs 197 TFLOPS per GPU at 4 nodes; 145 vs 148 at 8 nodes), but its
    clusters also differed in NICs per node (4 InfiniBand HCAs vs 2 RoCE HCAs in the
    `config.json` of github.com/CodexDive/Holmes), so the class gap is smaller than that.
  - ethernet 0.60: estimate: NCCL's socket transport (TCP, no RDMA) stages through host memory
    and the kernel stack; NVIDIA/nccl issue 465 measured 4 GB/s over sockets (IPoIB) against
    6 GB/s over verbs on the same 100 Gbit/s link, i.e. 0.67 of RDMA; 0.9 x 0.67 = 0.60.
    Holmes' pure-Ethernet runs were 0.62 (4 nodes) and 0.56 (8 nodes) of InfiniBand's TFLOPS.
- Latencies per message (one ring step): NVLink 3 us, PCIe 5 us, RDMA 8 us, TCP 25 us:
  estimates of NCCL's small-message step latency; they matter only for small messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from voltpack.model.errors import VoltpackError
from voltpack.model.gpu_sku import GpuSku
from voltpack.model.host_layout import NicDistance

BITS_PER_BYTE: Final = 8.0
NVLINK_EFFICIENCY: Final = 0.82
PCIE_EFFICIENCY: Final = 0.80
CROSS_NUMA_FACTOR: Final = 25.0 / 56.0
SAME_NUMA_FACTOR: Final = 0.70
NIC_CLASS_EFFICIENCY: Final[dict[str, float]] = {
    "infiniband": 0.90,
    "roce": 0.85,
    "ethernet": 0.60,
}
NIC_CLASS_LATENCY_S: Final[dict[str, float]] = {
    "infiniband": 8e-6,
    "roce": 8e-6,
    "ethernet": 25e-6,
}
NVLINK_LATENCY_S: Final = 3e-6
PCIE_LATENCY_S: Final = 5e-6
ALIGNMENT_FACTOR: Final[dict[NicDistance, float]] = {
    NicDistance.SAME_PCIE_SWITCH: 1.0,
    NicDistance.SAME_NUMA: SAME_NUMA_FACTOR,
    NicDistance.SAME_HOST: CROSS_NUMA_FACTOR,
}
PCIE_TOTAL_GBYTE_S_BY_ARCHITECTURE: Final[dict[str, float]] = {
    "Kepler": 32.0,
    "Pascal": 32.0,
    "Volta": 32.0,
    "Turing": 32.0,
    "Ampere": 64.0,
    "Ada": 64.0,
    "Hopper": 128.0,
    "Blackwell": 128.0,
    "CDNA2": 64.0,
    "CDNA3": 128.0,
}
"""Host PCIe x16 bandwidth (GB/s, both directions) of GPUs whose catalog link is not PCIe:
gen3 32, gen4 64, gen5 128 (PCI-SIG specifications; the GPU generation's host interface)."""
DEFAULT_PCIE_TOTAL_GBYTE_S: Final = 64.0


class PerfModelError(VoltpackError):
    """A performance-model input is invalid (bad catalog entry, impossible parallelism)."""


@dataclass(frozen=True)
class LinkSpeed:
    """Effective one-direction bandwidth (GB/s) per GPU and per-message latency (s)."""

    bandwidth_gbyte_s: float
    latency_s: float = 0.0

    def __post_init__(self) -> None:
        if not self.bandwidth_gbyte_s > 0:
            raise PerfModelError(
                f"link bandwidth_gbyte_s must be > 0, got {self.bandwidth_gbyte_s}"
            )
        if self.latency_s < 0:
            raise PerfModelError(f"link latency_s must be >= 0, got {self.latency_s}")

    def scaled(self, factor: float) -> LinkSpeed:
        """The same link with its bandwidth multiplied by `factor` (> 0)."""
        return LinkSpeed(self.bandwidth_gbyte_s * factor, self.latency_s)


def slowest(*links: LinkSpeed) -> LinkSpeed:
    """The link with the lowest bandwidth (the highest latency among equals)."""
    if not links:
        raise PerfModelError("slowest() needs at least one link")
    return min(links, key=lambda link: (link.bandwidth_gbyte_s, -link.latency_s))


def nvlink_speed(sku: GpuSku) -> LinkSpeed:
    """NVLink/NVSwitch (or the SKU's own intra-node link) between GPUs of one host.

    The catalog's `intra_node_link_bandwidth_gbps` is GB/s in total per GPU (both
    directions); a SKU whose intra-node link is PCIe gets `pcie_speed`.
    """
    link = (sku.intra_node_link or "").lower()
    if link.startswith("pcie") or sku.intra_node_link_bandwidth_gbps is None:
        return pcie_speed(sku, cross_socket=False)
    per_direction = sku.intra_node_link_bandwidth_gbps / 2.0
    return LinkSpeed(per_direction * NVLINK_EFFICIENCY, NVLINK_LATENCY_S)


def pcie_speed(sku: GpuSku, cross_socket: bool) -> LinkSpeed:
    """GPU-to-GPU traffic over PCIe inside a host; `cross_socket` adds the inter-socket hop."""
    link = (sku.intra_node_link or "").lower()
    if link.startswith("pcie") and sku.intra_node_link_bandwidth_gbps is not None:
        total = sku.intra_node_link_bandwidth_gbps
    else:
        total = PCIE_TOTAL_GBYTE_S_BY_ARCHITECTURE.get(
            sku.architecture or "", DEFAULT_PCIE_TOTAL_GBYTE_S
        )
    speed = LinkSpeed(total / 2.0 * PCIE_EFFICIENCY, PCIE_LATENCY_S)
    return speed.scaled(CROSS_NUMA_FACTOR) if cross_socket else speed


def network_speed(
    nic_class: str,
    line_rate_gbit_s: float,
    nics_per_gpu: float,
    alignment: NicDistance,
    oversubscription: float,
    ranks_per_node: int = 1,
) -> LinkSpeed:
    """What a group's collective achieves per GPU over the network.

    `nics_per_gpu` is NICs per node / GPUs per node; `alignment` is the GPU-NIC distance;
    `oversubscription` (>= 1) is the product of the oversubscription factors of the network
    levels the group crosses (1 when it crosses none). `ranks_per_node` is how many of the
    group's ranks share a node: NCCL runs one ring per NIC, so a group with k ranks on a node
    uses k GPUs' share of the node's NICs (the result is not capped by NVLink; take
    `slowest()` with `nvlink_speed` for that).
    """
    if nic_class not in NIC_CLASS_EFFICIENCY:
        known = ", ".join(sorted(NIC_CLASS_EFFICIENCY))
        raise PerfModelError(f"nic_class {nic_class!r} is unknown; use one of: {known}")
    if not line_rate_gbit_s > 0:
        raise PerfModelError(f"line_rate_gbit_s must be > 0, got {line_rate_gbit_s}")
    if not nics_per_gpu > 0:
        raise PerfModelError(f"nics_per_gpu must be > 0, got {nics_per_gpu}")
    if not oversubscription >= 1.0:
        raise PerfModelError(f"oversubscription must be >= 1, got {oversubscription}")
    if ranks_per_node < 1:
        raise PerfModelError(f"ranks_per_node must be >= 1, got {ranks_per_node}")
    per_gpu_gbyte_s = line_rate_gbit_s / BITS_PER_BYTE * nics_per_gpu
    bandwidth = (
        per_gpu_gbyte_s
        * ranks_per_node
        * NIC_CLASS_EFFICIENCY[nic_class]
        * ALIGNMENT_FACTOR[NicDistance(alignment)]
        / oversubscription
    )
    return LinkSpeed(bandwidth, NIC_CLASS_LATENCY_S[nic_class])
