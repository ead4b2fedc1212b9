"""The node agent over 8 simulated GPUs, checked by promtool and scraped by a real Prometheus."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.prometheus import (
    http_get,
    promtool_check_metrics,
    require_binary,
    running_prometheus,
)
from voltpack.telemetry.agent import NodeAgent, RunningAgent, start_agent
from voltpack.telemetry.exporter import PodRef
from voltpack.telemetry.simulated import SimulatedBackend

GPUS = 8
POWER_INTERVAL_S = 0.2
FULL_INTERVAL_S = 1.0


@pytest.fixture
def backend() -> SimulatedBackend:
    """8 H100-SXM GPUs at fixed utilizations 0, 1/7, ..., 1 (GPU 7 busiest)."""
    sim = SimulatedBackend("H100-SXM", GPUS, node_name="gpu-node-0")
    for index in range(GPUS):
        sim.set_utilization(index, index / (GPUS - 1))
    return sim


@pytest.fixture
def agent(backend: SimulatedBackend) -> Iterator[RunningAgent]:
    """A real agent serving on 127.0.0.1 and a free port."""
    with start_agent(
        backend,
        "gpu-node-0",
        "127.0.0.1",
        0,
        power_interval_s=POWER_INTERVAL_S,
        full_interval_s=FULL_INTERVAL_S,
    ) as running:
        yield running


def scrape(agent: RunningAgent) -> bytes:
    status, body = http_get(f"{agent.url}/metrics")
    assert status == 200, body
    return body


def samples(body: bytes) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> [(labels, value)] of an exposition."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))
    return out


def by_gpu(result: list[dict[str, Any]]) -> dict[str, float]:
    """A Prometheus vector result as gpu label -> value."""
    return {series["metric"]["gpu"]: float(series["value"][1]) for series in result}


def test_exposition_passes_promtool(agent: RunningAgent, backend: SimulatedBackend) -> None:
    backend.set_power_limit(7, 300)  # a throttle reason and a cap
    backend.inject_xid(2, 79)
    backend.mark_lost(5)  # an unhealthy GPU in the same exposition
    agent.agent.sample_once(full=True)
    body = scrape(agent)
    result = promtool_check_metrics(body)
    assert result.returncode == 0, f"promtool:\n{result.stdout}{result.stderr}"
    names = samples(body)
    for name in (
        "voltpack_gpu_power_watts",
        "voltpack_gpu_energy_joules_total",
        "voltpack_gpu_utilization_ratio",
        "voltpack_gpu_memory_used_bytes",
        "voltpack_gpu_memory_total_bytes",
        "voltpack_gpu_power_limit_watts",
        "voltpack_gpu_sm_clock_hertz",
        "voltpack_gpu_memory_clock_hertz",
        "voltpack_gpu_temperature_celsius",
        "voltpack_gpu_healthy",
        "voltpack_gpu_xid_errors_total",
        "voltpack_gpu_ecc_errors_total",
        "voltpack_gpu_throttled",
        "voltpack_agent_last_sample_timestamp_seconds",
        "voltpack_agent_sample_duration_seconds",
    ):
        assert name in names, f"{name} missing from the exposition"
    throttled = names["voltpack_gpu_throttled"]
    assert [(lbl["gpu"], lbl["reason"], v) for lbl, v in throttled] == [("7", "sw-power-cap", 1)]
    limits = {lbl["gpu"]: v for lbl, v in names["voltpack_gpu_power_limit_watts"]}
    assert limits["7"] == 300 and limits["0"] == 700
    assert "5" not in limits  # a lost GPU serves no stale readings


def test_prometheus_scrapes_eight_gpus(
    agent: RunningAgent, tmp_path: Path, backend: SimulatedBackend
) -> None:
    with running_prometheus(tmp_path, [f"127.0.0.1:{agent.port}"]) as prom:
        prom.wait_until("the agent target to be up", prom.targets_up)
        power = prom.wait_for_query("voltpack_gpu_power_watts", lambda r: len(r) == GPUS)
        assert sorted(by_gpu(power)) == [str(i) for i in range(GPUS)]
        assert {s["metric"]["node"] for s in power} == {"gpu-node-0"}
        assert {s["metric"]["model"] for s in power} == {"H100-SXM"}
        assert len({s["metric"]["uuid"] for s in power}) == GPUS
        rate = prom.wait_for_query(
            "rate(voltpack_gpu_energy_joules_total[5s])", lambda r: len(r) == GPUS
        )
        rates = by_gpu(rate)
        assert all(value > 0 for value in rates.values()), rates
        # energy grows faster on a busier GPU: 70 W idle on GPU 0, 700 W on GPU 7
        assert rates["7"] > rates["3"] > rates["0"], rates
        healthy = prom.wait_for_query("voltpack_gpu_healthy", lambda r: len(r) == GPUS)
        assert set(by_gpu(healthy).values()) == {1.0}


def test_lost_gpu_turns_unhealthy_alone(
    agent: RunningAgent, tmp_path: Path, backend: SimulatedBackend
) -> None:
    with running_prometheus(tmp_path, [f"127.0.0.1:{agent.port}"]) as prom:
        prom.wait_until("the agent target to be up", prom.targets_up)
        prom.wait_for_query("voltpack_gpu_healthy == 1", lambda r: len(r) == GPUS)
        backend.mark_lost(3)
        unhealthy = prom.wait_for_query("voltpack_gpu_healthy == 0", lambda r: len(r) == 1)
        assert unhealthy[0]["metric"]["gpu"] == "3"
        assert len(prom.query("voltpack_gpu_healthy == 1")) == GPUS - 1
        before = by_gpu(prom.query("voltpack_gpu_energy_joules_total"))
        others = [str(i) for i in range(GPUS) if i != 3]

        def others_advanced(result: list[dict[str, Any]]) -> bool:
            now = by_gpu(result)
            return all(gpu in now and now[gpu] > before[gpu] for gpu in others)

        prom.wait_for_query("voltpack_gpu_energy_joules_total", others_advanced)
        # the lost GPU's readings go stale rather than repeating the last value
        prom.wait_for_query('voltpack_gpu_power_watts{gpu="3"}', lambda r: r == [])
        _, health = http_get(f"{agent.url}/healthz")
        assert json.loads(health)["unhealthy_gpus"] == [3]


def test_healthz_is_200_with_json_when_fresh(agent: RunningAgent) -> None:
    agent.agent.sample_once(full=True)
    status, body = http_get(f"{agent.url}/healthz")
    assert status == 200, body
    payload = json.loads(body)
    assert payload["status"] == "ok"
    assert payload["node"] == "gpu-node-0"
    assert payload["gpus"] == GPUS
    assert payload["unhealthy_gpus"] == []
    assert http_get(f"{agent.url}/nope")[0] == 404


def test_healthz_is_503_when_the_last_sample_is_stale(backend: SimulatedBackend) -> None:
    clock = [100.0]
    node_agent = NodeAgent(backend, "gpu-node-0", power_interval_s=60.0, clock=lambda: clock[0])
    with RunningAgent(node_agent, "127.0.0.1", 0) as running:
        # the sampler passes once at start, then sleeps a minute of real time
        node_agent.sample_once(full=True)
        assert http_get(f"{running.url}/healthz")[0] == 200
        clock[0] += 3 * 60.0 + 1
        status, body = http_get(f"{running.url}/healthz")
    assert status == 503, body
    assert json.loads(body)["status"] == "stale"


def test_dcgm_compat_names_units_and_labels(backend: SimulatedBackend) -> None:
    uuid0 = backend.inventory()[0].uuid
    backend.inject_xid(1, 48)
    with start_agent(
        backend,
        "gpu-node-0",
        power_interval_s=POWER_INTERVAL_S,
        full_interval_s=FULL_INTERVAL_S,
        dcgm_compat=True,
        pod_mapping=lambda: {uuid0: PodRef("team-a", "trainer-0", "main")},
    ) as running:
        running.agent.sample_once(full=True)
        body = scrape(running)
    names = samples(body)
    for name in (
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_XID_ERRORS",
    ):
        assert len(names.get(name, [])) == GPUS, f"{name} missing or incomplete"
        for labels, _ in names[name]:
            assert {"gpu", "UUID", "modelName", "Hostname"} <= set(labels), labels
            assert labels["Hostname"] == "gpu-node-0"

    def values(name: str) -> dict[str, float]:
        return {lbl["gpu"]: v for lbl, v in names[name]}

    for gpu in map(str, range(GPUS)):
        assert values("DCGM_FI_DEV_POWER_USAGE")[gpu] == values("voltpack_gpu_power_watts")[gpu]
        assert values("DCGM_FI_DEV_GPU_UTIL")[gpu] == pytest.approx(
            100 * values("voltpack_gpu_utilization_ratio")[gpu]
        )
        assert values("DCGM_FI_DEV_FB_USED")[gpu] == pytest.approx(
            values("voltpack_gpu_memory_used_bytes")[gpu] / 2**20
        )
        assert values("DCGM_FI_DEV_SM_CLOCK")[gpu] == pytest.approx(
            values("voltpack_gpu_sm_clock_hertz")[gpu] / 1e6
        )
        assert values("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")[gpu] == pytest.approx(
            1000 * values("voltpack_gpu_energy_joules_total")[gpu]
        )
    assert values("DCGM_FI_DEV_XID_ERRORS")["1"] == 48
    pod_labels = next(lbl for lbl, _ in names["DCGM_FI_DEV_POWER_USAGE"] if lbl["gpu"] == "0")
    assert (pod_labels["namespace"], pod_labels["pod"], pod_labels["container"]) == (
        "team-a",
        "trainer-0",
        "main",
    )
    ours_pod = next(lbl for lbl, _ in names["voltpack_gpu_power_watts"] if lbl["gpu"] == "0")
    assert ours_pod["pod"] == "trainer-0"
    # dcgm-exporter's camelCase label names are the only thing promtool objects to
    require_binary("promtool")
    result = promtool_check_metrics(body)
    problems = [line for line in result.stderr.splitlines() if line.strip()]
    assert all("label names should be written in 'snake_case'" in p for p in problems), problems


def test_fault_metrics_pass_promtool_and_reach_prometheus(
    agent: RunningAgent, tmp_path: Path, backend: SimulatedBackend
) -> None:
    backend.inject_xid(2, 48)
    backend.inject_xid(2, 48)
    backend.inject_xid(2, 13)
    backend.set_row_remap(4, pending=False, failure=True)
    backend.set_hw_throttle(6, ("hw-power-brake-slowdown",))
    backend.mark_lost(5)
    agent.agent.sample_once(full=True)
    body = scrape(agent)
    result = promtool_check_metrics(body)
    assert result.returncode == 0, f"promtool:\n{result.stdout}{result.stderr}"
    names = samples(body)
    worst = {lbl["gpu"]: lbl["action"] for lbl, v in names["voltpack_gpu_fault_action"] if v}
    assert worst == {
        "0": "none", "1": "none", "2": "reset", "3": "none",
        "4": "replace", "5": "reboot", "6": "none", "7": "none",
    }  # fmt: skip
    assert len(names["voltpack_gpu_fault_action"]) == 4 * GPUS  # one-hot over 4 actions
    active = sorted(
        (lbl["gpu"], lbl["signal"], lbl["code"], lbl["action"])
        for lbl, _ in names["voltpack_gpu_fault_active"]
    )
    assert active == [
        ("2", "xid", "13", "none"),
        ("2", "xid", "48", "reset"),
        ("4", "row-remap", "", "replace"),
        ("5", "fell-off-bus", "", "reboot"),
        ("6", "power-brake", "", "none"),
    ]
    by_code = {
        (lbl["gpu"], lbl["xid"]): v for lbl, v in names["voltpack_gpu_xid_errors_by_code_total"]
    }
    assert by_code == {("2", "48"): 2.0, ("2", "13"): 1.0}

    with running_prometheus(tmp_path, [f"127.0.0.1:{agent.port}"]) as prom:
        prom.wait_until("the agent target to be up", prom.targets_up)
        needs = prom.wait_for_query(
            'voltpack_gpu_fault_action{action!="none"} == 1', lambda r: len(r) == 3
        )
        assert {(s["metric"]["gpu"], s["metric"]["action"]) for s in needs} == {
            ("2", "reset"),
            ("4", "replace"),
            ("5", "reboot"),
        }
        backend.reset_gpu(2)
        prom.wait_for_query('voltpack_gpu_fault_action{gpu="2",action="none"} == 1', bool)
        assert prom.query('voltpack_gpu_fault_active{gpu="2"}') == []
