"""End-to-end: the `voltpack` command as a user runs it, in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import hostile_yaml
from voltpack.cli import DEMO_POLICIES

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "voltpack" / "policies" / "examples"


def voltpack(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "voltpack", *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        env=env,
        timeout=600,
        check=False,
    )


@pytest.fixture
def small_trace(tmp_path: Path) -> tuple[Path, Path]:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n"
        + "".join(
            f"n{i},32000,131072,{[2, 4, 8][i % 3]},{['T4', 'V100M16'][i % 2]}\n" for i in range(12)
        )
    )
    pods = tmp_path / "pods.csv"
    rows = [
        "p0,4000,8192,1,1000,,LS,Running,0,100,0",
        "p1,2000,4096,1,500,,BE,Running,1,100,1",
        "p2,8000,16384,2,1000,,LS,Running,2,100,2",
        "p3,1000,2048,0,0,,BE,Running,3,100,3",
        "p4,3000,4096,1,250,T4,LS,Running,4,100,4",
        "p5,16000,32768,4,1000,,LS,Running,5,100,5",
    ]
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
        "creation_time,deletion_time,scheduled_time\n" + "\n".join(rows) + "\n"
    )
    return nodes, pods


def test_demo_compares_every_strategy_and_writes_reports(tmp_path: Path) -> None:
    result = voltpack(
        "demo", "--seeds", "42", "--out", str(tmp_path / "demo"), "--jobs", "2",
        "--replay-pods", "300", "--replay-seconds", "8",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "kubectl --server http://127.0.0.1:" in result.stdout
    assert "pods replayed" in result.stdout and "never placed" in result.stdout
    for name in DEMO_POLICIES:
        assert name in result.stdout
    assert "93.08%" in result.stdout  # the FGD paper's best-fit anchor is shown beside ours
    document = json.loads((tmp_path / "demo" / "results.json").read_text())
    assert document["config"]["seeds"] == [42]
    assert len(document["runs"]) == len(DEMO_POLICIES)
    best_fit = next(r for r in document["runs"] if r["strategy"] == "best-fit")
    assert abs(best_fit["final_allocation_ratio_pct"] - 93.08) < 1.0
    assert (tmp_path / "demo" / "allocation.png").stat().st_size > 10_000


def test_simulate_with_policy_file_and_name(tmp_path: Path, small_trace: tuple[Path, Path]) -> None:
    nodes, pods = small_trace
    out = tmp_path / "out"
    result = voltpack(
        "simulate", "--trace", str(pods), "--nodes", str(nodes),
        "--policy", str(EXAMPLES / "best-fit.yaml"), "--policy", "random",
        "--seeds", "1-3", "--out", str(out), "--jobs", "1",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads((out / "results.json").read_text())
    assert document["voltpack_version"]
    assert document["config"]["seeds"] == [1, 2, 3]
    assert "strategy: best-fit" in document["policies"]["best-fit"]
    assert {(r["strategy"], r["seed"]) for r in document["runs"]} == {
        (s, seed) for s in ("best-fit", "random") for seed in (1, 2, 3)
    }
    run = document["runs"][0]
    assert len(run["per_arrival"]["arrived_gpu_milli"]) == run["pods_arrived"]
    assert "| best-fit |" in (out / "summary.md").read_text()
    assert (out / "allocation.png").is_file()


def test_simulate_rejects_bad_policy_with_field_and_allowed_values(
    tmp_path: Path, small_trace: tuple[Path, Path]
) -> None:
    nodes, pods = small_trace
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: voltpack.io/v1alpha1\nkind: SchedulingPolicy\nmetadata: {name: x}\n"
        "spec: {scoring: {strategy: bestfit}}\n"
    )
    result = voltpack(
        "simulate", "--trace", str(pods), "--nodes", str(nodes), "--policy", str(bad),
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert result.returncode == 2
    assert "spec.scoring.strategy" in result.stderr
    assert "'bestfit'" in result.stderr
    assert "best-fit" in result.stderr
    assert not (tmp_path / "out").exists()


def test_simulate_rejects_malformed_trace_with_file_line_field(
    tmp_path: Path, small_trace: tuple[Path, Path]
) -> None:
    nodes, pods = small_trace
    lines = pods.read_text().splitlines()
    lines[3] = lines[3].replace("2,1000", "two,1000")
    pods.write_text("\n".join(lines) + "\n")
    result = voltpack(
        "simulate", "--trace", str(pods), "--nodes", str(nodes), "--policy", "best-fit",
        "--out", str(tmp_path / "out"), "--jobs", "1",
    )  # fmt: skip
    assert result.returncode == 2
    assert f"{pods}:4" in result.stderr
    assert "num_gpu" in result.stderr


def test_simulate_rejects_unknown_policy_name(
    tmp_path: Path, small_trace: tuple[Path, Path]
) -> None:
    nodes, pods = small_trace
    result = voltpack(
        "simulate", "--trace", str(pods), "--nodes", str(nodes), "--policy", "tetris",
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert result.returncode == 2
    assert "'tetris'" in result.stderr and "gpu-packing" in result.stderr


def test_bad_seed_list_is_refused(tmp_path: Path, small_trace: tuple[Path, Path]) -> None:
    nodes, pods = small_trace
    result = voltpack(
        "simulate", "--trace", str(pods), "--nodes", str(nodes), "--policy", "random",
        "--seeds", "51-42", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert result.returncode == 2
    assert "seed" in result.stderr


def test_policy_validate(tmp_path: Path) -> None:
    good = voltpack("policy", "validate", str(EXAMPLES / "gpu-packing.yaml"))
    assert good.returncode == 0, good.stderr
    assert "valid" in good.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: voltpack.io/v9\nkind: SchedulingPolicy\nmetadata: {name: x}\n")
    result = voltpack("policy", "validate", str(bad))
    assert result.returncode == 1
    assert "apiVersion" in result.stderr and "voltpack.io/v1alpha1" in result.stderr
    assert "spec" in result.stderr


@pytest.mark.parametrize("name", ["ALIAS_BOMB", "DEEP_NESTING"])
def test_policy_validate_refuses_hostile_yaml_in_one_line(tmp_path: Path, name: str) -> None:
    hostile = tmp_path / "hostile.yaml"
    hostile.write_text(getattr(hostile_yaml, name), encoding="utf-8")
    result = voltpack("policy", "validate", str(hostile))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) < 400, result.stderr
    assert f"{hostile}: not valid YAML: the document" in lines[0] and "line" in lines[0]


def test_policy_validate_accepts_the_hetero_example_and_names_its_allocation() -> None:
    good = voltpack("policy", "validate", str(EXAMPLES / "fgd-hetero.yaml"))
    assert good.returncode == 0, good.stderr
    assert "training allocation max_min_fairness_perf" in good.stdout


def test_policy_strategies_lists_every_strategy() -> None:
    result = voltpack("policy", "strategies")
    assert result.returncode == 0
    for name in (
        "random",
        "best-fit",
        "least-allocated",
        "dot-product",
        "gpu-packing",
        "gpu-clustering",
        "fgd",
        "headroom",
        "thresholds",
        "fair-share",
        "priority-fifo",
        "max_min_fairness_perf",
        "shortest_remaining_perf",
    ):
        assert name in result.stdout


def test_policy_validate_names_a_bad_power_setting(tmp_path: Path) -> None:
    bad = tmp_path / "power.yaml"
    bad.write_text(
        "apiVersion: voltpack.io/v1alpha1\nkind: SchedulingPolicy\nmetadata: {name: p}\n"
        "spec:\n  scoring: {strategy: fgd}\n  power:\n"
        "    gpus: {A100-80GB: {lock_clocks_mhz: [2000], floor_power_w: 100}}\n"
    )
    result = voltpack("policy", "validate", str(bad))
    assert result.returncode == 1
    assert "spec.power.gpus.A100-80GB" in result.stderr and "outside" in result.stderr


def test_agent_without_gpus_says_what_is_missing() -> None:
    result = voltpack("agent", "--backend", "auto", "--port", "0")
    assert result.returncode == 2
    assert "libnvidia-ml.so.1" in result.stderr
    assert "--backend simulated" in result.stderr


def test_simulate_training_compares_allocation_policies() -> None:
    trace = REPO / "data" / "gavel" / "physical_cluster" / "small_test.trace"
    result = voltpack(
        "simulate-training",
        "--trace",
        str(trace),
        "--cluster",
        "2:2:2",
        "--policy",
        "fifo",
        "--policy",
        "shortest_remaining_perf",
    )
    assert result.returncode == 0, result.stderr
    assert "fifo" in result.stdout and "shortest_remaining_perf" in result.stdout
    assert "avg JCT" in result.stdout


def test_simulate_training_refuses_bad_input_clearly(tmp_path: Path) -> None:
    trace = REPO / "data" / "gavel" / "physical_cluster" / "small_test.trace"
    unknown = voltpack("simulate-training", "--trace", str(trace), "--policy", "nope")
    assert unknown.returncode == 2
    assert "unknown allocation policy 'nope'" in unknown.stderr
    assert "max_min_fairness_perf" in unknown.stderr
    bad = tmp_path / "bad.trace"
    bad.write_text("ResNet-18 (batch size 32)\tcmd\t-n\t1\tmany\t0\t1\n")
    malformed = voltpack("simulate-training", "--trace", str(bad))
    assert malformed.returncode == 2
    assert f"{bad}:1: field total_steps='many' is not a number" in malformed.stderr
    too_big = voltpack("simulate-training", "--trace", str(trace), "--cluster", "1:1:1")
    assert too_big.returncode == 2
    assert "needs 2 GPUs of one model" in too_big.stderr
    cluster = voltpack("simulate-training", "--trace", str(trace), "--cluster", "8:8")
    assert cluster.returncode == 2
    assert "expected V100:P100:K80" in cluster.stderr


def test_emulator_refuses_a_malformed_token_file_naming_file_and_line(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('admin-token,ada,uid-ada,"admins"\nno-user-here\n', encoding="utf-8")
    result = voltpack("emulator", "--port", "0", "--token-auth-file", str(tokens))
    assert result.returncode == 2
    message = " ".join(result.stderr.split())
    assert f"token file {tokens}:2: expected token,user,uid" in message


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "gpu-head.example"])
def test_emulator_refuses_a_reachable_host_without_insecure_bind(host: str) -> None:
    result = voltpack("emulator", "--host", host, "--port", "0")
    assert result.returncode == 2, result.stdout
    message = " ".join(result.stderr.split())
    assert f"--host {host} would serve the emulator beyond this machine" in message
    assert "--insecure-bind" in message and "Traceback" not in result.stderr


def test_emulator_serves_a_reachable_host_with_insecure_bind_and_says_so() -> None:
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1"}
    command = [sys.executable, "-m", "voltpack", "emulator", "--host", "0.0.0.0", "--port", "0",
               "--insecure-bind"]  # fmt: skip
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO
    ) as process:
        try:
            assert process.stdout is not None and process.stderr is not None
            first = process.stdout.readline()
            assert "emulator with" in first and "http://0.0.0.0:" in first, first
        finally:
            process.terminate()
        _, errors = process.communicate(timeout=30)
    assert "without authentication (--insecure-bind)" in " ".join(errors.split())


def test_forecast_plan_says_what_to_keep_free_and_refuses_unknown_series() -> None:
    done = voltpack("forecast", "plan", "openb/gpu_demand/all/10min", "--quick", "--risk", "0.1")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "keep" in text and "90% chance demand stays at or below" in text
    power = voltpack("forecast", "plan", "genai/power/gpus/5min", "--quick", "--horizon", "6")
    assert power.returncode == 2 and "--budget-w" in " ".join(power.stdout.split())
    unknown = voltpack("forecast", "plan", "nope/x/y/z", "--quick")
    assert unknown.returncode == 2 and "voltpack forecast targets" in " ".join(
        unknown.stdout.split()
    )


def test_emulator_refuses_an_unknown_inventory_naming_the_choices(tmp_path: Path) -> None:
    unknown = voltpack("emulator", "--inventory", "alibaba-2099", "--port", "0")
    assert unknown.returncode == 2
    assert "inventory: 'alibaba-2099' is not one of alibaba-spot-2026, openb" in unknown.stderr
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,1000,1024,1,T4\n")
    both = voltpack(
        "emulator", "--nodes", str(nodes), "--inventory", "alibaba-spot-2026", "--port", "0"
    )
    assert both.returncode == 2 and "give one of them, not both" in both.stderr
