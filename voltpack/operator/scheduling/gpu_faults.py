"""GPU faults from GPUNode status, and the capacity they take out of the scheduler's snapshot.

The node agent writes each GPU's active fault signals (`status.gpus[].faults`, with the action
the XID catalog recommends) and its health. A fault is mapped to a scope for the recovery core
(`voltpack.scheduler.fault_recovery.isolation_for`), which decides what is cordoned:

- action `reset` or `replace`: that GPU only (`FaultScope.GPU`; with a policy of node-level
  isolation, the node);
- action `reboot`: the whole node (`FaultScope.NODE`): every GPU of it goes, since the reboot
  takes them all down;
- `health: Unhealthy` without a fault calling for more: that GPU (as `reset`);
- action `none` (e.g. a throttling signal): nothing.

A cordoned GPU is marked absent in the snapshot (`gpu_present` False, no free milli-GPU), so no
new pod is given it; the pods already on it stay accounted. It comes back as soon as the agent
clears the fault (after a reset and a passing health check) and the GPUNode says `Healthy`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from voltpack.model.resources.gpunode import GpuDevice
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.scheduler.fault_recovery import (
    FaultScope,
    Isolation,
    RecoveryPolicy,
    isolation_for,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GpuFaultSeen:
    """One faulty GPU as its GPUNode reports it."""

    node: str
    gpu: int
    action: str
    """The worst action its faults call for (`reset`, `reboot`, `replace`)."""
    reason: str
    """For people: e.g. `GPU 3 of node-a: XID 79 (fell off the bus), calls for reboot`."""

    @property
    def scope(self) -> FaultScope:
        return FaultScope.NODE if self.action == "reboot" else FaultScope.GPU


def _describe(node: str, device: GpuDevice) -> str:
    action = device.worst_action
    worst = [f for f in device.faults if f.action == action]
    if not worst:
        return f"GPU {device.index} of {node}: reported Unhealthy"
    fault = worst[0]
    what = f"XID {fault.code}" if fault.signal == "xid" and fault.code is not None else fault.signal
    if fault.code is not None and fault.signal != "xid":
        what += f" {fault.code}"
    if fault.message:
        what += f" ({fault.message})"
    return f"GPU {device.index} of {node}: {what}, calls for {action}"


def gpu_faults(gpunodes: Iterable[dict[str, Any]]) -> list[GpuFaultSeen]:
    """Every GPU whose faults call for an action (or that is Unhealthy), by node and index."""
    found = []
    for gpunode in gpunodes:
        name = gpunode["metadata"]["name"]
        for raw in (gpunode.get("status") or {}).get("gpus") or []:
            if not isinstance(raw, dict) or (
                not raw.get("faults") and raw.get("health") != "Unhealthy"
            ):
                continue  # the common case, without parsing
            try:
                device = GpuDevice.model_validate(raw)
            except ValidationError as exc:
                log.warning("GPUNode %s: a GPU's faults not read: %s", name, exc.errors()[0]["msg"])
                continue
            action = device.worst_action
            if action == "none" and device.health == "Unhealthy":
                action = "reset"
            if action == "none":
                continue
            found.append(GpuFaultSeen(name, device.index, action, _describe(name, device)))
    return found


def isolation_of(
    faults: Iterable[GpuFaultSeen], node_names: Mapping[str, int], policy: RecoveryPolicy
) -> Isolation:
    """What the faults cordon, by node index (`node_names`: name -> index; others ignored)."""
    gpus: set[tuple[int, int]] = set()
    nodes: set[int] = set()
    for fault in faults:
        if fault.node not in node_names:
            continue
        taken = isolation_for(fault.scope, node_names[fault.node], fault.gpu, policy)
        gpus |= taken.gpus
        nodes |= taken.nodes
    return Isolation(gpus=frozenset(gpus), nodes=frozenset(nodes))


def cordon(snapshot: ClusterSnapshot, isolation: Isolation) -> None:
    """Take the isolated GPUs (and whole nodes) out of `snapshot`'s free capacity."""
    if not isolation.gpus and not isolation.nodes:
        return
    present = snapshot.gpu_present.copy()  # may be shared with copies of the snapshot
    width = present.shape[1]
    for node, gpu in isolation.gpus:
        if 0 <= gpu < width:
            present[node, gpu] = False
            snapshot.gpu_free_milli[node, gpu] = 0
    for node in isolation.nodes:
        present[node, :] = False
        snapshot.gpu_free_milli[node, :] = 0
        snapshot.cpu_free_milli[node] = 0
        snapshot.memory_free_mib[node] = 0
    snapshot.gpu_present = present
    snapshot.mark_changed(sorted({node for node, _ in isolation.gpus} | set(isolation.nodes)))
