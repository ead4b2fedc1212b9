"""One verdict of a filter over every node: the nodes that pass, and the reason the others
fail, worded as kube-scheduler words it (its plugins' reasons, e.g. "Insufficient cpu")."""

from __future__ import annotations

from dataclasses import dataclass

from voltpack.model.snapshot import BoolArray


@dataclass(frozen=True)
class Check:
    """Nodes passing one requirement; the others fail with `reason`."""

    reason: str
    passed: BoolArray
