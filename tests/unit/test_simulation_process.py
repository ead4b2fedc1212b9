"""A simulation's child process: the report simulating here would give, its progress as it
goes, and a clear error when it runs out of time."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from voltpack.api.simulation_process import SimulationFailedError, simulate_in_child
from voltpack.api.simulations import SimulationRequest, _trace_path, simulate

REQUEST = SimulationRequest(
    trace="physical_cluster/small_test.trace",
    cluster="2:2:2",
    policies=["fifo", "max_min_fairness"],
    seeds=[0, 1],
)


def without_timings(report: dict[str, Any]) -> dict[str, Any]:
    """The report without the solver's wall-clock times, which differ run to run."""
    text = json.dumps(report, sort_keys=True)
    return json.loads(re.sub(r'"solve_[a-z0-9_]+": [0-9.e-]+', '"solve": 0', text))  # type: ignore[no-any-return]


def test_the_child_reports_as_simulating_here_would_with_its_progress() -> None:
    path = _trace_path(REQUEST.trace)
    shares: list[float] = []
    there = simulate_in_child(REQUEST, path, shares.append)
    assert without_timings(there) == without_timings(simulate(REQUEST, path, lambda _: None))
    assert shares == [0.25, 0.5, 0.75, 1.0]
    assert set(there["results"]) == {"fifo", "max_min_fairness"}


def test_a_child_that_runs_too_long_is_killed() -> None:
    with pytest.raises(SimulationFailedError, match="did not finish within"):
        simulate_in_child(REQUEST, _trace_path(REQUEST.trace), lambda _: None, timeout_s=0.05)
