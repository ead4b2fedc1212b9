"""Writes the scheduler's decisions into the cluster: GPU indices, bindings, Events."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import CoreV1Api

from voltpack.model.decision import Placement
from voltpack.operator.conventions import (
    GPU_INDICES_ANNOTATION,
    NICS_ANNOTATION,
    RANK_ANNOTATION,
    RANK_LABEL,
    SCHEDULER_NAME,
)
from voltpack.operator.kube import api_message, call_json, status_code
from voltpack.operator.setup_problems import setup_log_for

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


def bind_gang(
    core: CoreV1Api,
    placements: Sequence[Placement],
    uids: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    ranks: dict[str, int] | None = None,
) -> dict[str, str]:
    """Bind every pod of a gang; return the failures by pod.

    One request per pod: the Binding carries the pod's GPU indices, its rank (its position in
    `placements`) and its NICs as annotations, which the API server copies onto the pod
    together with the node name, so a pod is never bound without them recorded. In a gang of
    two or more pods, each pod first gets its rank as a label too (a patch; an API server does
    not copy a Binding's labels). With `uids`, a pod deleted and re-created under the same name
    since the snapshot is neither labelled nor bound (UID precondition). A binding that fails
    after others of the gang succeeded (the pod was deleted or bound elsewhere meanwhile) is
    reported; the next cycle sees the cluster as it is. `annotations` are written on every pod
    with the binding. `ranks` overrides the rank of some pods (a worker rejoining a running
    elastic job takes the rank the job lacks).
    """
    failures: dict[str, str] = {}
    for position, placement in enumerate(placements):
        rank = (ranks or {}).get(placement.pod, position)
        namespace, name = _split(placement.pod)
        if len(placements) > 1:
            patch: dict[str, Any] = {"metadata": {"labels": {RANK_LABEL: str(rank)}}}
            if uids and placement.pod in uids:
                patch["metadata"]["uid"] = uids[placement.pod]
            try:
                call_json(core.patch_namespaced_pod, name, namespace, patch)
            except Exception as error:
                failures[placement.pod] = f"rank label not written: {api_message(error)}"
                continue
        metadata: dict[str, Any] = {
            "name": name,
            "namespace": namespace,
            "annotations": {**(annotations or {}), **binding_annotations(placement, rank)},
        }
        if uids and placement.pod in uids:
            metadata["uid"] = uids[placement.pod]
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": placement.node},
        }
        try:
            call_json(core.create_namespaced_pod_binding, name, namespace, body)
        except Exception as error:
            failures[placement.pod] = f"binding failed: {api_message(error)}"
    return failures


#: who reports voltpack's Events (`reportingInstance`, at most 128 characters)
REPORTING_INSTANCE = (os.environ.get("POD_NAME") or socket.gethostname() or SCHEDULER_NAME)[:128]
REPORTING_COMPONENT = f"voltpack.io/{SCHEDULER_NAME}"


def record_event(
    core: CoreV1Api, obj: dict[str, Any], reason: str, message: str, kind: str = "Warning"
) -> None:
    """A core/v1 Event on a pod (or any object with `kind`), e.g. FailedScheduling.

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
    setup = setup_log_for(str(core.api_client.configuration.host))
    try:
        call_json(core.create_namespaced_event, meta.get("namespace") or "default", body)
    except Exception as error:
        if status_code(error) == 404 or not setup.handle("events", error, resource="events"):
            log.warning("event for %s not recorded: %s", meta["name"], api_message(error))
        return
    setup.works("events")
