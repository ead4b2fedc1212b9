"""Starting the emulator: settings are checked, ports in use are reported, nodes can be added."""

from __future__ import annotations

import pytest
from kubernetes import client

from voltpack.emulator import (
    EmulatorConfig,
    EmulatorError,
    EmulatorState,
    RunningEmulator,
    running_emulator,
)
from voltpack.model import Node


def test_bad_settings_are_reported_by_name() -> None:
    with pytest.raises(EmulatorError, match="history_size must be >= 1"):
        EmulatorConfig(history_size=0)
    with pytest.raises(EmulatorError, match="time_factor must be >= 0"):
        EmulatorConfig(time_factor=-1)


def test_a_port_in_use_is_an_emulator_error(emulator: RunningEmulator) -> None:
    with (
        pytest.raises(EmulatorError, match="could not listen"),
        running_emulator(port=emulator.port),
    ):
        raise AssertionError("a second emulator started on a port in use")


def test_nodes_added_while_running_are_served(
    emulator: RunningEmulator, core: client.CoreV1Api
) -> None:
    emulator.add_node(Node.empty("late", 8000, 32000, gpu_count=2, gpu_model="H100"))
    late = core.read_node("late")
    assert late.status.capacity["nvidia.com/gpu"] == "2"
    assert late.metadata.labels["voltpack.io/gpu-model"] == "H100"


def test_a_node_name_kubernetes_rejects_is_reported() -> None:
    bad = Node.empty("GPU_Node", 8000, 32000, gpu_count=1, gpu_model="A100")
    with pytest.raises(EmulatorError, match=r"cannot add node 'GPU_Node'.*RFC 1123"):
        EmulatorState(nodes=[bad])
