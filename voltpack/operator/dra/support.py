"""The operator's Dynamic Resource Allocation: caches of the `resource.k8s.io/v1` objects, the
cycle's device view, and the claim writes that precede a gang's bindings.

On a cluster that serves no `resource.k8s.io/v1` (or publishes no devices) every cache stays
empty, `DraCycle.active` is False and scheduling is what it was: the node and the GPU count
hold, the device choice within the node is advisory (docs/dra.md).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import ApiClient, ResourceV1Api

from voltpack.model.decision import Placement
from voltpack.model.errors import InvalidRequestError
from voltpack.operator.dra.cycle import DraCycle, node_devices
from voltpack.operator.dra.devices import NodeDevices
from voltpack.operator.dra.view import pod_claim_keys
from voltpack.operator.dra.writer import ClaimWrite, write_claims
from voltpack.operator.kube.cache import ResourceCache
from voltpack.operator.kube.setup_problems import SetupLog
from voltpack.scheduler.device_selectors import DeviceSelectors, SelectorError
from voltpack.scheduler.dra_allocation import Unsatisfiable


@dataclass(frozen=True)
class GangClaims:
    """What a placed gang's claims need written, and what they hold."""

    writes: tuple[ClaimWrite, ...] = ()
    words: dict[str, str] = field(default_factory=dict)
    """Pod -> its devices in words."""
    chosen: dict[str, tuple[tuple[int, ...], tuple[str, ...]]] = field(default_factory=dict)
    """Pod -> (GPU indices, NIC names) its claims were allocated."""


class DraSupport:
    """ResourceSlices, DeviceClasses and ResourceClaims, kept by list + watch."""

    def __init__(self, api_client: ApiClient, setup: SetupLog) -> None:
        self.api = ResourceV1Api(api_client)
        self.slices = ResourceCache("resourceslices", self.api.list_resource_slice, setup)
        self.classes = ResourceCache("deviceclasses", self.api.list_device_class, setup)
        self.claims = ResourceCache(
            "resourceclaims", self.api.list_resource_claim_for_all_namespaces, setup
        )
        self.selectors = DeviceSelectors()
        self._slice_versions: frozenset[tuple[str, str]] = frozenset()
        self._nodes: dict[str, NodeDevices] = {}

    def start(self, stop: threading.Event) -> None:
        for cache in (self.slices, self.classes, self.claims):
            cache.start(stop)

    def wait_synced(self, timeout_s: float) -> None:
        """Until each cache has listed once (or found its kind not served)."""
        for cache in (self.slices, self.classes, self.claims):
            cache.wait_synced(timeout_s)

    def cycle(self) -> DraCycle:
        """This cycle's view of the devices and claims (read from the cached objects
        themselves, never changed)."""
        slices = self.slices.values()
        versions = frozenset(
            (item["metadata"].get("name"), item["metadata"].get("resourceVersion"))
            for item in slices
        )
        if versions != self._slice_versions:  # parse the devices only when a slice changed
            self._nodes, self._slice_versions = node_devices(slices), versions
        return DraCycle.with_nodes(
            self._nodes, self.classes.values(), self.claims.values(), self.selectors
        )

    def gang_claims(
        self,
        dra: DraCycle,
        gang: Sequence[Placement],
        pods: Mapping[str, Mapping[str, Any]],
    ) -> GangClaims | str:
        """The claim writes of a placed gang, per pod the devices in words and the GPU indices
        and NICs allocated; or why its claims cannot be allocated on the nodes chosen (the
        gang then waits)."""
        if not any(_has_claims(pods.get(p.pod)) for p in gang):
            return GangClaims()
        try:
            result = dra.allocate([(p.pod, p.node, p.gpu_indices, p.nics) for p in gang], pods)
        except (SelectorError, InvalidRequestError) as exc:
            return str(exc)
        if isinstance(result, Unsatisfiable):
            return result.reason
        users: dict[str, list[tuple[str, str]]] = {}
        for placement in gang:
            pod = pods.get(placement.pod)
            if pod is None:
                continue
            meta = pod["metadata"]
            for claim in pod_claim_keys(pod)[0]:
                users.setdefault(claim, []).append((meta["name"], str(meta.get("uid", ""))))
        allocation_of = {a.claim: a for allocations in result.values() for a in allocations}
        writes = []
        for claim, pod_refs in users.items():
            state = dra.claims[claim]
            reserved = [
                (str(ref.get("name", "")), str(ref.get("uid", "")))
                for ref in (state.raw.get("status") or {}).get("reservedFor") or []
            ]
            new = [ref for ref in pod_refs if ref not in reserved]
            if claim not in allocation_of and not new:
                continue  # allocated and reserved for these pods already
            writes.append(
                ClaimWrite(
                    claim=claim,
                    resource_version=str(state.raw["metadata"].get("resourceVersion", "")),
                    allocation=allocation_of.get(claim),
                    reserved_for=tuple(reserved + new),
                    finalizers=tuple(state.raw["metadata"].get("finalizers") or ()),
                )
            )
        return GangClaims(
            tuple(writes),
            {pod: dra.describe(allocations) for pod, allocations in result.items()},
            {pod: dra.chosen(allocations) for pod, allocations in result.items()},
        )

    def write(self, writes: Sequence[ClaimWrite]) -> str:
        """Write a gang's claims (all or none); the written claims are assumed in the cache,
        so the next cycle counts their devices before the watch shows them."""
        problem, written = write_claims(self.api, writes)
        for claim in written:
            self.claims.assume(claim)
        return problem


def _has_claims(pod: Mapping[str, Any] | None) -> bool:
    return bool(pod is not None and (pod.get("spec") or {}).get("resourceClaims"))


class ClaimReserver:
    """The session's Reserve step (`scheduler/session.py` DeviceReserver) over one cycle's
    device view: a placed gang's ResourceClaims allocated on the nodes chosen, kept for its
    binding; or why they cannot be (the session rolls the gang back and it waits)."""

    def __init__(
        self, support: DraSupport, dra: DraCycle, pods: Mapping[str, Mapping[str, Any]]
    ) -> None:
        self._support, self._dra, self._pods = support, dra, pods
        self.claims: dict[str, GangClaims] = {}
        """Gang -> what its claims need written (gangs reserved this cycle)."""

    def reserve(self, gang: str, placements: Sequence[Placement]) -> str | None:
        if not self._dra.active:
            return None
        result = self._support.gang_claims(self._dra, placements, self._pods)
        if isinstance(result, str):
            return result
        self.claims[gang] = result
        return None
