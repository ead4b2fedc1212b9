"""Pod lifecycle simulator, the emulator's stand-in for kubelets (as KWOK is for real ones).

A pod bound to an existing node becomes `Running` (phase, conditions, startTime, host and pod
IPs, containerStatuses) after `pod_start_delay_s`; with the annotation
`voltpack.io/duration-seconds` it then becomes `Succeeded` after that many seconds
(`Failed` when `voltpack.io/exit-code` is non-zero). A bound, unfinished pod that is deleted
gets a deletionTimestamp first and disappears `pod_stop_delay_s` later, as with a kubelet.
All delays are simulated seconds; wall-clock seconds = simulated seconds x `time_factor`.

A pod with `spec.resourceClaims` starts only once each claim exists, is allocated and is
reserved for the pod (`dra_kubelet.unprepared_claim`); until then it stays Pending, and one
Warning Event `FailedPrepareDynamicResources` from the kubelet says why.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable

from voltpack.emulator.dra.kubelet import FAILED_PREPARE_REASON, unprepared_claim
from voltpack.emulator.errors import ApiError
from voltpack.emulator.objects import JsonObj, is_deleting, name_of, namespace_of, timestamp
from voltpack.emulator.operations import Operations
from voltpack.emulator.resources import EVENTS, NODES, PODS, RESOURCECLAIMS
from voltpack.emulator.store import DELETED, Event

DURATION_ANNOTATION = "voltpack.io/duration-seconds"
EXIT_CODE_ANNOTATION = "voltpack.io/exit-code"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})

log = logging.getLogger(__name__)


def _annotation(pod: JsonObj, key: str) -> str | None:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(key)
    return value if isinstance(value, str) else None


def pod_duration_s(pod: JsonObj) -> float | None:
    """The simulated run time a pod asks for, or None (runs until deleted)."""
    text = _annotation(pod, DURATION_ANNOTATION)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        log.warning("pod %s: ignoring non-numeric %s=%r", name_of(pod), DURATION_ANNOTATION, text)
        return None
    return max(value, 0.0)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class PodLifecycle:
    """Moves bound pods through Pending -> Running -> Succeeded/Failed on asyncio timers."""

    def __init__(
        self,
        ops: Operations,
        *,
        time_factor: float = 1.0,
        start_delay_s: float = 0.0,
        stop_delay_s: float = 0.0,
    ) -> None:
        self._ops = ops
        self._time_factor = time_factor
        self._start_delay_s = start_delay_s
        self._stop_delay_s = stop_delay_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._next_ip = 0
        self._warned: set[tuple[str, str]] = set()
        """(pod uid, message) of the FailedPrepareDynamicResources Events recorded."""
        ops.store.subscribe(self._on_event)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Begin simulating on `loop` (the server's); pods already bound are picked up."""
        self._loop = loop
        self._ops.graceful_pod_deletion = self._deletes_gracefully
        for pod in self._ops.store.objects(PODS.key):
            self._consider(pod)

    def stop(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self._loop = None
        self._ops.graceful_pod_deletion = lambda pod: False

    def _deletes_gracefully(self, pod: JsonObj) -> bool:
        phase = (pod.get("status") or {}).get("phase")
        return bool((pod.get("spec") or {}).get("nodeName")) and phase not in TERMINAL_PHASES

    # --- event handling --------------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        if self._loop is None:
            return
        if event.key == PODS.key:
            uid = str((event.obj.get("metadata") or {}).get("uid"))
            if event.type == DELETED:
                for step in ("start", "finish", "stop"):
                    handle = self._timers.pop((uid, step), None)
                    if handle is not None:
                        handle.cancel()
                self._warned = {seen for seen in self._warned if seen[0] != uid}
            else:
                self._consider(event.obj)
        elif event.key == NODES.key and event.type != DELETED:
            node = name_of(event.obj)
            for pod in self._ops.store.objects(PODS.key):
                if (pod.get("spec") or {}).get("nodeName") == node:
                    self._consider(pod)
        elif event.key == RESOURCECLAIMS.key:
            for pod in self._ops.store.objects(PODS.key, namespace_of(event.obj)):
                spec = pod.get("spec") or {}
                if spec.get("resourceClaims") and spec.get("nodeName"):
                    self._consider(pod)

    def _schedule(
        self, pod: JsonObj, step: str, delay_s: float, action: Callable[[], None]
    ) -> None:
        uid = str((pod.get("metadata") or {}).get("uid"))
        if (uid, step) in self._timers or self._loop is None:
            return

        def fire() -> None:
            self._timers.pop((uid, step), None)
            try:
                action()
            except Exception:
                log.exception("pod lifecycle step %s of %s failed", step, name_of(pod))

        wall_s = max(delay_s, 0.0) * self._time_factor
        self._timers[(uid, step)] = self._loop.call_later(wall_s, fire)

    def _consider(self, pod: JsonObj) -> None:
        spec = pod.get("spec") or {}
        status = pod.get("status") or {}
        phase = status.get("phase")
        namespace, name = namespace_of(pod), name_of(pod)
        uid = str((pod.get("metadata") or {}).get("uid"))
        if is_deleting(pod):
            if (pod.get("metadata") or {}).get("deletionGracePeriodSeconds"):
                self._schedule(
                    pod,
                    "stop",
                    self._stop_delay_s,
                    lambda: self._ops.finish_pod_deletion(namespace, name),
                )
            return
        node = spec.get("nodeName")
        if not node or phase in TERMINAL_PHASES:
            return
        if phase == "Pending":
            if self._ops.store.get(NODES.key, "", node) is None:
                return
            if (spec.get("resourceClaims")) and self._claims_unprepared(pod):
                return
            self._schedule(
                pod, "start", self._start_delay_s, lambda: self._run(namespace, name, uid)
            )
        elif phase == "Running":
            duration = pod_duration_s(pod)
            if duration is not None:
                self._schedule(pod, "finish", duration, lambda: self._finish(namespace, name, uid))

    def _claims_unprepared(self, pod: JsonObj) -> bool:
        """Whether the pod's claims keep it from starting; records the kubelet's Event once."""
        why = unprepared_claim(self._ops.store, pod)
        if why is None:
            return False
        uid = str((pod.get("metadata") or {}).get("uid"))
        if (uid, why) not in self._warned and self._loop is not None:
            self._warned.add((uid, why))
            self._loop.call_soon(self._record_failed_prepare, pod, why)
        return True

    def _record_failed_prepare(self, pod: JsonObj, why: str) -> None:
        now = timestamp(self._ops.clock())
        metadata = pod.get("metadata") or {}
        event = {
            "metadata": {"generateName": f"{name_of(pod)}."},
            "involvedObject": {
                "kind": "Pod",
                "namespace": namespace_of(pod),
                "name": name_of(pod),
                "uid": metadata.get("uid"),
                "apiVersion": "v1",
                "resourceVersion": metadata.get("resourceVersion"),
            },
            "reason": FAILED_PREPARE_REASON,
            "message": f"Failed to prepare dynamic resources: {why}",
            "source": {"component": "kubelet", "host": (pod.get("spec") or {}).get("nodeName")},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "type": "Warning",
            "reportingComponent": "kubelet",
            "reportingInstance": (pod.get("spec") or {}).get("nodeName") or "",
        }
        try:
            self._ops.create(EVENTS, namespace_of(pod), event)
        except ApiError as error:  # e.g. the namespace is being deleted
            log.warning("pod %s: cannot record %s: %s", name_of(pod), FAILED_PREPARE_REASON, error)

    # --- transitions -----------------------------------------------------------------------

    def _pod_ip(self) -> str:
        self._next_ip += 1
        return f"10.244.{self._next_ip // 250}.{self._next_ip % 250 + 1}"

    def _run(self, namespace: str, name: str, uid: str) -> None:
        now = timestamp(self._ops.clock())

        def mutate(pod: JsonObj) -> None:
            spec = pod.get("spec") or {}
            status = pod.setdefault("status", {})
            if (
                (pod.get("metadata") or {}).get("uid") != uid
                or status.get("phase") != "Pending"
                or is_deleting(pod)
            ):
                return
            node = self._ops.store.get(NODES.key, "", str(spec.get("nodeName")))
            if node is None:
                return
            if spec.get("resourceClaims") and unprepared_claim(self._ops.store, pod) is not None:
                return
            host_ip = next(
                (
                    a.get("address")
                    for a in (node.get("status") or {}).get("addresses") or []
                    if a.get("type") == "InternalIP"
                ),
                "10.0.0.1",
            )
            pod_ip = self._pod_ip()
            status["phase"] = "Running"
            status["hostIP"] = host_ip
            status["hostIPs"] = [{"ip": host_ip}]
            status["podIP"] = pod_ip
            status["podIPs"] = [{"ip": pod_ip}]
            status["startTime"] = now
            scheduled = next(
                (c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"),
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            )
            status["conditions"] = [
                {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": now},
                {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                {"type": "Ready", "status": "True", "lastTransitionTime": now},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
                scheduled,
            ]
            status["containerStatuses"] = [
                {
                    "name": c.get("name", ""),
                    "image": c.get("image", ""),
                    "imageID": f"{c.get('image', '')}@sha256:{_digest(str(c.get('image')))}",
                    "containerID": f"containerd://{_digest(uid + str(c.get('name')))}",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                    "lastState": {},
                }
                for c in spec.get("containers") or []
                if isinstance(c, dict)
            ]

        self._ops.write_status(PODS, namespace, name, mutate)

    def _finish(self, namespace: str, name: str, uid: str) -> None:
        now = timestamp(self._ops.clock())

        def mutate(pod: JsonObj) -> None:
            status = pod.setdefault("status", {})
            if (pod.get("metadata") or {}).get("uid") != uid or status.get("phase") != "Running":
                return
            try:
                exit_code = int(_annotation(pod, EXIT_CODE_ANNOTATION) or 0)
            except ValueError:
                exit_code = 1
            succeeded = exit_code == 0
            status["phase"] = "Succeeded" if succeeded else "Failed"
            reason = "PodCompleted" if succeeded else "PodFailed"
            for condition in status.get("conditions") or []:
                if condition.get("type") in ("Ready", "ContainersReady"):
                    condition.update(status="False", reason=reason, lastTransitionTime=now)
                elif condition.get("type") == "PodReadyToStartContainers":
                    condition.update(status="False", lastTransitionTime=now)
            for container in status.get("containerStatuses") or []:
                started = (container.get("state") or {}).get("running", {}).get("startedAt", now)
                container["ready"] = False
                container["started"] = False
                container["state"] = {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": "Completed" if succeeded else "Error",
                        "startedAt": started,
                        "finishedAt": now,
                        "containerID": container.get("containerID", ""),
                    }
                }

        self._ops.write_status(PODS, namespace, name, mutate)
