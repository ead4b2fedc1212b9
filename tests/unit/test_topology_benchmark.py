"""`benchmarks/topology_training.py` end to end on a small LLM trace: every queue variant, the
per-policy contention figures and the goals section (issue 32's JSON)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_benchmark_runs_llm_jobs_with_contention_and_reports_the_goals(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'benchmarks'}"}
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "topology_training.py"),
            "--jobs",
            "60",
            "--policies",
            "best-fit,kueue-preferred,kueue-required,voltpack",
            "--optimality-instances",
            "2",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    figures = json.loads((tmp_path / "topology_training.json").read_text())
    assert figures["contention"] == "on" and figures["trace"]["generated"] == "llm"
    names = [row["policy"] for row in figures["policies"]]
    assert names == [
        "best-fit",
        "kueue-preferred",
        "kueue-required",
        "voltpack",
        "best-fit+backfill",
        "kueue-preferred+backfill",
        "kueue-required+backfill",
        "voltpack+backfill",
        "voltpack+backfill+wait",
    ]
    for row in figures["policies"]:
        assert row["jobs"] + row["unplaced"] == 60
        assert row["avg_inflicted_slowdown"] >= 0.0
        assert row["avg_step_slowdown"] >= 1.0 - 1e-9
    compared = [(item["voltpack"], item["kueue"]) for item in figures["goals"]]
    assert [mine for mine, _ in compared] == [
        "voltpack",
        "voltpack+backfill",
        "voltpack+backfill+wait",
    ]
    assert all(kueue.startswith("kueue-") for _, kueue in compared)
    by_name = {row["policy"]: row for row in figures["policies"]}
    for item in figures["goals"]:
        for key, peer_key in (("gain_vs_kueue", "kueue"), ("gain_vs_best_fit", "best_fit")):
            gain, peer = item[key], by_name[item[peer_key]]
            # the JCT gain is exactly the queue gain plus the run gain
            assert abs(gain["jct_gain_h"] - gain["queue_gain_h"] - gain["run_gain_h"]) < 1e-9
            # no placement beats every job's ideal, uncontended step
            assert peer["avg_ideal_run_s"] <= peer["avg_run_s"] + 1e-6
            assert gain["peer_step_headroom_pct"] >= 0.0
    report = (tmp_path / "topology_training.md").read_text()
    assert "Goals (issue 32)" in report and "Where the gain comes from" in report
