"""The AMD SMI backend through the real `amdsmi` package against a fake libamd_smi.so.

The fake (tests/fakes/amdsmi/fake_amdsmi.c plus stubs generated from the installed
amdsmi_wrapper.py) is compiled with gcc into `<tmp>/voltpack-fake-rocm-*/lib/libamd_smi.so`.
`amdsmi` binds the library when it is first imported, from `$ROCM_PATH/lib`; the backend
imports `amdsmi` only when constructed, so this process points ROCM_PATH at the fake before
the first backend is built, and separate processes get ROCM_PATH in their environment.
See tests/fakes/amdsmi/__init__.py.
"""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.fakes.amdsmi import (
    PCIE,
    STATE_ENV,
    XGMI,
    FakeAmdGpu,
    bdf,
    build_fake_rocm,
    rocm_env,
    use_in_process,
    uuid,
    write_state,
)
from tests.fakes.state_file import read_state, update_state
from voltpack.telemetry import amd
from voltpack.telemetry.amd import AmdSmiBackend
from voltpack.telemetry.device import (
    GpuBackend,
    GpuLink,
    GpuLostError,
    PowerLimitRange,
    TelemetryError,
)

# amdsmi_status_t values the fake is told to answer with (amdsmi.h).
INVAL = "1"
NOT_SUPPORTED = "2"
NO_PERM = "10"
DRIVER_NOT_LOADED = "34"

GPUS = 4


@pytest.fixture(scope="session")
def fake_rocm() -> Path:
    rocm = build_fake_rocm()
    use_in_process(rocm)
    return rocm


def four_mi300x() -> list[FakeAmdGpu]:
    """Four MI300X with distinct readings; GPU 3 is capped at 637.5 W and power-throttled."""
    gpus = [
        FakeAmdGpu(
            socket_power=500 + 10 * i,
            current_socket_power=500 + 10 * i,
            energy_accumulator=1_000_000 * (i + 1),
            numa_node=i // 2,
            vram_used=(16 + i) * 1024**3,
        )
        for i in range(GPUS)
    ]
    gpus[3].power_cap = 637_500_000  # microwatts
    gpus[3].active_ppt = 1
    gpus[3].ecc_uncorrectable = 2
    return gpus


@pytest.fixture
def state(fake_rocm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A state file of 4 MI300X, all pairs linked by XGMI, selected for this process's fake."""
    path = tmp_path / "amdsmi-state"
    links = {(a, b): (XGMI, 1, 15) for a in range(GPUS) for b in range(a + 1, GPUS)}
    write_state(path, four_mi300x(), links=links)
    monkeypatch.setenv(STATE_ENV, str(path))
    return path


@pytest.fixture
def open_backend(state: Path) -> Iterator[Callable[[], AmdSmiBackend]]:
    """Opens backends on the current state; closes them after the test."""
    opened: list[AmdSmiBackend] = []

    def open_one() -> AmdSmiBackend:
        opened.append(AmdSmiBackend())
        return opened[-1]

    yield open_one
    for backend in opened:
        backend.close()


@pytest.fixture
def backend(open_backend: Callable[[], AmdSmiBackend]) -> AmdSmiBackend:
    return open_backend()


def run_python(code: str, env: dict[str, str]) -> dict[str, object]:
    """Run `code` in a fresh interpreter; it prints one JSON object as its last line."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- without ROCm --------------------------------------------------------------------------------


def test_missing_rocm_is_backend_unavailable_with_a_clear_message(tmp_path: Path) -> None:
    empty_rocm = tmp_path / "rocm"  # no lib/libamd_smi.so, as on a node without ROCm
    empty_rocm.mkdir()
    result = run_python(
        """
        import json
        from voltpack.telemetry.amd import AmdSmiBackend
        from voltpack.telemetry.device import BackendUnavailableError
        try:
            AmdSmiBackend()
            print(json.dumps({"error": None}))
        except BackendUnavailableError as err:
            print(json.dumps({"error": str(err)}))
        """,
        rocm_env(empty_rocm, None),
    )

    message = str(result["error"])
    assert "libamd_smi.so" in message
    assert "amd-smi-lib" in message
    assert "ROCM_PATH" in message
    assert str(empty_rocm / "lib") in message


def test_driver_not_loaded_is_backend_unavailable(state: Path) -> None:
    update_state(state, {"err.amdsmi_init": DRIVER_NOT_LOADED})

    with pytest.raises(TelemetryError, match="amdgpu driver is not loaded"):
        AmdSmiBackend()


# -- the fake is what amdsmi loaded, and it matches the bindings ---------------------------------


def test_amdsmi_loaded_the_fake_and_the_structs_match(backend: AmdSmiBackend) -> None:
    amdsmi_wrapper = sys.modules["amdsmi.amdsmi_wrapper"]  # imported by the backend

    lib = amdsmi_wrapper._libraries["libamd_smi.so"]
    assert lib.fakeAmdSmiIsFake() == 1
    lib.fakeAmdSmiSizeof.restype = ctypes.c_size_t
    lib.fakeAmdSmiSizeof.argtypes = [ctypes.c_char_p]
    for struct in (
        "amdsmi_asic_info_t",
        "amdsmi_engine_usage_t",
        "amdsmi_power_info_t",
        "amdsmi_power_cap_info_t",
        "amdsmi_clk_info_t",
        "amdsmi_error_count_t",
        "amdsmi_violation_status_t",
    ):
        assert lib.fakeAmdSmiSizeof(struct.encode()) == ctypes.sizeof(
            getattr(amdsmi_wrapper, struct)
        ), struct
    for name in ("INVAL", "NOT_SUPPORTED", "NO_PERM", "NOT_FOUND", "DRIVER_NOT_LOADED"):
        assert getattr(amd, f"STATUS_{name}") == getattr(amdsmi_wrapper, f"AMDSMI_STATUS_{name}")


# -- reads ---------------------------------------------------------------------------------------


def test_is_a_gpu_backend(backend: AmdSmiBackend) -> None:
    typed: GpuBackend = backend
    assert typed.vendor == "amd"


def test_inventory_of_four_gpus(backend: AmdSmiBackend) -> None:
    gpus = backend.inventory()

    assert [gpu.index for gpu in gpus] == list(range(GPUS))
    assert [gpu.uuid for gpu in gpus] == [uuid(i) for i in range(GPUS)]
    assert [gpu.pci_bus_id for gpu in gpus] == [bdf(i) for i in range(GPUS)]
    assert gpus[3].pci_bus_id == "0000:6c:00.0"
    first = gpus[0]
    assert first.name == "AMD Instinct MI300X"
    assert first.vendor == "amd"
    assert first.memory_total_bytes == 192 * 1024**3
    assert first.mig_enabled is None
    assert [gpu.numa_node for gpu in gpus] == [0, 0, 1, 1]


def test_sample_of_four_gpus_converts_units(backend: AmdSmiBackend) -> None:
    samples = [backend.sample(index) for index in range(GPUS)]

    for index, sample in enumerate(samples):
        assert sample.index == index
        assert sample.uuid == uuid(index)
        assert sample.healthy
        assert sample.power_w == pytest.approx(500.0 + 10 * index)  # already watts
        # 1e6 * (i + 1) ticks of 15.25 uJ
        assert sample.energy_j == pytest.approx(15.25 * (index + 1))
        assert sample.memory_used_bytes == (16 + index) * 1024**3
    sample = samples[0]
    assert sample.utilization_ratio == pytest.approx(0.87)  # GFX activity 87 %
    assert sample.power_limit_w == pytest.approx(750.0)  # 750_000_000 uW
    assert samples[3].power_limit_w == pytest.approx(637.5)  # 637_500_000 uW
    assert sample.sm_clock_mhz == 2100
    assert sample.memory_clock_mhz == 1300
    assert sample.temperature_c == 71  # MI300X: no edge sensor, the hotspot
    assert sample.throttle_reasons == ()
    assert sample.ecc_errors_total == 0
    assert sample.xid_errors_total is None
    assert samples[3].throttle_reasons == ("sw-power-cap",)
    assert samples[3].ecc_errors_total == 2


def test_older_card_reports_average_power_and_edge_temperature(
    state: Path, backend: AmdSmiBackend
) -> None:
    update_state(
        state,
        {
            "gpu.1.socket_power": "65535",  # 0xFFFF: not available
            "gpu.1.current_socket_power": "65535",
            "gpu.1.average_socket_power": "287",
            "gpu.1.temp_edge": "48",
        },
    )

    sample = backend.sample(1)

    assert sample.power_w == pytest.approx(287.0)
    assert sample.temperature_c == 48


def test_not_supported_fields_become_none(state: Path, backend: AmdSmiBackend) -> None:
    update_state(
        state,
        {
            "gpu.2.err.amdsmi_get_temp_metric": NOT_SUPPORTED,
            "gpu.2.err.amdsmi_get_gpu_total_ecc_count": NOT_SUPPORTED,
            "gpu.2.err.amdsmi_get_violation_status": NOT_SUPPORTED,
            "gpu.2.err.amdsmi_get_energy_count": NOT_SUPPORTED,
            "gpu.2.err.amdsmi_topo_get_numa_node_number": NOT_SUPPORTED,
        },
    )

    sample = backend.sample(2)

    assert sample.temperature_c is None
    assert sample.ecc_errors_total is None
    assert sample.energy_j is None
    assert sample.throttle_reasons == ()
    assert sample.power_w == pytest.approx(520.0)  # the other fields are still read
    assert backend.inventory()[2].numa_node is None
    assert backend.sample(3).temperature_c == 71


def test_power_limit_range_in_watts(backend: AmdSmiBackend) -> None:
    assert backend.power_limit_range(0) == PowerLimitRange(min_w=0.0, max_w=750.0, default_w=750.0)


# -- actuation -----------------------------------------------------------------------------------


def test_set_power_limit_within_range_is_read_back(state: Path, backend: AmdSmiBackend) -> None:
    result = backend.set_power_limit(1, 450.5)

    assert result.ok, result.error
    assert result.action == "set-power-limit"
    assert result.requested == "450.5 W"
    assert result.applied == "450.5 W"
    assert read_state(state)["gpu.1.power_cap"] == "450500000"  # microwatts to the driver
    assert backend.sample(1).power_limit_w == pytest.approx(450.5)
    assert backend.sample(0).power_limit_w == pytest.approx(750.0)


def test_set_power_limit_out_of_range_is_refused(state: Path, backend: AmdSmiBackend) -> None:
    result = backend.set_power_limit(1, 1200)

    assert not result.ok
    assert result.applied == "750 W"  # read back: unchanged
    assert result.error is not None
    assert "AMDSMI_STATUS_INVAL" in result.error
    assert "0-750 W" in result.error
    assert read_state(state)["gpu.1.power_cap"] == "750000000"


def test_set_power_limit_without_permission_says_root(state: Path, backend: AmdSmiBackend) -> None:
    update_state(state, {"gpu.2.err.amdsmi_set_power_cap": NO_PERM})

    result = backend.set_power_limit(2, 300)

    assert not result.ok
    assert result.applied == "750 W"
    assert result.error is not None
    assert "needs root" in result.error
    assert backend.set_power_limit(1, 300).ok  # only GPU 2 refuses


def test_reset_power_limit_goes_back_to_the_default(state: Path, backend: AmdSmiBackend) -> None:
    assert backend.set_power_limit(3, 400).ok

    result = backend.reset_power_limit(3)

    assert result.ok, result.error
    assert result.action == "reset-power-limit"
    assert result.requested == "default (750 W)"
    assert result.applied == "750 W"
    assert read_state(state)["gpu.3.power_cap"] == "750000000"


def test_lock_and_unlock_clocks(state: Path, backend: AmdSmiBackend) -> None:
    locked = backend.lock_clocks(2, 800, 1500)

    assert locked.ok, locked.error
    assert locked.applied == "800-1500 MHz"
    assert read_state(state)["gpu.2.locked_max"] == "1500"
    assert backend.sample(2).sm_clock_mhz == 1500

    unlocked = backend.unlock_clocks(2)

    assert unlocked.ok, unlocked.error
    assert unlocked.applied == "driver-managed (perf level auto)"
    assert "gpu.2.locked_max" not in read_state(state)


def test_lock_clocks_out_of_range_or_unsupported_is_refused(
    state: Path, backend: AmdSmiBackend
) -> None:
    out_of_range = backend.lock_clocks(0, 100, 3000)
    update_state(state, {"gpu.1.err.amdsmi_set_gpu_clk_range": NOT_SUPPORTED})
    unsupported = backend.lock_clocks(1, 800, 1500)

    assert not out_of_range.ok
    assert out_of_range.applied == "500-2100 MHz"
    assert "rejected" in str(out_of_range.error)
    assert not unsupported.ok
    assert "does not support" in str(unsupported.error)


# -- lost GPUs -----------------------------------------------------------------------------------


def test_lost_gpu_raises_for_that_gpu_only(state: Path, backend: AmdSmiBackend) -> None:
    update_state(state, {"gpu.3.lost": "1"})

    with pytest.raises(GpuLostError, match="GPU 3 is lost"):
        backend.sample(3)
    for index in range(3):
        assert backend.sample(index).healthy
    result = backend.set_power_limit(3, 400)  # actuation reports, never raises
    assert not result.ok
    assert "GPU 3 is lost" in str(result.error)
    assert not backend.lock_clocks(3, 800, 1500).ok


# -- topology ------------------------------------------------------------------------------------


def test_topology_of_four_xgmi_linked_gpus(backend: AmdSmiBackend) -> None:
    topology = backend.topology()

    assert topology.links == tuple(
        GpuLink(a, b, "xgmi", 1) for a in range(GPUS) for b in range(a + 1, GPUS)
    )
    assert topology.numa_node_of_gpu == {0: 0, 1: 0, 2: 1, 3: 1}


def test_topology_without_xgmi_falls_back_to_numa(
    fake_rocm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_state(
        tmp_path / "pcie-state",
        four_mi300x(),
        links={(0, 1): (PCIE, 2, 40), (0, 2): (PCIE, 3, 60), (1, 2): (XGMI, 2, 30)},
    )
    monkeypatch.setenv(STATE_ENV, str(path))

    with AmdSmiBackend() as backend:
        links = {(link.gpu_a, link.gpu_b): link for link in backend.topology().links}

    assert links[0, 1] == GpuLink(0, 1, "pcie-host-bridge")  # both on NUMA node 0
    assert links[0, 2] == GpuLink(0, 2, "cross-socket")
    assert links[1, 2] == GpuLink(1, 2, "xgmi", 0)  # two hops: no direct link
    assert links[0, 3] == GpuLink(0, 3, "unknown")  # the driver does not say


# -- another process -----------------------------------------------------------------------------


def test_a_separate_process_loads_the_fake_through_rocm_path(
    fake_rocm: Path, state: Path, backend: AmdSmiBackend
) -> None:
    assert backend.set_power_limit(0, 500).ok

    result = run_python(
        """
        import json
        from voltpack.telemetry.amd import AmdSmiBackend
        with AmdSmiBackend() as backend:
            sample = backend.sample(0)
            names = [gpu.name for gpu in backend.inventory()]
        print(json.dumps({"limit": sample.power_limit_w, "names": names}))
        """,
        rocm_env(fake_rocm, state),
    )

    assert result == {"limit": 500.0, "names": ["AMD Instinct MI300X"] * GPUS}


# -- fault signals -------------------------------------------------------------------------------


def test_fault_signals_ecc_thermal_and_lost(state: Path, backend: AmdSmiBackend) -> None:
    update_state(state, {"gpu.1.active_hbm_thrm": "1", "gpu.1.active_prochot": "1"})

    assert backend.sample(0).faults == ()
    ecc = backend.sample(3).faults  # 2 uncorrectable errors; PPT (power cap) is no fault
    assert [(f.signal, f.action) for f in ecc] == [("ecc", "reset")]
    assert "2 uncorrected" in ecc[0].message
    thermal = backend.sample(1).faults
    assert [(f.signal, f.action) for f in thermal] == [("thermal", "none")]
    assert "prochot-thermal" in thermal[0].message and "hbm-thermal" in thermal[0].message

    update_state(
        state, {"gpu.2.lost": "1", "gpu.1.active_hbm_thrm": "0", "gpu.1.active_prochot": "0"}
    )
    with pytest.raises(GpuLostError):
        backend.sample(2)
    assert [(f.signal, f.action) for f in backend.faults(2)] == [("fell-off-bus", "reboot")]
    assert backend.sample(1).faults == ()  # level signals clear with their cause
    update_state(state, {"gpu.2.lost": "0", "gpu.3.ecc_uncorrectable": "0"})
    assert backend.sample(2).faults == ()
    assert backend.sample(3).faults == ()
