"""Overhead of the node agent on a GPU node: CPU time and scrape latency.

The agent runs as it does in production, in a process of its own
(`python -m voltpack agent --backend nvml --power-interval-s 1`), over the fake NVML of the
test suite (`tests/fakes/nvml`, 8 H100-SXM GPUs) found through LD_LIBRARY_PATH. Two figures:

1. CPU: the agent's user + system time from /proc/<pid>/stat over ~30 s of steady sampling
   (no scrapes), as a percentage of one core. Goal: at most 2 %.
2. Scrape latency: 300 sequential GETs of /metrics (one HTTP connection each, as Prometheus'
   scraper would open after an idle interval); p50 and p99 in ms. Goal: p99 below 20 ms.
   The CPU used during the scrapes is reported too (per scrape), for sizing.

The fake NVML re-reads its state file on every call, so the CPU figure is, if anything, an
overestimate of the agent over a real driver's in-memory calls.

Usage: python benchmarks/agent_overhead.py [--cpu-seconds 30] [--scrapes 300]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from _common import free_port, save

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from tests.fakes.nvml import FakeGpu, build_fake_nvml, subprocess_env, write_state  # noqa: E402

GPUS = 8
CPU_GOAL_PCT = 2.0
P99_GOAL_MS = 20.0
READY_TIMEOUT_S = 30.0
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (fields 14 and 15 of /proc/<pid>/stat), in seconds."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may contain spaces
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / CLK_TCK


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5.0) as response:
        if response.status != 200:
            raise RuntimeError(f"GET {url}: HTTP {response.status}")
        return bytes(response.read())


def wait_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the agent exited ({process.returncode}):\n{log.read_text()}")
        try:
            if b"voltpack_gpu_power_watts" in get(f"{url}/metrics"):
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the agent did not serve GPU metrics in {READY_TIMEOUT_S} s")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, round(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def measure(cpu_window_s: float, scrapes: int) -> dict[str, float | int]:
    lib_dir = build_fake_nvml()
    with tempfile.TemporaryDirectory(prefix="voltpack-agent-bench-") as tmp:
        work = Path(tmp)
        state = write_state(work / "nvml-state", [FakeGpu(numa_node=i // 4) for i in range(GPUS)])
        port = free_port()
        log = work / "agent.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "voltpack",
                    "agent",
                    "--backend",
                    "nvml",
                    "--node-name",
                    "bench-node",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--power-interval-s",
                    "1",
                ],
                cwd=REPO_ROOT,
                env=subprocess_env(lib_dir, state),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(process, url, log)
            time.sleep(2.0)  # past start-up (imports, first full pass)
            cpu0, wall0 = cpu_seconds(process.pid), time.monotonic()
            time.sleep(cpu_window_s)
            cpu1, wall1 = cpu_seconds(process.pid), time.monotonic()
            latencies_ms: list[float] = []
            body_bytes = 0
            for _ in range(scrapes):
                started = time.perf_counter()
                body = get(f"{url}/metrics")
                latencies_ms.append((time.perf_counter() - started) * 1000.0)
                body_bytes = len(body)
            cpu2 = cpu_seconds(process.pid)
            if process.poll() is not None:
                raise RuntimeError(f"the agent exited during the run:\n{log.read_text()}")
        finally:
            if process.poll() is None:
                os.kill(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.kill(process.pid, signal.SIGKILL)
                    process.wait(timeout=20)
    return {
        "gpus": GPUS,
        "power_interval_s": 1.0,
        "cpu_window_s": round(wall1 - wall0, 2),
        "cpu_pct_of_one_core": round(100.0 * (cpu1 - cpu0) / (wall1 - wall0), 3),
        "scrapes": scrapes,
        "scrape_p50_ms": round(statistics.median(latencies_ms), 3),
        "scrape_p99_ms": round(percentile(latencies_ms, 99), 3),
        "scrape_max_ms": round(max(latencies_ms), 3),
        "cpu_ms_per_scrape": round(1000.0 * (cpu2 - cpu1) / scrapes, 3),
        "exposition_bytes": body_bytes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-seconds", type=float, default=30.0)
    parser.add_argument("--scrapes", type=int, default=300)
    args = parser.parse_args()
    figures = measure(args.cpu_seconds, args.scrapes)
    cpu_ok = figures["cpu_pct_of_one_core"] <= CPU_GOAL_PCT
    p99_ok = figures["scrape_p99_ms"] < P99_GOAL_MS
    goals = {
        "cpu_pct_of_one_core_max": CPU_GOAL_PCT,
        "scrape_p99_ms_max": P99_GOAL_MS,
        "cpu_met": cpu_ok,
        "scrape_p99_met": p99_ok,
    }
    markdown = (
        "# Node-agent overhead\n\n"
        f"Agent in its own process over the fake NVML, {GPUS} GPUs, power sampled every 1 s, "
        "full sample every 10 s.\n\n"
        "| figure | value | goal | met |\n"
        "|---|---|---|---|\n"
        f"| CPU, % of one core (over {figures['cpu_window_s']} s, no scrapes) | "
        f"{figures['cpu_pct_of_one_core']} | <= {CPU_GOAL_PCT} | {'yes' if cpu_ok else 'NO'} |\n"
        f"| scrape p50, ms ({figures['scrapes']} scrapes) | {figures['scrape_p50_ms']} | | |\n"
        f"| scrape p99, ms | {figures['scrape_p99_ms']} | < {P99_GOAL_MS} | "
        f"{'yes' if p99_ok else 'NO'} |\n"
        f"| scrape max, ms | {figures['scrape_max_ms']} | | |\n"
        f"| agent CPU per scrape, ms | {figures['cpu_ms_per_scrape']} | | |\n"
        f"| exposition size, bytes | {figures['exposition_bytes']} | | |\n"
    )
    save("agent_overhead", {"figures": figures, "goals": goals}, markdown)


if __name__ == "__main__":
    main()
