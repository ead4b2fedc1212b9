"""The agent's GPUNode loop against the emulator: status from the GPUs, spec applied to them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.fakes.nvml import STATE_ENV, FakeGpu, raise_xid, write_state
from tests.unit.test_sysfs_topology import FakeSysfs
from voltpack.emulator import RunningEmulator
from voltpack.operator.gpunode_sync import GpuNodeSync
from voltpack.operator.kube.crds import install_crds
from voltpack.telemetry.nvml import NvmlBackend
from voltpack.telemetry.simulated import SimulatedBackend


def gpunode(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    return custom.get_cluster_custom_object(  # type: ignore[no-any-return]
        "voltpack.io", "v1alpha1", "gpunodes", name
    )


def agent_of_node_n(
    custom: client.CustomObjectsApi, extensions: client.ApiextensionsV1Api
) -> tuple[SimulatedBackend, GpuNodeSync]:
    """The CRDs installed and an agent of node `n` (two H100s) that has published once."""
    install_crds(extensions)
    backend = SimulatedBackend("H100-SXM", 2, node_name="n")
    sync = GpuNodeSync(custom, "n", backend)
    sync.reconcile_once()
    return backend, sync


def ask_node_n(custom: client.CustomObjectsApi, gpus: list[dict[str, Any]]) -> None:
    """The settings the operator asks of node `n`'s GPUs (its GPUNode's `spec.gpus`)."""
    custom.patch_cluster_custom_object(
        "voltpack.io", "v1alpha1", "gpunodes", "n", {"spec": {"gpus": gpus}}
    )


def test_status_reports_the_gpus_and_the_spec_is_applied(
    emulator: RunningEmulator,
    custom: client.CustomObjectsApi,
    extensions: client.ApiextensionsV1Api,
) -> None:
    install_crds(extensions)
    backend = SimulatedBackend("H100-SXM", 8, node_name="gpu-a100-0")
    sync = GpuNodeSync(custom, "gpu-a100-0", backend)
    # a fresh agent does not know what the last one left locked: the first pass resets clocks
    first = sync.reconcile_once()
    assert {(r.action, r.ok) for r in first} == {("unlock-clocks", True)} and len(first) == 8
    assert sync.reconcile_once() == []
    status = gpunode(custom, "gpu-a100-0")["status"]
    assert len(status["gpus"]) == 8
    assert {g["health"] for g in status["gpus"]} == {"Healthy"}
    assert status["gpus"][0]["powerLimitW"] == 700
    for gpu in status["gpus"]:  # the simulated GPUs' readings, as the straggler Events show
        assert gpu["powerDrawW"] > 0 and gpu["smClockMhz"] > 0
        assert 0 <= gpu["utilizationRatio"] <= 1
    assert status["topology"]["nvlinkDomains"] == [list(range(8))]

    custom.patch_cluster_custom_object(
        "voltpack.io", "v1alpha1", "gpunodes", "gpu-a100-0",
        {"spec": {"gpus": [
            {"index": 3, "powerLimitW": 400},
            {"index": 5, "lockedClocks": {"minMhz": 900, "maxMhz": 1400}},
        ]}},
    )  # fmt: skip
    results = sync.reconcile_once()
    assert [(r.index, r.action, r.ok) for r in results] == [
        (3, "set-power-limit", True),
        (5, "lock-clocks", True),
    ]
    assert backend.sample(3).power_limit_w == 400
    status = gpunode(custom, "gpu-a100-0")["status"]
    assert status["gpus"][3]["powerLimitW"] == 400
    assert status["gpus"][5]["lockedClocks"] == {"minMhz": 900, "maxMhz": 1400}
    applied = {c["type"]: c for c in status["conditions"]}["SettingsApplied"]
    assert applied["status"] == "True"
    # level-triggered: nothing to change on the next pass
    assert sync.reconcile_once() == []

    # removing the cap from the spec resets the GPU to its default limit
    custom.patch_cluster_custom_object(
        "voltpack.io", "v1alpha1", "gpunodes", "gpu-a100-0", {"spec": {"gpus": []}}
    )
    actions = [(r.index, r.action) for r in sync.reconcile_once()]
    assert (3, "reset-power-limit") in actions and (5, "unlock-clocks") in actions
    assert backend.sample(3).power_limit_w == 700


def test_a_refused_setting_is_reported_not_raised(
    emulator: RunningEmulator,
    custom: client.CustomObjectsApi,
    extensions: client.ApiextensionsV1Api,
) -> None:
    backend, sync = agent_of_node_n(custom, extensions)
    ask_node_n(custom, [{"index": 0, "powerLimitW": 5000}])  # fmt: skip
    results = sync.reconcile_once()
    assert [r.ok for r in results] == [False]
    applied = {c["type"]: c for c in gpunode(custom, "n")["status"]["conditions"]}
    assert applied["SettingsApplied"]["status"] == "False"
    assert "GPU 0 set-power-limit" in applied["SettingsApplied"]["message"]
    backend.mark_lost(1)
    sync.reconcile_once()
    gpus = gpunode(custom, "n")["status"]["gpus"]
    assert [g["health"] for g in gpus] == ["Healthy", "Unhealthy"]


def newer_gpunode_crd(extensions: client.ApiextensionsV1Api) -> None:
    """The GPUNode CRD of a newer voltpack (a rolling upgrade): `spec.gpus[]` has a field this
    agent does not know, so the API server keeps it and the agent cannot fully read the spec."""
    crd = extensions.api_client.sanitize_for_serialization(
        extensions.read_custom_resource_definition("gpunodes.voltpack.io")
    )
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    item = schema["properties"]["spec"]["properties"]["gpus"]["items"]
    item["properties"]["powerProfile"] = {"type": "string"}
    extensions.replace_custom_resource_definition("gpunodes.voltpack.io", crd)


def test_a_spec_the_agent_cannot_read_keeps_the_limits_it_applied(
    emulator: RunningEmulator,
    custom: client.CustomObjectsApi,
    extensions: client.ApiextensionsV1Api,
) -> None:
    backend, sync = agent_of_node_n(custom, extensions)
    ask_node_n(custom, [{"index": 0, "powerLimitW": 200},
                       {"index": 1, "lockedClocks": {"minMhz": 900, "maxMhz": 1400}}])  # fmt: skip
    sync.reconcile_once()
    assert backend.sample(0).power_limit_w == 200
    newer_gpunode_crd(extensions)
    ask_node_n(custom, [{"index": 0, "powerLimitW": 200, "powerProfile": "max-q"},
                       {"index": 1, "lockedClocks": {"minMhz": 900, "maxMhz": 1400}}])  # fmt: skip
    assert gpunode(custom, "n")["spec"]["gpus"][0]["powerProfile"] == "max-q"
    for _ in range(2):  # never reset: not on the first pass, not on the next
        assert sync.reconcile_once() == []
        assert backend.sample(0).power_limit_w == 200  # not the 700 W default
    status = gpunode(custom, "n")["status"]
    assert status["gpus"][1]["lockedClocks"] == {"minMhz": 900, "maxMhz": 1400}
    applied = {c["type"]: c for c in status["conditions"]}["SettingsApplied"]
    assert (applied["status"], applied["reason"]) == ("False", "SpecUnreadable")
    assert "spec.gpus.0.powerProfile" in applied["message"]
    assert "kept" in applied["message"]
    # a spec it can read again is applied again
    ask_node_n(custom, [{"index": 0, "powerLimitW": 300}])  # fmt: skip
    sync.reconcile_once()
    assert backend.sample(0).power_limit_w == 300
    applied = {c["type"]: c for c in gpunode(custom, "n")["status"]["conditions"]}
    assert applied["SettingsApplied"]["status"] == "True"


def test_nics_from_sysfs_are_published_with_the_gpus_they_serve(
    emulator: RunningEmulator,
    custom: client.CustomObjectsApi,
    extensions: client.ApiextensionsV1Api,
    tmp_path: Path,
) -> None:
    install_crds(extensions)
    backend = SimulatedBackend("A100-80GB", 4, node_name="n")
    addresses = [g.pci_bus_id for g in backend.inventory()]
    fs = FakeSysfs(tmp_path)
    for switch, (complex_bus, numa) in enumerate([("10", 0), ("80", 1)]):
        chain = [f"pci0000:{complex_bus}", f"0000:{complex_bus}:01.0", f"0000:{switch}1:00.0"]
        for gpu in (2 * switch, 2 * switch + 1):
            address = str(addresses[gpu]).lower().removeprefix("0000")
            fs.pci_device([*chain, f"0000:{switch}2:0{gpu}.0", address], numa)
        hca = fs.pci_device([*chain, f"0000:{switch}2:09.0", f"0000:{switch}5:00.0"], numa)
        fs.ib_device(hca, f"mlx5_{switch}", f"ib{switch}", "400 Gb/sec (4X NDR)")
    GpuNodeSync(custom, "n", backend, sysfs_root=str(tmp_path)).reconcile_once()
    nics = gpunode(custom, "n")["status"]["topology"]["nics"]
    assert nics == [
        {
            "name": "mlx5_0",
            "nicClass": "infiniband",
            "bandwidthGbps": 400.0,
            "numaNode": 0,
            "gpus": [0, 1],
        },
        {
            "name": "mlx5_1",
            "nicClass": "infiniband",
            "bandwidthGbps": 400.0,
            "numaNode": 1,
            "gpus": [2, 3],
        },
    ]


def test_without_actuation_the_spec_is_reported_not_applied(
    emulator: RunningEmulator,
    custom: client.CustomObjectsApi,
    extensions: client.ApiextensionsV1Api,
) -> None:
    install_crds(extensions)
    backend = SimulatedBackend("H100-SXM", 2, node_name="ro")
    sync = GpuNodeSync(custom, "ro", backend, actuate=False)
    assert sync.reconcile_once() == []
    applied = {c["type"]: c for c in gpunode(custom, "ro")["status"]["conditions"]}
    assert applied["SettingsApplied"]["status"] == "True"
    custom.patch_cluster_custom_object(
        "voltpack.io", "v1alpha1", "gpunodes", "ro",
        {"spec": {"gpus": [{"index": 1, "powerLimitW": 400}]}},
    )  # fmt: skip
    assert sync.reconcile_once() == []
    assert backend.sample(1).power_limit_w == 700
    status = gpunode(custom, "ro")["status"]
    assert status["gpus"][1]["powerLimitW"] == 700
    applied = {c["type"]: c for c in status["conditions"]}["SettingsApplied"]
    assert (applied["status"], applied["reason"]) == ("False", "ActuationDisabled")
    assert "1 GPU(s)" in applied["message"]


def test_fault_signals_become_gpu_faults_health_and_conditions(
    emulator: RunningEmulator,
    custom: client.CustomObjectsApi,
    extensions: client.ApiextensionsV1Api,
) -> None:
    install_crds(extensions)
    wall = [1_700_000_000.0]  # 2023-11-14T22:13:20Z
    backend = SimulatedBackend(
        "H100-SXM", 6, node_name="f", xid_hold_s=600, wall_clock=lambda: wall[0]
    )
    sync = GpuNodeSync(custom, "f", backend)
    backend.inject_xid(2, 79)
    backend.inject_xid(2, 13)
    backend.inject_ecc_errors(3, 2)
    backend.set_hw_throttle(4, ("hw-thermal-slowdown",))
    backend.mark_lost(5)
    sync.reconcile_once()

    status = gpunode(custom, "f")["status"]
    gpus = status["gpus"]
    assert [g["health"] for g in gpus] == [
        "Healthy", "Healthy", "Unhealthy", "Unhealthy", "Healthy", "Unhealthy"
    ]  # fmt: skip
    assert gpus[0].get("faults", []) == []
    assert [(f["signal"], f["code"], f["action"]) for f in gpus[2]["faults"]] == [
        ("xid", 13, "none"),
        ("xid", 79, "reboot"),
    ]
    assert gpus[2]["faults"][1]["firstSeen"] == "2023-11-14T22:13:20Z"
    assert [(f["signal"], f["action"]) for f in gpus[3]["faults"]] == [("ecc", "reset")]
    assert [(f["signal"], f["action"]) for f in gpus[4]["faults"]] == [("thermal", "none")]
    assert [(f["signal"], f["action"]) for f in gpus[5]["faults"]] == [("fell-off-bus", "reboot")]
    conditions = {c["type"]: c for c in status["conditions"]}
    assert "GPU0Fault" not in conditions
    assert conditions["GPU2Fault"]["status"] == "True"
    assert conditions["GPU2Fault"]["reason"] == "Xid79"
    assert "needs: reboot" in conditions["GPU2Fault"]["message"]
    assert conditions["GPU3Fault"]["reason"] == "Ecc"
    assert conditions["GPU4Fault"]["reason"] == "Thermal"
    assert "needs: none" in conditions["GPU4Fault"]["message"]
    assert conditions["GPU5Fault"]["reason"] == "FellOffBus"

    # a minute on, XID 79 again: last seen moves, first seen stays
    wall[0] += 60
    backend.inject_xid(2, 79)
    sync.reconcile_once()
    xid79 = gpunode(custom, "f")["status"]["gpus"][2]["faults"][1]
    assert (xid79["firstSeen"], xid79["lastSeen"]) == (
        "2023-11-14T22:13:20Z",
        "2023-11-14T22:14:20Z",
    )

    # GPU 2 is reset, GPU 3 too (volatile ECC clears), GPU 5 comes back, GPU 4 cools down
    for index in (2, 3, 5):
        backend.reset_gpu(index)
    backend.set_hw_throttle(4, ())
    sync.reconcile_once()
    status = gpunode(custom, "f")["status"]
    assert {g["health"] for g in status["gpus"]} == {"Healthy"}
    assert all(not g.get("faults") for g in status["gpus"])
    assert not [c for c in status["conditions"] if c["type"].endswith("Fault")]


def test_an_xid_clears_after_the_hold_time_without_a_reset(
    emulator: RunningEmulator,
    custom: client.CustomObjectsApi,
    extensions: client.ApiextensionsV1Api,
) -> None:
    install_crds(extensions)
    wall = [1_700_000_000.0]
    backend = SimulatedBackend(
        "H100-SXM", 2, node_name="h", xid_hold_s=600, wall_clock=lambda: wall[0]
    )
    sync = GpuNodeSync(custom, "h", backend)
    backend.inject_xid(1, 48)
    sync.reconcile_once()
    assert gpunode(custom, "h")["status"]["gpus"][1]["health"] == "Unhealthy"
    wall[0] += 600
    sync.reconcile_once()
    assert gpunode(custom, "h")["status"]["gpus"][1]["health"] == "Unhealthy"  # held
    wall[0] += 1
    sync.reconcile_once()
    status = gpunode(custom, "h")["status"]
    assert status["gpus"][1]["health"] == "Healthy"
    assert "GPU1Fault" not in {c["type"] for c in status["conditions"]}


def test_an_xid_from_the_fake_nvml_reaches_the_gpunode(
    emulator: RunningEmulator,
    custom: client.CustomObjectsApi,
    extensions: client.ApiextensionsV1Api,
    fake_nvml_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Real pynvml over the fake libnvidia-ml.so: the XID goes through the event set."""
    install_crds(extensions)
    state = write_state(tmp_path / "nvml-state", [FakeGpu() for _ in range(8)])
    monkeypatch.setenv(STATE_ENV, str(state))
    with NvmlBackend() as backend:
        sync = GpuNodeSync(custom, "nv", backend)
        sync.reconcile_once()  # registers the event sets
        raise_xid(state, 6, 79)
        sync.reconcile_once()
        status = gpunode(custom, "nv")["status"]
        assert [g["health"] for g in status["gpus"]].count("Unhealthy") == 1
        assert status["gpus"][6]["health"] == "Unhealthy"
        assert [(f["signal"], f["code"], f["action"]) for f in status["gpus"][6]["faults"]] == [
            ("xid", 79, "reboot")
        ]
        condition = {c["type"]: c for c in status["conditions"]}["GPU6Fault"]
        assert (condition["status"], condition["reason"]) == ("True", "Xid79")
        assert "XID 79: GPU has fallen off the bus" in condition["message"]


def test_the_gpus_power_draw_sm_clock_and_utilisation_are_published(
    emulator: RunningEmulator,
    custom: client.CustomObjectsApi,
    extensions: client.ApiextensionsV1Api,
    fake_nvml_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Real pynvml over the fake libnvidia-ml.so: the readings the straggler Events show."""
    install_crds(extensions)
    gpus = [FakeGpu(), FakeGpu(power_mw=281_500, sm_clock_mhz=1410, util_gpu=42)]
    state = write_state(tmp_path / "nvml-state", gpus)
    monkeypatch.setenv(STATE_ENV, str(state))
    with NvmlBackend() as backend:
        GpuNodeSync(custom, "nv", backend).reconcile_once()
        status = gpunode(custom, "nv")["status"]
    readings = [
        (g["index"], g["powerDrawW"], g["smClockMhz"], g["utilizationRatio"])
        for g in status["gpus"]
    ]
    assert readings == [(0, 412.345, 1980.0, 0.75), (1, 281.5, 1410.0, 0.42)]
