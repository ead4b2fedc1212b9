"""The row's power split by group, and the floors no policy sparing high priority goes below."""

from __future__ import annotations

import numpy as np

from voltpack.sim.power_bound import row_power_parts
from voltpack.sim.power_row import RowScenario, build_workload, run_row
from voltpack.sim.traces.azure_llm import CONVERSATION_TRACE, azure_llm_dir
from voltpack.sim.traces.service_mix import load_service_mix


def test_floors_lie_between_high_priority_alone_and_the_uncapped_row() -> None:
    scenario = RowScenario(servers=20, training_share=0.4, duration_s=3600, mean_rate_per_s=0.4)
    workload = build_workload(scenario, load_service_mix([azure_llm_dir() / CONVERSATION_TRACE]))
    parts = row_power_parts(workload)
    np.testing.assert_allclose(parts.uncapped_w, run_row(workload, None).row_power_w, rtol=1e-9)
    assert (parts.high_w < parts.frugal_w).all()
    assert (parts.frugal_w < parts.training_kept_w).all()
    assert (parts.training_kept_w < parts.uncapped_w).all()
    summary = parts.summary()
    assert summary["frugal_peak_hour_share"] < summary["uncapped_peak_hour_share"]
    assert summary["frugal_peak_second_share"] >= summary["frugal_peak_hour_share"]
