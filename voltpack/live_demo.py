"""The live part of `voltpack demo`: emulator + operator + a trace slice replayed through the API.

An emulator serves an openb-shaped cluster on 127.0.0.1, an operator replica schedules it, and
a slice of the openb trace is replayed as real pods (plus a few GPUJob gangs) in accelerated
time: arrivals are spaced as in the trace, and each pod runs for its traced duration, both
scaled by the same factor.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from voltpack.emulator import EmulatorConfig, running_emulator
from voltpack.model.cluster import Node
from voltpack.model.resources import API_GROUP, API_VERSION
from voltpack.model.workload import Pod
from voltpack.operator.kube.client import call_json
from voltpack.operator.kube.crds import install_crds
from voltpack.operator.kube.translate import gpu_indices, pod_to_k8s
from voltpack.operator.runner import Operator, OperatorConfig
from voltpack.policies.schema import PolicyFile

NAMESPACE = "default"
LEASE_NAMESPACE = "voltpack-system"


@dataclass(frozen=True)
class ReplayPlan:
    """Which pods arrive when (wall seconds from the start), and how long each runs."""

    pods: tuple[Pod, ...]
    arrival_s: tuple[float, ...]
    time_factor: float


def plan_replay(trace: Sequence[Pod], pod_count: int, wall_s: float) -> ReplayPlan:
    """The `pod_count` pods from the middle of the trace by creation time, squeezed into
    `wall_s` seconds of wall time."""
    ordered = sorted(trace, key=lambda pod: pod.creation_time_s)
    start = max((len(ordered) - pod_count) // 2, 0)
    window = ordered[start : start + pod_count]
    first = window[0].creation_time_s
    span_s = max(window[-1].creation_time_s - first, 1.0)
    factor = wall_s / span_s
    return ReplayPlan(
        pods=tuple(window),
        arrival_s=tuple((pod.creation_time_s - first) * factor for pod in window),
        time_factor=factor,
    )


def gang_job(name: str, workers: int, gpus: int) -> dict[str, Any]:
    """A GPUJob of `workers` pods with `gpus` whole GPUs each."""
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "GPUJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "workers": workers,
            "gpusPerWorker": gpus,
            "template": {"spec": {"containers": [{"name": "trainer", "image": "train:1"}]}},
        },
    }


@dataclass
class ClusterCounts:
    """What the API shows at one moment."""

    phases: Counter[str]
    bound: int
    gpus_in_use: int
    jobs: dict[str, str]


def read_counts(core: client.CoreV1Api, custom: client.CustomObjectsApi) -> ClusterCounts:
    """Pods by phase, bound pods, GPUs held by running pods, GPUJob phases."""
    phases: Counter[str] = Counter()
    bound = gpus = 0
    for pod in call_json(core.list_namespaced_pod, NAMESPACE).get("items", []):
        phase = (pod.get("status") or {}).get("phase", "Pending")
        phases[phase] += 1
        if (pod.get("spec") or {}).get("nodeName"):
            bound += 1
            if phase == "Running":
                gpus += len(gpu_indices(pod) or ())
    jobs = call_json(
        custom.list_namespaced_custom_object, API_GROUP, API_VERSION, NAMESPACE, "gpujobs"
    )
    return ClusterCounts(
        phases=phases,
        bound=bound,
        gpus_in_use=gpus,
        jobs={
            j["metadata"]["name"]: (j.get("status") or {}).get("phase", "Pending")
            for j in jobs.get("items", [])
        },
    )


def run_live_demo(
    nodes: Sequence[Node],
    trace: Sequence[Pod],
    policy: PolicyFile,
    *,
    pod_count: int = 1500,
    wall_s: float = 40.0,
    on_ready: Callable[[str], None],
    on_tick: Callable[[ClusterCounts, int], None],
) -> dict[str, Any]:
    """Replay the slice; call `on_ready(url)` once serving and `on_tick` about once a second.

    Returns the figures printed at the end.
    """
    plan = plan_replay(trace, pod_count, wall_s)
    config = EmulatorConfig(time_factor=plan.time_factor)
    with running_emulator(nodes=nodes, config=config) as emulator:
        api = client.ApiClient(client.Configuration(host=emulator.url))
        core = client.CoreV1Api(api)
        custom = client.CustomObjectsApi(api)
        call_json(core.create_namespace, {"metadata": {"name": LEASE_NAMESPACE}})
        install_crds(client.ApiextensionsV1Api(api))
        on_ready(emulator.url)
        operator = Operator(
            api, OperatorConfig(policy=policy, identity="demo", cycle_interval_s=0.1)
        )
        stop = threading.Event()
        thread = threading.Thread(target=operator.run, args=(stop,), daemon=True)
        thread.start()
        started = time.monotonic()
        next_tick = started
        for index, (pod, arrival_s) in enumerate(zip(plan.pods, plan.arrival_s, strict=True)):
            if index in (pod_count // 4, pod_count // 2):
                call_json(
                    custom.create_namespaced_custom_object,
                    API_GROUP, API_VERSION, NAMESPACE, "gpujobs", gang_job(f"gang-{index}", 4, 8),
                )  # fmt: skip
            delay_s = started + arrival_s - time.monotonic()
            if delay_s > 0:
                time.sleep(delay_s)
            duration = (pod.deletion_time_s or pod.creation_time_s) - pod.creation_time_s
            name = f"trace-{index:05d}"
            call_json(
                core.create_namespaced_pod,
                NAMESPACE,
                pod_to_k8s(pod, name, duration_s=max(duration, 1.0)),
            )
            if time.monotonic() >= next_tick:
                on_tick(read_counts(core, custom), index + 1)
                next_tick = time.monotonic() + 1.0
        time.sleep(2.0)
        final = read_counts(core, custom)
        on_tick(final, len(plan.pods))
        stop.set()
        thread.join(timeout=15)
        api.close()
    return {
        "pods_replayed": len(plan.pods),
        "trace_days_replayed": round(plan.arrival_s[-1] / plan.time_factor / 86_400, 1),
        "speed_up": round(1 / plan.time_factor),
        "pods_bound": operator.stats.bound,
        "never_placed": final.phases.get("Pending", 0),
        "events": operator.stats.events,
        "jobs": final.jobs,
        "phases": dict(final.phases),
    }
