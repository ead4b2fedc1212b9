"""`benchmarks/power_oversubscription.py --out DIR` writes its JSON and table there, with the
JSON keys the issue keeps (`policies[{policy, servers, best{brakes, ...}}]`), and leaves the
committed results alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_out_dir_gets_the_results(tmp_path: Path) -> None:
    committed = REPO / "benchmarks" / "results" / "power_oversubscription.json"
    before = committed.read_bytes() if committed.exists() else None
    done = subprocess.run(
        [sys.executable, "power_oversubscription.py", "--days", "0.02", "--policies",
         "thresholds", "--out", str(tmp_path)],
        cwd=REPO / "benchmarks", capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads((tmp_path / "power_oversubscription.json").read_text())
    (policy,) = figures["policies"]
    assert policy["policy"] == "thresholds" and policy["servers"] >= 40
    assert "brakes" in policy["best"] and "seconds_over_budget" in policy["best"]
    # Issue 35 item 4: every result reports its safety and its energy.
    safety_and_energy = {
        "longest_excursion_s", "breaker_heat_peak_share", "breaker_margin_share",
        "peak_60s_share_of_budget", "low_p99_increase_pct", "energy_per_request_wh",
        "energy_per_iteration_wh",
    }  # fmt: skip
    assert safety_and_energy <= set(policy["best"])
    assert safety_and_energy <= set(figures["no_oversubscription"])
    assert policy["best"]["energy_per_request_wh"] > 0
    assert "breaker_margin_share" in policy["margins"]  # low-priority latency: reported only
    table = (tmp_path / "power_oversubscription.md").read_text()
    for column in ("breaker heat peak (margin)", "peak/budget 60 s", "Wh per request"):
        assert column in table
    assert (committed.read_bytes() if committed.exists() else None) == before
