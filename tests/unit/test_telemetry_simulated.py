"""The simulated GPU backend (power model, caps, clocks, energy, lost GPUs) and the agent's
sampling and exporting logic driven by it with an injected clock."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from voltpack.telemetry.agent import NodeAgent
from voltpack.telemetry.device import (
    GpuBackend,
    GpuInventory,
    GpuLostError,
    GpuSample,
    TelemetryError,
)
from voltpack.telemetry.exporter import GpuReading, NodeReadings, PodRef, TelemetryExporter
from voltpack.telemetry.simulated import SimulatedBackend

# H100-SXM in the catalog: TDP 700 W, min cap 200 W, max SM clock 1980 MHz; idle is 10% of TDP.
IDLE_W = 70.0
TDP_W = 700.0


class FakeClock:
    """Monotonic seconds that move only when the test says so."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sim(clock: FakeClock) -> SimulatedBackend:
    return SimulatedBackend("H100-SXM", 8, clock=clock, utilization=0.0)


def test_is_a_gpu_backend(sim: SimulatedBackend) -> None:
    backend: GpuBackend = sim  # checked by mypy --strict
    assert backend.vendor == "simulated"
    inventory = backend.inventory()
    assert [gpu.index for gpu in inventory] == list(range(8))
    assert len({gpu.uuid for gpu in inventory}) == 8
    assert all(gpu.name == "H100-SXM" and gpu.memory_total_bytes == 80 * 2**30 for gpu in inventory)


def test_uuids_are_deterministic_per_node_and_seed(clock: FakeClock) -> None:
    def uuids(node: str, seed: int) -> list[str]:
        backend = SimulatedBackend("A100-80GB", 4, node_name=node, seed=seed, clock=clock)
        return [gpu.uuid for gpu in backend.inventory()]

    assert uuids("n1", 0) == uuids("n1", 0)
    assert uuids("n1", 0) != uuids("n2", 0)
    assert uuids("n1", 0) != uuids("n1", 1)


@pytest.mark.parametrize(
    ("utilization", "power_w"), [(0.0, IDLE_W), (0.5, IDLE_W + 0.5 * 630), (1.0, TDP_W)]
)
def test_power_is_idle_plus_dynamic_share(
    sim: SimulatedBackend, utilization: float, power_w: float
) -> None:
    sim.set_utilization(2, utilization)
    sample = sim.sample(2)
    assert sample.power_w == pytest.approx(power_w)
    assert sample.utilization_ratio == utilization
    assert sample.throttle_reasons == ()
    assert sample.sm_clock_mhz == pytest.approx(1980)
    assert sim.speed_factor(2) == 1.0


def test_a_binding_cap_holds_power_and_slows_the_gpu(sim: SimulatedBackend) -> None:
    sim.set_utilization(0, 1.0)
    result = sim.set_power_limit(0, 385)
    assert result.ok and result.applied == "385 W" and result.action == "set-power-limit"
    sample = sim.sample(0)
    assert sample.power_limit_w == 385
    assert sample.power_w == pytest.approx(385)
    assert sample.throttle_reasons == ("sw-power-cap",)
    # (385 - 70) / (700 - 70): half speed, half the clock
    assert sim.speed_factor(0) == pytest.approx(0.5)
    assert sample.sm_clock_mhz == pytest.approx(990)
    # a cap above the demand does not bind
    sim.set_utilization(0, 0.2)
    assert sim.sample(0).power_w == pytest.approx(IDLE_W + 0.2 * 630)
    assert sim.sample(0).throttle_reasons == ()


@pytest.mark.parametrize("watts", [199.0, 701.0, 0.0, -5.0])
def test_caps_outside_the_driver_range_are_refused_with_the_range(
    sim: SimulatedBackend, watts: float
) -> None:
    sim.set_power_limit(1, 400)
    result = sim.set_power_limit(1, watts)
    assert not result.ok
    assert result.error is not None and "200..700 W" in result.error
    assert result.applied == "400 W"  # read back: unchanged
    assert sim.sample(1).power_limit_w == 400


def test_caps_at_the_range_ends_are_accepted_and_reset_restores_the_default(
    sim: SimulatedBackend,
) -> None:
    limits = sim.power_limit_range(0)
    assert (limits.min_w, limits.max_w, limits.default_w) == (200, 700, 700)
    assert sim.set_power_limit(0, 200).ok
    assert sim.sample(0).power_limit_w == 200
    assert sim.set_power_limit(0, 700).ok
    sim.set_power_limit(0, 300)
    reset = sim.reset_power_limit(0)
    assert reset.ok and reset.applied == "700 W"
    assert sim.sample(0).power_limit_w == 700


def test_a_model_without_a_published_minimum_gets_a_quarter_of_tdp(clock: FakeClock) -> None:
    h200 = SimulatedBackend("H200", 1, clock=clock)
    assert h200.power_limit_range(0).min_w == 175


def test_locked_clocks_scale_the_dynamic_power(sim: SimulatedBackend) -> None:
    sim.set_utilization(0, 1.0)
    result = sim.lock_clocks(0, 210, 990)
    assert result.ok and result.applied == "210-990 MHz"
    sample = sim.sample(0)
    assert sample.power_w == pytest.approx(IDLE_W + 630 * 0.5)
    assert sample.sm_clock_mhz == pytest.approx(990)
    assert sim.speed_factor(0) == pytest.approx(0.5)
    assert sim.unlock_clocks(0).ok
    assert sim.sample(0).power_w == pytest.approx(TDP_W)


@pytest.mark.parametrize(("low", "high"), [(100, 990), (210, 2500), (1500, 1000)])
def test_clock_locks_outside_the_gpu_range_are_refused(
    sim: SimulatedBackend, low: int, high: int
) -> None:
    result = sim.lock_clocks(0, low, high)
    assert not result.ok
    assert result.error is not None and "210..1980 MHz" in result.error
    assert result.applied == "unlocked"


def test_energy_integrates_power_over_the_injected_clock(
    sim: SimulatedBackend, clock: FakeClock
) -> None:
    start = sim.sample(0).energy_j
    assert start == 0
    sim.set_utilization(0, 0.5)  # 385 W
    clock.advance(10)
    assert sim.sample(0).energy_j == pytest.approx(3850)
    sim.set_utilization(0, 1.0)  # 700 W
    clock.advance(5)
    sim.set_power_limit(0, 300)  # 300 W from now on
    clock.advance(2)
    assert sim.sample(0).energy_j == pytest.approx(3850 + 3500 + 600)
    # an idle GPU integrates its idle power
    assert sim.sample(1).energy_j == pytest.approx(17 * IDLE_W)


def test_energy_is_monotonic_and_matches_sampled_power_under_the_pattern(
    clock: FakeClock,
) -> None:
    backend = SimulatedBackend("A100-80GB", 2, clock=clock, seed=7, pattern_period_s=3.0)
    previous = backend.sample(1)
    levels = set()
    for _ in range(30):
        clock.advance(1.0)
        sample = backend.sample(1)
        assert previous.energy_j is not None and sample.energy_j is not None
        assert previous.power_w is not None
        # the pattern changes level only on whole periods, so each second runs at the power
        # sampled at its start
        assert sample.energy_j - previous.energy_j == pytest.approx(previous.power_w)
        assert sample.utilization_ratio is not None
        assert 0.2 <= sample.utilization_ratio <= 1.0
        levels.add(sample.utilization_ratio)
        previous = sample
    assert len(levels) > 3


def test_the_pattern_is_deterministic_per_seed() -> None:
    def trace(seed: int) -> list[float | None]:
        clock = FakeClock()
        backend = SimulatedBackend("L40S", 4, clock=clock, seed=seed, pattern_period_s=1.0)
        out = []
        for _ in range(10):
            clock.advance(1.0)
            out += [backend.sample(i).power_w for i in range(4)]
        return out

    assert trace(1) == trace(1)
    assert trace(1) != trace(2)


def test_a_lost_gpu_raises_and_refuses_actuation_while_the_others_answer(
    sim: SimulatedBackend, clock: FakeClock
) -> None:
    clock.advance(10)
    energy = sim.sample(3).energy_j
    sim.mark_lost(3)
    with pytest.raises(GpuLostError, match="GPU 3"):
        sim.sample(3)
    with pytest.raises(GpuLostError):
        sim.power_limit_range(3)
    refused = sim.set_power_limit(3, 300)
    assert not refused.ok and refused.error is not None and "fallen off the bus" in refused.error
    assert not sim.lock_clocks(3, 300, 900).ok
    assert sim.sample(2).healthy
    clock.advance(10)
    sim.mark_recovered(3)
    clock.advance(1)
    # no energy counted while the GPU was gone
    assert sim.sample(3).energy_j == pytest.approx((energy or 0) + IDLE_W)


def test_user_errors_name_the_problem(sim: SimulatedBackend, clock: FakeClock) -> None:
    with pytest.raises(TelemetryError, match=r"index 8; this node has 8 GPUs \(0..7\)"):
        sim.sample(8)
    with pytest.raises(TelemetryError, match=r"ratio in 0\.\.1"):
        sim.set_utilization(0, 1.5)
    with pytest.raises(TelemetryError, match="no tdp_w"):
        SimulatedBackend("G1", 1, clock=clock)
    with pytest.raises(TelemetryError, match="unknown GPU model"):
        SimulatedBackend("Z9000", 1, clock=clock)


def test_topology_is_nvlink_for_sxm_and_pcie_otherwise(clock: FakeClock) -> None:
    sxm = SimulatedBackend("H100-SXM", 8, clock=clock).topology()
    assert len(sxm.links) == 28
    assert {link.kind for link in sxm.links} == {"nvlink"}
    assert {link.links for link in sxm.links} == {18}
    pcie = SimulatedBackend("L40S", 4, clock=clock).topology()
    kinds = {(link.gpu_a, link.gpu_b): link.kind for link in pcie.links}
    assert kinds[(0, 1)] == "pcie-switch" and kinds[(0, 2)] == "cross-socket"
    assert pcie.numa_node_of_gpu == {0: 0, 1: 0, 2: 1, 3: 1}
    amd = SimulatedBackend("MI300X", 8, clock=clock).topology()
    assert {link.kind for link in amd.links} == {"xgmi"}


# -- the agent and the exporter over the simulated backend -------------------------------------


def metric_values(body: bytes, name: str) -> dict[str, float]:
    """gpu label -> value of one sample name in an exposition."""
    out = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == name:
                out[sample.labels.get("gpu", "")] = float(sample.value)
    return out


def test_agent_marks_a_lost_gpu_unhealthy_and_keeps_sampling_the_others(
    sim: SimulatedBackend, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    agent = NodeAgent(sim, "n1", clock=clock, wall_clock=lambda: 1.7e9)
    agent.sample_once(full=True)
    sim.mark_lost(5)
    for _ in range(3):
        clock.advance(1)
        agent.sample_once(full=True)
    assert sum("GPU 5" in record.getMessage() for record in caplog.records) == 1  # logged once
    readings = agent.readings()
    assert [gpu.healthy for gpu in readings.gpus] == [i != 5 for i in range(8)]
    body = agent.exporter.render()
    assert metric_values(body, "voltpack_gpu_healthy") == {
        str(i): (0.0 if i == 5 else 1.0) for i in range(8)
    }
    assert "5" not in metric_values(body, "voltpack_gpu_power_watts")
    assert metric_values(body, "voltpack_gpu_energy_joules_total")["4"] == pytest.approx(3 * IDLE_W)
    assert metric_values(body, "voltpack_agent_last_sample_timestamp_seconds") == {"": 1.7e9}
    sim.mark_recovered(5)
    agent.sample_once(full=False)  # power passes do not retry a failing GPU
    assert not agent.readings().gpus[5].healthy
    agent.sample_once(full=True)
    assert agent.readings().gpus[5].healthy


def test_power_passes_refresh_power_and_keep_the_rest(
    sim: SimulatedBackend, clock: FakeClock
) -> None:
    agent = NodeAgent(sim, "n1", clock=clock)
    agent.sample_once(full=True)
    sim.set_utilization(0, 1.0)
    clock.advance(1)
    agent.sample_once(full=False)
    sample = agent.readings().gpus[0].sample
    assert sample is not None
    assert sample.power_w == pytest.approx(TDP_W)
    assert sample.utilization_ratio == 0.0  # until the next full pass
    agent.sample_once(full=True)
    assert agent.readings().gpus[0].sample == sim.sample(0)


def test_health_turns_stale_after_three_power_intervals(
    sim: SimulatedBackend, clock: FakeClock
) -> None:
    agent = NodeAgent(sim, "n1", power_interval_s=1.0, clock=clock)
    fresh, body = agent.health()
    assert not fresh and body["status"] == "stale"  # nothing sampled yet
    agent.sample_once(full=True)
    clock.advance(3.0)
    assert agent.health()[0]
    clock.advance(0.5)
    fresh, body = agent.health()
    assert not fresh and body["last_sample_age_seconds"] == pytest.approx(3.5)


def test_exporter_omits_unknown_values_and_adds_pod_labels() -> None:
    inventory = GpuInventory(index=0, uuid="GPU-x", name="T4", vendor="simulated")
    sample = GpuSample(index=0, uuid="GPU-x", power_w=42.0)
    readings = NodeReadings(node="n1", gpus=(GpuReading(inventory, sample, healthy=True),))
    exporter = TelemetryExporter(
        lambda: readings, pod_mapping=lambda: {"GPU-x": PodRef("ns", "pod-0", "c")}
    )
    body = exporter.render().decode()
    families = {family.name for family in text_string_to_metric_families(body)}
    # the worst fault action is always known (none without faults), so always served
    assert families == {
        "voltpack_gpu_healthy",
        "voltpack_gpu_power_watts",
        "voltpack_gpu_fault_action",
    }
    assert 'namespace="ns"' in body and 'pod="pod-0"' in body and 'container="c"' in body
    # no global registry side effects: two exporters coexist
    assert TelemetryExporter(lambda: readings).render() != b""
