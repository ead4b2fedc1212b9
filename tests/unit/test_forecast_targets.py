"""Forecasting targets: windows checked by hand on tiny traces, the shipped data, bad rows."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO_ROOT
from voltpack.forecast.series import TimeSeries
from voltpack.model.errors import TraceFormatError
from voltpack.perf.gpu_power import power_model_for
from voltpack.perf.throughput_table import ThroughputTable, load_gavel_throughputs
from voltpack.sim.forecast_targets import (
    azure_request_rate,
    build_targets,
    gavel_gpu_demand,
    genai_gpu_power,
    genai_request_rate,
    openb_gpu_demand,
    row_power,
    target_rows,
)
from voltpack.sim.forecast_targets.power import duty_cycle_power_w
from voltpack.sim.forecast_targets.windows import alive_mean, seasons_for, step_label
from voltpack.sim.traces.azure_llm import CONVERSATION_TRACE, load_azure_llm_trace
from voltpack.sim.traces.genai import load_duty_cycle, load_qps

DATA = REPO_ROOT / "data"
GENAI = DATA / "alibaba-genai-2026"
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time"
)
# a: 1 GPU on [0, 900); b: 2 GPUs on [300, 1500); c: half a GPU from 600, never deleted
# (alive to the last event, 1500); d: CPU only (ignored)
TINY_PODS = [
    "a,1000,1024,1,1000,,LS,Running,0,900,0",
    "b,1000,1024,2,1000,A100,BE,Running,300,1500,300",
    "c,1000,1024,1,500,,LS,Running,600,,600",
    "d,1000,1024,0,0,,BE,Running,0,1500,0",
]


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def tar_gz(path: Path, member: str, lines: list[str]) -> Path:
    data = ("\n".join(lines) + "\n").encode()
    with tarfile.open(path, "w:gz") as archive:
        info = tarfile.TarInfo(member)
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return path


def by_key(series: list[TimeSeries]) -> dict[str, TimeSeries]:
    return {s.name.split("/")[2]: s for s in series}


# --- window arithmetic -------------------------------------------------------------------------


def test_alive_mean_integrates_partial_overlaps() -> None:
    # [0, 10) weight 1 and [5, 25) weight 2; windows of 10 s from 0
    values = alive_mean(
        np.array([0.0, 5.0]), np.array([10.0, 25.0]), np.array([1.0, 2.0]), 0.0, 10.0, 3
    )
    # window 0: 10*1 + 5*2 = 20; window 1: 10*2 = 20; window 2: 5*2 = 10
    assert values.tolist() == pytest.approx([2.0, 2.0, 1.0])


def test_seasons_need_two_full_cycles() -> None:
    assert seasons_for(600.0, 2 * 1008) == (144, 1008)
    assert seasons_for(600.0, 2 * 1008 - 1) == (144,)
    assert seasons_for(3600.0, 47) == ()
    assert seasons_for(13.0, 10**6) == ()  # neither a day nor a week is whole 13 s steps
    assert [step_label(s) for s in (1.0, 10.0, 300.0, 600.0, 3600.0)] == [
        "1s", "10s", "5min", "10min", "1h",
    ]  # fmt: skip


# --- openb GPU demand --------------------------------------------------------------------------


def test_openb_demand_per_queue_by_hand(tmp_path: Path) -> None:
    path = write(tmp_path / "openb_pod_list_default.csv", [POD_HEADER, *TINY_PODS])
    series = by_key(openb_gpu_demand(path, 600.0, "queue", min_share=0.0))
    assert set(series) == {"all", "LS", "BE"}
    total = series["all"]
    assert total.name == "openb/gpu_demand/all/10min"
    assert (total.family, total.unit) == ("gpu_demand", "gpus")
    assert (total.step_s, total.start_s) == (600.0, 0.0)
    # [0,600): a 600 s + b 300 s x 2 = 1200 GPU-s; [600,1200): a 300 + b 1200 + c 300 = 1800
    assert total.values.tolist() == pytest.approx([2.0, 3.0])
    assert series["LS"].values.tolist() == pytest.approx([1.0, 1.0])
    assert series["BE"].values.tolist() == pytest.approx([1.0, 2.0])


def test_openb_demand_per_gpu_model_and_min_share(tmp_path: Path) -> None:
    path = write(tmp_path / "openb_pod_list_gpuspec33.csv", [POD_HEADER, *TINY_PODS])
    series = by_key(openb_gpu_demand(path, 600.0, "gpu_model", min_share=0.0))
    assert series["A100"].name == "openb-gpuspec33/gpu_demand/A100/10min"
    assert series["A100"].values.tolist() == pytest.approx([1.0, 2.0])
    assert series["any"].values.tolist() == pytest.approx([1.0, 1.0])
    # b holds 2400 of 3300 GPU-s: above a 50% share it stays alone beside the total
    kept = by_key(openb_gpu_demand(path, 600.0, "gpu_model", min_share=0.5))
    assert set(kept) == {"all", "A100"}


def test_openb_malformed_row_names_line_and_field(tmp_path: Path) -> None:
    bad = [*TINY_PODS[:2], "c,1000,1024,one,500,,LS,Running,600,,600"]
    path = write(tmp_path / "pods.csv", [POD_HEADER, *bad])
    with pytest.raises(TraceFormatError, match=r"pods\.csv:4: field num_gpu='one'"):
        openb_gpu_demand(path, 600.0, "queue")
    path = write(tmp_path / "late.csv", [POD_HEADER, "a,1,1,1,1000,,LS,Running,0,soon,0"])
    with pytest.raises(TraceFormatError, match=r"late\.csv:2: field deletion_time='soon'"):
        openb_gpu_demand(path, 600.0, "queue")


def test_openb_pod_list_without_times_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "multi.csv", ["name,cpu_milli,memory_mib,num_gpu,gpu_milli",
                                          "a,1,1,2,1000"])  # fmt: skip
    with pytest.raises(TraceFormatError, match="creation_time and deletion_time are missing"):
        openb_gpu_demand(path, 600.0, "queue")


# --- Gavel GPU demand --------------------------------------------------------------------------


def test_gavel_demand_uses_v100_durations(tmp_path: Path) -> None:
    table = ThroughputTable({("ResNet-18", 1): {"v100": 2.0}, ("ResNet-18", 4): {"v100": 4.0}})
    line = "ResNet-18\tpython3 train.py\t--num_steps\t1\t{steps}\t{arrival}\t{sf}"
    vc1_lines = [
        line.format(steps=1200, arrival=0.0, sf=1),
        line.format(steps=2400, arrival=1200.0, sf=4),
    ]
    vc1 = write(tmp_path / "vc1.trace", vc1_lines)
    vc2 = write(tmp_path / "vc2.trace", [line.format(steps=600, arrival=600.0, sf=1)])
    series = by_key(gavel_gpu_demand([vc1, vc2], table, 600.0, min_share=0.0))
    # vc1: 1 GPU on [0, 600), 4 GPUs on [1200, 1800); vc2: 1 GPU on [600, 900)
    # windows end at each series' last arrival: vc1 and all at 1200 s, vc2 at 600 s
    assert series["vc1"].values.tolist() == pytest.approx([1.0, 0.0])
    assert series["vc2"].values.tolist() == pytest.approx([0.0])
    assert series["all"].values.tolist() == pytest.approx([1.0, 0.5])
    assert series["all"].name == "gavel/gpu_demand/all/10min"


def test_gavel_malformed_line_names_field(tmp_path: Path) -> None:
    table = ThroughputTable({("ResNet-18", 1): {"v100": 2.0}})
    path = write(tmp_path / "vc.trace", ["ResNet-18\tcmd\t--num_steps\t1\tmany\t0.0\t1"])
    with pytest.raises(TraceFormatError, match=r"vc\.trace:1: field total_steps='many'"):
        gavel_gpu_demand([path], table, 600.0)


# --- GenAI request rate and power --------------------------------------------------------------

QPS_HEADER = "timestamp_anon,value,container_ip,request_type"


def test_genai_rate_sums_containers_by_hand(tmp_path: Path) -> None:
    rows = [QPS_HEADER]
    # sampling every 60 s; two containers and the API (no container) over two 120 s windows
    rows += [f"{t},1.0,c1,Generative Requests" for t in (1000, 1060, 1120, 1180)]
    rows += [f"{t},2.0,c2,Generative Requests" for t in (1000, 1120)]
    rows += ["1060,0.5,,API Requests", "1180,0.5,None,API Requests"]
    path = tar_gz(tmp_path / "qps.tar.gz", "qps.csv", rows)
    series = by_key(genai_request_rate(path, 120.0))
    assert set(series) == {"all", "generative", "api"}
    assert series["all"].start_s == 960.0  # 1000 rounded down to a 120 s step
    # [960,1080): c1 1000,1060 + c2 1000 + api 1060 -> (1+1+2+0.5)*60/120 = 2.25
    # [1080,1200): c1 1120,1180 + c2 1120 + api 1180 -> 2.25; the period ends at 1240: no more
    assert series["all"].values.tolist() == pytest.approx([2.25, 2.25])
    assert series["api"].values.tolist() == pytest.approx([0.25, 0.25])
    assert series["generative"].unit == "requests_per_s"


def test_genai_qps_bad_value_names_member_line_field(tmp_path: Path) -> None:
    path = tar_gz(tmp_path / "qps.tar.gz", "qps.csv",
                  [QPS_HEADER, "1000,1.0,c1,Generative Requests", "1060,lots,c1,API"])  # fmt: skip
    with pytest.raises(TraceFormatError, match=r"qps\.tar\.gz\[qps\.csv\]:3: field value='lots'"):
        load_qps(path)
    plain = write(tmp_path / "qps.csv", [QPS_HEADER, "1000,-1,c1,Generative Requests"])
    with pytest.raises(TraceFormatError, match=r"qps\.csv:2: field value=-1.0 must not be"):
        load_qps(plain)
    empty_kind = write(tmp_path / "kind.csv", [QPS_HEADER, "1000,1,c1,"])
    with pytest.raises(TraceFormatError, match=r"kind\.csv:2: field request_type is empty"):
        load_qps(empty_kind)


def test_duty_cycle_power_by_hand(tmp_path: Path) -> None:
    gpu = power_model_for("A100-80GB")
    assert duty_cycle_power_w(np.array([0.0, 100.0])).tolist() == pytest.approx(
        [gpu.idle_w, gpu.tdp_w]
    )
    half = float(duty_cycle_power_w(np.array([50.0]))[0])
    assert half == pytest.approx((gpu.idle_w + gpu.tdp_w) / 2)
    rows = ["value,timestamp_anon,container_ip", "0,0,p1", "100,0,p2", "100,60,p1", "50,300,p1"]
    path = tar_gz(tmp_path / "duty.tar.gz", "pod_gpu_duty_cycle_anon.csv", rows)
    series = genai_gpu_power(path, 120.0)
    assert series.name == "genai/power/gpus/2min"
    # window [0,120): scrape 0 -> idle + tdp, scrape 60 -> tdp; mean of the two sums
    # window [120,240): no scrape -> NaN; window [240,360): one pod at 50 %
    expected_first = ((gpu.idle_w + gpu.tdp_w) + gpu.tdp_w) / 2
    assert series.values[0] == pytest.approx(expected_first)
    assert np.isnan(series.values[1])
    assert series.values[2] == pytest.approx(half)


def test_duty_cycle_out_of_range_names_line(tmp_path: Path) -> None:
    path = write(tmp_path / "duty.csv", ["value,timestamp_anon,container_ip", "0,0,p1",
                                         "130,60,p1"])  # fmt: skip
    with pytest.raises(TraceFormatError, match=r"duty\.csv:3: field value=130.0 .* 0\.\.100"):
        load_duty_cycle(path)
    missing = write(tmp_path / "ip.csv", ["value,timestamp_anon,container_ip", "0,0,NULL"])
    with pytest.raises(TraceFormatError, match=r"ip\.csv:2: field container_ip is empty"):
        load_duty_cycle(missing)


def test_archive_with_two_csvs_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "two.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for name in ("a.csv", "b.csv"):
            info = tarfile.TarInfo(name)
            info.size = 1
            archive.addfile(info, io.BytesIO(b"\n"))
    with pytest.raises(TraceFormatError, match=r"exactly one \.csv member"):
        load_qps(path)


def test_azure_rate_counts_arrivals(tmp_path: Path) -> None:
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"] + [
        f"2023-11-16 18:00:{s:02d}.5000000,10,10" for s in (0, 1, 2, 3, 12, 25)
    ]
    path = write(tmp_path / "AzureLLMInferenceTrace_code.csv", rows)
    series = azure_request_rate(path, 10.0)
    assert series.name == "azure-llm-2023/request_rate/code/10s"
    # arrivals relative to the first: 0,1,2,3,12,25 -> two whole windows before 25 s
    assert series.values.tolist() == pytest.approx([0.4, 0.1])


# --- the shipped data --------------------------------------------------------------------------


def check(series: TimeSeries, step_s: float, min_length: int) -> None:
    assert series.step_s == step_s
    assert len(series) >= min_length
    assert np.nanmin(series.values) >= 0.0
    assert np.isfinite(series.values).mean() > 0.9


def test_shipped_openb_demand_spans_the_trace(openb_dir: Path) -> None:
    series = by_key(openb_gpu_demand(openb_dir / "openb_pod_list_default.csv", 3600.0, "queue"))
    total = series["all"]
    # the default list spans 12,902,960 s (149.3 days): 3584 whole hours
    assert len(total) == 12_902_960 // 3600
    assert total.seasons == (24, 168)
    check(total, 3600.0, 3000)
    assert {"LS", "BE"} <= set(series)
    # per-queue demand adds up to the total when no queue is below the share threshold
    every = by_key(openb_gpu_demand(openb_dir / "openb_pod_list_default.csv", 3600.0, "queue",
                                    min_share=0.0))  # fmt: skip
    summed = sum(s.values for k, s in every.items() if k != "all")
    assert np.allclose(summed, total.values)


def test_shipped_gavel_demand() -> None:
    gavel = DATA / "gavel"
    table = load_gavel_throughputs(gavel / "simulation_throughputs.json")
    traces = sorted((gavel / "msr-seed0").glob("*.trace"))
    series = gavel_gpu_demand(traces, table, 3600.0)
    assert len(series) >= 5
    for s in series:
        check(s, 3600.0, 24)
        assert s.seasons[:1] == (24,)


def test_shipped_genai_and_azure() -> None:
    rates = by_key(genai_request_rate(GENAI / "qps.tar.gz", 300.0))
    assert set(rates) == {"all", "api", "generative"}
    for s in rates.values():
        check(s, 300.0, 250)  # about 22 hours of 5-minute windows
    assert np.allclose(rates["all"].values, rates["api"].values + rates["generative"].values)
    power = genai_gpu_power(GENAI / "pod_gpu_duty_cycle_anon.tar.gz", 300.0)
    check(power, 300.0, 250)
    gpu = power_model_for("A100-80GB")
    # between every reporting pod idle and every one at TDP (about 100-115 pods a scrape)
    assert 100 * gpu.idle_w <= np.nanmin(power.values)
    assert np.nanmax(power.values) <= 143 * gpu.tdp_w
    conv = azure_request_rate(DATA / "azure-llm-2023" / CONVERSATION_TRACE, 10.0)
    check(conv, 10.0, 340)
    assert conv.values.sum() * 10.0 == pytest.approx(19_366, abs=60)  # all but the last window


def test_shipped_row_power_is_bounded_by_the_servers() -> None:
    trace = load_azure_llm_trace(DATA / "azure-llm-2023" / CONVERSATION_TRACE)
    series, budget_w = row_power(trace, servers=4, days=0.05, step_s=60.0)
    assert series.name == "row-sim/power/4servers-10pct-training/1min"
    assert len(series) == 72  # 4320 s
    check(series, 60.0, 72)
    assert budget_w > 0
    # four eight-GPU servers draw more than idle GPUs and less than the budget of 40 servers
    assert 4 * 8 * power_model_for("A100-80GB").idle_w < series.values.min()
    assert series.values.max() < budget_w


@pytest.mark.slow
def test_build_targets_quick_covers_every_family() -> None:
    targets = build_targets(DATA, quick=True)
    names = [t.name for t in targets]
    assert len(names) == len(set(names))
    assert {t.family for t in targets} == {"gpu_demand", "request_rate", "power"}
    for target in targets:
        parts = target.name.split("/")
        assert len(parts) == 4 and parts[1] == target.family
        assert np.nanmin(target.values) >= 0.0


def test_target_rows_describe_each_series() -> None:
    series = TimeSeries("x/gpu_demand/all/1h", "gpu_demand", 3600.0, 0.0,
                        np.array([1.0, np.nan, 3.0, 2.0]), "gpus")  # fmt: skip
    (row,) = target_rows([series])
    assert row["samples"] == 4
    assert row["mean"] == pytest.approx(2.0)
    assert row["peak"] == pytest.approx(3.0)
    assert row["missing_share"] == pytest.approx(0.25)
    assert row["span_days"] == pytest.approx(4 / 24, abs=0.01)
