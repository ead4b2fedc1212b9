"""Fault signals of the NVML backend through the real `pynvml` against the fake libnvidia-ml.so.1:
XIDs delivered through an event set, ECC, row remapping, NVLink error counters, a lost GPU,
HW thermal and power-brake throttling; first/last seen, the XID hold time and reset clearing.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.nvml import (
    STATE_ENV,
    FakeGpu,
    bus_id,
    raise_xid,
    subprocess_env,
    write_state,
)
from tests.fakes.state_file import read_state, update_state
from tests.integration.prometheus import free_port, running_prometheus
from voltpack.telemetry.device import GpuLostError
from voltpack.telemetry.faults import ActiveFault, worst_action
from voltpack.telemetry.nvml import NvmlBackend


class Clock:
    """A settable wall clock (Unix seconds)."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def state(fake_nvml_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Four H100s with row remapping reporting; GPUs 0 and 1 joined by two NVLinks."""
    path = tmp_path / "nvml-state"
    gpus = [FakeGpu(extra={"remap_pending": "0", "remap_failure": "0"}) for _ in range(4)]
    write_state(path, gpus, nvlink_peers={0: [bus_id(1), bus_id(1)], 1: [bus_id(0), bus_id(0)]})
    monkeypatch.setenv(STATE_ENV, str(path))
    return path


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def backend(state: Path, clock: Clock) -> Iterator[NvmlBackend]:
    nvml = NvmlBackend(xid_hold_s=600.0, wall_clock=clock, nvlink_interval_s=0.0)
    yield nvml
    nvml.close()


def by_signal(faults: tuple[ActiveFault, ...]) -> dict[tuple[str, int | None], ActiveFault]:
    return {(f.signal, f.code): f for f in faults}


def test_no_faults_on_healthy_gpus(backend: NvmlBackend) -> None:
    for index in range(4):
        sample = backend.sample(index)
        assert sample.faults == ()
        assert backend.faults(index) == ()
        assert sample.xid_errors_total == 0


def test_xid_arrives_through_the_event_set_latched_until_hold_time(
    state: Path, backend: NvmlBackend, clock: Clock
) -> None:
    backend.sample(2)  # registers GPU 2's event set
    raise_xid(state, 2, 48, 13)

    sample = backend.sample(2)

    faults = by_signal(sample.faults)
    assert set(faults) == {("xid", 48), ("xid", 13)}
    assert faults[("xid", 48)].action == "reset"
    assert "Double-bit ECC" in faults[("xid", 48)].message
    assert faults[("xid", 13)].action == "none"
    assert worst_action(sample.faults) == "reset"
    assert sample.xid_errors_total == 2
    assert sample.last_xid == 13
    assert read_state(state)["gpu.2.xid_queue"] == ""  # consumed by the event set
    assert backend.sample(1).faults == ()  # other GPUs untouched

    clock.now += 300
    raise_xid(state, 2, 48)  # raised again: last seen moves, first seen stays
    again = by_signal(backend.sample(2).faults)
    assert again[("xid", 48)].first_seen_s == faults[("xid", 48)].first_seen_s
    assert again[("xid", 48)].last_seen_s == clock.now
    assert backend.sample(2).xid_errors_total == 3

    clock.now += 599  # 13 was last seen 899 s ago: gone; 48 599 s ago: held
    assert set(by_signal(backend.sample(2).faults)) == {("xid", 48)}
    clock.now += 2
    assert backend.sample(2).faults == ()
    assert backend.faults(2) == ()


def test_xid_clears_when_the_gpu_is_reset(state: Path, backend: NvmlBackend) -> None:
    backend.sample(0)
    raise_xid(state, 0, 79)
    assert worst_action(backend.sample(0).faults) == "reboot"

    update_state(state, {"gpu.0.energy_mj": "1000"})  # the counter restarted: a reset

    assert backend.sample(0).faults == ()
    raise_xid(state, 0, 95)  # the event set was registered again after the reset
    assert by_signal(backend.sample(0).faults)[("xid", 95)].action == "reset"


def test_ecc_row_remap_and_throttle_are_level_signals(state: Path, backend: NvmlBackend) -> None:
    update_state(
        state,
        {
            "gpu.1.ecc_uncorrected_volatile": "2",
            "gpu.1.remap_pending": "1",
            "gpu.3.remap_failure": "1",
            "gpu.3.throttle_reasons": str(0x40 | 0x80 | 0x4),
        },
    )

    one = by_signal(backend.sample(1).faults)
    three = by_signal(backend.sample(3).faults)

    assert one[("ecc", None)].action == "reset"
    assert "2 uncorrected" in one[("ecc", None)].message
    assert one[("row-remap", None)].action == "reset"
    assert three[("row-remap", None)].action == "replace"
    assert three[("thermal", None)].action == "none"
    assert three[("power-brake", None)].action == "none"
    assert worst_action(three.values()) == "replace"

    update_state(state, {"gpu.1.ecc_uncorrected_volatile": "0", "gpu.1.remap_pending": "0"})
    assert backend.sample(1).faults == ()


def test_nvlink_error_growth(state: Path, backend: NvmlBackend) -> None:
    update_state(state, {"gpu.0.nvlink_err.1.0": "5"})  # replays before the agent started
    assert backend.sample(0).faults == ()  # the first reading is the baseline

    update_state(state, {"gpu.0.nvlink_err.1.0": "9"})
    replay = by_signal(backend.sample(0).faults)[("nvlink", None)]
    assert replay.action == "none"
    assert "replay +4" in replay.message

    update_state(state, {"gpu.0.nvlink_err.0.1": "1"})  # a recovery: the link was retrained
    recovery = by_signal(backend.sample(0).faults)[("nvlink", None)]
    assert recovery.action == "reset"
    assert "recovery +1" in recovery.message

    # latched like an XID: no growth since, still held, with the worst action it was raised with
    held = by_signal(backend.sample(0).faults)[("nvlink", None)]
    assert held.action == "reset"
    assert held.first_seen_s == replay.first_seen_s
    update_state(state, {"gpu.0.energy_mj": "1"})  # a reset restarts the counters
    assert backend.sample(0).faults == ()
    update_state(state, {"gpu.0.nvlink_err.0.1": "0", "gpu.0.nvlink_err.1.0": "0"})
    assert backend.sample(0).faults == ()  # counters restarted from zero: a new baseline


def test_nvlink_counters_are_read_at_most_every_interval(state: Path, clock: Clock) -> None:
    with NvmlBackend(wall_clock=clock, nvlink_interval_s=3600.0) as nvml:
        nvml.sample(0)  # baseline
        update_state(state, {"gpu.0.nvlink_err.0.1": "1"})
        assert nvml.sample(0).faults == ()  # not read again within the hour


def test_lost_gpu_is_fell_off_the_bus_until_it_answers(
    state: Path, backend: NvmlBackend, clock: Clock
) -> None:
    backend.sample(3)
    raise_xid(state, 3, 31)
    backend.sample(3)
    update_state(state, {"gpu.3.lost": "1"})

    with pytest.raises(GpuLostError):
        backend.sample(3)

    faults = by_signal(backend.faults(3))
    assert faults[("fell-off-bus", None)].action == "reboot"
    assert ("xid", 31) in faults  # XIDs stay latched while the GPU is away
    first = faults[("fell-off-bus", None)].first_seen_s
    clock.now += 10
    with pytest.raises(GpuLostError):
        backend.sample(3)
    assert by_signal(backend.faults(3))[("fell-off-bus", None)].first_seen_s == first

    update_state(state, {"gpu.3.lost": "0"})
    assert backend.sample(3).faults == ()  # back after a reset: everything cleared


def test_xid_events_unsupported_is_not_an_error(state: Path, clock: Clock) -> None:
    update_state(state, {"gpu.1.err.nvmlDeviceRegisterEvents": "3"})  # NOT_SUPPORTED
    with NvmlBackend(wall_clock=clock) as nvml:
        raise_xid(state, 1, 48)
        sample = nvml.sample(1)
        assert sample.xid_errors_total is None  # cannot tell, not 0
        assert sample.faults == ()
        assert nvml.sample(0).xid_errors_total == 0


def test_agent_process_over_fake_nvml_to_prometheus(
    fake_nvml_dir: Path, state: Path, tmp_path: Path
) -> None:
    """`voltpack agent --backend nvml` in its own process loads the fake by soname; an XID raised
    through the state file reaches Prometheus as a fault action, then a reset clears it."""
    port = free_port()
    env = subprocess_env(fake_nvml_dir, state)
    command = [
        sys.executable, "-m", "voltpack", "agent", "--backend", "nvml", "--node-name", "gpu-n0",
        "--host", "127.0.0.1", "--port", str(port), "--power-interval-s", "0.2",
        "--full-interval-s", "0.5", "--pod-resources-socket", str(tmp_path / "no-kubelet.sock"),
        "--xid-hold-s", "600",
    ]  # fmt: skip
    agent = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        with running_prometheus(tmp_path, [f"127.0.0.1:{port}"]) as prom:
            prom.wait_until("the agent target to be up", prom.targets_up)
            prom.wait_for_query(
                'voltpack_gpu_fault_action{action="none"} == 1', lambda r: len(r) == 4
            )
            raise_xid(state, 1, 79)
            update_state(state, {"gpu.2.remap_pending": "1"})
            needs = prom.wait_for_query(
                'voltpack_gpu_fault_action{action!="none"} == 1', lambda r: len(r) == 2
            )
            assert {(s["metric"]["gpu"], s["metric"]["action"]) for s in needs} == {
                ("1", "reboot"),
                ("2", "reset"),
            }
            counted = prom.wait_for_query("voltpack_gpu_xid_errors_by_code_total", bool)
            assert [(s["metric"]["gpu"], s["metric"]["xid"]) for s in counted] == [("1", "79")]
            update_state(state, {"gpu.1.energy_mj": "1", "gpu.2.remap_pending": "0"})  # resets
            prom.wait_for_query(
                'voltpack_gpu_fault_action{action="none"} == 1', lambda r: len(r) == 4
            )
    finally:
        agent.terminate()
        output = agent.communicate(timeout=30)[0].decode()
    assert agent.returncode == 0, output
