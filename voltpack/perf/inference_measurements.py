"""Measured LLM inference profiles in Splitwise's `perf_model.csv` format.

Columns: `model,hardware,prompt_size,batch_size,token_size,peak_power,average_power,
prompt_time,token_time,e2e_time,tensor_parallel` (times in ms, power as a fraction of TDP).
Shipped: `data/splitwise-perf/perf_model.csv` (Splitwise, ISCA'24; MIT). Repeated runs of one
setting are averaged. A malformed row raises TraceFormatError naming the file, line and field.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from voltpack.model.csv_rows import csv_rows, integer_field, number_field
from voltpack.model.data_files import find_data_dir
from voltpack.model.errors import TraceFormatError

SPLITWISE_FILE = Path("splitwise-perf") / "perf_model.csv"
COLUMNS = (
    "model",
    "hardware",
    "prompt_size",
    "batch_size",
    "token_size",
    "peak_power",
    "average_power",
    "prompt_time",
    "token_time",
    "tensor_parallel",
)

HARDWARE_NAMES: dict[str, tuple[str, float]] = {
    "a100-80gb": ("A100-80GB", 1.0),
    "h100-80gb": ("H100-SXM", 1.0),
    "h100-80gb-pcap": ("H100-SXM", 0.7),
}
"""Splitwise's hardware names -> (voltpack catalog name, power cap as a share of TDP). The
power-capped H100 is Splitwise's DGX-H100 at 7,140 W instead of 10,200 W (0.7 of TDP,
`hardware-configs.txt`). Other names are read as catalog names, uncapped."""


@dataclass(frozen=True)
class ProfileKey:
    """One measured configuration: a model on `tensor_parallel` GPUs of one type and cap."""

    model: str
    gpu_type: str
    tensor_parallel: int
    power_cap_ratio: float = 1.0

    def label(self) -> str:
        """Short text such as `llama2-70b/H100-SXM/TP4` (plus `@cap0.7` when capped)."""
        cap = "" if self.power_cap_ratio >= 1.0 else f"@cap{self.power_cap_ratio:g}"
        return f"{self.model}/{self.gpu_type}{cap}/TP{self.tensor_parallel}"


@dataclass(frozen=True)
class MeasuredPoint:
    """The mean of a setting's runs: prefill time of the batch and time per decode step."""

    key: ProfileKey
    prompt_tokens: int
    batch_size: int
    output_tokens: int
    prompt_time_s: float
    token_time_s: float
    peak_power_ratio: float
    """Peak power over the run as a share of TDP (reached in prefill); 0 where unreported."""
    average_power_ratio: float
    """Mean power over the run as a share of TDP; 0 where the file has none."""
    runs: int


def default_measurements_path() -> Path:
    """The shipped Splitwise profile file; TraceFormatError if voltpack's data folder lacks it."""
    folder = find_data_dir(SPLITWISE_FILE)
    if folder is None:
        raise TraceFormatError(
            f"{SPLITWISE_FILE} is not in voltpack's data folder (set VOLTPACK_DATA_DIR)"
        )
    return folder / SPLITWISE_FILE


def load_measurements(path: Path) -> list[MeasuredPoint]:
    """Every setting of a profile file, repeated runs averaged, in file order."""
    sums: dict[tuple[ProfileKey, int, int, int], list[float]] = defaultdict(
        lambda: [0.0, 0.0, 0.0, 0.0, 0.0]
    )
    for line, row in csv_rows(path, COLUMNS):
        where = f"{path}:{line}"
        hardware = row["hardware"].strip()
        gpu_type, cap = HARDWARE_NAMES.get(hardware.casefold(), (hardware, 1.0))
        model = row["model"].strip()
        if not model or not gpu_type:
            raise TraceFormatError(f"{where}: fields model and hardware must not be empty")
        key = ProfileKey(model, gpu_type, integer_field(where, row, "tensor_parallel", 1), cap)
        setting = (
            key,
            integer_field(where, row, "prompt_size", 1),
            integer_field(where, row, "batch_size", 1),
            integer_field(where, row, "token_size", 1),
        )
        total = sums[setting]
        total[0] += number_field(where, row, "prompt_time", 0.0) / 1000.0
        total[1] += number_field(where, row, "token_time", 0.0) / 1000.0
        total[2] += number_field(where, row, "peak_power", 0.0)
        total[3] += number_field(where, row, "average_power", 0.0)
        total[4] += 1
    if not sums:
        raise TraceFormatError(f"{path}: no measured rows")
    return [
        MeasuredPoint(
            key=key,
            prompt_tokens=prompt,
            batch_size=batch,
            output_tokens=output,
            prompt_time_s=total[0] / total[4],
            token_time_s=total[1] / total[4],
            peak_power_ratio=total[2] / total[4],
            average_power_ratio=total[3] / total[4],
            runs=int(total[4]),
        )
        for (key, prompt, batch, output), total in sums.items()
    ]


@dataclass(frozen=True)
class PrefillSetting:
    """One prefill measurement: `batch_size` prompts of `prompt_tokens`, runs of every output
    length averaged (prefill does not depend on it)."""

    key: ProfileKey
    prompt_tokens: int
    batch_size: int
    prompt_time_s: float


@dataclass(frozen=True)
class ExcludedSetting:
    """A measured prefill setting left out of every fit, and why."""

    setting: PrefillSetting
    reason: str


ANOMALY_RATIO = 0.5
"""A prefill that takes less than this share of the time the same prompts took in a smaller
batch cannot be the same work (more tokens in less time) and is left out as a measurement
anomaly."""


def prefill_settings(
    points: list[MeasuredPoint],
) -> tuple[list[PrefillSetting], list[ExcludedSetting]]:
    """Distinct prefill settings (output lengths averaged) and the anomalous ones left out."""
    grouped: dict[tuple[ProfileKey, int, int], list[float]] = defaultdict(list)
    for point in points:
        grouped[(point.key, point.prompt_tokens, point.batch_size)].append(point.prompt_time_s)
    settings = [
        PrefillSetting(key, prompt, batch, sum(times) / len(times))
        for (key, prompt, batch), times in grouped.items()
    ]
    kept: list[PrefillSetting] = []
    excluded: list[ExcludedSetting] = []
    for setting in settings:
        faster_than = [
            other
            for other in settings
            if other.key == setting.key
            and other.prompt_tokens == setting.prompt_tokens
            and other.batch_size < setting.batch_size
            and setting.prompt_time_s < ANOMALY_RATIO * other.prompt_time_s
        ]
        if faster_than:
            other = max(faster_than, key=lambda s: s.prompt_time_s)
            excluded.append(
                ExcludedSetting(
                    setting,
                    f"{setting.key.label()}: batch {setting.batch_size} x {setting.prompt_tokens} "
                    f"tokens took {setting.prompt_time_s * 1000:.0f} ms, less than half of batch "
                    f"{other.batch_size} ({other.prompt_time_s * 1000:.0f} ms)",
                )
            )
        else:
            kept.append(setting)
    return kept, excluded
