"""Writing a gang's device choice into its ResourceClaims, as kube-scheduler's DRA plugin does.

For each claim: `status.allocation` (per request: driver, pool, device; the configuration the
driver applies; a node selector on the chosen node) and `status.reservedFor` (the pods using
it), in one status update guarded by the claim's resourceVersion, so a claim another scheduler
allocated meanwhile is never overwritten (409: the gang waits for the next cycle). A gang's
claims are written all or none: when one write fails, the ones written before it are cleared
again, and no pod of the gang is bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes.client import ResourceV1Api

from voltpack.model.devices import ClaimAllocation
from voltpack.operator.kube.client import api_message, call_json


@dataclass(frozen=True)
class ClaimWrite:
    """One claim to write: its allocation (None: allocated already) and the pods it serves."""

    claim: str
    """`namespace/name`."""
    resource_version: str
    allocation: ClaimAllocation | None
    reserved_for: tuple[tuple[str, str], ...]
    """(pod name, pod UID) of every pod it is reserved for after the write."""
    finalizers: tuple[str, ...] = ()
    """The claim's finalizers as listed."""


DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"
"""Set on a claim before it is allocated, as kube-scheduler does: the resourceclaim controller
deallocates (and removes it from) a claim whose reservations are all gone."""


def allocation_json(allocation: ClaimAllocation) -> dict[str, Any]:
    """A claim's `status.allocation` in the API's form."""
    results = []
    for result in allocation.results:
        entry: dict[str, Any] = {
            "request": result.request,
            "driver": result.device.driver,
            "pool": result.device.pool,
            "device": result.device.name,
        }
        if result.share_id is not None:
            entry["shareID"] = result.share_id
        if result.consumed_capacity:
            entry["consumedCapacity"] = {
                name.split("/", 1)[1] if name.startswith(f"{result.device.driver}/") else name: q
                for name, q in result.consumed_capacity.items()
            }
        results.append(entry)
    config = [
        {
            "source": item.source,
            **({"requests": list(item.requests)} if item.requests else {}),
            "opaque": {"driver": item.driver, "parameters": dict(item.parameters)},
        }
        for item in allocation.config
    ]
    devices: dict[str, Any] = {"results": results}
    if config:
        devices["config"] = config
    return {
        "devices": devices,
        "nodeSelector": {
            "nodeSelectorTerms": [
                {
                    "matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [allocation.node]}
                    ]
                }
            ]
        },
    }


def _protect(api: ResourceV1Api, write: ClaimWrite) -> str:
    """Add the delete-protection finalizer before allocating; the resourceVersion to write at."""
    if write.allocation is None or DELETE_PROTECTION_FINALIZER in write.finalizers:
        return write.resource_version
    namespace, name = write.claim.split("/", 1)
    body = {
        "metadata": {
            "resourceVersion": write.resource_version,
            "finalizers": [*write.finalizers, DELETE_PROTECTION_FINALIZER],
        }
    }
    updated = call_json(api.patch_namespaced_resource_claim, name, namespace, body)
    return str(updated["metadata"]["resourceVersion"])


def _status(write: ClaimWrite, resource_version: str) -> dict[str, Any]:
    status: dict[str, Any] = {
        "reservedFor": [
            {"resource": "pods", "name": name, "uid": uid} for name, uid in write.reserved_for
        ]
    }
    if write.allocation is not None:
        status["allocation"] = allocation_json(write.allocation)
    return {"metadata": {"resourceVersion": resource_version}, "status": status}


def write_claims(
    api: ResourceV1Api, writes: Sequence[ClaimWrite]
) -> tuple[str, list[dict[str, Any]]]:
    """Write every claim's status, or none: ('', the claims as written) on success, else
    (why, []) with the ones written already undone."""
    done: list[ClaimWrite] = []
    written: list[dict[str, Any]] = []
    for write in writes:
        namespace, name = write.claim.split("/", 1)
        try:
            version = _protect(api, write)
            written.append(
                call_json(
                    api.patch_namespaced_resource_claim_status,
                    name,
                    namespace,
                    _status(write, version),
                )
            )
        except Exception as error:
            undo_problems = _undo(api, done)
            why = f"ResourceClaim {write.claim} not written: {api_message(error)}{undo_problems}"
            return why, []
        done.append(write)
    return "", written


def _undo(api: ResourceV1Api, done: Sequence[ClaimWrite]) -> str:
    """Clear what this gang wrote (allocations made now; reservations added now)."""
    problems = []
    for write in done:
        namespace, name = write.claim.split("/", 1)
        body: dict[str, Any] = {"status": {"reservedFor": None}}
        if write.allocation is not None:
            body["status"]["allocation"] = None
        try:
            call_json(api.patch_namespaced_resource_claim_status, name, namespace, body)
        except Exception as error:  # the next cycle sees the claim as it is
            problems.append(f"{write.claim}: {api_message(error)}")
    return f" (and not undone: {'; '.join(problems)})" if problems else ""
