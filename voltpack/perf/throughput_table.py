"""Training throughput (steps/s) by job type, GPU model and worker count.

The table is loaded from Gavel's measurements (`simulation_throughputs.json`: 26 job types x
1/2/4/8 workers on K80, P100 and V100, each run alone) and refined online from the throughput
each running job reports (an exponential moving average, as Gavel's scheduler does with
alpha 0.5). Where a cell was never measured it is estimated and flagged:

- a worker count between two measured ones: interpolated linearly between them;
- a worker count beyond the measured ones: the nearest measured count, scaled linearly and
  multiplied by the job's measured scaling efficiency per doubling (the ratio between its two
  largest measured counts, clamped to [0.5, 1]; 0.9 when only one count was measured);
- a GPU model on which the job type was never measured: the job's throughput on a measured
  model scaled by the two models' FP32 TFLOPS from the GPU catalog (compute-bound assumption).
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from voltpack.model.errors import CatalogError, TraceFormatError
from voltpack.model.gpu_sku import GpuCatalog, default_catalog

JobKey = tuple[str, int]
"""(job type, number of workers)."""

DEFAULT_SCALING_EFFICIENCY = 0.9
ONLINE_EMA_ALPHA = 0.5
"""Weight of a new measurement in the online refinement (Gavel's EMA_ALPHA)."""


@dataclass(frozen=True)
class ThroughputTable:
    """Measured steps per second for (job type, workers) on each GPU model, with estimates."""

    steps_per_s: Mapping[JobKey, Mapping[str, float]]
    source: str = "in memory"
    catalog: GpuCatalog = field(default_factory=default_catalog, compare=False, repr=False)

    @property
    def gpu_models(self) -> tuple[str, ...]:
        """Every GPU model with at least one measurement, sorted."""
        return tuple(sorted({gpu for rates in self.steps_per_s.values() for gpu in rates}))

    @property
    def job_types(self) -> tuple[str, ...]:
        """Every job type with at least one measurement, sorted."""
        return tuple(sorted({job for job, _ in self.steps_per_s}))

    def model_name(self, gpu_model: str) -> str:
        """The table's name for `gpu_model` (e.g. `v100` for a node labelled `V100M16`).

        A model the table measured under a name the catalog resolves to the same SKU (names and
        aliases, case-insensitive); otherwise `gpu_model` itself (then estimated by `rate`).
        """
        measured = self.gpu_models
        if gpu_model in measured:
            return gpu_model
        try:
            sku = self.catalog.get(gpu_model).name
        except CatalogError:
            return gpu_model
        for name in measured:
            try:
                if self.catalog.get(name).name == sku:
                    return name
            except CatalogError:
                continue
        return gpu_model

    def is_measured(self, job_type: str, gpu_model: str, workers: int) -> bool:
        """True when this cell was measured (or observed online), not estimated."""
        return gpu_model in self.steps_per_s.get((job_type, workers), {})

    def rate(self, job_type: str, gpu_model: str, workers: int) -> float:
        """Steps per second of `job_type` on `workers` GPUs of `gpu_model` (estimated if needed).

        Raises LookupError when nothing is known about the job type at all.
        """
        measured = self.steps_per_s.get((job_type, workers), {}).get(gpu_model)
        if measured is not None:
            return measured
        counts = sorted(w for (job, w), rates in self.steps_per_s.items() if job == job_type)
        if not counts:
            raise LookupError(
                f"no throughput known for job type {job_type!r}; known types: "
                f"{', '.join(self.job_types)}"
            )
        on_model = [w for w in counts if gpu_model in self.steps_per_s[(job_type, w)]]
        if on_model:
            return self._scaled_workers(job_type, gpu_model, workers, on_model)
        return self._other_model(job_type, gpu_model, workers)

    def observed(
        self, job_type: str, gpu_model: str, workers: int, measured_steps_per_s: float
    ) -> ThroughputTable:
        """A table refined by one throughput a running job reported (moving average)."""
        if not math.isfinite(measured_steps_per_s) or measured_steps_per_s < 0:
            raise ValueError(
                f"reported throughput {measured_steps_per_s!r} steps/s for {job_type!r} on "
                f"{workers} x {gpu_model} must be a finite number >= 0"
            )
        key = (job_type, workers)
        old = self.steps_per_s.get(key, {}).get(gpu_model)
        new = (
            measured_steps_per_s
            if old is None
            else ONLINE_EMA_ALPHA * measured_steps_per_s + (1 - ONLINE_EMA_ALPHA) * old
        )
        rates = {k: dict(v) for k, v in self.steps_per_s.items()}
        rates.setdefault(key, {})[gpu_model] = new
        return ThroughputTable(rates, self.source, self.catalog)

    def _scaled_workers(
        self, job_type: str, gpu_model: str, workers: int, counts: list[int]
    ) -> float:
        smaller = [w for w in counts if w <= workers]
        larger = [w for w in counts if w > workers]
        if smaller and larger:
            # Between two measured counts: interpolate linearly (never beyond either).
            low, high = smaller[-1], larger[0]
            low_rate = self.steps_per_s[(job_type, low)][gpu_model]
            high_rate = self.steps_per_s[(job_type, high)][gpu_model]
            return float(low_rate + (high_rate - low_rate) * (workers - low) / (high - low))
        base = smaller[-1] if smaller else counts[0]
        base_rate = self.steps_per_s[(job_type, base)][gpu_model]
        if len(counts) >= 2:
            low, high = counts[-2], counts[-1]
            low_rate = self.steps_per_s[(job_type, low)][gpu_model]
            high_rate = self.steps_per_s[(job_type, high)][gpu_model]
            per_gpu_ratio = (high_rate / high) / (low_rate / low) if low_rate > 0 else 1.0
            doublings_measured = math.log2(high / low)
            efficiency = per_gpu_ratio ** (1 / doublings_measured)
            efficiency = min(1.0, max(0.5, efficiency))
        else:
            efficiency = DEFAULT_SCALING_EFFICIENCY
        doublings = math.log2(workers / base)
        return float(base_rate * (workers / base) * efficiency**doublings)

    def _other_model(self, job_type: str, gpu_model: str, workers: int) -> float:
        target = self._fp32_tflops(gpu_model)
        measured_on = {
            gpu for (job, _), rates in self.steps_per_s.items() if job == job_type for gpu in rates
        }
        # The measured model closest in FP32 TFLOPS is the least extrapolated reference.
        reference = min(
            sorted(measured_on), key=lambda gpu: abs(math.log(target / self._fp32_tflops(gpu)))
        )
        ratio = target / self._fp32_tflops(reference)
        return self.rate(job_type, reference, workers) * ratio

    def _fp32_tflops(self, gpu_model: str) -> float:
        try:
            tflops = self.catalog.get(gpu_model).fp32_tflops
        except CatalogError as exc:
            raise LookupError(f"cannot estimate throughput on {gpu_model!r}: {exc}") from None
        if tflops is None:
            raise LookupError(
                f"cannot estimate throughput on {gpu_model!r}: the catalog has no FP32 TFLOPS"
            )
        return tflops


def _parse_key(text: str, origin: str) -> JobKey:
    try:
        parsed = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise TraceFormatError(f"{origin}: key {text!r} is not ('<job type>', <workers>)") from None
    if (
        not isinstance(parsed, tuple)
        or len(parsed) != 2
        or not isinstance(parsed[0], str)
        or not isinstance(parsed[1], int)
        or parsed[1] < 1
    ):
        raise TraceFormatError(f"{origin}: key {text!r} is not ('<job type>', <workers>)")
    return parsed[0], parsed[1]


def load_gavel_throughputs(
    path: Path, gpu_models: Iterable[str] | None = None, *, consolidated: bool = True
) -> ThroughputTable:
    """Read Gavel's throughput file: isolated (`null`) steps/s per job type, workers and GPU.

    `consolidated` keeps the worker types measured with all workers on one server (`v100`);
    False keeps the `*_unconsolidated` measurements, renamed to the plain GPU model.
    """
    origin = str(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TraceFormatError(f"{origin}: cannot open: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TraceFormatError(f"{origin}: not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise TraceFormatError(f"{origin}: expected an object of worker types")
    suffix = "_unconsolidated"
    wanted = None if gpu_models is None else set(gpu_models)
    rates: dict[JobKey, dict[str, float]] = {}
    for worker_type, jobs in raw.items():
        if worker_type.endswith(suffix) == consolidated:
            continue
        gpu = worker_type.removesuffix(suffix)
        if wanted is not None and gpu not in wanted:
            continue
        if not isinstance(jobs, dict):
            raise TraceFormatError(f"{origin}: {worker_type} is not an object of job types")
        for key_text, entry in jobs.items():
            if key_text == "null":
                continue
            key = _parse_key(key_text, f"{origin}: {worker_type}")
            raw = entry.get("null") if isinstance(entry, dict) else None
            isolated = (
                float(raw)
                if isinstance(raw, int | float) and not isinstance(raw, bool)
                else math.nan
            )
            if not math.isfinite(isolated):
                raise TraceFormatError(
                    f"{origin}: {worker_type} {key_text}: field null (isolated steps/s) is "
                    f"missing or not a number"
                )
            if isolated < 0:
                raise TraceFormatError(
                    f"{origin}: {worker_type} {key_text}: steps/s {isolated} is negative"
                )
            rates.setdefault(key, {})[gpu] = isolated
    if not rates:
        raise TraceFormatError(f"{origin}: no throughput measurements found")
    return ThroughputTable(rates, origin)
