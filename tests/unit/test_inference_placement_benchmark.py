"""`benchmarks/inference_placement.py`: plans made from the planning window only and judged
out of sample, the mixing and split gains reported apart, extrapolated plans marked, the
B200/H200 table kept apart from the headline, and the Splitwise and speed sections."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import inference_placement as bench  # noqa: E402

from voltpack.perf.serving_capacity import ServingSlo  # noqa: E402
from voltpack.policies.inference.prices import example_prices  # noqa: E402
from voltpack.sim.serving import scale_to_rate  # noqa: E402
from voltpack.sim.traces.azure_llm import LlmRequests  # noqa: E402
from voltpack.sim.traces.melange_workloads import regime_workload  # noqa: E402
from voltpack.sim.traces.trace_windows import first_requests, split_by_time  # noqa: E402


def test_plans_see_only_the_planning_window_and_are_judged_on_the_rest() -> None:
    arena = first_requests(regime_workload("arena"), 240)
    # a burst only the held-out window holds: its last 80 requests arrive within 2 seconds
    arrivals = arena.arrival_s.copy()
    arrivals[-80:] = arrivals[-81] + np.linspace(0.0, 2.0, 80)
    bursty = LlmRequests(arrivals, arena.prompt_tokens, arena.output_tokens)
    slo = ServingSlo(4.0, 0.12)
    row = bench.sweep_row(
        "arena", bursty, "llama2-7b", slo, 2.0, example_prices(), bench.HEADLINE_TYPES
    )
    windows = split_by_time(scale_to_rate(bursty, 2.0))
    planned = bench.planning_rate(windows.planning, slo, backtest=True)
    assert row["planning_rate_per_s"] == round(planned.rate_per_s, 3)
    assert row["planning_headroom"] == round(planned.headroom, 3) >= 1.0
    assert row["planning_rate_window_per_s"] == round(
        bench.planning_rate(windows.planning, slo).rate_per_s, 3
    )
    # the whole trace, burst included, would have asked for a higher rate
    assert row["planning_rate_whole_trace_per_s"] > row["planning_rate_per_s"]
    assert row["requests_planning"] == windows.planning.arrival_s.size
    assert row["requests"] == windows.holdout.arrival_s.size
    assert row["context"] == "short"
    for name in bench.PLANNERS:
        plan = row[name]
        assert "error" not in plan, plan
        assert plan["slo_attainment_pct"] == plan["attainment_out_of_sample_pct"]
        assert 0 <= plan["attainment_in_sample_pct"] <= 100
        # Splitwise measured llama2-70b only: every llama2-7b plan is flagged
        assert plan["extrapolated_profiles"] and plan["extrapolated_groups"]
    assert row["attainment_out_of_sample_pct"] == row["voltpack"]["attainment_out_of_sample_pct"]
    costs = {name: row[name]["cost_per_hour"] for name in bench.PLANNERS}
    assert row["savings_mix_pct"] == pytest.approx(
        100 * (1 - costs["voltpack"] / costs["best_single_type_split"]), abs=0.01
    )
    assert row["savings_split_pct"] == pytest.approx(
        100 * (1 - costs["best_single_type_split"] / costs["best_single_type"]), abs=0.01
    )


def _row(context: str, tpot_ms: float, mix_pct: float, attainment_pct: float) -> dict[str, Any]:
    plan = {
        "attainment_out_of_sample_pct": attainment_pct,
        "attainment_in_sample_pct": 100.0,
        "slo_attainment_feasible_pct": attainment_pct,
        "extrapolated_profiles": True,
    }
    return {
        "context": context,
        "model": "llama2-7b",
        "slo_tpot_ms": tpot_ms,
        **{name: dict(plan) for name in bench.PLANNERS},
        "attainment_out_of_sample_pct": attainment_pct,
        "savings_mix_pct": mix_pct,
        "savings_split_pct": 0.0,
        "savings_vs_single_pct": mix_pct,
        "savings_vs_melange_pct": 0.0,
        "savings_vs_melange_split_pct": -1.0 if mix_pct < 0 else 0.0,
        "requests_infeasible_idle": 0,
        "requests_outside_planned_buckets": 2,
    }


def test_summary_counts_each_goal_on_its_own_settings() -> None:
    rows = [
        _row("short", 120, 20.0, 99.5),
        _row("short", 120, 5.0, 99.5),
        _row("short", 40, 30.0, 98.0),  # TPOT 40: not in the short-context goal
        _row("long", 120, 12.0, 99.9),
        _row("long", 40, -3.0, 99.9),
    ]
    summary = bench.summarise(rows)
    assert summary["mix_goal_short"] == {"settings": 2, "met": 1}
    assert summary["mix_goal_long"] == {
        "settings": 2,
        "met": 1,
        "settings_tpot120": 1,
        "met_tpot120": 1,
    }
    assert summary["voltpack_above_single_split"] == 1
    assert summary["voltpack_above_melange_split"] == 1
    assert summary["plans"] == 25
    assert summary["plans_meeting_attainment"] == 20
    assert summary["min_attainment_out_of_sample_pct"] == 98.0
    assert summary["requests_outside_planned_buckets"] == 10
    text = "\n".join(bench.goal_lines(summary))
    assert "1 of 2 (met)" in text and "20 of 25 plans" in text and "(NOT met)" in text


def test_the_benchmark_runs_end_to_end_with_every_section(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'benchmarks'}"}
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "inference_placement.py"),
            *("--trace", "pubmed", "--model", "llama2-7b", "--slo-tpot-ms", "120"),
            *("--rate", "2", "--extended-rate", "2", "--max-requests", "200"),
            *("--splitwise", "--speed", "--out", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
        cwd=ROOT / "benchmarks",
    )
    assert run.returncode == 0, run.stderr
    figures = json.loads((tmp_path / "inference_placement.json").read_text())
    (row,) = figures["sweep"]
    for key in ("savings_mix_pct", "savings_split_pct", "attainment_out_of_sample_pct"):
        assert key in row
    assert row["context"] == "long" and row["trace"] == "pubmed"
    assert figures["settings"]["gpu_types"] == ["L4", "A10", "A100-80GB", "H100-SXM"]
    headline_types = {t for name in bench.PLANNERS for t in row[name].get("gpus_per_type", {})}
    assert headline_types <= {"L4", "A10", "A100-80GB", "H100-SXM"}
    (extended,) = figures["extended"]
    assert "B200" in figures["settings"]["extended_gpu_types"]
    assert extended["rate_per_s"] == 2
    assert figures["splitwise"] and "throughput_per_cost_gain" in figures["splitwise"][0]
    assert len(figures["speed"]) == 6
    text = (tmp_path / "inference_placement.md").read_text()
    assert "NOT the headline" in text and "†" in text and "Goals (headline settings)" in text
