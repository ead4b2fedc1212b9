"""Forecasting targets built from the shipped traces: GPU demand, request rate and power.

Every builder returns `TimeSeries` named `<source>/<quantity>/<key>/<step>` with `seasons`
set to the daily and weekly periods the series shows at least twice. `build_targets` gathers
the set the forecast benchmark runs on.
"""

from __future__ import annotations

from pathlib import Path

from voltpack.forecast.series import TimeSeries
from voltpack.perf.throughput_table import load_gavel_throughputs
from voltpack.sim.forecast_targets.demand import gavel_gpu_demand, openb_gpu_demand
from voltpack.sim.forecast_targets.power import genai_gpu_power, row_power
from voltpack.sim.forecast_targets.rates import azure_request_rate, genai_request_rate
from voltpack.sim.forecast_targets.summary import target_rows
from voltpack.sim.traces.azure_llm import CONVERSATION_TRACE, load_azure_llm_trace
from voltpack.sim.traces.genai import DUTY_CYCLE_ARCHIVE, GENAI_FOLDER, QPS_ARCHIVE

__all__ = [
    "azure_request_rate",
    "build_targets",
    "gavel_gpu_demand",
    "genai_gpu_power",
    "genai_request_rate",
    "openb_gpu_demand",
    "row_power",
    "target_rows",
]

DEMAND_STEPS_S = (600.0, 3600.0)
GENAI_STEP_S = 300.0
AZURE_STEPS_S = (1.0, 10.0)
ROW_STEP_S = 300.0
GAVEL_MIN_SHARE = 0.05
"""Gavel's virtual clusters get their own series from 5% of the GPU-time (the benchmark's
runtime grows with the number of series; smaller clusters stay in the total)."""
ROW_SERVERS = 40
ROW_DAYS = 3.0
"""Three days: at least two daily cycles before the test windows (MSTL needs two)."""


def build_targets(data_dir: Path, quick: bool = False) -> list[TimeSeries]:
    """Every forecasting target from the traces under `data_dir` (voltpack's `data/` layout).

    `quick` keeps one step per source (for smoke runs).
    """
    demand_steps = DEMAND_STEPS_S[:1] if quick else DEMAND_STEPS_S
    targets: list[TimeSeries] = []
    openb = data_dir / "openb"
    for step_s in demand_steps:
        targets += openb_gpu_demand(openb / "openb_pod_list_default.csv", step_s, "queue")
        spec = openb / "openb_pod_list_gpuspec33.csv"
        if spec.is_file():  # per GPU model: the default list names no model
            targets += [
                s for s in openb_gpu_demand(spec, step_s, "gpu_model") if "/all/" not in s.name
            ]
    gavel = data_dir / "gavel"
    table = load_gavel_throughputs(gavel / "simulation_throughputs.json")
    traces = sorted((gavel / "msr-seed0").glob("*.trace"))
    for step_s in demand_steps:
        targets += gavel_gpu_demand(traces, table, step_s, min_share=GAVEL_MIN_SHARE)
    genai = data_dir / GENAI_FOLDER
    targets += genai_request_rate(genai / QPS_ARCHIVE, GENAI_STEP_S)
    azure = data_dir / "azure-llm-2023"
    for path in sorted(azure.glob("AzureLLMInferenceTrace_*.csv")):
        for step_s in AZURE_STEPS_S[-1:] if quick else AZURE_STEPS_S:
            targets.append(azure_request_rate(path, step_s))
    targets.append(genai_gpu_power(genai / DUTY_CYCLE_ARCHIVE, GENAI_STEP_S))
    trace = load_azure_llm_trace(azure / CONVERSATION_TRACE)
    targets.append(row_power(trace, ROW_SERVERS, ROW_DAYS, ROW_STEP_S)[0])
    return targets
