"""Power and latency of one 8-GPU LLM inference server under clock locks and power caps.

The server runs one tensor-parallel model instance (all GPUs at the same clock) with
continuous batching and prefill priority. Time is cut into bins (1 s in the simulation); per
bin the model keeps a fluid account of the GPU time spent in prefill (compute-bound, power at
or above TDP), in decode (memory-bound, lower power) and idle:

- prefill work (seconds at max clock) queues FIFO; a bin serves `bin_s / time_factor` of it
  (Lindley recursion, vectorised with a running minimum), the rest carries over;
- decode occupancy comes from each request's decode interval at max clock; sequences linger
  longer when the clock is lower or prefill takes the GPU (Little's law), and the GPU is busy
  decoding in `1 - exp(-concurrency)` of the time prefill leaves over.

So a lower clock lowers power while the work is running but makes the GPUs busy for longer,
and latency grows. Arrays over bins may carry a leading server axis: `[server, bin]`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from voltpack.model.errors import InvalidRequestError
from voltpack.perf.gpu_power import (
    FloatArray,
    GpuPowerModel,
    ServerPowerModel,
    server_power_model_for,
)

MIN_FREE_SHARE = 0.05
"""Lower bound on the GPU time share left to decode, so stalled bins stay finite."""
MAX_QUEUE_UTILISATION = 0.95
"""Upper bound on the utilisation in the Kingman term; overload shows up as fluid backlog."""


@dataclass(frozen=True)
class InferenceProfile:
    """Speed and power behaviour of one model instance on one server.

    Defaults: BLOOM-176B, tensor-parallel over the 8 GPUs of a DGX-A100 (the model POLCA
    characterises). Sources, per field:

    - prefill_overhead_s 0.057, prefill_tokens_per_s 5230, prefill_s_per_token2 2.95e-8:
      least-squares fit of prompt_time for bloom-176b/a100-80gb/batch 1 in the splitwise-sim
      profile (github.com/Mutinifni/splitwise-sim data/perf_model.csv, measured for Splitwise,
      ISCA'24): 174/289/540/1355/3600 ms for 512/1024/2048/4096/8192 prompt tokens; the
      quadratic term is attention. Mean over the Azure conversation trace: ~3,500 tokens/s.
    - decode_s_per_token 0.04865, decode_s_per_extra_sequence 0.000535: linear fit of
      token_time over batch 1-32 in the same profile (48.7 ms at batch 1, 57.3 ms at 16,
      65.7 ms at 32).
    - max_batch 64: largest batch in that profile (token time 96.6 ms there).
    - reference_batch 16: batch used to turn output tokens into decode occupancy at max clock
      (a loaded server holds 10-30 sequences).
    - prefill_activity 1.0: prefill draws the GPU's transient peak (1.00-1.03 x TDP in the
      profile's peak_power for BLOOM prompts of >= 1024 tokens; POLCA: spikes above TDP).
    - decode_activity 0.54: the profile's average_power for decode-dominated BLOOM runs is
      0.63-0.66 x TDP (~255 W per A100): (255 - 60 W idle) / (420 - 60 W peak dynamic).
    - prefill_compute_share 0.9, decode_compute_share 0.25: estimates. Splitwise: prefill is
      compute-bound and decode memory-bound; the shares say how much of each phase's time
      stretches with max_clock / clock (decode keeps kernel-launch and small-GEMM work that
      does scale).
    - non_gpu_load_coupling 0.569: from the DGX-A100 nameplate: the 6.5 kW "max system
      power" is what the server draws at its worst, which for inference is a second of
      prefill on all 8 GPUs at the 420 W transient peak; so non-GPU power there is
      6500 - 8 x 420 = 3140 W, and over the 1500 W non-GPU idle that is
      (3140 - 1500) / (8 x (420 - 60)) = 0.569 W per W of GPU power above idle (fans, PSU
      losses, CPUs and NVSwitches scaling with the GPUs' load). This is the least favourable
      reading for oversubscription (a server's worst second at its nameplate); it agrees
      with training's coupling fitted independently to POLCA's 97 % anchor (0.59). POLCA's
      ~79 % for inference is a ROW-level peak (servers do not all peak in the same second):
      `voltpack.sim.power_calibration` calibrates the offered load to it. (An earlier
      version fitted 0.095 so that one server's peak second was 79 %; with that a row can
      only reach 79 % when every server prefills in the same second.)
    - server: dgx-a100 in gpu_power.yaml (6.5 kW provisioned, 1.5 kW non-GPU idle).
    """

    name: str
    server: ServerPowerModel
    prefill_overhead_s: float = 0.057
    prefill_tokens_per_s: float = 5230.0
    prefill_s_per_token2: float = 2.95e-8
    decode_s_per_token: float = 0.04865
    decode_s_per_extra_sequence: float = 0.000535
    max_batch: int = 64
    reference_batch: int = 16
    prefill_activity: float = 1.0
    decode_activity: float = 0.54
    prefill_compute_share: float = 0.9
    decode_compute_share: float = 0.25
    non_gpu_load_coupling: float = 0.569

    def prefill_time_s(self, prompt_tokens: ArrayLike) -> FloatArray:
        """Prefill duration (s) at max clock of prompts of `prompt_tokens` tokens each."""
        tokens = np.asarray(prompt_tokens, dtype=np.float64)
        return np.asarray(
            self.prefill_overhead_s
            + tokens / self.prefill_tokens_per_s
            + self.prefill_s_per_token2 * tokens**2,
            dtype=np.float64,
        )

    def time_per_token_s(self, batch: ArrayLike) -> FloatArray:
        """Time (s) of one decode step at max clock with `batch` sequences (clipped to 1..max)."""
        sequences = np.clip(np.asarray(batch, dtype=np.float64), 1.0, self.max_batch)
        return np.asarray(
            self.decode_s_per_token + self.decode_s_per_extra_sequence * (sequences - 1.0),
            dtype=np.float64,
        )


@cache
def default_inference_profile() -> InferenceProfile:
    """BLOOM-176B on a DGX-A100 (8x A100-80GB), the profile documented on InferenceProfile."""
    return InferenceProfile(name="bloom-176b-dgx-a100", server=server_power_model_for("dgx-a100"))


@dataclass(frozen=True)
class InferenceLoad:
    """Offered work per time bin for one server (`[bin]`) or several (`[server, bin]`).

    `prefill_work_s`: prefill seconds at max clock of the requests arriving in the bin.
    `decode_seq_s`: sequence-seconds of decoding in the bin at max clock and the profile's
    reference batch (sum over requests of the time each spends decoding inside the bin).
    """

    bin_s: float
    arrivals: NDArray[np.int64]
    prefill_work_s: FloatArray
    decode_seq_s: FloatArray

    @property
    def n_bins(self) -> int:
        """Number of time bins."""
        return int(self.prefill_work_s.shape[-1])

    def bins(self, start: int, stop: int) -> InferenceLoad:
        """The load of bins [start, stop) only (for running the model in chunks)."""
        return InferenceLoad(
            bin_s=self.bin_s,
            arrivals=self.arrivals[..., start:stop],
            prefill_work_s=self.prefill_work_s[..., start:stop],
            decode_seq_s=self.decode_seq_s[..., start:stop],
        )

    @classmethod
    def stack(cls, loads: list[InferenceLoad]) -> InferenceLoad:
        """Several servers' loads (same bins) as one `[server, bin]` load."""
        if not loads or len({(load.bin_s, load.n_bins) for load in loads}) != 1:
            raise InvalidRequestError("stack needs at least one load, all with the same bins")
        return cls(
            bin_s=loads[0].bin_s,
            arrivals=np.stack([load.arrivals for load in loads]),
            prefill_work_s=np.stack([load.prefill_work_s for load in loads]),
            decode_seq_s=np.stack([load.decode_seq_s for load in loads]),
        )


def _n_bins(bin_s: float, horizon_s: float) -> int:
    if bin_s <= 0 or horizon_s <= 0:
        raise InvalidRequestError(f"bin_s={bin_s} and horizon_s={horizon_s} must both be positive")
    return int(np.ceil(horizon_s / bin_s - 1e-9))


def _covered_after(points_s: FloatArray, bin_s: float, n_bins: int) -> FloatArray:
    """Per bin, the total length of [point, inf) inside the bin, summed over the points."""
    position = points_s / bin_s
    index = np.floor(position).astype(np.int64)
    inside = (index >= 0) & (index < n_bins)
    index, position = index[inside], position[inside]
    partial = np.bincount(index, weights=(1.0 - (position - index)) * bin_s, minlength=n_bins)
    later = np.cumsum(np.bincount(index + 1, minlength=n_bins + 1)[:n_bins]) * bin_s
    early = np.count_nonzero(points_s < 0) * bin_s
    return np.asarray(partial + later + early, dtype=np.float64)


def bin_requests(
    arrival_s: ArrayLike,
    prompt_tokens: ArrayLike,
    output_tokens: ArrayLike,
    bin_s: float,
    horizon_s: float,
    profile: InferenceProfile | None = None,
) -> InferenceLoad:
    """Bin one server's requests into per-bin prefill work and decode occupancy at max clock.

    Requests arriving outside [0, horizon_s) are dropped; decoding that runs past the horizon
    is cut there.
    """
    profile = profile or default_inference_profile()
    n_bins = _n_bins(bin_s, horizon_s)
    arrival = np.asarray(arrival_s, dtype=np.float64)
    prompt = np.asarray(prompt_tokens, dtype=np.float64)
    output = np.asarray(output_tokens, dtype=np.float64)
    if not arrival.shape == prompt.shape == output.shape or arrival.ndim != 1:
        raise InvalidRequestError(
            "arrival_s, prompt_tokens and output_tokens must be 1-D arrays of the same length"
        )
    keep = (arrival >= 0) & (arrival < n_bins * bin_s)
    arrival, prompt, output = arrival[keep], prompt[keep], output[keep]
    prefill_s = profile.prefill_time_s(prompt)
    index = np.floor(arrival / bin_s).astype(np.int64)
    decode_start = arrival + prefill_s
    decode_end = decode_start + output * profile.time_per_token_s(profile.reference_batch)
    return InferenceLoad(
        bin_s=bin_s,
        arrivals=np.bincount(index, minlength=n_bins).astype(np.int64),
        prefill_work_s=np.bincount(index, weights=prefill_s, minlength=n_bins).astype(np.float64),
        decode_seq_s=_covered_after(decode_start, bin_s, n_bins)
        - _covered_after(decode_end, bin_s, n_bins),
    )


@dataclass(frozen=True)
class InferenceBusy:
    """Per-bin state of the server(s) under given clocks (arrays shaped like the load)."""

    prefill_clock_mhz: FloatArray
    decode_clock_mhz: FloatArray
    prefill_time_factor: FloatArray
    decode_time_factor: FloatArray
    prefill_share: FloatArray
    """Share of the bin the GPUs spend in prefill."""
    decode_share: FloatArray
    """Share of the bin the GPUs spend decoding."""
    backlog_start_s: FloatArray
    """Prefill work (s at max clock) queued at the start of the bin."""
    backlog_end_s: FloatArray
    """Prefill work (s at max clock) queued at the end of the last bin, per server."""
    concurrency: FloatArray
    """Mean number of sequences decoding, stretched by the clock and by prefill stalls."""


def _trailing_mean(values: FloatArray, window: int) -> FloatArray:
    """Mean over the last `window` bins (fewer at the start), along the last axis."""
    zeros = np.zeros((*values.shape[:-1], 1))
    cumulative = np.concatenate([zeros, np.cumsum(values, axis=-1)], axis=-1)
    index = np.arange(values.shape[-1])
    start = np.maximum(index + 1 - window, 0)
    return np.asarray(
        (cumulative[..., index + 1] - cumulative[..., start]) / (index + 1 - start),
        dtype=np.float64,
    )


def inference_busy(
    load: InferenceLoad,
    clock_mhz_per_bin: ArrayLike,
    profile: InferenceProfile,
    gpu_model: GpuPowerModel,
    power_limit_w_per_bin: ArrayLike | None = None,
    window_s: float = 60.0,
    initial_backlog_s: ArrayLike = 0.0,
    previous_prefill_share: FloatArray | None = None,
) -> InferenceBusy:
    """Prefill/decode/idle shares of each bin under the given clocks (and optional GPU cap).

    A power limit lowers each phase's clock to `clock_for_power_limit_mhz` of its activity,
    so a cap slows prefill much more than decode (POLCA); the limit is taken as sustained
    over the bin. Decode concurrency is stretched by the decode time factor and by the share
    of GPU time prefill took over the trailing `window_s` (Little's law over that window).

    To run the bins in chunks (e.g. between two controller decisions), pass the previous
    chunk's `backlog_end_s` as `initial_backlog_s` and its last `prefill_share` bins as
    `previous_prefill_share`; loads can be cut with `InferenceLoad.bins(start, stop)`.
    """
    shape = load.prefill_work_s.shape
    clock = gpu_model.clamp_clock_mhz(np.broadcast_to(np.asarray(clock_mhz_per_bin), shape))
    prefill_clock = gpu_model.effective_clock_mhz(
        clock, profile.prefill_activity, power_limit_w_per_bin
    )
    decode_clock = gpu_model.effective_clock_mhz(
        clock, profile.decode_activity, power_limit_w_per_bin
    )
    prefill_factor = gpu_model.time_factor(prefill_clock, profile.prefill_compute_share)
    decode_factor = gpu_model.time_factor(decode_clock, profile.decode_compute_share)

    capacity_s = load.bin_s / prefill_factor
    initial = np.broadcast_to(np.asarray(initial_backlog_s, dtype=np.float64), shape[:-1])
    surplus = initial[..., np.newaxis] + np.cumsum(load.prefill_work_s - capacity_s, axis=-1)
    # Lindley recursion q_b = max(0, q_(b-1) + work_b - capacity_b) in closed form
    floor = np.minimum(np.minimum.accumulate(surplus, axis=-1), 0.0)
    backlog_end = np.maximum(surplus - floor, 0.0)
    backlog_start = np.concatenate([initial[..., np.newaxis], backlog_end[..., :-1]], axis=-1)
    served_s = backlog_start + load.prefill_work_s - backlog_end
    prefill_share = np.clip(served_s * prefill_factor / load.bin_s, 0.0, 1.0)

    window = max(1, round(window_s / load.bin_s))
    if previous_prefill_share is None:
        recent_prefill = _trailing_mean(prefill_share, window)
    else:
        history = np.broadcast_to(
            previous_prefill_share[..., -window:],
            (*shape[:-1], min(window, previous_prefill_share.shape[-1])),
        )
        joined = np.concatenate([history, prefill_share], axis=-1)
        recent_prefill = _trailing_mean(joined, window)[..., history.shape[-1] :]
    free = np.maximum(1.0 - recent_prefill, MIN_FREE_SHARE)
    concurrency = load.decode_seq_s / load.bin_s * decode_factor / free
    decode_share = (1.0 - prefill_share) * (1.0 - np.exp(-concurrency))
    return InferenceBusy(
        prefill_clock_mhz=prefill_clock,
        decode_clock_mhz=decode_clock,
        prefill_time_factor=prefill_factor,
        decode_time_factor=decode_factor,
        prefill_share=prefill_share,
        decode_share=decode_share,
        backlog_start_s=backlog_start,
        backlog_end_s=backlog_end[..., -1],
        concurrency=concurrency,
    )


def server_power_w(
    load: InferenceLoad,
    clock_mhz_per_bin: ArrayLike,
    profile: InferenceProfile,
    gpu_model: GpuPowerModel,
    power_limit_w_per_bin: ArrayLike | None = None,
) -> FloatArray:
    """Mean server power (W) per bin: GPUs (prefill, decode, idle shares) plus non-GPU part."""
    busy = inference_busy(load, clock_mhz_per_bin, profile, gpu_model, power_limit_w_per_bin)
    return power_from_busy_w(busy, profile, gpu_model)


def power_from_busy_w(
    busy: InferenceBusy, profile: InferenceProfile, gpu_model: GpuPowerModel
) -> FloatArray:
    """Mean server power (W) per bin from an `inference_busy` result (for chunked runs)."""
    idle_share = 1.0 - busy.prefill_share - busy.decode_share
    gpu_w = (
        busy.prefill_share * gpu_model.power_w(profile.prefill_activity, busy.prefill_clock_mhz)
        + busy.decode_share * gpu_model.power_w(profile.decode_activity, busy.decode_clock_mhz)
        + idle_share * gpu_model.idle_w
    )
    return profile.server.power_w(gpu_w, gpu_model, profile.non_gpu_load_coupling)


def _decode_time_s(
    start_s: FloatArray,
    output_tokens: FloatArray,
    busy: InferenceBusy,
    profile: InferenceProfile,
    bin_s: float,
) -> FloatArray:
    """Time to decode `output_tokens` from `start_s`, integrating each bin's token rate."""
    batch = np.maximum(busy.concurrency, 1.0)
    per_token_s = (
        profile.time_per_token_s(batch)
        * busy.decode_time_factor
        * np.maximum(batch / profile.max_batch, 1.0)
    )
    rate = np.maximum(1.0 - busy.prefill_share, MIN_FREE_SHARE) / per_token_s
    n_bins = rate.size
    tokens_at_edge = np.concatenate([np.zeros(1), np.cumsum(rate * bin_s)])
    first = np.minimum(np.floor(start_s / bin_s).astype(np.int64), n_bins - 1)
    tokens_at_start = tokens_at_edge[first] + rate[first] * (start_s - first * bin_s)
    target = tokens_at_start + output_tokens
    last = np.searchsorted(tokens_at_edge, target, side="right") - 1
    inside = last < n_bins
    bin_of_end = np.minimum(last, n_bins - 1)
    end_s = np.where(
        inside,
        bin_of_end * bin_s + (target - tokens_at_edge[bin_of_end]) / rate[bin_of_end],
        n_bins * bin_s + (target - tokens_at_edge[n_bins]) / rate[n_bins - 1],
    )
    return np.asarray(np.maximum(end_s - start_s, 0.0), dtype=np.float64)


class LatencyBreakdown(NamedTuple):
    """Per-request latency parts (s); `total_s` is their sum."""

    queue_s: FloatArray
    prefill_s: FloatArray
    decode_s: FloatArray
    total_s: FloatArray


def request_latency_breakdown(
    arrival_s: ArrayLike,
    prompt_tokens: ArrayLike,
    output_tokens: ArrayLike,
    clock_mhz_per_bin: ArrayLike,
    bin_s: float,
    profile: InferenceProfile,
    gpu_model: GpuPowerModel,
    power_limit_w_per_bin: ArrayLike | None = None,
    window_s: float = 60.0,
) -> LatencyBreakdown:
    """End-to-end latency of one server's requests, split into queueing, prefill and decode.

    The horizon is `len(clock_mhz_per_bin) * bin_s`; arrivals must lie inside it.

    - queue: the fluid prefill backlog at the start of the arrival bin (slowed by the bin's
      prefill time factor) plus a Kingman G/G/1 wait for the variability the bins hide:
      rho / (1 - rho) * (1 + cs^2) / 2 * E[S], with rho the prefill share of the GPU over the
      trailing `window_s`, E[S] the mean slowed prefill time over that window, Poisson
      arrivals (ca^2 = 1) and cs^2 the squared coefficient of variation of the prefill times.
    - prefill: prefill_time_s(prompt) times the arrival bin's prefill time factor.
    - decode: the time to generate the output tokens at each bin's token rate, which is the
      share of the bin prefill leaves free over time_per_token_s(concurrency) times the
      decode time factor (times concurrency / max_batch above the batch limit); past the
      horizon the last bin's rate holds.
    """
    clocks = np.asarray(clock_mhz_per_bin, dtype=np.float64)
    if clocks.ndim != 1:
        raise InvalidRequestError("request_latency_s takes one server's clocks: a 1-D array")
    arrival = np.asarray(arrival_s, dtype=np.float64)
    prompt = np.asarray(prompt_tokens, dtype=np.float64)
    output = np.asarray(output_tokens, dtype=np.float64)
    horizon_s = clocks.size * bin_s
    if arrival.size and (arrival.min() < 0 or arrival.max() >= horizon_s):
        raise InvalidRequestError(
            f"arrival_s must lie in [0, {horizon_s}) s, the horizon the clocks cover"
        )
    load = bin_requests(arrival, prompt, output, bin_s, horizon_s, profile)
    busy = inference_busy(load, clocks, profile, gpu_model, power_limit_w_per_bin, window_s)
    n_bins = load.n_bins
    index = np.minimum(np.floor(arrival / bin_s).astype(np.int64), n_bins - 1)

    window = max(1, round(window_s / bin_s))
    slowed_work_s = load.prefill_work_s * busy.prefill_time_factor
    rho = np.minimum(_trailing_mean(busy.prefill_share, window), MAX_QUEUE_UTILISATION)
    window_work_s = _trailing_mean(slowed_work_s, window)
    window_arrivals = _trailing_mean(load.arrivals.astype(np.float64), window)
    prefill_max_clock_s = profile.prefill_time_s(prompt)
    overall_mean_s = float(prefill_max_clock_s.mean()) if prefill_max_clock_s.size else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_service_s = np.where(
            window_arrivals > 0, window_work_s / window_arrivals, overall_mean_s
        )
    cv2 = float(prefill_max_clock_s.var() / overall_mean_s**2) if overall_mean_s > 0 else 0.0
    kingman_s = rho / (1.0 - rho) * (1.0 + cv2) / 2.0 * mean_service_s
    queue_s = (busy.backlog_start_s * busy.prefill_time_factor + kingman_s)[index]
    prefill_s = prefill_max_clock_s * busy.prefill_time_factor[index]

    start_s = arrival + queue_s + prefill_s
    decode_s = _decode_time_s(start_s, output, busy, profile, bin_s)
    return LatencyBreakdown(
        queue_s=queue_s,
        prefill_s=prefill_s,
        decode_s=decode_s,
        total_s=queue_s + prefill_s + decode_s,
    )


def request_latency_s(
    arrival_s: ArrayLike,
    prompt_tokens: ArrayLike,
    output_tokens: ArrayLike,
    clock_mhz_per_bin: ArrayLike,
    bin_s: float,
    profile: InferenceProfile,
    gpu_model: GpuPowerModel,
    power_limit_w_per_bin: ArrayLike | None = None,
    window_s: float = 60.0,
) -> FloatArray:
    """End-to-end latency (s) of each request; see `request_latency_breakdown`."""
    return request_latency_breakdown(
        arrival_s,
        prompt_tokens,
        output_tokens,
        clock_mhz_per_bin,
        bin_s,
        profile,
        gpu_model,
        power_limit_w_per_bin,
        window_s,
    ).total_s
