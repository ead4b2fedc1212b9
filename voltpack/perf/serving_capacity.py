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
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from voltpack.perf.inference_profile import FloatArray, ServingProfile
from voltpack.perf.links import PerfModelError

Role = Literal["unified", "prefill", "decode"]
Limit = Literal["ttft", "tpot", "kv-cache", "batch", "none"]

MAX_BATCH = 64
"""Largest decode batch planned for: the measured profiles stop at 64 sequences."""
TTFT_PERCENTILE = 0.99
"""The share of requests whose TTFT the queueing term covers."""


@dataclass(frozen=True)
class ServingSlo:
    """Latency objectives of a service: time to first token and mean time per output token."""

    ttft_s: float
    tpot_s: float

    def __post_init__(self) -> None:
        if not (self.ttft_s > 0 and self.tpot_s > 0):
            raise PerfModelError(
                f"SLO must be positive: ttft_s={self.ttft_s}, tpot_s={self.tpot_s}"
            )


@dataclass(frozen=True)
class RequestSize:
    """A class of requests: mean prompt and output tokens, and the largest prompt."""

    prompt_tokens: float
    output_tokens: float
    max_prompt_tokens: float

    def __post_init__(self) -> None:
        if self.prompt_tokens < 1 or self.output_tokens < 1:
            raise PerfModelError("a request size needs at least one prompt and one output token")


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


def ttft_wait_s(utilisation: FloatArray, service_s: FloatArray) -> FloatArray:
    """TTFT_PERCENTILE quantile of the prefill queue's wait: M/G/1 mean
    `rho P / (2 (1 - rho))` with the exponential tail `P(W > t) = rho exp(-rho t / W)`."""
    rho = np.clip(utilisation, 0.0, 1.0 - 1e-12)
    tail = 1.0 - TTFT_PERCENTILE
    with np.errstate(divide="ignore", invalid="ignore"):
        per_rho_wait = service_s / (2.0 * (1.0 - rho))
        wait = per_rho_wait * np.log(np.maximum(rho, tail) / tail)
    return np.asarray(np.where(rho > tail, wait, 0.0), dtype=np.float64)


def kv_transfer_s(profile: ServingProfile, prompt_tokens: float, link_bytes_per_s: float) -> float:
    """Time to move a prompt's KV cache from a prefill to a decode replica."""
    return profile.model.kv_bytes_per_token * prompt_tokens / link_bytes_per_s


@dataclass(frozen=True)
class OperatingPoints:
    """Per request size (rows) and mean decode batch (columns): rate, TTFT quantile, TPOT."""

    rate_per_s: FloatArray
    ttft_s: FloatArray
    tpot_s: FloatArray
    kv_tokens: FloatArray


def decode_operating_points(
    profile: ServingProfile,
    sizes: Sequence[RequestSize],
    role: Role,
    transfer_s: FloatArray | None = None,
) -> OperatingPoints:
    """Operating points of a unified or decode replica over BATCH_GRID.

    With mean batch b, the decode step D(b) and the prefill time P of a prompt, a unified
    replica spends b P / o of each output token's time prefilling newcomers (Little's law), so
    TPOT = D(b) + b P / o and the rate is b / (o TPOT); a decode replica has TPOT = D(b) plus
    the KV transfer spread over the output tokens.
    """
    prompt = np.array([s.prompt_tokens for s in sizes])[:, None]
    output = np.array([s.output_tokens for s in sizes])[:, None]
    longest = np.array([s.max_prompt_tokens for s in sizes])
    batch = np.broadcast_to(BATCH_GRID[None, :], (len(sizes), BATCH_GRID.size))
    running = np.maximum(batch, 1.0)
    context = running * (prompt + output / 2.0)
    step = profile.decode_time_s(running.ravel(), context.ravel()).reshape(batch.shape)
    prefill = profile.prefill_time_s(prompt[:, 0], prompt[:, 0] ** 2)[:, None]
    if role == "unified":
        tpot = step + batch * prefill / output
    else:
        spread = np.zeros_like(prefill) if transfer_s is None else transfer_s[:, None] / output
        tpot = step + spread
    rate = batch / (output * tpot)
    if role == "unified":
        longest_s = profile.prefill_time_s(longest, longest**2)[:, None]
        wait = ttft_wait_s(rate * prefill, np.broadcast_to(prefill, rate.shape))
        ttft = wait + longest_s + step
    else:
        ttft = np.zeros_like(rate)
    kv_tokens = running * (prompt + output)
    return OperatingPoints(rate, ttft, tpot, kv_tokens)


def capacity_table(
    profile: ServingProfile,
    sizes: Sequence[RequestSize],
    slo: ServingSlo,
    role: Role = "unified",
    transfer_s: FloatArray | None = None,
) -> list[Capacity]:
    """Per request size, the largest rate a replica of `profile` in `role` sustains within
    `slo` (0 with the failing bound named when even a lone request misses it)."""
    if not sizes:
        return []
    if role == "prefill":
        return _prefill_capacities(profile, sizes, slo)
    points = decode_operating_points(profile, sizes, role, transfer_s)
    checks: list[tuple[Limit, NDArray[np.bool_]]] = [
        ("tpot", points.tpot_s <= slo.tpot_s),
        ("kv-cache", points.kv_tokens <= profile.kv_capacity_tokens),
        ("ttft", points.ttft_s <= slo.ttft_s),
    ]
    feasible = np.logical_and.reduce([ok for _, ok in checks])
    capacities = []
    for row, size in enumerate(sizes):
        columns = np.flatnonzero(feasible[row])
        if columns.size == 0:
            limit = next(name for name, ok in checks if not ok[row, 0])
            capacities.append(
                Capacity(0.0, limit, _lone_detail(profile, size, slo, points, row, limit, role))
            )
            continue
        best = int(columns[np.argmax(points.rate_per_s[row, columns])])
        if best == BATCH_GRID.size - 1:
            limit = "batch"
        else:
            limit = next((name for name, ok in checks if not ok[row, best + 1]), "batch")
        rate = float(points.rate_per_s[row, best])
        capacities.append(
            Capacity(rate, limit, f"{profile.label} as {role}: {rate:.3g} req/s ({limit} binds)")
        )
    return capacities


def _prefill_capacities(
    profile: ServingProfile, sizes: Sequence[RequestSize], slo: ServingSlo
) -> list[Capacity]:
    prompt = np.array([s.prompt_tokens for s in sizes])
    longest = np.array([s.max_prompt_tokens for s in sizes])
    prefill = profile.prefill_time_s(prompt, prompt**2)[:, None]
    longest_s = profile.prefill_time_s(longest, longest**2)[:, None]
    load = np.broadcast_to(LOAD_GRID[None, :], (len(sizes), LOAD_GRID.size))
    ttft = ttft_wait_s(load, np.broadcast_to(prefill, load.shape)) + longest_s
    capacities = []
    for row, size in enumerate(sizes):
        ok = np.flatnonzero(ttft[row] <= slo.ttft_s)
        if longest_s[row, 0] > slo.ttft_s or ok.size == 0:
            detail = (
                f"{profile.label} as prefill: a lone {size.max_prompt_tokens:.0f}-token prompt "
                f"takes {longest_s[row, 0] * 1000:.0f} ms, over the TTFT SLO of "
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
) -> Capacity:
    """`capacity_table` for one request size."""
    return capacity_table(profile, [size], slo, role, np.array([transfer_s]))[0]


def _lone_detail(
    profile: ServingProfile,
    size: RequestSize,
    slo: ServingSlo,
    points: OperatingPoints,
    row: int,
    limit: Limit,
    role: Role,
) -> str:
    what = f"{profile.label} as {role}"
    if limit == "ttft":
        return (
            f"{what}: a lone {size.max_prompt_tokens:.0f}-token prompt takes "
            f"{points.ttft_s[row, 0] * 1000:.0f} ms to the first token, over the TTFT SLO of "
            f"{slo.ttft_s * 1000:.0f} ms"
        )
    if limit == "tpot":
        return (
            f"{what}: a lone request's time per output token is "
            f"{points.tpot_s[row, 0] * 1000:.1f} ms, over the TPOT SLO of "
            f"{slo.tpot_s * 1000:.1f} ms"
        )
    return (
        f"{what}: one request needs {points.kv_tokens[row, 0]:.0f} KV tokens, more than the "
        f"{profile.kv_capacity_tokens} it holds"
    )
