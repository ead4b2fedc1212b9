"""The node agent's side of `GPUNode`: report inventory, health, power and topology in status,
and apply the power limits and clock locks the spec asks for, reporting what was applied.

Level-triggered: each pass reads the spec as it is now and the device as it is now, changes
only what differs, and writes the whole status. A refused setting (permission, range) becomes a
`SettingsApplied=False` condition with the driver's message; it never stops the agent. A spec
the agent cannot fully read (a field of a newer CRD, a malformed value) fails closed: every
limit and lock stays as applied, and `SettingsApplied=False` (reason `SpecUnreadable`) names the
field.

Fault signals (`voltpack.telemetry.faults`, as the backend tracks them) go into each GPU's
`faults` (signal, code, action, message, first and last seen). A GPU is `Unhealthy` when it does
not answer or when its worst fault calls for an action (reset, reboot, replace); a GPU with only
`none` faults (thermal or power-brake throttling, application XIDs) stays `Healthy`. Every GPU
with an active fault gets a `GPU<index>Fault` condition (status True, reason from its worst
fault, e.g. `Xid79` or `RowRemap`, message listing the faults and the action, transition time
the earliest first seen); the condition is absent once the faults clear.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import CustomObjectsApi
from pydantic import ValidationError

from voltpack.model.resources import API_GROUP, API_VERSION, GpuNodeSpec, GpuNodeStatus
from voltpack.operator.kube.client import api_message, call_json, status_code
from voltpack.telemetry.device import (
    ActuationResult,
    GpuBackend,
    GpuInventory,
    GpuSample,
    TelemetryError,
    Topology,
)
from voltpack.telemetry.faults import ACTION_ORDER, ActiveFault, worst_action
from voltpack.telemetry.sysfs_topology import SysfsTopology, discover_topology, with_pcie_links

log = logging.getLogger(__name__)

PLURAL = "gpunodes"
POWER_TOLERANCE_W = 1.0


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _rfc3339(unix_s: float) -> str:
    return datetime.fromtimestamp(unix_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def fault_status(fault: ActiveFault) -> dict[str, Any]:
    """One active fault as a `GpuFault` (camelCase, as in the CRD)."""
    return {
        "signal": fault.signal,
        "code": fault.code,
        "action": fault.action,
        "message": fault.message,
        "firstSeen": _rfc3339(fault.first_seen_s),
        "lastSeen": _rfc3339(fault.last_seen_s),
    }


def fault_condition(index: int, faults: tuple[ActiveFault, ...]) -> dict[str, Any]:
    """The `GPU<index>Fault` condition of a GPU with active faults."""
    worst = max(faults, key=lambda f: (ACTION_ORDER.index(f.action), -f.first_seen_s))
    reason = "".join(part.capitalize() for part in worst.signal.split("-"))
    if worst.code is not None:
        reason += str(worst.code)
    action = worst_action(faults)
    return {
        "type": f"GPU{index}Fault",
        "status": "True",
        "reason": reason,
        "message": f"GPU {index} needs: {action}; "
        + "; ".join(f"{f.message} [{f.action}]" for f in faults),
        "lastTransitionTime": _rfc3339(min(f.first_seen_s for f in faults)),
    }


def unreadable_spec(error: ValidationError) -> str:
    """Why a GPUNode spec cannot be read, naming its first bad field, and what the agent does."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return (
        f"spec.{where}: {first['msg']} ({error.error_count()} problem(s)); the current power "
        "limits and clock locks are kept until the spec can be read (upgrade this agent to the "
        "CRD's version, or fix the spec)"
    )


def nvlink_domains(topology: Topology) -> list[list[int]]:
    """Groups of GPUs joined (transitively) by NVLink or xGMI."""
    parent: dict[int, int] = {}

    def root(gpu: int) -> int:
        while parent.setdefault(gpu, gpu) != gpu:
            gpu = parent[gpu]
        return gpu

    for link in topology.links:
        if link.kind in ("nvlink", "xgmi"):
            parent[root(link.gpu_a)] = root(link.gpu_b)
    groups: dict[int, list[int]] = {}
    for gpu in sorted(parent):
        groups.setdefault(root(gpu), []).append(gpu)
    return [sorted(group) for group in groups.values() if len(group) > 1]


class GpuNodeSync:
    """Keeps one node's `GPUNode` in step with its GPUs."""

    def __init__(
        self,
        custom: CustomObjectsApi,
        node_name: str,
        backend: GpuBackend,
        clock: Callable[[], str] = _now,
        sysfs_root: str | None = None,
        actuate: bool = True,
    ) -> None:
        """`actuate=False`: report only; the spec's settings are never applied to the GPUs."""
        self.custom = custom
        self.node_name = node_name
        self.backend = backend
        self.clock = clock
        self.sysfs_root = sysfs_root
        self.actuate = actuate
        self._locked: dict[int, tuple[int, int] | None] = {}
        self._sysfs: SysfsTopology | None = None

    def reconcile_once(self) -> list[ActuationResult]:
        """Apply the spec, then write the status; return the setting changes attempted."""
        resource = self._get_or_create()
        try:
            spec = GpuNodeSpec.model_validate(resource.get("spec") or {})
        except ValidationError as exc:
            # fail closed: a spec this agent cannot fully read (a newer CRD during a rolling
            # upgrade, or a malformed one) keeps every limit and lock as applied now
            problem = unreadable_spec(exc)
            log.warning("GPUNode %s: %s", self.node_name, problem)
            self._write_status(self._samples(), [], unreadable=problem)
            return []
        samples = self._samples()
        if not self.actuate:
            self._write_status(samples, [], ignored=len(spec.gpus))
            return []
        results = self._apply(spec, samples)
        if results:
            samples = self._samples()  # read back what the device now reports
        self._write_status(samples, results)
        return results

    def _get_or_create(self) -> dict[str, Any]:
        try:
            return call_json(
                self.custom.get_cluster_custom_object,
                API_GROUP,
                API_VERSION,
                PLURAL,
                self.node_name,
            )
        except Exception as error:
            if status_code(error) != 404:
                raise
        body = {
            "apiVersion": f"{API_GROUP}/{API_VERSION}",
            "kind": "GPUNode",
            "metadata": {"name": self.node_name},
            "spec": {},
        }
        return call_json(
            self.custom.create_cluster_custom_object, API_GROUP, API_VERSION, PLURAL, body
        )

    def _samples(self) -> dict[int, GpuSample | None]:
        readings: dict[int, GpuSample | None] = {}
        for gpu in self.backend.inventory():
            try:
                readings[gpu.index] = self.backend.sample(gpu.index)
            except TelemetryError as error:
                log.warning("GPU %d: %s", gpu.index, error)
                readings[gpu.index] = None
        return readings

    def _apply(
        self, spec: GpuNodeSpec, samples: dict[int, GpuSample | None]
    ) -> list[ActuationResult]:
        results: list[ActuationResult] = []
        wanted = {setting.index: setting for setting in spec.gpus}
        for index, sample in samples.items():
            if sample is None:
                continue
            setting = wanted.get(index)
            target_w = setting.power_limit_w if setting else None
            if target_w is not None:
                current = sample.power_limit_w
                if current is None or abs(current - target_w) > POWER_TOLERANCE_W:
                    results.append(self.backend.set_power_limit(index, target_w))
            elif self._is_capped(index, sample):
                results.append(self.backend.reset_power_limit(index))
            clocks = setting.locked_clocks if setting else None
            want = (clocks.min_mhz, clocks.max_mhz) if clocks else None
            # After a restart the device's lock is unknown: the first pass applies the spec.
            if index not in self._locked or want != self._locked[index]:
                result = (
                    self.backend.lock_clocks(index, *want)
                    if want
                    else self.backend.unlock_clocks(index)
                )
                results.append(result)
                if result.ok:
                    self._locked[index] = want
        return results

    def _is_capped(self, index: int, sample: GpuSample) -> bool:
        if sample.power_limit_w is None:
            return False
        try:
            default_w = self.backend.power_limit_range(index).default_w
        except TelemetryError:
            return False
        return abs(sample.power_limit_w - default_w) > POWER_TOLERANCE_W

    def _topology_status(self, inventory: list[GpuInventory]) -> dict[str, Any] | None:
        """NVLink domains and NUMA from the backend; NICs (and missing NUMA) from sysfs."""
        try:
            topology = self.backend.topology()
        except TelemetryError as error:
            log.warning("topology unavailable: %s", error)
            return None
        nics: list[dict[str, Any]] = []
        if self.sysfs_root is not None:
            try:
                if self._sysfs is None:  # the wiring of a node does not change while it runs
                    self._sysfs = discover_topology(inventory, self.sysfs_root)
                topology = with_pcie_links(topology, self._sysfs.gpus)
                nics = [nic.model_dump(by_alias=True) for nic in self._sysfs.nic_models()]
            except TelemetryError as error:
                log.warning("sysfs topology unavailable: %s", error)
        return {
            "nvlinkDomains": nvlink_domains(topology),
            "numaNodes": _numa_groups_of(topology),
            "nics": nics,
        }

    def _write_status(
        self,
        samples: dict[int, GpuSample | None],
        results: list[ActuationResult],
        ignored: int = 0,
        unreadable: str = "",
    ) -> None:
        inventory = {gpu.index: gpu for gpu in self.backend.inventory()}
        devices = []
        fault_conditions = []
        for index, gpu in sorted(inventory.items()):
            sample = samples.get(index)
            faults = sample.faults if sample is not None else self.backend.faults(index)
            healthy = sample is not None and sample.healthy and worst_action(faults) == "none"
            if faults:
                fault_conditions.append(fault_condition(index, faults))
            locked = self._locked.get(index)
            devices.append(
                {
                    "index": index,
                    "uuid": gpu.uuid,
                    "model": gpu.name,
                    "memoryMib": (gpu.memory_total_bytes or 0) // 2**20,
                    "health": "Healthy" if healthy else "Unhealthy",
                    "powerLimitW": sample.power_limit_w if sample else None,
                    "powerDrawW": sample.power_w if sample else None,
                    "smClockMhz": sample.sm_clock_mhz if sample else None,
                    "utilizationRatio": sample.utilization_ratio if sample else None,
                    "lockedClocks": (
                        {"minMhz": locked[0], "maxMhz": locked[1]} if locked else None
                    ),
                    "faults": [fault_status(fault) for fault in faults],
                }
            )
        topology_status = self._topology_status(list(inventory.values()))
        failures = [r for r in results if not r.ok]
        conditions = [
            {"type": "Ready", "status": "True", "reason": "AgentReporting", "message": ""},
            {
                "type": "SettingsApplied",
                "status": "False" if failures else "True",
                "reason": "DriverRefused" if failures else "Applied",
                "message": "; ".join(f"GPU {r.index} {r.action}: {r.error}" for r in failures),
            },
        ]
        if ignored:
            conditions[1] = {
                "type": "SettingsApplied",
                "status": "False",
                "reason": "ActuationDisabled",
                "message": f"the agent runs with --no-actuate: settings for {ignored} GPU(s) "
                "not applied (enable actuation on this node to apply them)",
            }
        if unreadable:
            conditions[1] = {
                "type": "SettingsApplied",
                "status": "False",
                "reason": "SpecUnreadable",
                "message": unreadable,
            }
        conditions += fault_conditions
        status = GpuNodeStatus.model_validate(
            {
                "gpus": devices,
                "topology": topology_status,
                "lastHeartbeatTime": self.clock(),
                "conditions": conditions,
            }
        ).model_dump(by_alias=True, exclude_none=True)
        try:
            call_json(
                self.custom.patch_cluster_custom_object_status,
                API_GROUP, API_VERSION, PLURAL, self.node_name, {"status": status},
            )  # fmt: skip
        except Exception as error:
            log.warning("GPUNode %s: status not written: %s", self.node_name, api_message(error))


def _numa_groups_of(topology: Topology) -> list[list[int]]:
    groups: dict[int, list[int]] = {}
    for gpu, numa in sorted(topology.numa_node_of_gpu.items()):
        groups.setdefault(numa, []).append(gpu)
    return [groups[numa] for numa in sorted(groups)]
