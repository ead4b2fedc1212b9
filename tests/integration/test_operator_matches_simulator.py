"""The same trace slice, scheduled by the operator through the emulator and by the simulator's
core directly, gives the same placements (same policy, same seed)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from kubernetes import client

from tests.integration.conftest import wait_for
from voltpack.emulator import EmulatorConfig, running_emulator
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.operator.kube.translate import pod_to_k8s
from voltpack.operator.runner import Operator, OperatorConfig
from voltpack.policies.registry import make_strategy
from voltpack.policies.schema import policy_for_strategy
from voltpack.scheduler.placement import Scheduler
from voltpack.sim.traces.openb import load_nodes, load_pods

DATA = Path(__file__).resolve().parents[2] / "data" / "openb"
SEED = 7
NODE_COUNT = 60
POD_COUNT = 150


@pytest.mark.parametrize("strategy", ["best-fit", "fgd"])
def test_operator_and_simulator_place_a_trace_slice_identically(strategy: str) -> None:
    nodes = sorted(load_nodes(DATA / "openb_node_list_gpu_node.csv"), key=lambda n: n.name)
    nodes = nodes[:: len(nodes) // NODE_COUNT][:NODE_COUNT]
    rng = np.random.default_rng(SEED)
    trace = load_pods(DATA / "openb_pod_list_default.csv")
    pods = [trace[i] for i in rng.choice(len(trace), size=POD_COUNT, replace=False)]

    # the simulator's path: the core on a snapshot, pods in arrival order
    snapshot = ClusterSnapshot.from_nodes(nodes)
    core_strategy = make_strategy(strategy)
    scheduler = Scheduler.with_random_ranks(
        core_strategy, snapshot.node_count, np.random.default_rng(SEED)
    )
    decision_rng = np.random.default_rng(SEED)
    expected: dict[str, tuple[str, tuple[int, ...]] | None] = {}
    for index, pod in enumerate(pods):
        scheduler.observe_arrival(pod)
        decision = scheduler.schedule_pod(snapshot, pod, decision_rng)
        placement = decision.placements[0] if decision.placed else None
        expected[f"p-{index:04d}"] = (placement.node, placement.gpu_indices) if placement else None

    # the operator's path: the same pods through the emulator's API
    config = EmulatorConfig(lifecycle=False)
    with running_emulator(nodes=nodes, config=config) as emulator:
        api = client.ApiClient(client.Configuration(host=emulator.url))
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": "voltpack-system"}})
        for index, pod in enumerate(pods):
            core.create_namespaced_pod(
                "default",
                pod_to_k8s(pod, f"p-{index:04d}"),
            )
        operator = Operator(
            api,
            OperatorConfig(
                policy=policy_for_strategy(strategy),
                identity="op",
                seed=SEED,
                cycle_interval_s=0.05,
            ),
        )
        stop = threading.Event()
        thread = threading.Thread(target=operator.run, args=(stop,), daemon=True)
        thread.start()
        placed = sum(1 for v in expected.values() if v is not None)
        wait_for(lambda: operator.stats.bound >= placed, timeout_s=60, what="every placement")
        stop.set()
        thread.join(timeout=15)
        actual: dict[str, tuple[str, tuple[int, ...]] | None] = {}
        for item in core.list_namespaced_pod("default").items:
            annotations = item.metadata.annotations or {}
            indices = tuple(
                int(i) for i in (annotations.get("voltpack.io/gpu-indices") or "").split(",") if i
            )
            actual[item.metadata.name] = (
                (item.spec.node_name, indices) if item.spec.node_name else None
            )
        api.close()
    assert actual == expected
