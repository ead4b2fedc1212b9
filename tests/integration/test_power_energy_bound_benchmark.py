"""`benchmarks/power_energy_bound.py` on a short row: one result per count, floors ordered,
and a clear error for a malformed row."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "power_energy_bound.py", *args], cwd=REPO / "benchmarks",
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def test_bound_per_count(tmp_path: Path) -> None:
    done = _run("--row", "mix:0.1:0:0.02", "--servers", "45", "--servers", "60",
                "--out", str(tmp_path))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads((tmp_path / "power_energy_bound.json").read_text())["rows"]
    assert [r["servers"] for r in rows] == [45, 60]
    for r in rows:
        assert r["high_priority_peak_hour_share"] < r["frugal_peak_hour_share"]
        assert r["frugal_peak_hour_share"] <= r["training_kept_peak_hour_share"]
        assert r["training_kept_peak_hour_share"] < r["uncapped_peak_hour_share"]
    assert rows[0]["uncapped_peak_hour_share"] < rows[1]["uncapped_peak_hour_share"]


def test_a_malformed_row_is_refused_by_name() -> None:
    done = _run("--row", "mixed:0.1:0")
    assert done.returncode != 0
    assert "--row 'mixed:0.1:0': expected traces:training_share:seed:days" in done.stderr
