"""The examples on the modern inventory (`voltpack emulator --inventory alibaba-spot-2026`): the
GPUJobs accept A100-80GB, so they run there too, applied with kubectl as on the default cluster."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from tests.integration.conftest import Kubectl, operator_thread, wait_for
from voltpack.emulator import EmulatorConfig, RunningEmulator, running_emulator
from voltpack.model.errors import TraceFormatError
from voltpack.operator.kube.crds import install_crds
from voltpack.operator.runner import OperatorConfig
from voltpack.policies.schema import example_policy_path, load_policy
from voltpack.sim.datasets import inventory_nodes
from voltpack.sim.traces.alibaba_spot import load_spot_nodes

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SPINE, LEAF = "network.topology.nvidia.com/spine", "network.topology.nvidia.com/block"


def test_the_inventory_is_the_datasets_nodes() -> None:
    nodes = inventory_nodes("alibaba-spot-2026")
    assert len(nodes) == 4278 and sum(n.gpu_count for n in nodes) == 10412
    models = collections.Counter(n.gpu_model for n in nodes)
    assert models["A100-SXM4-80GB"] == 432 and models["H800"] == 219 and models["A10"] == 2494
    first = nodes[3]
    assert (first.name, first.gpu_count, first.cpu_milli) == ("spot-node-0003", 8, 128_000)
    assert first.memory_mib == 128 * 8 * 1024  # the stated assumption: 8 GiB per vCPU


def test_a_malformed_row_names_the_file_line_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "node_info_df.csv"
    bad.write_text("gpu_model,gpu_capacity_num,cpu_num,node_name\nA10,one,128,0\n")
    with pytest.raises(TraceFormatError, match=r"node_info_df.csv:2: field gpu_capacity_num='one'"):
        load_spot_nodes(bad)


@pytest.fixture
def spot_emulator() -> Iterator[RunningEmulator]:
    nodes = inventory_nodes("alibaba-spot-2026")
    with running_emulator(nodes=nodes, config=EmulatorConfig(time_factor=0.001)) as running:
        yield running


def test_the_example_jobs_run_on_a100_nodes(spot_emulator: RunningEmulator, tmp_path: Path) -> None:
    kubectl = Kubectl(spot_emulator.url, tmp_path)
    with client.ApiClient(client.Configuration(host=spot_emulator.url)) as api:
        install_crds(client.ApiextensionsV1Api(api))
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": "voltpack-system"}})
        a100 = [
            n.metadata.name
            for n in core.list_node(label_selector="voltpack.io/gpu-model=A100-SXM4-80GB").items
        ][:8]
        kubectl("label", "node", *a100, f"{SPINE}=sp1")
        kubectl("label", "node", *a100[:4], f"{LEAF}=b1")
        kubectl("label", "node", *a100[4:], f"{LEAF}=b2")
        config = OperatorConfig(
            policy=load_policy(example_policy_path("fgd")),
            identity="spot",
            cycle_interval_s=0.05,
            power=False,
        )
        with operator_thread(spot_emulator.url, config):
            for name in ("queues", "gpujob", "topology", "gpujob-topology"):
                kubectl("apply", "-f", str(EXAMPLES / f"{name}.yaml"))

            def placed() -> dict[str, str]:
                pods = core.list_namespaced_pod("default").items
                bound = {p.metadata.name: p.spec.node_name for p in pods if p.spec.node_name}
                return bound if len(bound) == 6 else {}

            nodes = wait_for(placed, timeout_s=60, what="both example jobs placed")
        models = {
            n.metadata.name: n.metadata.labels["voltpack.io/gpu-model"]
            for n in core.list_node().items
            if n.metadata.name in set(nodes.values())
        }
        assert set(models.values()) == {"A100-SXM4-80GB"}
        assert {nodes[f"gpt-13b-worker-{i}"] for i in range(4)} <= set(a100)
