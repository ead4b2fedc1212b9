"""A statement: changes to a snapshot that are committed together or rolled back together."""

from __future__ import annotations

from collections.abc import Sequence

from voltpack.model.decision import Placement
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.workload import Pod


class Statement:
    """Records allocations on a snapshot so that a gang can be undone if it does not fit whole."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self._snapshot = snapshot
        self._allocations: list[tuple[int, Pod, tuple[int, ...], tuple[int, ...]]] = []

    def allocate(
        self, node: int, pod: Pod, gpu_indices: Sequence[int], nic_indices: Sequence[int] = ()
    ) -> None:
        """Allocate on the snapshot now (GPUs and NICs); remember it for a possible rollback."""
        self._snapshot.allocate(node, pod, gpu_indices, nic_indices)
        self._allocations.append((node, pod, tuple(gpu_indices), tuple(nic_indices)))

    def place(
        self, node: int, pod: Pod, gpu_indices: Sequence[int], nic_indices: Sequence[int] = ()
    ) -> Placement:
        """`allocate`, and the resulting placement (node, GPUs and NICs by name)."""
        self.allocate(node, pod, gpu_indices, nic_indices)
        return Placement(
            pod=pod.name,
            node=self._snapshot.node_names[node],
            gpu_indices=tuple(gpu_indices),
            gpu_milli=pod.gpu_milli,
            nics=self._snapshot.nic_names(node, tuple(nic_indices)),
            rdma_percent=pod.rdma_percent,
        )

    def rollback(self) -> None:
        """Undo every allocation of this statement (NIC shares included), newest first."""
        while self._allocations:
            node, pod, gpus, nics = self._allocations.pop()
            self._snapshot.release(node, pod, gpus, nics)

    def commit(self) -> None:
        """Keep the allocations; the statement forgets them."""
        self._allocations.clear()

    @property
    def touched_nodes(self) -> list[int]:
        """Nodes changed by the allocations not yet committed or rolled back."""
        return [node for node, _, _, _ in self._allocations]
