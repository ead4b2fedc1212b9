"""The row simulator with the energy mechanisms: same work, less energy, high priority kept."""

from __future__ import annotations

import numpy as np

from voltpack.policies.schema import PowerSpec
from voltpack.sim.power_row import RowScenario, build_workload, run_row
from voltpack.sim.traces.azure_llm import CONVERSATION_TRACE, azure_llm_dir
from voltpack.sim.traces.service_mix import load_service_mix

SCENARIO = RowScenario(
    servers=10, budget_servers=40, training_share=0.0, low_priority_inference_share=0.5,
    duration_s=1800, mean_rate_per_s=0.36,
)  # fmt: skip


def _run(efficiency: dict) -> tuple:
    workload = build_workload(SCENARIO, load_service_mix([azure_llm_dir() / CONVERSATION_TRACE]))
    return workload, run_row(workload, PowerSpec(policy="headroom", efficiency=efficiency))


def test_routing_and_phase_clocks_save_energy_without_touching_high_priority() -> None:
    """A budget far above the row: only the efficiency mechanisms act. High-priority requests
    see exactly what they see without them; low-priority requests all complete."""
    _, plain = _run({})
    workload, efficient = _run({"routing": {"max_prefill_share": 0.3}, "phase_clocks": {}})
    assert efficient.row_power_w.sum() < 0.97 * plain.row_power_w.sum()
    np.testing.assert_allclose(efficient.latency_s, plain.latency_s)
    assert efficient.low_completed >= plain.low_completed - 2
    assert workload.n_high == 5
    assert (efficient.clock_mhz[:5] == 1410).all()
    assert (efficient.clock_mhz[5:10, 120:] < 1410).any()


def test_phase_clocks_alone_lock_only_low_priority_servers() -> None:
    _, run = _run({"phase_clocks": {"max_slowdown": 0.08}})
    assert (run.clock_mhz[:5] == 1410).all()
    assert (run.clock_mhz[5:, 120:] <= 1260).mean() > 0.5
