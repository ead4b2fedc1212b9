"""Joint GPU + NIC allocation: the RDMA NIC a pod's traffic uses, chosen with its GPUs.

A pod with `rdma_percent` > 0 gets that share of ONE RDMA NIC (InfiniBand or RoCE) of its node.
What "together" means here:

1. The scoring strategy picks the node and, on it, the GPUs it prefers (`pick_gpus`).
2. The distance of a GPU set to a NIC is that of its farthest GPU, in Koordinator's `SamePCIe`
   order: the same PCIe switch, else the same NUMA node, else only the same host
   (`NicDistance`). Among the RDMA NICs with room for the share, the nearest tier to the
   strategy's GPUs wins, and within a tier the NIC left with the least free bandwidth (best fit;
   lowest slot on a tie), so that whole NICs stay free for large shares.
3. When no NIC with room is on the PCIe switch (or NUMA node) of the strategy's GPUs, but another
   set of fitting GPUs of the same node has such a NIC, the pod takes those GPUs instead: a
   strictly nearer tier beats the strategy's GPU preference. Within the new set, the strategy's
   own GPUs come first, then the fullest GPUs that fit (best fit), then the lowest index. The
   GPUs never move for a tier that is not strictly nearer.
4. A pod without GPUs (a CPU-node instance) takes the best-fitting RDMA NIC with room.

The node filter (`scheduler.filter`) has already checked that some RDMA NIC of the node has
room, and that enough GPUs fit: with both, a choice always exists (at worst across the host).
Pure and deterministic: no I/O, no randomness.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from voltpack.model.errors import InvalidRequestError
from voltpack.model.host_layout import HostLayout, NicDistance
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.workload import Pod


@dataclass(frozen=True)
class NicChoice:
    """GPUs and NIC slot for one pod on one node, and how near they are."""

    gpus: tuple[int, ...]
    nic: int | None
    """Slot of the NIC in the node's layout; None when the pod asks for no RDMA bandwidth."""
    distance: NicDistance | None
    """Distance from the farthest chosen GPU to the NIC; None for a pod without GPUs or NIC."""
    moved_gpus: bool = False
    """True when the GPUs differ from the strategy's, to reach a nearer NIC."""

    def describe(self, layout: HostLayout | None, rdma_percent: int) -> str:
        """A few words for the decision's reason, e.g. 'NIC mlx5_0 (25%, same PCIe switch)'."""
        if self.nic is None or layout is None:
            return ""
        text = f"NIC {layout.nics[self.nic].name} ({rdma_percent}%"
        if self.distance is not None:
            text += ", " + self.distance.name.lower().replace("_", " ")
        text += ")"
        if self.moved_gpus:
            text += ", GPUs moved to reach it"
        return text


@lru_cache(maxsize=256)
def _distances(layout: HostLayout) -> tuple[tuple[NicDistance, ...], ...]:
    return layout.nic_distances()


def set_distance(layout: HostLayout, gpus: Sequence[int], nic: int) -> NicDistance:
    """Distance of a GPU set to NIC slot `nic`: that of its farthest GPU."""
    table = _distances(layout)
    return max((table[gpu][nic] for gpu in gpus), default=NicDistance.SAME_HOST)


def choose_gpus_and_nic(
    layout: HostLayout,
    pod: Pod,
    preferred_gpus: Sequence[int],
    gpu_free_milli: Sequence[int],
    nic_free_pct: Sequence[int],
) -> NicChoice:
    """The GPUs and RDMA NIC for `pod` on one node (see the module docstring for the order).

    `gpu_free_milli` is each GPU's free milli-GPU, `nic_free_pct` each NIC's free percent, both
    in the layout's order; `preferred_gpus` are the strategy's choice.
    """
    preferred = tuple(int(g) for g in preferred_gpus)
    if pod.rdma_percent == 0:
        return NicChoice(gpus=preferred, nic=None, distance=None)
    usable = _usable_nics(layout, pod, nic_free_pct)

    def leftover(slot: int) -> int:
        return nic_free_pct[slot] - pod.rdma_percent

    nic, distance = _nearest_usable(layout, pod, preferred, usable, nic_free_pct)
    if pod.num_gpu == 0:
        return NicChoice(gpus=preferred, nic=nic, distance=None)
    if distance == NicDistance.SAME_PCIE_SWITCH:
        return NicChoice(gpus=preferred, nic=nic, distance=distance)
    fitting = [g for g in range(layout.gpu_count) if gpu_free_milli[g] >= pod.gpu_milli]
    better: tuple[NicDistance, int, int, tuple[int, ...]] | None = None
    table = _distances(layout)
    for slot in usable:
        gpus = _nearest_gpus(pod, fitting, preferred, gpu_free_milli, [row[slot] for row in table])
        if gpus is None:
            continue
        found = (set_distance(layout, gpus, slot), leftover(slot), slot, gpus)
        if found[0] < distance and (better is None or found[:3] < better[:3]):
            better = found
    if better is None:
        return NicChoice(gpus=preferred, nic=nic, distance=distance)
    return NicChoice(gpus=better[3], nic=better[2], distance=better[0], moved_gpus=True)


def nic_for_gpus(
    layout: HostLayout, pod: Pod, gpus: Sequence[int], nic_free_pct: Sequence[int]
) -> NicChoice:
    """The RDMA NIC for `pod` whose GPUs are fixed (e.g. a gang's tensor-parallel group): the
    nearest with room, then the best fit; the GPUs never move."""
    fixed = tuple(int(g) for g in gpus)
    if pod.rdma_percent == 0:
        return NicChoice(gpus=fixed, nic=None, distance=None)
    usable = _usable_nics(layout, pod, nic_free_pct)
    nic, distance = _nearest_usable(layout, pod, fixed, usable, nic_free_pct)
    return NicChoice(gpus=fixed, nic=nic, distance=distance if fixed else None)


def _usable_nics(layout: HostLayout, pod: Pod, nic_free_pct: Sequence[int]) -> list[int]:
    """RDMA NIC slots with the pod's share free; raise when there is none."""
    usable = [
        slot
        for slot, nic in enumerate(layout.nics)
        if nic.is_rdma and nic_free_pct[slot] >= pod.rdma_percent
    ]
    if not usable:
        raise InvalidRequestError(
            f"pod {pod.name}: no RDMA NIC has {pod.rdma_percent}% of its bandwidth free "
            f"(free: {list(nic_free_pct)})"
        )
    return usable


def _nearest_usable(
    layout: HostLayout,
    pod: Pod,
    gpus: Sequence[int],
    usable: Sequence[int],
    nic_free_pct: Sequence[int],
) -> tuple[int, NicDistance]:
    """Among `usable`, the NIC nearest to `gpus` (by their farthest GPU), then the one left with
    the least free bandwidth, then the lowest slot; with its distance."""
    nic = min(
        usable,
        key=lambda slot: (
            set_distance(layout, gpus, slot) if gpus else NicDistance.SAME_PCIE_SWITCH,
            nic_free_pct[slot] - pod.rdma_percent,
            slot,
        ),
    )
    return nic, set_distance(layout, gpus, nic)


def _nearest_gpus(
    pod: Pod,
    fitting: Sequence[int],
    preferred: Sequence[int],
    gpu_free_milli: Sequence[int],
    distance_of_gpu: Sequence[NicDistance],
) -> tuple[int, ...] | None:
    """`num_gpu` fitting GPUs nearest to one NIC: the nearest tier that has enough of them,
    then the strategy's GPUs, the fullest GPUs, the lowest index; None if too few fit."""
    if len(fitting) < pod.num_gpu:
        return None
    for tier in NicDistance:
        near = [g for g in fitting if distance_of_gpu[g] <= tier]
        if len(near) >= pod.num_gpu:
            near.sort(key=lambda g: (g not in preferred, gpu_free_milli[g], g))
            return tuple(sorted(near[: pod.num_gpu]))
    return None


def choose_on_snapshot(
    snapshot: ClusterSnapshot, node: int, pod: Pod, preferred_gpus: Sequence[int]
) -> NicChoice:
    """`choose_gpus_and_nic` for `node` of a snapshot (a node without a layout has no NIC)."""
    layout = snapshot.layouts[node]
    if pod.rdma_percent == 0:
        return NicChoice(gpus=tuple(int(g) for g in preferred_gpus), nic=None, distance=None)
    if layout is None:
        raise InvalidRequestError(
            f"pod {pod.name} asks for rdma_percent={pod.rdma_percent} but node "
            f"{snapshot.node_names[node]} reports no NICs"
        )
    gpu_free = [int(v) for v in snapshot.gpu_free_milli[node, : layout.gpu_count]]
    present = snapshot.gpu_present[node, : layout.gpu_count]
    gpu_free = [free if ok else -1 for free, ok in zip(gpu_free, present, strict=True)]
    nic_free = [int(v) for v in snapshot.nic_free_pct[node, : len(layout.nics)]]
    return choose_gpus_and_nic(layout, pod, preferred_gpus, gpu_free, nic_free)


def nic_slot_for(
    snapshot: ClusterSnapshot, node: int, pod: Pod, gpus: tuple[int, ...]
) -> tuple[int, ...]:
    """The NIC slot a pod with an RDMA share takes beside its (fixed) GPUs; () without one or
    when no NIC of the node's layout has room."""
    layout = snapshot.layouts[node]
    if not pod.rdma_percent or layout is None:
        return ()
    free = [int(v) for v in snapshot.nic_free_pct[node, : len(layout.nics)]]
    choice = nic_for_gpus(layout, pod, gpus, free)
    return () if choice.nic is None else (choice.nic,)
