"""Writes the scheduler's decisions into the cluster: GPU indices, bindings (a gang whole or
none of it), Events."""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import CoreV1Api

from voltpack.model.decision import Placement
from voltpack.operator.kube.client import api_message, call_json, path_part, post_json, status_code
from voltpack.operator.kube.conventions import (
    GANG_BINDING_ANNOTATION,
    GPU_INDICES_ANNOTATION,
    NICS_ANNOTATION,
    RANK_ANNOTATION,
    RANK_LABEL,
    SCHEDULER_NAME,
)
from voltpack.operator.kube.setup_problems import setup_log_for

log = logging.getLogger(__name__)


def _split(key: str) -> tuple[str, str]:
    namespace, _, name = key.partition("/")
    return namespace, name


def binding_annotations(placement: Placement, rank: int) -> dict[str, str]:
    """What voltpack records on a pod with its binding: GPUs, rank, and NICs if it got any."""
    written = {
        GPU_INDICES_ANNOTATION: ",".join(str(g) for g in placement.gpu_indices),
        RANK_ANNOTATION: str(rank),
    }
    if placement.nics:
        written[NICS_ANNOTATION] = ",".join(placement.nics)
    return written


@dataclass(frozen=True)
class GangBindResult:
    """What binding one gang did: why each pod is not bound (none: all are), and the pods
    bound and then deleted again because the gang could not be bound whole."""

    failures: dict[str, str] = field(default_factory=dict)
    undone: tuple[str, ...] = ()


def bind_gang(
    core: CoreV1Api,
    placements: Sequence[Placement],
    uids: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    ranks: dict[str, int] | None = None,
    owned: frozenset[str] | None = None,
) -> GangBindResult:
    """Bind every pod of a gang, or none: a failure after others were bound undoes them.

    One request per pod: the Binding carries the pod's GPU indices, its rank (its position in
    `placements`) and its NICs as annotations, which the API server copies onto the pod
    together with the node name, so a pod is never bound without them recorded. In a gang of
    two or more pods, every pod first gets its rank as a label (an API server does not copy a
    Binding's labels) and the binding attempt (`voltpack.io/gang-binding`), all before the
    first binding: a label that cannot be written stops the gang with none bound. A binding
    that fails (a 5xx, the pod deleted or bound elsewhere meanwhile) stops the gang too, and
    the members already bound are deleted (`undo_members`: Kubernetes cannot unbind a pod;
    `owned` names the pods a controller creates again, for their Events). A gang left
    partly bound anyway (the process stopped between bindings, a delete failed) is found by
    its attempt in a later cycle (`gang_undo.PartialGangs`).

    With `uids`, a pod deleted and re-created under the same name since the snapshot is
    neither labelled nor bound (UID precondition). `annotations` are written on every pod
    with the binding. `ranks` overrides the rank of some pods (a worker rejoining a running
    elastic job takes the rank the job lacks).
    """
    uids = uids or {}
    written = dict(annotations or {})
    if len(placements) > 1:
        written[GANG_BINDING_ANNOTATION] = f"{secrets.token_hex(6)}/{len(placements)}"
        for position, placement in enumerate(placements):
            rank = (ranks or {}).get(placement.pod, position)
            meta: dict[str, Any] = {
                "labels": {RANK_LABEL: str(rank)},
                "annotations": {GANG_BINDING_ANNOTATION: written[GANG_BINDING_ANNOTATION]},
            }
            if placement.pod in uids:
                meta["uid"] = uids[placement.pod]
            namespace, name = _split(placement.pod)
            try:
                call_json(core.patch_namespaced_pod, name, namespace, {"metadata": meta})
            except Exception as error:
                why = f"rank label of {placement.pod} not written: {api_message(error)}"
                return GangBindResult(_gang_failures(placements, placement.pod, why))
    bound: list[Placement] = []
    for position, placement in enumerate(placements):
        rank = (ranks or {}).get(placement.pod, position)
        try:
            _bind(core, placement, rank, uids.get(placement.pod), written)
        except Exception as error:
            why = f"binding of {placement.pod} to {placement.node} failed: {api_message(error)}"
            log.warning("gang of %d pods: %s", len(placements), why)
            if len(placements) > 1 and _maybe_bound(core, placement.pod, uids.get(placement.pod)):
                bound.append(placement)  # the answer was lost, not the binding
            if not bound:
                return GangBindResult(_gang_failures(placements, placement.pod, why))
            cause = (
                f"gang of {len(placements)} pods could not be bound whole ({why}); "
                f"{len(bound)} bound members undone"
            )
            members = [
                Member(p.pod, uids.get(p.pod), p.pod in (owned or frozenset())) for p in bound
            ]
            undone = undo_members(core, members, cause)
            return GangBindResult(_gang_failures(placements, placement.pod, why), tuple(undone))
        bound.append(placement)
    return GangBindResult()


def _maybe_bound(core: CoreV1Api, key: str, uid: str | None) -> bool:
    """Whether a pod whose binding failed may be bound all the same (an error can come after
    the API server bound it: a lost answer, a proxy's 5xx): its node name read back, or True
    when it cannot be read (fail closed: its gang is undone rather than left partly bound)."""
    namespace, name = _split(key)
    try:
        pod = call_json(core.read_namespaced_pod, name, namespace)
    except Exception as error:
        return status_code(error) != 404
    same = uid is None or pod["metadata"].get("uid") == uid
    return same and bool((pod.get("spec") or {}).get("nodeName"))


def _gang_failures(placements: Sequence[Placement], failed: str, why: str) -> dict[str, str]:
    """Every pod of the gang unbound: `failed` for `why`, the others because of it."""
    return {p.pod: why if p.pod == failed else f"gang not bound whole: {why}" for p in placements}


def _bind(
    core: CoreV1Api, placement: Placement, rank: int, uid: str | None, written: dict[str, str]
) -> None:
    namespace, name = _split(placement.pod)
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "annotations": {**written, **binding_annotations(placement, rank)},
    }
    if uid:
        metadata["uid"] = uid
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"apiVersion": "v1", "kind": "Node", "name": placement.node},
    }
    path = f"/api/v1/namespaces/{path_part(namespace)}/pods/{path_part(name)}/binding"
    post_json(core.api_client, path, body)


UNDONE_REASON = "GangBindingUndone"
"""The Event reason on each deleted member (and on its GPUJob)."""


@dataclass(frozen=True)
class Member:
    """A bound pod of a gang to undo: `namespace/name`, its UID (delete precondition) and
    whether a controller owns it (creates it again)."""

    key: str
    uid: str | None = None
    controlled: bool = True


def controlled(pod: dict[str, Any]) -> bool:
    """Whether a controller owns the pod (an ownerReference with `controller: true`)."""
    return any(ref.get("controller") for ref in pod["metadata"].get("ownerReferences") or [])


def undo_members(core: CoreV1Api, members: Sequence[Member], cause: str) -> list[str]:
    """Delete the bound members of a gang that cannot be bound whole (no grace: their GPUs
    are free for the gang's next placement now), each with a Warning Event saying `cause`.

    Returns the members deleted (or already gone); a member whose delete fails is left for
    `PartialGangs` to find in a later cycle.
    """
    deleted = []
    for member in members:
        namespace, _, name = member.key.partition("/")
        fate = (
            "deleted: its controller creates it again and the gang is placed again whole"
            if member.controlled
            else "deleted: no controller owns it, so it is not created again (create the gang "
            "again, or run it under a GPUJob, Job or JobSet)"
        )
        body = {"preconditions": {"uid": member.uid}} if member.uid else None
        try:
            call_json(
                core.delete_namespaced_pod, name, namespace, grace_period_seconds=0, body=body
            )
        except Exception as error:
            if status_code(error) not in (404, 409):  # 409: a new pod of that name: not ours
                log.warning("undo of %s failed (retried next cycle): %s", member.key,
                            api_message(error))  # fmt: skip
                continue
        else:
            pod = {"metadata": {"name": name, "namespace": namespace, "uid": member.uid}}
            record_event(core, pod, UNDONE_REASON, f"{cause}; this pod was bound and is {fate}")
        deleted.append(member.key)
    return deleted


#: who reports voltpack's Events (`reportingInstance`, at most 128 characters)
REPORTING_INSTANCE = (os.environ.get("POD_NAME") or socket.gethostname() or SCHEDULER_NAME)[:128]
REPORTING_COMPONENT = f"voltpack.io/{SCHEDULER_NAME}"


def event_request(
    obj: dict[str, Any], reason: str, message: str, kind: str = "Warning"
) -> tuple[str, dict[str, Any]]:
    """Where a core/v1 Event on `obj` is posted (its namespace's events) and its body.

    `eventTime` carries microseconds, so two Events in the same second keep their order
    (`lastTimestamp` has whole seconds); an API server requires the reporting fields and an
    action beside it.
    """
    meta = obj["metadata"]
    moment = datetime.now(UTC)
    now = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta.get("namespace")},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion", "v1"),
            "kind": obj.get("kind", "Pod"),
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
        },
        "reason": reason,
        "message": message[:1024],
        "type": kind,
        "source": {"component": SCHEDULER_NAME},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "eventTime": moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingComponent": REPORTING_COMPONENT,
        "reportingInstance": REPORTING_INSTANCE,
        "action": "Scheduling" if reason == "FailedScheduling" else reason,
        "count": 1,
    }
    namespace = meta.get("namespace") or "default"
    return f"/api/v1/namespaces/{path_part(namespace)}/events", body


def event_outcome(core: CoreV1Api, name: str, error: BaseException | None) -> bool:
    """Whether an Event on the object `name` was recorded; a failure is said (a setup
    problem, such as no permission for events, once)."""
    setup = setup_log_for(str(core.api_client.configuration.host))
    if error is None:
        setup.works("events")
        return True
    failure = error if isinstance(error, Exception) else RuntimeError(str(error))
    if status_code(failure) == 404 or not setup.handle("events", failure, resource="events"):
        log.warning("event for %s not recorded: %s", name, api_message(failure))
    return False


def record_event(
    core: CoreV1Api,
    obj: dict[str, Any],
    reason: str,
    message: str,
    kind: str = "Warning",
    *,
    raw: bool = False,
) -> bool:
    """A core/v1 Event on a pod (or any object with `kind`), e.g. FailedScheduling; whether
    the API server took it (a caller that tells once retries one that was not recorded).
    `raw`: posted with `post_json`, not the generated method, whose argument validation and
    serialisation were a third of each Event's CPU (py-spy): for the Event of every bound pod.
    """
    path, body = event_request(obj, reason, message, kind)
    try:
        if raw:
            post_json(core.api_client, path, body)
        else:
            namespace = obj["metadata"].get("namespace") or "default"
            call_json(core.create_namespaced_event, namespace, body)
    except Exception as error:
        return event_outcome(core, obj["metadata"]["name"], error)
    return event_outcome(core, obj["metadata"]["name"], None)
