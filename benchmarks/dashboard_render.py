"""Render the power dashboard's main panels from a real Prometheus scraping a real agent.

An agent over the simulated backend (8 H100s, utilizations stepping up, GPU 7 capped at
300 W), a Prometheus from apt scraping it every second for `--seconds`, then the panels'
queries (`voltpack_gpu_power_watts` per GPU against `voltpack_gpu_power_limit_watts`, and
utilization) are drawn with matplotlib into `docs/evidence/power-dashboard.png`.

Usage: python benchmarks/dashboard_render.py [--seconds 40]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from _common import free_port
from matplotlib.figure import Figure

from voltpack.telemetry.agent import start_agent
from voltpack.telemetry.simulated import SimulatedBackend

OUT = Path(__file__).resolve().parents[1] / "docs" / "evidence" / "power-dashboard.png"


def query_range(url: str, expr: str, start: float, end: float) -> list[dict[str, Any]]:
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": 1})
    with urllib.request.urlopen(f"{url}/api/v1/query_range?{params}", timeout=10) as reply:
        return list(json.load(reply)["data"]["result"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=40.0)
    args = parser.parse_args()
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        raise SystemExit("prometheus is not installed (apt install prometheus)")
    backend = SimulatedBackend("H100-SXM", 8, node_name="gpu-node-0", pattern_period_s=20.0)
    backend.set_utilization(7, 1.0)  # GPUs 0-6 follow the seeded load pattern
    backend.set_power_limit(7, 300)
    with start_agent(backend, "gpu-node-0", power_interval_s=0.5) as agent, \
            tempfile.TemporaryDirectory() as folder:  # fmt: skip
        port = free_port()
        config = Path(folder) / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s}\nscrape_configs:\n  - job_name: voltpack-agent\n"
            f"    static_configs: [{{targets: ['127.0.0.1:{agent.port}']}}]\n"
        )
        process = subprocess.Popen(
            [prometheus, f"--config.file={config}", f"--storage.tsdb.path={folder}/data",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            start = time.time()
            time.sleep(args.seconds)
            end = time.time()
            url = f"http://127.0.0.1:{port}"
            power = query_range(url, "voltpack_gpu_power_watts", start, end)
            limit = query_range(url, "voltpack_gpu_power_limit_watts", start, end)
            utilization = query_range(url, "voltpack_gpu_utilization_ratio", start, end)
        finally:
            process.terminate()
            process.wait(timeout=30)
    figure = Figure(figsize=(10, 6), dpi=110)
    top, bottom = figure.subplots(2, 1, sharex=True)
    for series in sorted(power, key=lambda s: int(s["metric"]["gpu"])):
        xs = [float(t) - start for t, _ in series["values"]]
        top.plot(
            xs, [float(v) for _, v in series["values"]], label=f"GPU {series['metric']['gpu']}"
        )
    for series in limit:
        if series["metric"]["gpu"] == "7":
            xs = [float(t) - start for t, _ in series["values"]]
            top.plot(xs, [float(v) for _, v in series["values"]], "k--", label="GPU 7 limit")
    for series in sorted(utilization, key=lambda s: int(s["metric"]["gpu"])):
        xs = [float(t) - start for t, _ in series["values"]]
        bottom.plot(xs, [float(v) for _, v in series["values"]])
    top.set_title("voltpack power dashboard: GPU power (W) on gpu-node-0, queried from Prometheus")
    top.set_ylabel("W")
    top.legend(fontsize=7, ncol=3)
    bottom.set_title("GPU utilization (ratio)")
    bottom.set_xlabel("seconds")
    figure.tight_layout()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(OUT)
    print(f"wrote {OUT} ({len(power)} power series)")


if __name__ == "__main__":
    main()
