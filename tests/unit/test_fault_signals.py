"""FaultTracker (level vs latched signals, first/last seen, hold time, reset) and the simulated
backend's fault injectors."""

from __future__ import annotations

import pytest

from voltpack.telemetry.device import GpuLostError
from voltpack.telemetry.faults import (
    FaultSignal,
    FaultTracker,
    ecc_signal,
    nvlink_signal,
    row_remap_signals,
    throttle_signals,
    worst_action,
)
from voltpack.telemetry.simulated import SimulatedBackend


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


XID_48 = FaultSignal("xid", "reset", "XID 48", 48)
ECC = ecc_signal(3)[0]


def test_level_signal_is_active_while_reported() -> None:
    clock = Clock()
    tracker = FaultTracker(clock=clock)
    tracker.observe(0, [ECC])
    clock.now += 5
    (fault,) = tracker.observe(0, [ECC])
    assert (fault.first_seen_s, fault.last_seen_s) == (1000.0, 1005.0)
    assert tracker.observe(0, []) == ()
    clock.now += 5
    (again,) = tracker.observe(0, [ECC])
    assert again.first_seen_s == 1010.0  # a new occurrence after clearing


def test_event_is_latched_until_the_hold_time() -> None:
    clock = Clock()
    tracker = FaultTracker(xid_hold_s=60, clock=clock)
    tracker.observe(1, events=[XID_48])
    clock.now += 60
    assert [f.code for f in tracker.observe(1)] == [48]
    clock.now += 0.5
    assert tracker.active(1) == ()  # active() applies the hold without an observation
    assert tracker.observe(1) == ()
    assert tracker.xid_counts(1) == {48: 1}  # the count stays


def test_reset_clears_latched_faults_only() -> None:
    tracker = FaultTracker(clock=Clock())
    tracker.observe(2, [ECC], [XID_48, *nvlink_signal({"recovery": 1})])
    tracker.reset(2)
    assert [f.signal for f in tracker.active(2)] == ["ecc"]


def test_latched_fault_keeps_its_worst_action() -> None:
    tracker = FaultTracker(clock=Clock())
    tracker.observe(0, events=nvlink_signal({"recovery": 1}))
    (fault,) = tracker.observe(0, events=nvlink_signal({"replay": 3}))
    assert fault.action == "reset"
    assert "replay +3" in fault.message


def test_gpus_are_independent() -> None:
    tracker = FaultTracker(clock=Clock())
    tracker.observe(0, events=[XID_48])
    assert tracker.observe(1) == ()
    assert len(tracker.active(0)) == 1


def test_hold_time_must_be_positive() -> None:
    with pytest.raises(ValueError, match="xid_hold_s must be positive"):
        FaultTracker(xid_hold_s=0)


def test_signal_helpers() -> None:
    assert ecc_signal(0) == [] and ecc_signal(None) == []
    assert row_remap_signals(False, False) == []
    assert [s.action for s in row_remap_signals(True, False)] == ["reset"]
    assert [s.action for s in row_remap_signals(True, True)] == ["replace"]
    assert nvlink_signal({}) == []
    assert [s.signal for s in throttle_signals(("sw-power-cap", "hw-power-brake-slowdown"))] == [
        "power-brake"
    ]
    assert worst_action([]) == "none"
    assert worst_action([*row_remap_signals(True, True), XID_48]) == "replace"


def test_simulated_backend_raises_every_signal_and_a_reset_clears() -> None:
    clock, wall = Clock(), Clock()
    sim = SimulatedBackend("H100-SXM", 8, clock=clock, wall_clock=wall, xid_hold_s=300)
    sim.inject_xid(0, 95)
    sim.inject_ecc_errors(1, 2)
    sim.set_row_remap(2, pending=True)
    sim.inject_nvlink_errors(3, "replay", 7)
    sim.set_hw_throttle(4, ("hw-thermal-slowdown", "hw-power-brake-slowdown"))
    sim.mark_lost(5)
    faults = {i: [(f.signal, f.code, f.action) for f in sim.sample(i).faults] for i in range(5)}
    assert faults == {
        0: [("xid", 95, "reset")],
        1: [("ecc", None, "reset")],
        2: [("row-remap", None, "reset")],
        3: [("nvlink", None, "none")],
        4: [("power-brake", None, "none"), ("thermal", None, "none")],
    }
    assert "hw-thermal-slowdown" in sim.sample(4).throttle_reasons
    with pytest.raises(GpuLostError):
        sim.sample(5)
    assert [f.signal for f in sim.faults(5)] == ["fell-off-bus"]
    assert sim.sample(0).xid_counts == ((95, 1),)
    for index in range(6):
        sim.reset_gpu(index)
    sim.set_hw_throttle(4, ())
    assert all(sim.sample(i).faults == () for i in range(6))
    assert sim.sample(1).ecc_errors_total == 2  # the lifetime counter keeps counting


def test_simulated_xid_expires_after_the_hold_time() -> None:
    wall = Clock()
    sim = SimulatedBackend("H100-SXM", 1, wall_clock=wall, xid_hold_s=300)
    sim.inject_xid(0, 79)
    assert worst_action(sim.sample(0).faults) == "reboot"
    wall.now += 301
    assert sim.sample(0).faults == ()
