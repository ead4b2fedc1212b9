"""The power policy's efficiency mechanisms in the operator, end to end over the emulator: router
weights of a low-priority InferenceService, and phase-aware clocks through the GPUNode spec to
a node agent driving the fake libnvidia-ml.

One node of 8 H100s in rack r1 (a PowerBudget of 4000 W), its agent (`GpuNodeSync` over NVML)
and the operator (scheduler, InferenceService controller and power loop). Two services of
llama3-8b: `batch` (priority low, planned at 40 requests/s: 4 replicas of one GPU) and `chat`
(priority high: 1 replica). Every replica serves vLLM's Prometheus page from a fake server
(test_operator_inference_vllm's `network`) whose token counters grow as the test says.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.fakes.nvml import STATE_ENV, FakeGpu, write_state
from tests.fakes.state_file import read_state, update_state
from tests.integration.conftest import operator_thread, wait_for
from tests.integration.test_operator_inference import (  # noqa: F401 (fixtures)
    RATE,
    crds,
    create,
    get,
    replicas,
)
from tests.integration.test_operator_inference_vllm import FakeVllm, Network
from tests.integration.test_operator_inference_vllm import network as network_fixture  # noqa: F401
from tests.integration.test_power_loop import Agent, power_budget
from voltpack.emulator import EmulatorConfig, RunningEmulator, running_emulator
from voltpack.model import Node
from voltpack.operator.gpunode_sync import GpuNodeSync
from voltpack.operator.runner import Operator, OperatorConfig
from voltpack.policies.schema import parse_policy
from voltpack.telemetry.nvml import NvmlBackend

NODE = "gpu-h100-0"
RACK_LABEL = "voltpack.io/rack"
PHASE_LOCK_MHZ = 1575  # rung 2 of the default H100-SXM ladder: decode alone stretches 6 % there
FLOOR_W = 200  # the cap rung (the catalog's minimum H100-SXM power limit)
WAIT_S = 90.0
WEIGHT = "voltpack.io/router-weight"

POLICY = """
apiVersion: voltpack.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: efficiency-test}
spec:
  scoring: {strategy: best-fit}
  power:
    policy: thresholds
    params:
      thresholds: [0.6, 0.95]
      release_margin: 0.05
      hold_s: 3600
      low_priority_rungs: [0, 1, 4]
      high_priority_rungs: [0, 0, 1]
    stale_after_s: 10
    high_priority_min: 1000
    forecast: {enabled: false}
    efficiency:
      routing: {window_s: 1, lookback_s: 2, shrink_hold_s: 2, max_prefill_share: 0.5}
      phase_clocks: {window_s: 4, max_slowdown: 0.08}
"""


@pytest.fixture
def emulator() -> Iterator[RunningEmulator]:
    nodes = [Node.empty(NODE, 128_000, 1_048_576, 8, "H100-SXM")]
    with running_emulator(nodes=nodes, config=EmulatorConfig(time_factor=0.001)) as running:
        yield running


@pytest.fixture
def cluster(
    emulator: RunningEmulator,
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    fake_nvml_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[Operator, Path, Agent]]:
    """The rack's budget, the node's agent over the fake NVML (8 GPUs at 100 W), the
    operator with the policy above."""
    core.patch_node(NODE, {"metadata": {"labels": {RACK_LABEL: "r1"}}})
    custom.create_cluster_custom_object(
        "voltpack.io", "v1alpha1", "powerbudgets", power_budget("rack-r1", 4000)
    )
    state = tmp_path / "nvml-state"
    write_state(state, [FakeGpu(power_mw=100_000) for _ in range(8)])
    monkeypatch.setenv(STATE_ENV, str(state))
    backend = NvmlBackend()
    agent = Agent(GpuNodeSync(custom, NODE, backend))
    agent.start()
    config = OperatorConfig(
        policy=parse_policy(POLICY),
        identity="efficiency",
        namespace="voltpack-system",
        cycle_interval_s=0.05,
        lease_duration_s=5,
        power_interval_s=0.1,
        policy_configmap=None,
    )
    try:
        with operator_thread(emulator.url, config) as operator:
            yield operator, state, agent
    finally:
        agent.halt()
        backend.close()


def status(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    return dict(get(custom, name).get("status") or {})


def weights_of(core: client.CoreV1Api, service: str) -> dict[str, str | None]:
    return {
        p.metadata.name: (p.metadata.annotations or {}).get(WEIGHT) for p in replicas(core, service)
    }


def observe_rate(custom: client.CustomObjectsApi, name: str, rate_per_s: float) -> None:
    body = {"metadata": {"annotations": {RATE: str(rate_per_s)}}}
    custom.patch_namespaced_custom_object(
        "voltpack.io", "v1alpha1", "default", "inferenceservices", name, body
    )


def gpunode(custom: client.CustomObjectsApi) -> dict[str, Any]:
    found: dict[str, Any] = custom.get_cluster_custom_object(
        "voltpack.io", "v1alpha1", "gpunodes", NODE
    )
    return found


def spec_gpus(custom: client.CustomObjectsApi) -> dict[int, dict[str, Any]]:
    return {g["index"]: g for g in (gpunode(custom).get("spec") or {}).get("gpus") or []}


def status_gpus(custom: client.CustomObjectsApi) -> dict[int, dict[str, Any]]:
    return {g["index"]: g for g in (gpunode(custom).get("status") or {}).get("gpus") or []}


def served(network: Network, core: client.CoreV1Api, service: str, count: int) -> dict[str, Any]:
    """Pod name -> (its GPU index, its fake vLLM server), once `count` replicas are served."""

    def ready() -> dict[str, Any] | None:
        pods = replicas(core, service)
        with network.lock:
            found = {
                p.metadata.name: (
                    int((p.metadata.annotations or {})["voltpack.io/gpu-indices"]),
                    network.servers[p.metadata.uid],
                )
                for p in pods
                if p.metadata.uid in network.servers
                and "voltpack.io/gpu-indices" in (p.metadata.annotations or {})
            }
        return found if len(found) == count and len(pods) == count else None

    result: dict[str, Any] = wait_for(ready, timeout_s=WAIT_S, what=f"{count} served replicas")
    return result


def test_low_priority_routing_and_phase_clocks_through_the_gpunode_spec(
    cluster: tuple[Operator, Path, Agent],
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    network_fixture: Network,  # noqa: F811 (the imported fixture)
) -> None:
    network = network_fixture
    _, state, agent = cluster
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        network.port = probe.getsockname()[1]
    scaling = {
        "mode": "reactive",
        "replanRateChange": 0.99,  # the plan of 4 replicas stays; routing packs inside it
        "metrics": {"port": network.port, "timeoutSeconds": 0.5},
    }
    spec = {"gpuTypes": ["H100-SXM"], "scaling": scaling}
    create(custom, "batch", ratePerSecond=40, priority="low", **spec)
    create(custom, "chat", ratePerSecond=5, priority="high", **spec)
    batch = served(network, core, "batch", 4)
    chat = served(network, core, "chat", 1)

    # (1) no measured rate yet: every replica an equal share, never none
    wait_for(
        lambda: (status(custom, "batch").get("routing") or {}).get("reason") == "NoMeasuredRate",
        timeout_s=WAIT_S,
        what="equal weights without a measured rate",
    )
    assert status(custom, "batch")["routing"]["weights"] == {pod: 0.25 for pod in batch}
    wait_for(
        lambda: set(weights_of(core, "batch").values()) == {"250"},
        timeout_s=WAIT_S,
        what="each replica annotated with an equal weight",
    )
    assert "routing" not in status(custom, "chat")  # high priority: never consolidated
    assert set(weights_of(core, "chat").values()) == {None}

    # (2) a low measured rate: after the lookback and the hold, fewer replicas take requests
    observe_rate(custom, "batch", 0.5)  # within the band: the plan stays
    routing = wait_for(
        lambda: (
            (r := status(custom, "batch").get("routing") or {}).get("activeReplicas", 4) < 4 and r
        ),
        timeout_s=WAIT_S,
        what="the pool consolidated",
    )
    active = routing["activeReplicas"]
    assert routing["reason"] == "Consolidated" and routing["replicas"] == 4, routing
    assert sum(routing["weights"].values()) == pytest.approx(1.0)
    assert sorted(routing["weights"].values()) == [0.0] * (4 - active) + [1 / active] * active
    assert len(status(custom, "batch")["plan"]) == 1 and status(custom, "batch")["replicas"] == 4
    wait_for(
        lambda: (
            sorted(weights_of(core, "batch").values(), key=str)
            == sorted(["0"] * (4 - active) + [str(round(1000 / active))] * active, key=str)
        ),
        timeout_s=WAIT_S,
        what="the pods annotated with the consolidated weights",
        explain=lambda: str(weights_of(core, "batch")),
    )

    # (3) the rate rises: the pool grows back at once
    observe_rate(custom, "batch", 40)
    wait_for(
        lambda: (status(custom, "batch").get("routing") or {}).get("activeReplicas") == 4,
        timeout_s=WAIT_S,
        what="the pool grown back",
    )
    wait_for(
        lambda: set(weights_of(core, "batch").values()) == {"250"},
        timeout_s=WAIT_S,
        what="every replica weighted again",
    )

    # (4) one low-priority replica only decodes, the others only prefill, and the
    # high-priority replica only decodes: the decoding low replica's GPU is locked
    decoder, (decode_gpu, decode_fake) = sorted(batch.items())[0]
    fakes: list[FakeVllm] = [fake for _, fake in batch.values()]
    with network.lock:
        for fake in fakes:
            fake.prompt_per_s = 40_000.0
        decode_fake.prompt_per_s, decode_fake.generation_per_s = 0.0, 500.0
        chat_gpu, chat_fake = next(iter(chat.values()))
        chat_fake.generation_per_s = 500.0
    phases = wait_for(
        lambda: (
            (p := status(custom, "batch").get("replicaPhases") or {})
            .get(decoder, {})
            .get("decodeShare", 0)
            > 0.5
            and p
        ),
        timeout_s=WAIT_S,
        what="the decoding replica's phase mix",
    )
    assert phases[decoder]["prefillShare"] == 0 and phases[decoder]["decodeShare"] > 0.5
    assert "replicaPhases" not in status(custom, "chat")
    # (an idle replica is locked deepest: its clock costs no request anything)
    wait_for(
        lambda: (
            (status_gpus(custom).get(decode_gpu) or {}).get("lockedClocks", {}).get("maxMhz")
            == PHASE_LOCK_MHZ
        ),
        timeout_s=WAIT_S,
        what="the agent to report the decoding replica's GPU locked at the phase clock",
        explain=lambda: str(status_gpus(custom).get(decode_gpu)),
    )
    assert spec_gpus(custom)[decode_gpu]["lockedClocks"]["maxMhz"] == PHASE_LOCK_MHZ
    assert read_state(state)[f"gpu.{decode_gpu}.locked_max_mhz"] == str(PHASE_LOCK_MHZ)
    prefill_gpus = [gpu for pod, (gpu, _) in batch.items() if pod != decoder]
    wait_for(
        lambda: all(
            (status(custom, "batch").get("replicaPhases") or {}).get(pod, {}).get("prefillShare")
            == 1
            for pod in batch
            if pod != decoder
        ),
        timeout_s=WAIT_S,
        what="the prefilling replicas' mix",
    )
    wait_for(  # full clocks for prefill
        lambda: not set(prefill_gpus) & set(spec_gpus(custom)),
        timeout_s=WAIT_S,
        what="the prefilling replicas' GPUs unlocked",
        explain=lambda: str(spec_gpus(custom)),
    )
    assert chat_gpu not in spec_gpus(custom)  # high priority: not clocked by phase

    # (5) the budget under pressure still sheds deeper than the phase floor
    with agent.lock:
        update_state(state, {f"gpu.{i}.power_mw": str(480_000) for i in range(8)})
    capped = wait_for(
        lambda: (
            (g := status_gpus(custom).get(decode_gpu) or {}).get("powerLimitW") == FLOOR_W and g
        ),
        timeout_s=WAIT_S,
        what="the decoding replica's GPU capped under pressure",
    )
    assert not capped.get("lockedClocks")
    assert read_state(state)[f"gpu.{decode_gpu}.power_limit_mw"] == str(FLOOR_W * 1000)
    assert "powerLimitW" not in spec_gpus(custom).get(chat_gpu, {})  # high priority: last


def test_a_lost_mix_releases_the_phase_lock(
    cluster: tuple[Operator, Path, Agent],
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    network_fixture: Network,  # noqa: F811 (the imported fixture)
) -> None:
    """A replica whose metrics stop answering has no mix: its floor goes (no efficiency lock
    without a fresh measurement), and the equal-weight fail-safe holds with no rate."""
    network = network_fixture
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        network.port = probe.getsockname()[1]
    scaling = {"metrics": {"port": network.port, "timeoutSeconds": 0.5}}
    create(custom, "batch", ratePerSecond=5, priority="low", gpuTypes=["H100-SXM"], scaling=scaling)
    ((pod, (gpu, fake)),) = served(network, core, "batch", 1).items()
    with network.lock:
        fake.generation_per_s = 500.0
    wait_for(
        lambda: (spec_gpus(custom).get(gpu) or {}).get("lockedClocks"),
        timeout_s=WAIT_S,
        what="the decoding replica locked",
    )
    with network.lock:
        fake.broken = True
    wait_for(
        lambda: gpu not in spec_gpus(custom),
        timeout_s=WAIT_S,
        what="the lock released once the mix is gone",
    )
    assert pod not in (status(custom, "batch").get("replicaPhases") or {})
    assert status(custom, "batch")["routing"]["weights"] == {pod: 1.0}
