"""The operator flags a straggling rank from the step times its workers report (emulator)."""

from __future__ import annotations

from typing import Any

import numpy as np
from kubernetes import client

from tests.integration.conftest import operator_thread, pod_manifest, wait_for
from voltpack.emulator import RunningEmulator
from voltpack.operator.runner import OperatorConfig
from voltpack.policies.schema import policy_for_strategy

GANG = "llm"
WORKERS = 8
SLOW_RANK = 3
STEPS = 60


def step_times(rank: int, seed: int) -> str:
    """STEPS steps of about 1.5 s with 1% noise; the slow rank 12% slower from step 10."""
    rng = np.random.default_rng(seed)
    common = 1.5 * (1 + 0.02 * rng.standard_normal(STEPS))
    entries = []
    for step in range(STEPS):
        slow = 1.12 if rank == SLOW_RANK and step >= 10 else 1.0
        seconds = common[step] * slow * (1 + 0.01 * rng.standard_normal())
        entries.append(f"{step}:{seconds:.4f}")
    return ",".join(entries)


def test_a_rank_12_percent_slower_gets_a_straggler_event(
    emulator: RunningEmulator, core: client.CoreV1Api
) -> None:
    core.create_namespace({"metadata": {"name": "voltpack-system"}})
    annotations = {"voltpack.io/pod-group": GANG, "voltpack.io/min-members": str(WORKERS)}
    for index in range(WORKERS):
        core.create_namespaced_pod(
            "default", pod_manifest(f"{GANG}-{index}", gpus=1, annotations=annotations)
        )
    config = OperatorConfig(
        policy=policy_for_strategy("best-fit"), identity="op", cycle_interval_s=0.05
    )
    with operator_thread(emulator.url, config):

        def bound() -> list[Any]:
            pods = [p for p in core.list_namespaced_pod("default").items if p.spec.node_name]
            ranked = [p for p in pods if "voltpack.io/rank" in (p.metadata.annotations or {})]
            return ranked if len(ranked) == WORKERS else []

        pods = wait_for(bound, timeout_s=30, what="the gang bound with ranks")
        slow_pod = ""
        for seed, pod in enumerate(pods):
            rank = int(pod.metadata.annotations["voltpack.io/rank"])
            if rank == SLOW_RANK:
                slow_pod = pod.metadata.name
            patch = {
                "metadata": {"annotations": {"voltpack.io/step-times": step_times(rank, seed)}}
            }
            core.patch_namespaced_pod(pod.metadata.name, "default", patch)

        def straggler_events() -> list[Any]:
            events = core.list_namespaced_event("default").items
            return [e for e in events if e.reason == "Straggler"]

        events = wait_for(straggler_events, timeout_s=30, what="a Straggler Event")
    assert {e.involved_object.name for e in events} == {slow_pod}
    assert f"rank {SLOW_RANK} on " in events[0].message and "slower" in events[0].message
