"""A statement: changes to a snapshot that are kept together or rolled back together.

In the manner of KAI-Scheduler's statement: every allocation and release made while a
statement is open is recorded in the snapshot's journal, whoever makes it (a pod placement,
a gang placed as one unit, a victim released for preemption). A checkpoint is a position in
that journal; rolling back to it undoes, newest first, everything after it. Statements nest:
an inner statement (a gang inside a session's statement) rolls back only its own changes,
and when it commits its changes stay in the journal, so the outer statement can still undo
them. The outermost statement stops the recording when it ends.
"""

from __future__ import annotations

from collections.abc import Sequence

from voltpack.model.decision import Placement
from voltpack.model.snapshot import ClusterSnapshot, JournalEntry
from voltpack.model.workload import Pod

Checkpoint = int
"""A position in the snapshot's journal."""


class Statement:
    """Records changes to a snapshot so that they can be undone to a checkpoint."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self._snapshot = snapshot
        self._outermost = snapshot.journal is None
        if snapshot.journal is None:
            snapshot.journal = []
        self._start: Checkpoint = len(snapshot.journal)

    @property
    def snapshot(self) -> ClusterSnapshot:
        """The snapshot this statement changes."""
        return self._snapshot

    def allocate(
        self, node: int, pod: Pod, gpu_indices: Sequence[int], nic_indices: Sequence[int] = ()
    ) -> None:
        """Allocate on the snapshot now (GPUs and NICs); recorded for a possible rollback."""
        self._snapshot.allocate(node, pod, gpu_indices, nic_indices)

    def release(
        self, node: int, pod: Pod, gpu_indices: Sequence[int], nic_indices: Sequence[int] = ()
    ) -> None:
        """Give a pod's resources back on the snapshot now (e.g. a victim's); recorded."""
        self._snapshot.release(node, pod, gpu_indices, nic_indices)

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

    def checkpoint(self) -> Checkpoint:
        """The present position: `rollback(to=...)` returns the snapshot to it."""
        return len(self._journal())

    def rollback(self, to: Checkpoint | None = None) -> None:
        """Undo every change after `to`, newest first, and go on; without `to`, every change
        since the statement began, and end it."""
        journal = self._journal()
        stop = self._start if to is None else max(to, self._start)
        undone = journal[stop:]
        del journal[stop:]
        self._snapshot.journal = None  # the undoing is not itself recorded
        try:
            for sign, node, pod, gpus, nics in reversed(undone):
                if sign > 0:
                    self._snapshot.release(node, pod, gpus, nics)
                else:
                    self._snapshot.allocate(node, pod, gpus, nics)
        finally:
            self._snapshot.journal = journal
        if to is None:
            self._end_if_outermost()

    def commit(self) -> None:
        """Keep the changes. An inner statement leaves them to the one around it."""
        self._end_if_outermost()

    def _journal(self) -> list[JournalEntry]:
        journal = self._snapshot.journal
        if journal is None:
            raise RuntimeError("the statement has ended (committed or rolled back)")
        return journal

    def _end_if_outermost(self) -> None:
        if self._outermost:
            self._snapshot.journal = None
