"""Per-GPU-type LLM inference profiles: prefill and decode time, KV-cache capacity, power.

One roofline-shaped model for every (LLM, GPU type, tensor-parallel degree), calibrated on the
measured points (Splitwise's `perf_model.csv`) and extended to GPU types without a measured
point from the catalog's compute (bf16 TFLOPS) and memory bandwidth:

- prefill of a batch: weight and per-layer fixed costs read at memory speed, plus the FLOPs
  (2 per parameter per token and causal attention) at a fitted fraction of peak compute, plus
  the tensor-parallel all-reduces of the activations over the GPU's intra-node link;
- one decode step: weights and per-layer overheads (growing with log2 of the TP degree) at
  memory speed, plus per-sequence compute and KV-cache reads.

A measured configuration interpolates its own prefill table and gets decode coefficients
fitted on its own points (relative error, Huber weights, non-negative); a configuration
without a measured point uses the coefficients fitted on every measured point and is
`extrapolated`. Prefill settings that contradict the rest of
their configuration (more tokens in less than half the time) are left out and reported.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
from numpy.typing import NDArray

from voltpack.model.errors import CatalogError
from voltpack.model.gpu_sku import GpuSku, default_catalog
from voltpack.perf.gpu_power import power_model_for
from voltpack.perf.inference_measurements import (
    ExcludedSetting,
    MeasuredPoint,
    PrefillSetting,
    ProfileKey,
    default_measurements_path,
    load_measurements,
    prefill_settings,
)
from voltpack.perf.links import PerfModelError
from voltpack.perf.serving_models import ServingModel, ServingModelCatalog, default_serving_models

BYTES_PER_GIB = 1024**3
USABLE_MEMORY_SHARE = 0.9
"""Share of GPU memory a serving engine gives weights and KV cache (vLLM's default
`gpu_memory_utilization` is 0.9); the rest is activations, CUDA graphs and fragmentation."""
MIN_KV_TOKENS = 8192
"""A configuration must hold at least one 8,192-token sequence (the longest measured prompt)."""
TENSOR_PARALLEL_DEGREES = (1, 2, 4, 8)
"""Degrees considered inside one server (at most 8 GPUs share a node)."""
HUBER_RELATIVE = 0.05
"""Relative error beyond which a point's weight in a fit shrinks (Huber)."""
PREFILL_FEATURES = 4
DECODE_FEATURES = 5
DEFAULT_IDLE_POWER_RATIO = 0.15
"""Idle power as a share of TDP for a GPU the power calibration cannot describe."""
PREFILL_ACTIVITY = 1.0
"""Activity used to turn a power cap into a clock (prefill draws the GPU's peak)."""

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class HardwareRates:
    """What one GPU of a configuration offers the model (after any power cap)."""

    gpu_type: str
    flops_per_s: float
    memory_bytes_per_s: float
    memory_bytes: float
    link_bytes_per_s: float
    tdp_w: float
    power_cap_ratio: float = 1.0


def hardware_rates(sku: GpuSku, power_cap_ratio: float = 1.0) -> HardwareRates:
    """The catalog's figures for `sku`, compute lowered to the clock a cap of
    `power_cap_ratio` x TDP allows for prefill-like work (the GPU power model)."""
    tflops = sku.bf16_tflops or sku.fp16_tflops
    missing = [
        name
        for name, value in (
            ("bf16_tflops", tflops),
            ("memory_bandwidth_gbps", sku.memory_bandwidth_gbps),
            ("memory_gib", sku.memory_gib),
            ("tdp_w", sku.tdp_w),
        )
        if value is None
    ]
    if missing or tflops is None:
        raise PerfModelError(
            f"GPU type {sku.name}: the catalog lacks {', '.join(missing)}, needed for an "
            "inference profile"
        )
    assert sku.memory_bandwidth_gbps is not None and sku.memory_gib is not None
    assert sku.tdp_w is not None
    clock_share = 1.0
    if power_cap_ratio < 1.0:
        power = power_model_for(sku.name)
        clock = power.clock_for_power_limit_mhz(PREFILL_ACTIVITY, power_cap_ratio * sku.tdp_w)
        clock_share = float(clock) / power.max_clock_mhz
    link_gbps = sku.intra_node_link_bandwidth_gbps or 32.0
    return HardwareRates(
        gpu_type=sku.name,
        flops_per_s=tflops * 1e12 * clock_share,
        memory_bytes_per_s=sku.memory_bandwidth_gbps * 1e9,
        memory_bytes=sku.memory_gib * BYTES_PER_GIB,
        link_bytes_per_s=link_gbps * 1e9,
        tdp_w=sku.tdp_w,
        power_cap_ratio=power_cap_ratio,
    )


def prefill_features(
    model: ServingModel,
    rates: HardwareRates,
    tensor_parallel: int,
    tokens: FloatArray,
    squared_tokens: FloatArray,
) -> FloatArray:
    """Feature rows `[weights/B, layers/B, linear FLOPs/F, attention FLOPs/F]` (seconds per
    unit coefficient) for batches of `tokens` prompt tokens in all whose squares sum to
    `squared_tokens` (2 FLOPs per parameter per token; causal attention 2 x layers x hidden x
    tokens^2 per sequence)."""
    bandwidth = rates.memory_bytes_per_s
    compute = tensor_parallel * rates.flops_per_s
    ones = np.ones_like(tokens)
    return np.column_stack(
        [
            ones * model.weight_bytes / tensor_parallel / bandwidth,
            ones * model.layers / bandwidth,
            2.0 * model.parameters * tokens / compute,
            2.0 * model.layers * model.hidden_size * squared_tokens / compute,
        ]
    )


def prefill_all_reduce_s(
    model: ServingModel, rates: HardwareRates, tensor_parallel: int, tokens: FloatArray
) -> FloatArray:
    """Time of the TP all-reduces of a prefill (two per layer, ring) over the intra-node link;
    physical, not fitted (the measured servers all have NVLink)."""
    if tensor_parallel == 1:
        return np.zeros_like(tokens)
    payload = 2.0 * model.layers * tokens * model.hidden_size * model.bytes_per_parameter
    ring_share = 2.0 * (tensor_parallel - 1) / tensor_parallel
    return np.asarray(payload * ring_share / rates.link_bytes_per_s, dtype=np.float64)


def decode_features(
    model: ServingModel,
    rates: HardwareRates,
    tensor_parallel: int,
    batch: FloatArray,
    context_tokens: FloatArray,
) -> FloatArray:
    """Feature rows `[weights/B, layers/B, layers*log2(TP)/B, FLOPs/F, KV bytes/B]` for decode
    steps of `batch` sequences holding `context_tokens` tokens in all."""
    bandwidth = rates.memory_bytes_per_s
    ones = np.ones_like(batch)
    return np.column_stack(
        [
            ones * model.weight_bytes / tensor_parallel / bandwidth,
            ones * model.layers / bandwidth,
            ones * model.layers * math.log2(tensor_parallel) / bandwidth,
            2.0 * model.parameters * batch / (tensor_parallel * rates.flops_per_s),
            model.kv_bytes_per_token * context_tokens / (tensor_parallel * bandwidth),
        ]
    )


def robust_nonnegative_fit(
    features: FloatArray, offset_s: FloatArray, measured_s: FloatArray, iterations: int = 30
) -> FloatArray:
    """Non-negative coefficients c minimising the Huber-weighted relative error of
    `features @ c + offset_s` against `measured_s` (iteratively reweighted NNLS; points more
    than HUBER_RELATIVE off get weight HUBER_RELATIVE / error)."""
    target = measured_s - offset_s
    huber = np.ones_like(measured_s)
    coefficients = np.zeros(features.shape[1])
    from scipy.optimize import nnls  # noqa: PLC0415 - 0.3 s import, only to fit a profile

    for _ in range(iterations):
        weight = huber / measured_s
        coefficients, _ = nnls(features * weight[:, None], target * weight)
        error = np.abs((features @ coefficients + offset_s) / measured_s - 1.0)
        huber = np.minimum(1.0, HUBER_RELATIVE / np.maximum(error, 1e-12))
    return np.asarray(coefficients, dtype=np.float64)


@dataclass(frozen=True)
class FitRows:
    """Feature rows and measured times of prefill settings and decode points."""

    prefill_x: FloatArray
    prefill_offset_s: FloatArray
    prefill_s: FloatArray
    decode_x: FloatArray
    decode_s: FloatArray


def fit_rows(
    prefills: Sequence[PrefillSetting],
    decodes: Sequence[MeasuredPoint],
    models: ServingModelCatalog,
) -> FitRows:
    """Features of measured prefill settings and decode points under the profile model."""
    prefill_x, offsets, decode_x = [], [], []
    for setting in prefills:
        model = models.get(setting.key.model)
        rates = _rates_for(setting.key)
        tp = setting.key.tensor_parallel
        tokens = np.array([float(setting.prompt_tokens * setting.batch_size)])
        squares = np.array([float(setting.prompt_tokens**2 * setting.batch_size)])
        prefill_x.append(prefill_features(model, rates, tp, tokens, squares)[0])
        offsets.append(prefill_all_reduce_s(model, rates, tp, tokens)[0])
    for point in decodes:
        model = models.get(point.key.model)
        rates = _rates_for(point.key)
        batch = np.array([float(point.batch_size)])
        context = np.array([decode_context_tokens(point)])
        decode_x.append(decode_features(model, rates, point.key.tensor_parallel, batch, context)[0])
    return FitRows(
        prefill_x=np.array(prefill_x).reshape(-1, PREFILL_FEATURES),
        prefill_offset_s=np.array(offsets),
        prefill_s=np.array([s.prompt_time_s for s in prefills]),
        decode_x=np.array(decode_x).reshape(-1, DECODE_FEATURES),
        decode_s=np.array([p.token_time_s for p in decodes]),
    )


def decode_context_tokens(point: MeasuredPoint) -> float:
    """Tokens the batch holds on average over a measured decode run."""
    return point.batch_size * (point.prompt_tokens + point.output_tokens / 2.0)


def _rates_for(key: ProfileKey) -> HardwareRates:
    return hardware_rates(default_catalog().get(key.gpu_type), key.power_cap_ratio)


@dataclass(frozen=True)
class LatencyCoefficients:
    """Coefficients of the prefill and decode features (all >= 0)."""

    prefill: tuple[float, ...]
    decode: tuple[float, ...]


def fit_coefficients(
    prefills: Sequence[PrefillSetting],
    decodes: Sequence[MeasuredPoint],
    models: ServingModelCatalog | None = None,
) -> LatencyCoefficients:
    """Coefficients fitted on measured prefill settings and decode points (any models, GPU
    types and TP degrees)."""
    if not prefills or not decodes:
        raise PerfModelError("no measured points to fit an inference profile on")
    rows = fit_rows(prefills, decodes, models or default_serving_models())
    prefill = robust_nonnegative_fit(rows.prefill_x, rows.prefill_offset_s, rows.prefill_s)
    decode = robust_nonnegative_fit(rows.decode_x, np.zeros_like(rows.decode_s), rows.decode_s)
    return LatencyCoefficients(tuple(prefill.tolist()), tuple(decode.tolist()))


@dataclass(frozen=True)
class PowerRatios:
    """GPU power as a share of TDP while prefilling and while decoding."""

    prefill: float
    decode: float


PREFILL_DOMINATED_SHARE = 0.3
"""Runs with at least this share of time in prefill tell the prefill power (their peak)."""
DECODE_DOMINATED_SHARE = 0.9
"""Runs with at least this share of time in decode tell the decode power (their average)."""


def fit_power_ratios(points: Sequence[MeasuredPoint]) -> PowerRatios | None:
    """Prefill power (median peak of prefill-heavy runs, at most TDP) and decode power
    (median average of decode-dominated runs); None when the points report neither."""
    prefill, decode = [], []
    for point in points:
        decode_s = point.token_time_s * point.output_tokens
        prompt_share = point.prompt_time_s / (point.prompt_time_s + decode_s)
        if point.peak_power_ratio > 0 and prompt_share >= PREFILL_DOMINATED_SHARE:
            prefill.append(min(1.0, point.peak_power_ratio))
        if point.average_power_ratio > 0 and 1.0 - prompt_share >= DECODE_DOMINATED_SHARE:
            decode.append(point.average_power_ratio)
    if not prefill or not decode:
        return None
    return PowerRatios(prefill=float(np.median(prefill)), decode=float(np.median(decode)))


DEFAULT_POWER = PowerRatios(prefill=1.0, decode=0.6)
"""Used only when no measured point reports power."""


@dataclass(frozen=True)
class PrefillTable:
    """Measured prefill time against the batch's total prompt tokens, interpolated linearly in
    log-log between settings (the measured profiles depend on the total far more than on how
    it splits into prompts). Below the smallest total the time stays at its measured value;
    above the largest it grows in proportion to the tokens (compute-bound)."""

    tokens: tuple[float, ...]
    seconds: tuple[float, ...]

    @classmethod
    def from_settings(cls, settings: Sequence[PrefillSetting]) -> PrefillTable:
        """Settings with the same total averaged, sorted by total."""
        by_total: dict[float, list[float]] = {}
        for setting in settings:
            total = float(setting.prompt_tokens * setting.batch_size)
            by_total.setdefault(total, []).append(setting.prompt_time_s)
        totals = sorted(by_total)
        if not totals:
            raise PerfModelError("a prefill table needs at least one measured setting")
        return cls(tuple(totals), tuple(float(np.mean(by_total[t])) for t in totals))

    def time_s(self, tokens: FloatArray) -> FloatArray:
        """Prefill time of batches of `tokens` prompt tokens in all."""
        known_tokens = np.log(np.array(self.tokens))
        known_s = np.log(np.array(self.seconds))
        wanted = np.maximum(np.asarray(tokens, dtype=np.float64), 1.0)
        inside = np.exp(np.interp(np.log(wanted), known_tokens, known_s))
        beyond = self.seconds[-1] * wanted / self.tokens[-1]
        return np.asarray(np.where(wanted > self.tokens[-1], beyond, inside), dtype=np.float64)


@dataclass(frozen=True)
class ServingProfile:
    """Latency, memory and power of one replica: `model` on `tensor_parallel` GPUs of a type.

    `extrapolated` is True when no measured point of this model on this GPU type backs it
    (the shared roofline alone); `basis` says in words what it rests on.
    """

    model: ServingModel
    rates: HardwareRates
    tensor_parallel: int
    coefficients: LatencyCoefficients
    power: PowerRatios = DEFAULT_POWER
    idle_power_ratio: float = 0.15
    extrapolated: bool = True
    basis: str = ""
    prefill_table: PrefillTable | None = None
    """Measured prefill times, used instead of the prefill coefficients where present."""

    @property
    def gpu_type(self) -> str:
        """The GPU type's catalog name."""
        return self.rates.gpu_type

    @property
    def gpus(self) -> int:
        """GPUs one replica occupies."""
        return self.tensor_parallel

    @property
    def label(self) -> str:
        """Short text such as `llama2-70b/H100-SXM/TP4` (plus ` (extrapolated)`)."""
        text = f"{self.model.name}/{self.gpu_type}/TP{self.tensor_parallel}"
        return text + (" (extrapolated)" if self.extrapolated else "")

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens of KV cache the replica holds beside the weights."""
        free = self.tensor_parallel * self.rates.memory_bytes * USABLE_MEMORY_SHARE
        return max(0, int((free - self.model.weight_bytes) / self.model.kv_bytes_per_token))

    def prefill_s(self, prompt_tokens: Iterable[float]) -> float:
        """Time to prefill the prompts in `prompt_tokens` together, one batch."""
        prompts = np.asarray(list(prompt_tokens), dtype=np.float64)
        tokens = np.array([prompts.sum()])
        return float(self.prefill_time_s(tokens, np.array([(prompts**2).sum()]))[0])

    def prefill_time_s(self, tokens: FloatArray, squared_tokens: FloatArray) -> FloatArray:
        """Vectorised prefill time of batches with `tokens` prompt tokens in all whose squares
        sum to `squared_tokens`."""
        if self.prefill_table is not None:
            return self.prefill_table.time_s(tokens)
        x = prefill_features(self.model, self.rates, self.tensor_parallel, tokens, squared_tokens)
        extra = prefill_all_reduce_s(self.model, self.rates, self.tensor_parallel, tokens)
        return np.asarray(x @ np.array(self.coefficients.prefill) + extra, dtype=np.float64)

    @property
    def prefill_token_s(self) -> float:
        """Marginal time of one more prompt token in an iteration that also decodes (chunked
        prefill): the steepest measured slope (the top segment of the prefill table), else
        the roofline's compute and all-reduce time per token."""
        if self.prefill_table is not None and len(self.prefill_table.tokens) >= 2:
            tokens, seconds = self.prefill_table.tokens, self.prefill_table.seconds
            slope = (seconds[-1] - seconds[-2]) / (tokens[-1] - tokens[-2])
            if slope > 0:
                return float(slope)
        one = np.array([1.0])
        x = prefill_features(self.model, self.rates, self.tensor_parallel, one, np.zeros(1))
        compute = float(x[0, 2] * self.coefficients.prefill[2])
        return compute + float(
            prefill_all_reduce_s(self.model, self.rates, self.tensor_parallel, one)[0]
        )

    def mixed_step_s(
        self, batch: FloatArray, context_tokens: FloatArray, prefill_tokens: FloatArray
    ) -> FloatArray:
        """Vectorised time of one iteration that decodes `batch` sequences (holding
        `context_tokens`) and prefills `prefill_tokens` prompt tokens (a chunk); without
        sequences to decode it is a plain prefill of those tokens."""
        batch = np.asarray(batch, dtype=np.float64)
        chunk = np.asarray(prefill_tokens, dtype=np.float64)
        decoding = batch > 0
        mixed = (
            self.decode_time_s(np.maximum(batch, 1.0), context_tokens)
            + chunk * self.prefill_token_s
        )
        alone = self.prefill_time_s(np.maximum(chunk, 1.0), np.maximum(chunk, 1.0) ** 2)
        return np.asarray(np.where(decoding, mixed, alone), dtype=np.float64)

    def decode_step_s(self, batch: float, context_tokens: float) -> float:
        """Time of one decode step for `batch` sequences holding `context_tokens` in all."""
        return float(self.decode_time_s(np.array([float(batch)]), np.array([context_tokens]))[0])

    def decode_time_s(self, batch: FloatArray, context_tokens: FloatArray) -> FloatArray:
        """Vectorised decode step time."""
        x = decode_features(self.model, self.rates, self.tensor_parallel, batch, context_tokens)
        return np.asarray(x @ np.array(self.coefficients.decode), dtype=np.float64)

    def power_w(self, prefill_share: float, decode_share: float) -> float:
        """Mean power of the replica's GPUs busy `prefill_share` of the time in prefill and
        `decode_share` in decode (the rest idle), never above a set cap."""
        idle_share = max(0.0, 1.0 - prefill_share - decode_share)
        ratio = (
            prefill_share * self.power.prefill
            + decode_share * self.power.decode
            + idle_share * self.idle_power_ratio
        )
        return self.tensor_parallel * self.rates.tdp_w * min(ratio, self.rates.power_cap_ratio)


class ProfileBook:
    """Profiles of every (model, GPU type, TP): measured configurations get coefficients
    fitted on their own points; others the coefficients fitted on all points (extrapolated)."""

    def __init__(
        self,
        points: Sequence[MeasuredPoint],
        models: ServingModelCatalog | None = None,
    ) -> None:
        self.models = models or default_serving_models()
        self.points = list(points)
        prefills, self.excluded = prefill_settings(self.points)
        self.shared = fit_coefficients(prefills, self.points, self.models)
        self._prefills: dict[ProfileKey, list[PrefillSetting]] = {}
        self._decodes: dict[ProfileKey, list[MeasuredPoint]] = {}
        for setting in prefills:
            self._prefills.setdefault(setting.key, []).append(setting)
        for point in self.points:
            self._decodes.setdefault(point.key, []).append(point)
        self.pooled_power = fit_power_ratios(self.points) or DEFAULT_POWER

    def excluded_settings(self) -> list[ExcludedSetting]:
        """Measured prefill settings left out of every fit, with the reason."""
        return list(self.excluded)

    def is_measured(self, model: str, gpu_type: str) -> bool:
        """Whether any uncapped measured point has this model on this GPU type."""
        return any(
            k.model.casefold() == model.casefold()
            and k.gpu_type.casefold() == gpu_type.casefold()
            and k.power_cap_ratio >= 1.0
            for k in self._decodes
        )

    def profile(
        self, model: str, gpu_type: str, tensor_parallel: int, power_cap_ratio: float = 1.0
    ) -> ServingProfile:
        """The profile of `model` on `tensor_parallel` GPUs of `gpu_type` (catalog name)."""
        serving_model = self.models.get(model)
        sku = default_catalog().get(gpu_type)
        if not serving_model.supports_tensor_parallel(tensor_parallel):
            raise PerfModelError(
                f"{model}: tensor parallel {tensor_parallel} does not divide its "
                f"{serving_model.attention_heads} attention heads"
            )
        rates = hardware_rates(sku, power_cap_ratio)
        key = ProfileKey(serving_model.name, sku.name, tensor_parallel, power_cap_ratio)
        decodes = self._decodes.get(key, [])
        prefills = self._prefills.get(key, [])
        if not decodes or not prefills:
            return ServingProfile(
                model=serving_model,
                rates=rates,
                tensor_parallel=tensor_parallel,
                coefficients=self.shared,
                power=self.pooled_power,
                idle_power_ratio=_idle_power_ratio(sku),
                extrapolated=True,
                basis=(
                    f"extrapolated: roofline from the catalog ({sku.name}: "
                    f"{rates.flops_per_s / 1e12:g} TFLOPS, "
                    f"{rates.memory_bytes_per_s / 1e9:g} GB/s) with coefficients fitted on "
                    f"{len(self.points)} measured points"
                ),
            )
        return ServingProfile(
            model=serving_model,
            rates=rates,
            tensor_parallel=tensor_parallel,
            coefficients=fit_coefficients(prefills, decodes, self.models),
            power=fit_power_ratios(decodes) or self.pooled_power,
            idle_power_ratio=_idle_power_ratio(sku),
            extrapolated=False,
            prefill_table=PrefillTable.from_settings(prefills),
            basis=f"measured: {len(decodes)} settings of {key.label()} (Splitwise profile)",
        )

    def feasible_profiles(
        self, model: str, gpu_type: str, power_cap_ratio: float = 1.0
    ) -> list[ServingProfile]:
        """Profiles for each TP degree at which the model fits on `gpu_type` with room for at
        least MIN_KV_TOKENS of KV cache; empty when none does."""
        serving_model = self.models.get(model)
        profiles = []
        for degree in TENSOR_PARALLEL_DEGREES:
            if not serving_model.supports_tensor_parallel(degree):
                continue
            candidate = self.profile(model, gpu_type, degree, power_cap_ratio)
            if candidate.kv_capacity_tokens >= MIN_KV_TOKENS:
                profiles.append(candidate)
        return profiles


def _idle_power_ratio(sku: GpuSku) -> float:
    try:
        power = power_model_for(sku.name)
    except CatalogError:
        return DEFAULT_IDLE_POWER_RATIO
    return power.idle_w / power.tdp_w


@cache
def default_profile_book() -> ProfileBook:
    """The profile book calibrated on the shipped Splitwise measurements."""
    return ProfileBook(load_measurements(default_measurements_path()))
