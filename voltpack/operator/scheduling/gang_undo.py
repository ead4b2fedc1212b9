"""Undoing a gang left partly bound: its bound members are deleted, so no GPU stays held by a
gang that cannot run whole (docs/gang-binding.md).

Kubernetes cannot unbind a pod (`spec.nodeName` is immutable once set), so undoing a binding
means deleting the pod. A member with a controller (a GPUJob's worker, a Job's, a JobSet's)
is created again, pending, and the gang is placed again whole; a bare pod is gone, and its
Event says so.

Two ways a gang ends up partly bound:

- a binding (or the pod's rank label) fails after others of the gang were bound:
  `binder.bind_gang` undoes the gang at once (`undo_members`);
- the operator stops between two bindings (a crash, a lost Lease), or an undo's delete fails:
  every pod of a gang of two or more carries its binding attempt
  (`voltpack.io/gang-binding`, written before any member is bound), so pods of one attempt,
  some bound and some pending, are a partial gang. `PartialGangs` finds them each cycle and
  undoes one seen partial in an earlier cycle too, after reading its members again from the
  API server (a cache a moment behind the bindings is not mistaken for a partial gang).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import CoreV1Api

from voltpack.operator.kube.binder import (
    UNDONE_REASON,
    Member,
    controlled,
    record_event,
    undo_members,
)
from voltpack.operator.kube.client import api_message, call_json, status_code
from voltpack.operator.kube.conventions import GANG_BINDING_ANNOTATION, SERVED_SCHEDULERS
from voltpack.operator.kube.translate import pod_key
from voltpack.operator.scheduling.cluster_view import TERMINAL_PHASES
from voltpack.operator.scheduling.jobs import owning_job

log = logging.getLogger(__name__)


def _active(pod: dict[str, Any]) -> bool:
    meta = pod["metadata"]
    phase = (pod.get("status") or {}).get("phase")
    return not meta.get("deletionTimestamp") and phase not in TERMINAL_PHASES


@dataclass
class PartialGang:
    """Pods of one binding attempt: those bound and those still pending."""

    attempt: str
    bound: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)

    def describe(self) -> str:
        size = self.attempt.rsplit("/", 1)[-1]
        return (
            f"gang left partly bound ({len(self.bound)} of {size} members bound, "
            f"{', '.join(sorted(pod_key(p) for p in self.pending))} pending) for more than "
            "one cycle (the operator stopped between bindings, or an undo failed)"
        )


def partial_gangs(
    pods: Iterable[dict[str, Any]], scheduler_names: frozenset[str] = SERVED_SCHEDULERS
) -> dict[str, PartialGang]:
    """Binding attempts with members both bound and pending, by `namespace/attempt`."""
    attempts: dict[str, PartialGang] = {}
    for pod in pods:
        meta = pod["metadata"]
        attempt = (meta.get("annotations") or {}).get(GANG_BINDING_ANNOTATION)
        spec = pod.get("spec") or {}
        if not attempt or spec.get("schedulerName") not in scheduler_names or not _active(pod):
            continue
        key = f"{meta.get('namespace', 'default')}/{attempt}"
        gang = attempts.setdefault(key, PartialGang(attempt))
        (gang.bound if spec.get("nodeName") else gang.pending).append(pod)
    return {key: gang for key, gang in attempts.items() if gang.bound and gang.pending}


class PartialGangs:
    """Level-triggered: each cycle, undo the gangs partly bound since an earlier cycle."""

    def __init__(
        self, core: CoreV1Api, scheduler_names: frozenset[str] = SERVED_SCHEDULERS
    ) -> None:
        self.core = core
        self.scheduler_names = scheduler_names
        self._seen: set[str] = set()

    def cycle(self, pods: Iterable[dict[str, Any]]) -> list[str]:
        """Undo the partial gangs among `pods` (the cache) seen in the previous cycle too and
        still partial on the API server; returns the pods deleted."""
        found = partial_gangs(pods, self.scheduler_names)
        due = [key for key in sorted(found) if key in self._seen]
        self._seen = set(found)
        deleted: list[str] = []
        for key in due:
            gang = self._confirmed(found[key])
            if gang is None:
                continue
            cause = gang.describe()
            members = [
                Member(pod_key(p), p["metadata"].get("uid"), controlled(p)) for p in gang.bound
            ]
            undone = undo_members(self.core, members, cause)
            deleted.extend(undone)
            jobs = {
                job["metadata"]["name"]: job
                for p in gang.bound
                if pod_key(p) in undone and (job := owning_job(p)) is not None
            }
            for job in jobs.values():
                record_event(self.core, job, UNDONE_REASON, cause)
            self._seen.discard(key)
        return deleted

    def _confirmed(self, gang: PartialGang) -> PartialGang | None:
        """The gang as the API server has it now, if still partly bound."""
        fresh = []
        for pod in (*gang.bound, *gang.pending):
            meta = pod["metadata"]
            try:
                fresh.append(
                    call_json(self.core.read_namespaced_pod, meta["name"], meta.get("namespace"))
                )
            except Exception as error:
                if status_code(error) != 404:
                    log.warning("partial gang check of %s: %s", pod_key(pod), api_message(error))
                    return None
        again = partial_gangs(
            p
            for p in fresh
            if (p["metadata"].get("annotations") or {}).get(GANG_BINDING_ANNOTATION) == gang.attempt
        )
        return next(iter(again.values()), None)
