"""Phase-aware clock floors for the GPUs of inference replicas (`spec.power.efficiency.
phase_clocks` of the policy file; the decision is `voltpack.policies.power.phase_clocks`).

The InferenceService controller publishes each replica's phase mix in the service's
`status.replicaPhases[pod] = {prefillShare, decodeShare, observedAt}`. Every tick the power
loop maps each mix to the replica pod's GPUs (pod -> node -> the pod's GPU indices) and asks
the policy for the lowest clock lock of each GPU's ladder whose latency cost at that mix stays
within `max_slowdown`: the floor the controller's policy and fail-safes may deepen, never
lighten (`PowerController.step(floor_rung=...)`).

Fail safe, i.e. no efficiency lock (floor 0; the budget's own fail-safes are unaffected):
a mix that is missing, unreadable, or stale (not refreshed within `window_s + stale_after_s`
by this loop's clock: freshness by arrival, as for heartbeats), a pod not Running or without
GPU indices, a high-priority pod (unless `phase_clocks_high_priority`), a GPU whose model has
no power model.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import ValidationError

from voltpack.model.errors import CatalogError, InvalidRequestError
from voltpack.model.resources.inferenceservice import ReplicaPhase
from voltpack.operator.kube.conventions import INFERENCE_SERVICE_LABEL
from voltpack.operator.kube.timestamps import kube_time_s
from voltpack.operator.kube.translate import gpu_indices, pod_priority
from voltpack.perf.gpu_power import power_model_for
from voltpack.perf.llm_inference import default_inference_profile
from voltpack.policies.power.ladder import IntArray
from voltpack.policies.power.phase_clocks import phase_clock_rungs
from voltpack.policies.schema import PowerSpec
from voltpack.power.controller import GpuSlot
from voltpack.power.freshness import ArrivalClock


def replica_phases(
    services: Sequence[dict[str, Any]],
) -> dict[tuple[str, str], tuple[str, ReplicaPhase]]:
    """(namespace, pod) -> (service name, its phase mix) from every service's status;
    unreadable entries are left out."""
    found = {}
    for service in services:
        meta = service.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        phases = (service.get("status") or {}).get("replicaPhases")
        if not isinstance(phases, dict):
            continue
        for pod, entry in phases.items():
            try:
                phase = ReplicaPhase.model_validate(entry)
            except ValidationError:
                continue
            found[(namespace, str(pod))] = (str(meta.get("name")), phase)
    return found


def gpu_phases(
    phases: Mapping[tuple[str, str], tuple[str, ReplicaPhase]],
    pods: Sequence[dict[str, Any]],
    spec: PowerSpec,
) -> dict[tuple[str, int], tuple[tuple[str, str], ReplicaPhase]]:
    """(node, GPU index) -> (the replica, its mix) for the Running replica pods the phase
    clocks apply to."""
    high_too = spec.efficiency.phase_clocks_high_priority
    found = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        key = (meta.get("namespace") or "default", str(meta.get("name")))
        entry = phases.get(key)
        if entry is None or (meta.get("labels") or {}).get(INFERENCE_SERVICE_LABEL) != entry[0]:
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        indices = gpu_indices(pod)
        if not node or indices is None or (pod.get("status") or {}).get("phase") != "Running":
            continue
        if not high_too:
            try:
                if pod_priority(pod) >= spec.high_priority_min:
                    continue
            except InvalidRequestError:
                continue  # cannot tell: never slowed
        for index in indices:
            found[(str(node), index)] = (key, entry[1])
    return found


def floor_rungs(
    slots: Sequence[GpuSlot],
    services: Sequence[dict[str, Any]],
    pods: Sequence[dict[str, Any]],
    spec: PowerSpec,
    arrivals: ArrivalClock,
    now_s: float,
) -> IntArray:
    """Each controller GPU's phase-clock floor rung (0: none)."""
    params = spec.efficiency.phase_clocks
    floor = np.zeros(len(slots), dtype=np.int64)
    if params is None:
        return floor
    by_gpu = gpu_phases(replica_phases(services), pods, spec)
    fresh_for_s = params.window_s + spec.stale_after_s
    seen: set[Hashable] = set()
    profile = default_inference_profile()
    for i, slot in enumerate(slots):
        found = by_gpu.get((slot.node, slot.index))
        if found is None:
            continue
        replica, phase = found
        seen.add(replica)
        reported_s = kube_time_s(phase.observed_at)
        arrived_s = arrivals.observe(
            replica, phase.observed_at, math.nan if reported_s is None else reported_s, now_s
        )
        if not now_s - arrived_s <= fresh_for_s:  # NaN (never fresh) included
            continue
        locks = [s.locked_clock_mhz for s in slot.ladder.settings if s.locked_clock_mhz]
        try:
            gpu = power_model_for(slot.ladder.sku)
        except CatalogError:
            continue
        rung = phase_clock_rungs(
            np.array([phase.prefill_share]), np.array([phase.decode_share]), locks, gpu,
            profile, params,
        )  # fmt: skip
        floor[i] = int(rung[0])
    arrivals.forget_except(seen)
    return floor
