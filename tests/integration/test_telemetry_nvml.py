"""The NVML backend through the real `pynvml` against a fake libnvidia-ml.so.1.

The fake (tests/fakes/nvml/fake_nvml.c) is compiled with gcc and answers from a state file.
In this process it is dlopened by full path before pynvml's `CDLL("libnvidia-ml.so.1")`,
which glibc then resolves to it by soname; separate processes find it through
LD_LIBRARY_PATH. See tests/fakes/nvml/__init__.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pynvml  # type: ignore[import-untyped]
import pytest

from tests.conftest import REPO_ROOT
from tests.fakes.nvml import (
    STATE_ENV,
    FakeGpu,
    bus_id,
    subprocess_env,
    write_state,
)
from tests.fakes.state_file import read_state, update_state
from voltpack.telemetry.device import (
    GpuBackend,
    GpuLink,
    GpuLostError,
    PowerLimitRange,
    TelemetryError,
)
from voltpack.telemetry.nvml import NvmlBackend

NO_PERMISSION = str(pynvml.NVML_ERROR_NO_PERMISSION)
INVALID_ARGUMENT = str(pynvml.NVML_ERROR_INVALID_ARGUMENT)
NOT_SUPPORTED = str(pynvml.NVML_ERROR_NOT_SUPPORTED)


@pytest.fixture
def state(fake_nvml_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A state file of 8 H100s (GPU 6 throttled), selected for this process's fake."""
    path = tmp_path / "nvml-state"
    gpus = [FakeGpu(power_mw=100_000 + 1_111 * i, energy_mj=5_000_000 * (i + 1)) for i in range(8)]
    gpus[6].throttle_reasons = 0x4 | 0x40
    gpus[6].ecc_uncorrected_volatile = 3
    write_state(path, gpus)
    monkeypatch.setenv(STATE_ENV, str(path))
    return path


@pytest.fixture
def open_backend(state: Path) -> Iterator[Callable[[], NvmlBackend]]:
    """Opens backends on the current state; closes them after the test."""
    opened: list[NvmlBackend] = []

    def open_one() -> NvmlBackend:
        opened.append(NvmlBackend())
        return opened[-1]

    yield open_one
    for backend in opened:
        backend.close()


@pytest.fixture
def backend(open_backend: Callable[[], NvmlBackend]) -> NvmlBackend:
    return open_backend()


def test_is_a_gpu_backend(backend: NvmlBackend) -> None:
    typed: GpuBackend = backend
    assert typed.vendor == "nvidia"


def test_inventory_of_eight_gpus(backend: NvmlBackend) -> None:
    gpus = backend.inventory()

    assert [gpu.index for gpu in gpus] == list(range(8))
    assert len({gpu.uuid for gpu in gpus}) == 8
    first = gpus[0]
    assert first.name == "NVIDIA H100 80GB HBM3"
    assert first.vendor == "nvidia"
    assert first.uuid == "GPU-fa4e0000-0000-4000-8000-000000000000"
    assert first.pci_bus_id == "0000:18:00.0"  # NVML's 00000000:18:00.0, as Linux writes it
    assert gpus[7].pci_bus_id == "0000:88:00.0"
    assert first.memory_total_bytes == 80 * 1024**3
    assert first.mig_enabled is False
    assert first.numa_node == 0


def test_sample_of_eight_gpus_converts_units(backend: NvmlBackend) -> None:
    samples = [backend.sample(index) for index in range(8)]

    for index, sample in enumerate(samples):
        assert sample.index == index
        assert sample.healthy
        assert sample.power_w == pytest.approx(100.0 + 1.111 * index)  # mW -> W
        assert sample.energy_j == pytest.approx(5_000.0 * (index + 1))  # mJ -> J
    sample = samples[0]
    assert sample.uuid == "GPU-fa4e0000-0000-4000-8000-000000000000"
    assert sample.utilization_ratio == pytest.approx(0.75)
    assert sample.memory_used_bytes == 20 * 1024**3
    assert sample.power_limit_w == pytest.approx(700.0)
    assert sample.sm_clock_mhz == 1980
    assert sample.memory_clock_mhz == 2619
    assert sample.temperature_c == 61
    assert sample.throttle_reasons == ()
    assert sample.ecc_errors_total == 0
    assert sample.xid_errors_total == 0  # XID events are registered; none arrived yet
    assert sample.last_xid is None
    assert sample.faults == ()
    assert samples[6].throttle_reasons == ("sw-power-cap", "hw-thermal-slowdown")
    assert samples[6].ecc_errors_total == 3


def test_not_supported_fields_become_none(state: Path, backend: NvmlBackend) -> None:
    update_state(
        state,
        {
            "gpu.2.err.nvmlDeviceGetTemperature": NOT_SUPPORTED,
            "gpu.2.err.nvmlDeviceGetTotalEccErrors": NOT_SUPPORTED,
            "gpu.2.err.nvmlDeviceGetNumaNodeId": NOT_SUPPORTED,
            "gpu.2.err.nvmlDeviceGetMigMode": NOT_SUPPORTED,
        },
    )

    sample = backend.sample(2)
    inventory = backend.inventory()[2]

    assert sample.temperature_c is None
    assert sample.ecc_errors_total is None
    assert sample.power_w == pytest.approx(102.222)  # the other fields are still read
    assert inventory.numa_node is None
    assert inventory.mig_enabled is None
    assert backend.sample(3).temperature_c == 61


def test_old_driver_without_clock_event_reasons_falls_back_to_throttle_reasons(
    state: Path, backend: NvmlBackend
) -> None:
    update_state(
        state,
        {"err.nvmlDeviceGetCurrentClocksEventReasons": str(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)},
    )

    assert backend.sample(6).throttle_reasons == ("sw-power-cap", "hw-thermal-slowdown")


def test_power_limit_range(backend: NvmlBackend) -> None:
    assert backend.power_limit_range(0) == PowerLimitRange(
        min_w=200.0, max_w=700.0, default_w=700.0
    )


def test_set_power_limit_within_range_is_read_back(state: Path, backend: NvmlBackend) -> None:
    result = backend.set_power_limit(1, 450.5)

    assert result.ok, result.error
    assert result.action == "set-power-limit"
    assert result.requested == "450.5 W"
    assert result.applied == "450.5 W"
    assert result.error is None
    assert read_state(state)["gpu.1.power_limit_mw"] == "450500"  # the fake's driver state
    assert backend.sample(1).power_limit_w == pytest.approx(450.5)
    assert backend.sample(0).power_limit_w == pytest.approx(700.0)


def test_set_power_limit_out_of_range_reports_the_driver_error(backend: NvmlBackend) -> None:
    result = backend.set_power_limit(1, 1200)

    assert not result.ok
    assert result.applied == "700 W"  # read back: unchanged
    assert result.error is not None
    assert "Invalid Argument" in result.error
    assert "200-700 W" in result.error
    assert backend.sample(1).power_limit_w == pytest.approx(700.0)


def test_set_power_limit_without_permission_says_root(state: Path, backend: NvmlBackend) -> None:
    update_state(state, {"gpu.4.err.nvmlDeviceSetPowerManagementLimit": NO_PERMISSION})

    result = backend.set_power_limit(4, 300)

    assert not result.ok
    assert result.applied == "700 W"
    assert result.error is not None
    assert "root or CAP_SYS_ADMIN" in result.error
    assert "Insufficient Permissions" in result.error
    assert backend.set_power_limit(5, 300).ok  # only GPU 4 is refused


def test_failed_setter_is_reported_even_when_the_limit_already_matches(
    state: Path, backend: NvmlBackend
) -> None:
    """The `_v2` trap: nvidia-ml-py's SetPowerManagementLimit_v2 wrapper drops the driver's code."""
    refused = {
        "gpu.3.err.nvmlDeviceSetPowerManagementLimit": NO_PERMISSION,
        "gpu.3.err.nvmlDeviceSetPowerManagementLimit_v2": NO_PERMISSION,
    }
    update_state(state, refused)
    handle = pynvml.nvmlDeviceGetHandleByIndex(3)
    # The trap itself: the driver refuses, the wrapper says success.
    assert pynvml.nvmlDeviceSetPowerManagementLimit_v2(handle, 0, 300_000) == pynvml.NVML_SUCCESS
    assert read_state(state)["gpu.3.power_limit_mw"] == "700000"

    unchanged = backend.set_power_limit(3, 300)
    matching = backend.set_power_limit(3, 700)  # read-back equals the request: still a failure

    assert not unchanged.ok
    assert unchanged.applied == "700 W"
    assert not matching.ok
    assert matching.applied == "700 W"
    assert matching.error is not None
    assert "CAP_SYS_ADMIN" in matching.error


def test_set_power_limit_not_supported(state: Path, backend: NvmlBackend) -> None:
    update_state(state, {"gpu.0.err.nvmlDeviceSetPowerManagementLimit": NOT_SUPPORTED})

    result = backend.set_power_limit(0, 400)

    assert not result.ok
    assert result.error is not None
    assert "does not support" in result.error


def test_reset_power_limit_restores_the_default(backend: NvmlBackend) -> None:
    assert backend.set_power_limit(2, 350).ok

    result = backend.reset_power_limit(2)

    assert result.ok, result.error
    assert result.action == "reset-power-limit"
    assert result.requested == "default (700 W)"
    assert result.applied == "700 W"
    assert backend.sample(2).power_limit_w == pytest.approx(700.0)


def test_lock_and_unlock_clocks(backend: NvmlBackend) -> None:
    locked = backend.lock_clocks(0, 1000, 1400)

    assert locked.ok, locked.error
    assert locked.requested == "1000-1400 MHz"
    assert locked.applied == "1000-1400 MHz (SM clock 1400 MHz)"
    assert backend.sample(0).sm_clock_mhz == 1400
    assert backend.sample(1).sm_clock_mhz == 1980

    unlocked = backend.unlock_clocks(0)

    assert unlocked.ok, unlocked.error
    assert unlocked.applied == "driver-managed (SM clock 1980 MHz)"
    assert backend.sample(0).sm_clock_mhz == 1980


def test_lock_clocks_refusals_are_reported(state: Path, backend: NvmlBackend) -> None:
    out_of_range = backend.lock_clocks(0, 1000, 2500)
    update_state(state, {"gpu.1.err.nvmlDeviceSetGpuLockedClocks": NO_PERMISSION})
    no_permission = backend.lock_clocks(1, 1000, 1400)

    assert not out_of_range.ok
    assert out_of_range.error is not None
    assert "Invalid Argument" in out_of_range.error
    assert out_of_range.applied == "SM clock 1980 MHz"
    assert not no_permission.ok
    assert no_permission.error is not None
    assert "root or CAP_SYS_ADMIN" in no_permission.error


def test_lost_gpu_raises_for_that_gpu_only(state: Path, backend: NvmlBackend) -> None:
    assert backend.sample(3).healthy
    update_state(state, {"gpu.3.lost": "1"})

    with pytest.raises(GpuLostError, match="GPU 3 is lost"):
        backend.sample(3)
    assert backend.sample(2).healthy
    assert backend.sample(4).power_w == pytest.approx(104.444)
    refused = backend.set_power_limit(3, 300)  # actuation reports, never raises
    assert not refused.ok
    assert refused.error is not None
    assert "GPU 3 is lost" in refused.error


def test_gpu_lost_during_a_read_raises(state: Path, backend: NvmlBackend) -> None:
    update_state(state, {"gpu.5.err.nvmlDeviceGetPowerUsage": str(pynvml.NVML_ERROR_GPU_IS_LOST)})

    with pytest.raises(GpuLostError):
        backend.sample(5)
    assert backend.sample(6).healthy


def test_unknown_index_is_a_telemetry_error(backend: NvmlBackend) -> None:
    with pytest.raises(TelemetryError, match="no NVIDIA GPU with index 8: this node has 8"):
        backend.sample(8)


def test_topology_from_nvlink_and_common_ancestors(
    state: Path, open_backend: Callable[[], NvmlBackend]
) -> None:
    gpus = [
        FakeGpu(numa_node=0),
        FakeGpu(numa_node=0),
        FakeGpu(numa_node=1, nvlinks=0),
        FakeGpu(numa_node=1, nvlinks=0),
    ]
    write_state(
        state,
        gpus,
        nvlink_peers={0: [bus_id(1), bus_id(1)], 1: [bus_id(0), bus_id(0)]},
        topology={
            (0, 2): pynvml.NVML_TOPOLOGY_SINGLE,
            (0, 3): pynvml.NVML_TOPOLOGY_SYSTEM,
            (1, 2): pynvml.NVML_TOPOLOGY_HOSTBRIDGE,
            (1, 3): pynvml.NVML_TOPOLOGY_NODE,
        },  # (2, 3) missing: the driver cannot tell
    )

    topology = open_backend().topology()

    assert topology.links == (
        GpuLink(0, 1, "nvlink", 2),
        GpuLink(0, 2, "pcie-switch"),
        GpuLink(0, 3, "cross-socket"),
        GpuLink(1, 2, "pcie-host-bridge"),
        GpuLink(1, 3, "pcie-host-bridge"),
        GpuLink(2, 3, "unknown"),
    )
    assert topology.numa_node_of_gpu == {0: 0, 1: 0, 2: 1, 3: 1}


def test_topology_through_an_nvswitch(state: Path, open_backend: Callable[[], NvmlBackend]) -> None:
    switch = "00000000:C5:00.0"  # not a GPU: an NVSwitch port
    write_state(
        state,
        [FakeGpu() for _ in range(4)],
        nvlink_peers={index: [switch] * 3 for index in range(4)},
        topology={(a, b): pynvml.NVML_TOPOLOGY_SYSTEM for a in range(4) for b in range(a + 1, 4)},
    )

    links = open_backend().topology().links

    assert len(links) == 6
    assert {(link.kind, link.links) for link in links} == {("nvlink", 3)}


def run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_separate_agent_process_sees_and_persists_settings(
    fake_nvml_dir: Path, state: Path, backend: NvmlBackend
) -> None:
    """Another process finds the fake through LD_LIBRARY_PATH and shares its state file."""
    update_state(state, {"gpu.5.temperature_c": "77"})
    agent = run_python(
        """
        import json
        from voltpack.telemetry.nvml import NvmlBackend
        backend = NvmlBackend()
        result = backend.set_power_limit(5, 450)
        print(json.dumps({"ok": result.ok, "applied": result.applied,
                          "temperature_c": backend.sample(5).temperature_c}))
        backend.close()
        """,
        subprocess_env(fake_nvml_dir, state),
    )

    assert agent.returncode == 0, agent.stderr
    assert json.loads(agent.stdout) == {"ok": True, "applied": "450 W", "temperature_c": 77.0}
    assert backend.sample(5).power_limit_w == pytest.approx(450.0)


def test_missing_library_is_backend_unavailable(tmp_path: Path, state: Path) -> None:
    empty = tmp_path / "no-driver"
    empty.mkdir()
    result = run_python(
        """
        from voltpack.telemetry.device import BackendUnavailableError
        from voltpack.telemetry.nvml import NvmlBackend
        try:
            NvmlBackend()
        except BackendUnavailableError as err:
            print(err)
        else:
            print("NVML started")
        """,
        subprocess_env(empty, state),
    )

    assert result.returncode == 0, result.stderr
    assert "the NVIDIA driver (libnvidia-ml.so.1) was not found" in result.stdout
