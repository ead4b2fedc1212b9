"""The row simulation records each server's energy, and it adds up to the row's."""

from __future__ import annotations

import numpy as np
import pytest

from voltpack.policies.schema import PowerSpec
from voltpack.sim.power_row import RowScenario, build_workload, run_row
from voltpack.sim.traces.azure_llm import azure_llm_dir, load_azure_llm_trace

SCENARIO = RowScenario(
    servers=8, budget_servers=5, training_share=0.25, duration_s=600, seed=3,
    mean_rate_per_s=0.8,
)  # fmt: skip


@pytest.mark.parametrize("policy", [None, "headroom"])
def test_server_energy_adds_up_to_the_row_energy(policy: str | None) -> None:
    trace = load_azure_llm_trace(azure_llm_dir() / "AzureLLMInferenceTrace_conv.csv")
    workload = build_workload(SCENARIO, trace)
    run = run_row(workload, None if policy is None else PowerSpec(policy=policy))
    assert run.server_energy_j.shape == (SCENARIO.servers,)
    assert run.server_energy_j.sum() == pytest.approx(run.row_power_w.sum(), rel=1e-9)
    # Every server draws at least its idle power for every second of the run.
    assert (run.server_energy_j > 0).all()
    training = run.server_energy_j[workload.n_inference :]
    assert training.size == 2 and np.isfinite(training).all()
