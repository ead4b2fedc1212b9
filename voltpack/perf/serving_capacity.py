"""The highest request rate one replica sustains within a TTFT and a TPOT SLO.

A replica serves requests of one size class (mean prompt and output tokens, largest prompt)
with continuous batching. Three roles:

- `unified`: prefill and decode on the same GPUs, prefill first (vLLM's default): every
  prefill stalls the running batch, so the time per output token is the decode step over the
  share of time prefill leaves (`1 - rho`);
- `prefill` (a split pool's prompt side): only prefill; the first token leaves from here;
- `decode` (a split pool's token side): only decode, after the KV cache arrives over the
  network (its transfer time is spread over the request's output tokens).

Queueing for prefill uses the M/G/1 mean wait with an exponential tail for the TTFT
percentile; the decode batch follows Little's law (`batch = rate x output tokens x TPOT`).
Rates are computed on a grid of mean batch sizes (decode roles) or utilisations (prefill),
vectorised over request sizes; the result names the bound that stops the rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

import numpy as np
from numpy.typing import NDArray

from voltpack.perf.inference_profile import FloatArray, ServingProfile
from voltpack.perf.links import PerfModelError

PromptTokens = TypeVar("PromptTokens", float, FloatArray)

Role = Literal["unified", "prefill", "decode"]
Limit = Literal["ttft", "tpot", "kv-cache", "batch", "context", "none"]
"""What stops a replica's rate: `context` when the bucket's requests are longer than the
replica's context class (see `voltpack.policies.inference.context_classes`)."""

MAX_BATCH = 64
"""Largest decode batch planned for: the measured profiles stop at 64 sequences."""
TTFT_PERCENTILE = 0.99
"""The share of requests whose TTFT the queueing term covers."""


TpotStatistic = Literal["p99", "mean"]
TPOT_STATISTICS: tuple[TpotStatistic, ...] = ("p99", "mean")


@dataclass(frozen=True)
class ServingSlo:
    """Latency objectives of a service: time to first token (per request, at
    TTFT_PERCENTILE) and time per output token, judged per request (`p99`: every request's
    own TPOT, sized for the high batch and the worst iteration) or over the service (`mean`:
    the mean of the requests' TPOTs, sized for the mean iteration: Mélange's SLO)."""

    ttft_s: float
    tpot_s: float
    tpot_statistic: TpotStatistic = "p99"

    def __post_init__(self) -> None:
        if not (self.ttft_s > 0 and self.tpot_s > 0):
            raise PerfModelError(
                f"SLO must be positive: ttft_s={self.ttft_s}, tpot_s={self.tpot_s}"
            )
        if self.tpot_statistic not in TPOT_STATISTICS:
            raise PerfModelError(
                f"tpot_statistic must be one of {', '.join(TPOT_STATISTICS)}, got "
                f"{self.tpot_statistic!r}"
            )

    @property
    def tpot_is_mean(self) -> bool:
        """Whether the TPOT objective is on the mean over requests (Mélange's)."""
        return self.tpot_statistic == "mean"


def tpot_met(
    tpot_s: FloatArray, output_tokens: NDArray[np.int64], served: NDArray[np.bool_], slo: ServingSlo
) -> NDArray[np.bool_]:
    """Per request, whether the TPOT objective holds for it: its own TPOT within the SLO
    (`p99`), or, for a mean-TPOT SLO, whether the mean TPOT over the served requests that
    decode (two or more output tokens) is within it (then for every served request, else for
    none). Unserved requests never meet it."""
    if not slo.tpot_is_mean:
        with np.errstate(invalid="ignore"):
            return np.asarray(served & (tpot_s <= slo.tpot_s), dtype=np.bool_)
    mean_s = mean_tpot_s(tpot_s, output_tokens, served)
    return np.asarray(served & (np.isnan(mean_s) or mean_s <= slo.tpot_s), dtype=np.bool_)


def mean_tpot_s(
    tpot_s: FloatArray, output_tokens: NDArray[np.int64], served: NDArray[np.bool_]
) -> float:
    """Mean TPOT over the served requests that decode (two or more output tokens); NaN when
    none does."""
    decoding = served & (output_tokens > 1)
    return float(np.mean(tpot_s[decoding])) if decoding.any() else float("nan")


@dataclass(frozen=True)
class RequestSize:
    """A class of requests: mean prompt and output tokens, the largest prompt (what TTFT must
    cover), the shortest output of two or more tokens (what a decode pool's TPOT must
    cover: joining the decode batch is spread over few tokens; None = the mean output) and
    the longest output (what a context class must hold; None = unknown, the mean output)."""

    prompt_tokens: float
    output_tokens: float
    max_prompt_tokens: float
    min_output_tokens: float | None = None
    max_output_tokens: float | None = None

    def __post_init__(self) -> None:
        if self.prompt_tokens < 1 or self.output_tokens < 1:
            raise PerfModelError("a request size needs at least one prompt and one output token")
        if self.min_output_tokens is not None and self.min_output_tokens < 2:
            raise PerfModelError("min_output_tokens counts outputs of two or more tokens")
        if (
            self.max_output_tokens is not None
            and self.max_output_tokens < self.output_tokens - 1e-6
        ):
            raise PerfModelError("max_output_tokens must be at least the mean output_tokens")

    @property
    def shortest_decoded_output(self) -> float:
        """Output tokens of the shortest request that decodes (>= 2 tokens); infinite when
        none does (one-token outputs have no TPOT)."""
        if self.min_output_tokens is not None:
            return self.min_output_tokens
        return self.output_tokens if self.output_tokens >= 2 else float("inf")


@dataclass(frozen=True)
class Capacity:
    """Requests per second one replica sustains within the SLO, and what stops it there."""

    rate_per_s: float
    limit: Limit
    detail: str


BATCH_GRID = np.geomspace(0.01, MAX_BATCH, 400)
"""Mean decode batches tried (continuous batching holds a fractional mean; below one the
replica is idle part of the time and a running request decodes alone)."""
LOAD_GRID = np.linspace(0.0, 0.999, 1000)[1:]
"""Prefill utilisations tried for a prefill-only replica."""


FLUCTUATION_Z = 2.33
"""Standard normal quantile of TTFT_PERCENTILE: the running batch fluctuates around its mean
about like a Poisson count (M/G/infinity), so caps must hold mean + z x sqrt(mean)."""


def ttft_wait_s(utilisation: FloatArray, service_s: FloatArray) -> FloatArray:
    """TTFT_PERCENTILE quantile of the prefill queue's wait, from the M/M/1 tail
    `P(W > t) = rho exp(-(1 - rho) t / S)`: prompt sizes vary within and across buckets, so
    the exponential service assumption is the cautious one."""
    rho = np.clip(utilisation, 0.0, 1.0 - 1e-12)
    tail = 1.0 - TTFT_PERCENTILE
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = service_s / (1.0 - rho) * np.log(np.maximum(rho, tail) / tail)
    return np.asarray(np.where(rho > tail, wait, 0.0), dtype=np.float64)


def kv_transfer_s(
    profile: ServingProfile, prompt_tokens: PromptTokens, link_bytes_per_s: float
) -> PromptTokens:
    """Time to move a prompt's KV cache (or each of an array of prompts') from a prefill to
    a decode replica."""
    return profile.model.kv_bytes_per_token * prompt_tokens / link_bytes_per_s


def high_batch(mean_batch: FloatArray) -> FloatArray:
    """The batch the running count stays under TTFT_PERCENTILE of the time."""
    return np.asarray(mean_batch + FLUCTUATION_Z * np.sqrt(mean_batch), dtype=np.float64)


@dataclass(frozen=True)
class ReplicaSettings:
    """How a replica is configured: its batch cap and, for unified replicas, its prefill chunk
    (None: whole prompts first, stalling the batch)."""

    max_batch: int = MAX_BATCH
    prefill_chunk_tokens: int | None = None
    max_prefill_utilisation: float = 1.0
    """Share of the replica's prompt-token throughput it may be loaded to. A replica serves a
    mix of buckets, and a prompt queues behind all of them: checking every bucket's TTFT at
    this cap (not at the bucket's own load) keeps the check true for any mix of buckets
    whose loads respect the cap."""
    queue_prompt_tokens: float | None = None
    """Prompt size the queue's wait is computed with: E[p^2] / E[p] of the service's mix
    (the residual size a newcomer waits behind); None = each bucket's own mean prompt."""


def batch_cap(
    profile: ServingProfile,
    slo: ServingSlo,
    context_per_sequence: float,
    chunk_tokens: int | None = None,
    extra_s: float = 0.0,
) -> int:
    """The largest batch (<= MAX_BATCH) whose iteration, with a full chunk of `chunk_tokens`
    and `extra_s` added per token, stays within the TPOT SLO; 0 when even one sequence
    misses it. With a mean-TPOT SLO the chunk is left out: it comes once per prompt, and
    the capacity table bounds the mean iteration."""
    batches = np.arange(1, MAX_BATCH + 1, dtype=np.float64)
    chunk = np.full_like(batches, 0.0 if slo.tpot_is_mean else float(chunk_tokens or 0))
    step = profile.mixed_step_s(batches, batches * context_per_sequence, chunk) + extra_s
    fits = np.flatnonzero(step <= slo.tpot_s)
    return int(fits[-1] + 1) if fits.size else 0


@dataclass(frozen=True)
class OperatingPoints:
    """Per request size (rows) and mean decode batch (columns): rate, TTFT quantile, TPOT,
    and the batch and KV tokens the replica must hold TTFT_PERCENTILE of the time."""

    rate_per_s: FloatArray
    ttft_s: FloatArray
    tpot_s: FloatArray
    high_batch: FloatArray
    kv_tokens: FloatArray
    prefill_ok: NDArray[np.bool_]


@dataclass(frozen=True)
class DecodeSteps:
    """One profile's decode step per request size (rows) over the whole BATCH_GRID, at each
    mean batch and at its high batch: the same for every setting of the profile, so a
    planner computes them once (`decode_steps`) and passes them to `capacity_table`."""

    step_s: FloatArray
    high_step_s: FloatArray

    def rows(self, positions: NDArray[np.int64]) -> DecodeSteps:
        """The steps of the sizes at `positions`."""
        return DecodeSteps(self.step_s[positions], self.high_step_s[positions])


def decode_steps(profile: ServingProfile, sizes: Sequence[RequestSize]) -> DecodeSteps:
    """Decode steps of `profile` for `sizes` at every mean batch of BATCH_GRID (each
    sequence holding its prompt and half its output) and at the batch's high batch."""
    prompt = np.array([s.prompt_tokens for s in sizes])[:, None]
    output = np.array([s.output_tokens for s in sizes])[:, None]
    batch = np.broadcast_to(BATCH_GRID[None, :], (len(sizes), BATCH_GRID.size))
    per_sequence = prompt + output / 2.0
    running = np.maximum(batch, 1.0)
    step = profile.decode_time_s(running.ravel(), (running * per_sequence).ravel())
    high = np.maximum(high_batch(batch), 1.0)
    high_step = profile.decode_time_s(high.ravel(), (high * per_sequence).ravel())
    return DecodeSteps(step.reshape(batch.shape), high_step.reshape(batch.shape))


def decode_operating_points(
    profile: ServingProfile,
    sizes: Sequence[RequestSize],
    role: Role,
    settings: ReplicaSettings,
    transfer_s: FloatArray | None = None,
    steps: DecodeSteps | None = None,
    mean_tpot: bool = False,
) -> OperatingPoints:
    """Operating points of a unified or decode replica over BATCH_GRID (mean batches).

    Mean batch b, decode step D(b): a unified replica with chunked prefill spends
    `p b / o` prompt tokens per iteration on newcomers (Little's law), so its mean iteration is
    D(b) + (p b / o) x prefill_token_s and TPOT is at most the worst iteration (a full batch
    plus a full chunk); without chunking each newcomer's whole prefill P stalls the batch:
    TPOT = D(b) + b P / o. A decode replica: TPOT = D(b) plus the KV transfer spread over the
    output (for the bucket's shortest output, the transfer and one step's wait to join the
    batch spread over its tokens, when that is larger). Rate = b / (o x mean iteration).
    TTFT for chunked prefill: the prompt-token queue
    (M/M/1 wait) plus the iterations of the longest prompt's chunks, each a full chunk with
    the high batch. `steps`: `decode_steps(profile, sizes)` when already computed.
    `mean_tpot`: the TPOT is the mean iteration's (the mean batch, newcomers' prefill spread
    over the iterations, a decode replica's KV transfer spread over the output), for a
    mean-TPOT SLO.
    """
    prompt = np.array([s.prompt_tokens for s in sizes])[:, None]
    output = np.array([s.output_tokens for s in sizes])[:, None]
    longest = np.array([s.max_prompt_tokens for s in sizes])[:, None]
    columns = int(np.count_nonzero(settings.max_batch >= BATCH_GRID))
    batch = np.broadcast_to(BATCH_GRID[None, :columns], (len(sizes), columns))
    high = high_batch(batch)
    per_sequence = prompt + output / 2.0
    computed = steps if steps is not None else decode_steps(profile, sizes)
    step = computed.step_s[:, :columns]
    high_step = computed.high_step_s[:, :columns]
    prefill_ok = np.ones(batch.shape, dtype=bool)
    chunk = settings.prefill_chunk_tokens
    if role == "unified" and chunk is not None:
        newcomer_tokens = prompt * batch / output
        iteration = step + newcomer_tokens * profile.prefill_token_s
        worst = profile.mixed_step_s(
            np.full(len(sizes), float(settings.max_batch)),
            settings.max_batch * per_sequence[:, 0],
            np.full(len(sizes), float(chunk)),
        )[:, None]
        busy = np.minimum(high_step + chunk * profile.prefill_token_s, worst)
        tpot = np.minimum(high_step + newcomer_tokens * profile.prefill_token_s, worst)
        if mean_tpot:
            tpot = iteration
        rate = batch / (output * iteration)
        token_rate = chunk / busy
        rho = rate * prompt / token_rate
        cap = settings.max_prefill_utilisation
        prefill_ok = rho <= min(cap, 0.999)
        queued = prompt if settings.queue_prompt_tokens is None else settings.queue_prompt_tokens
        wait = ttft_wait_s(np.full_like(rho, min(cap, 0.999)), queued / token_rate)
        ttft = wait + np.ceil(longest / chunk) * busy
    elif role == "unified":
        prefill = profile.prefill_time_s(prompt[:, 0], prompt[:, 0] ** 2)[:, None]
        tpot = high_step + high * prefill / output
        if mean_tpot:
            tpot = step + batch * prefill / output
        rate = batch / (output * (step + batch * prefill / output))
        longest_s = profile.prefill_time_s(longest[:, 0], longest[:, 0] ** 2)[:, None]
        ttft = ttft_wait_s(rate * prefill, np.broadcast_to(prefill, rate.shape)) + longest_s + step
    else:
        moved = np.zeros_like(prompt) if transfer_s is None else transfer_s[:, None]
        spread = moved / output
        shortest = np.array([s.shortest_decoded_output for s in sizes])[:, None]
        # the shortest output's TPOT: its KV transfer and the wait for the decode batch's
        # next iteration (up to one step) come between its first token and its second
        tpot = high_step + np.maximum(spread, (moved + high_step) / (shortest - 1.0))
        if mean_tpot:
            tpot = step + spread
        rate = batch / (output * (step + spread))
        ttft = np.zeros_like(rate)
    kv_tokens = np.maximum(high, 1.0) * (prompt + output)
    return OperatingPoints(rate, ttft, tpot, high, kv_tokens, prefill_ok)


def capacity_table(
    profile: ServingProfile,
    sizes: Sequence[RequestSize],
    slo: ServingSlo,
    role: Role = "unified",
    transfer_s: FloatArray | None = None,
    settings: ReplicaSettings | None = None,
    steps: DecodeSteps | None = None,
) -> list[Capacity]:
    """Per request size, the largest rate a replica of `profile` in `role` with `settings`
    sustains within `slo` (0 with the failing bound named when even a lone request misses
    it). Default settings: a batch of up to MAX_BATCH, no chunking. `steps`:
    `decode_steps(profile, sizes)` when already computed (unified and decode roles)."""
    if not sizes:
        return []
    chosen = settings or ReplicaSettings()
    if role == "prefill":
        return _prefill_capacities(profile, sizes, slo, chosen)
    points = decode_operating_points(
        profile, sizes, role, chosen, transfer_s, steps, slo.tpot_is_mean
    )
    checks: list[tuple[Limit, NDArray[np.bool_]]] = [
        ("tpot", points.tpot_s <= slo.tpot_s),
        ("batch", points.high_batch <= chosen.max_batch),
        ("kv-cache", points.kv_tokens <= profile.kv_capacity_tokens),
        ("ttft", (points.ttft_s <= slo.ttft_s) & points.prefill_ok),
    ]
    feasible = np.logical_and.reduce([ok for _, ok in checks])
    servable = feasible.any(axis=1).tolist()
    best_columns = np.argmax(np.where(feasible, points.rate_per_s, -np.inf), axis=1).tolist()
    last = points.rate_per_s.shape[1] - 1
    what = f"{profile.label} as {role}"
    capacities = []
    for row, size in enumerate(sizes):
        if not servable[row]:
            limit: Limit = next((name for name, ok in checks if not ok[row, 0]), "batch")
            detail = _lone_detail(profile, size, slo, points, row, limit, role, chosen)
            capacities.append(Capacity(0.0, limit, detail))
            continue
        best = best_columns[row]
        limit = "batch"
        if best < last:
            limit = next((name for name, ok in checks if not ok[row, best + 1]), "batch")
        rate = float(points.rate_per_s[row, best])
        capacities.append(Capacity(rate, limit, f"{what}: {rate:.3g} req/s ({limit} binds)"))
    return capacities


def _prefill_capacities(
    profile: ServingProfile,
    sizes: Sequence[RequestSize],
    slo: ServingSlo,
    settings: ReplicaSettings,
) -> list[Capacity]:
    """Prefill-only replicas batch waiting prompts: a prompt also waits for the prompts that
    join its batch while it queues, so the queue's wait counts (1 + rho) times. TTFT is
    checked at the utilisation cap (any mix of buckets), the rate is the cap's."""
    prompt = np.array([s.prompt_tokens for s in sizes])
    longest = np.array([s.max_prompt_tokens for s in sizes])
    prefill = profile.prefill_time_s(prompt, prompt**2)[:, None]
    longest_s = profile.prefill_time_s(longest, longest**2)[:, None]
    cap = min(settings.max_prefill_utilisation, 0.999)
    grid = LOAD_GRID[cap >= LOAD_GRID]
    load = np.broadcast_to(grid[None, :], (len(sizes), grid.size))
    queued = settings.queue_prompt_tokens
    service = (
        prefill
        if queued is None
        else profile.prefill_time_s(np.array([queued]), np.array([queued**2]))[:, None]
        * np.ones_like(prefill)
    )
    wait_at_cap = ttft_wait_s(np.full(len(sizes), cap), service[:, 0]) * (1.0 + cap)
    ttft = np.broadcast_to((wait_at_cap + longest_s[:, 0])[:, None], load.shape)
    capacities = []
    for row, size in enumerate(sizes):
        ok = np.flatnonzero(ttft[row] <= slo.ttft_s)
        if longest_s[row, 0] > slo.ttft_s or ok.size == 0:
            detail = (
                f"{profile.label} as prefill: a {size.max_prompt_tokens:.0f}-token prompt "
                f"reaches its first token after {ttft[row, 0] * 1000:.0f} ms at p99 with the "
                f"queue at its {cap:.0%} prompt load cap, over the TTFT SLO of "
                f"{slo.ttft_s * 1000:.0f} ms"
            )
            capacities.append(Capacity(0.0, "ttft", detail))
            continue
        rate = float(LOAD_GRID[ok[-1]] / prefill[row, 0])
        capacities.append(
            Capacity(rate, "ttft", f"{profile.label} as prefill: {rate:.3g} req/s (ttft binds)")
        )
    return capacities


def replica_capacity(
    profile: ServingProfile,
    size: RequestSize,
    slo: ServingSlo,
    role: Role = "unified",
    transfer_s: float = 0.0,
    settings: ReplicaSettings | None = None,
) -> Capacity:
    """`capacity_table` for one request size."""
    return capacity_table(profile, [size], slo, role, np.array([transfer_s]), settings)[0]


def _lone_detail(
    profile: ServingProfile,
    size: RequestSize,
    slo: ServingSlo,
    points: OperatingPoints,
    row: int,
    limit: Limit,
    role: Role,
    settings: ReplicaSettings,
) -> str:
    what = f"{profile.label} as {role}"
    if limit == "ttft":
        load = settings.max_prefill_utilisation
        queue = f" at p99 with the queue at its {load:.0%} prompt load cap" if load < 1 else ""
        return (
            f"{what}: a {size.max_prompt_tokens:.0f}-token prompt reaches its first token "
            f"after {points.ttft_s[row, 0] * 1000:.0f} ms{queue}, over the TTFT SLO of "
            f"{slo.ttft_s * 1000:.0f} ms"
        )
    if limit == "tpot":
        return (
            f"{what}: a lone request's time per output token is "
            f"{points.tpot_s[row, 0] * 1000:.1f} ms, over the TPOT SLO of "
            f"{slo.tpot_s * 1000:.1f} ms"
        )
    if limit == "batch":
        return f"{what}: its batch cap leaves no room for a request"
    return (
        f"{what}: one request needs {points.kv_tokens[row, 0]:.0f} KV tokens, more than the "
        f"{profile.kv_capacity_tokens} it holds"
    )
