"""The side-by-side's summary: runs alternate, medians and spread per set-up and size, and
voltpack's ratio over kube-scheduler (QPS 5000) per size."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from k8s_shapes_report import throughput_lines
from k8s_side_by_side import (
    KUBE_NO_PLUGINS,
    KUBE_RAISED,
    parse_scale,
    ratios,
    run_order,
    summarise,
)


def row(scheduler: str, config: str, pods_per_s: float, cpu_per_pod: float) -> dict[str, Any]:
    return {"scheduler": scheduler, "config": config, "nodes": 10, "pods": 20,
            "pods_per_s": pods_per_s, "scheduler_cpu_s_per_pod": cpu_per_pod,
            "scheduler_rss_peak_mib": 100.0, "complete": True,
            "loadavg_before": [1.0, 1.0, 1.0]}  # fmt: skip


def test_rounds_alternate() -> None:
    assert run_order(["k", "v"], 3) == ["k", "v", "v", "k", "k", "v"]


def test_medians_spread_and_ratio() -> None:
    rows = [
        row("kube-scheduler", KUBE_RAISED.config, 100.0, 0.004),
        row("voltpack", "vp", 300.0, 0.002),
        row("voltpack", "vp", 150.0, 0.001),
        row("kube-scheduler", KUBE_RAISED.config, 200.0, 0.002),
        row("kube-scheduler", KUBE_RAISED.config, 400.0, 0.003),
        row("voltpack", "vp", 240.0, 0.003),
    ]
    summary = summarise(rows)
    kube, ours = summary
    assert kube["runs"] == 3 and kube["pods_per_s"] == {"median": 200.0, "min": 100.0, "max": 400.0}
    assert ours["scheduler_cpu_s_per_pod"]["median"] == 0.002
    (ratio,) = ratios(summary, KUBE_RAISED.config)
    assert ratio["pods_per_s_ratio"] == pytest.approx(240.0 / 200.0)
    assert ratio["cpu_s_per_pod_ratio"] == pytest.approx(0.002 / 0.003)


def test_a_bad_scale_is_named() -> None:
    assert parse_scale("5000x10000") == (5000, 10000)
    for bad in ("5000", "ax3", "0x10"):
        with pytest.raises(argparse.ArgumentTypeError, match="--scale"):
            parse_scale(bad)


def test_the_apiservers_cpu_per_pod_is_summarised() -> None:
    rows = [
        {
            **row("kube-scheduler", KUBE_RAISED.config, 250.0, 0.002),
            "bound": 20,
            "apiserver_cpu_s": 0.04,
        },
        {
            **row("kube-scheduler", KUBE_RAISED.config, 250.0, 0.002),
            "bound": 20,
            "apiserver_cpu_s": 0.08,
        },
        {
            **row("kube-scheduler", KUBE_RAISED.config, 250.0, 0.002),
            "bound": 0,
            "apiserver_cpu_s": None,
        },
    ]
    (kube,) = summarise(rows)
    assert kube["apiserver_cpu_s_per_pod"] == {"median": 0.003, "min": 0.002, "max": 0.004}


def test_the_ceiling_says_whether_the_goal_can_be_reached() -> None:
    """kube-scheduler deciding nothing bounds what any scheduler making its requests reaches:
    a goal above that rate is reported as out of reach, and voltpack's share of it is kept."""
    rows = [
        row("kube-scheduler", KUBE_RAISED.config, 300.0, 0.002),
        row("kube-scheduler", KUBE_NO_PLUGINS.config, 400.0, 0.001),
        row("voltpack", "vp", 360.0, 0.0015),
    ]
    summary = summarise(rows)
    (ratio,) = ratios(summary, KUBE_RAISED.config, KUBE_NO_PLUGINS.config)
    assert ratio["goal_pods_per_s"] == pytest.approx(450.0)
    assert ratio["ceiling_pods_per_s"] == 400.0 and ratio["goal_over_ceiling"] is True
    assert ratio["pods_per_s_of_ceiling"] == pytest.approx(0.9)
    assert ratio["pods_per_s_ratio"] == pytest.approx(1.2) and not ratio["goal_met"]
    text = "\n".join(throughput_lines({"throughput_summary": summary, "throughput_ratios": [ratio],
                                       "throughput": []}))  # fmt: skip
    assert "| gpu | 450.0 | 400.0 (400.0-400.0) | **no** | 360.0 (360.0-360.0) | 0.90 |" in text
    # the baseline's row is kube-scheduler with scheduler_perf's limits, not the ceiling
    assert "| 300.0 (300.0-300.0) | 360.0 (360.0-360.0) | 1.20x |" in text
    (without,) = ratios(summary, KUBE_RAISED.config)
    assert without["ceiling_pods_per_s"] is None and without["goal_over_ceiling"] is None
