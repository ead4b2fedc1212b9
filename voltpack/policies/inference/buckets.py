"""Request-size buckets: a service's requests grouped by prompt and output length.

Each non-empty bucket carries its share of the requests, its mean prompt and output tokens
(what throughput depends on), its largest prompt (what the TTFT bound must cover) and its
longest output (with the largest prompt, what an open-ended bucket's context class must hold).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
from numpy.typing import ArrayLike

from voltpack.model.errors import InvalidRequestError
from voltpack.perf.serving_capacity import RequestSize

DEFAULT_PROMPT_EDGES = (0, 128, 256, 512, 1024, 1536, 2048, 3072, 4096, 8192)
"""Lower edges of prompt-length buckets (tokens); the last bucket is open-ended."""
DEFAULT_OUTPUT_EDGES = (0, 16, 32, 64, 128, 256, 384, 512, 768, 1024)
"""Lower edges of output-length buckets (tokens); the last bucket is open-ended."""


@dataclass(frozen=True)
class Bucket:
    """One non-empty request-size bucket."""

    index: int
    prompt_range: tuple[int, int | None]
    output_range: tuple[int, int | None]
    share: float
    """Share of all requests that fall here."""
    size: RequestSize

    @property
    def label(self) -> str:
        """Text such as `prompt 512-1024, output 128-256`."""

        def span(low: int, high: int | None) -> str:
            return f"{low}+" if high is None else f"{low}-{high}"

        return f"prompt {span(*self.prompt_range)}, output {span(*self.output_range)}"


@dataclass(frozen=True)
class RequestMix:
    """A service's requests as buckets; shares sum to 1."""

    buckets: tuple[Bucket, ...]
    prompt_edges: tuple[int, ...]
    output_edges: tuple[int, ...]

    def bucket_of(self, prompt_tokens: ArrayLike, output_tokens: ArrayLike) -> np.ndarray:
        """Index into `buckets` of each request (-1 for a size no bucket holds)."""
        grid = _grid_index(self.prompt_edges, self.output_edges, prompt_tokens, output_tokens)
        return self._positions(grid)

    def _positions(self, grid: np.ndarray) -> np.ndarray:
        """Index into `buckets` of each grid cell (-1 for a cell no bucket holds)."""
        lookup = {b.index: position for position, b in enumerate(self.buckets)}
        return np.array([lookup.get(int(g), -1) for g in grid], dtype=np.int64)

    def serving_bucket_of(self, prompt_tokens: ArrayLike, output_tokens: ArrayLike) -> np.ndarray:
        """The bucket whose groups serve each request: its own (`bucket_of`); for a size the
        mix holds no bucket for (its requests never had it: a plan meets new sizes), the
        nearest bucket at least as large in both prompt and output bins (fewest bins away,
        then the smaller prompt bin), whose groups are sized for longer requests; past every
        bucket, the one of the largest prompt bin, then output bin. -1 only for an empty mix."""
        grid = _grid_index(self.prompt_edges, self.output_edges, prompt_tokens, output_tokens)
        positions = self._positions(grid)
        missing = positions < 0
        if not missing.any() or not self.buckets:
            return positions
        cells = np.array([bucket.index for bucket in self.buckets])
        prompt_bins, output_bins = np.divmod(cells, len(self.output_edges))
        largest = int(np.lexsort((output_bins, prompt_bins))[-1])
        for cell in np.unique(grid[missing]):
            prompt_bin, output_bin = divmod(int(cell), len(self.output_edges))
            covering = (prompt_bins >= prompt_bin) & (output_bins >= output_bin)
            pick = largest
            if covering.any():
                away = (prompt_bins - prompt_bin) + (output_bins - output_bin)
                ranked = np.lexsort((prompt_bins, np.where(covering, away, np.iinfo(np.int64).max)))
                pick = int(ranked[0])
            positions[missing & (grid == cell)] = pick
        return positions


def _grid_index(
    prompt_edges: Sequence[int],
    output_edges: Sequence[int],
    prompt_tokens: ArrayLike,
    output_tokens: ArrayLike,
) -> np.ndarray:
    prompt_bin = np.searchsorted(np.asarray(prompt_edges), np.asarray(prompt_tokens), "right") - 1
    output_bin = np.searchsorted(np.asarray(output_edges), np.asarray(output_tokens), "right") - 1
    return np.asarray(prompt_bin * len(output_edges) + output_bin, dtype=np.int64)


def request_mix(
    prompt_tokens: ArrayLike,
    output_tokens: ArrayLike,
    prompt_edges: Sequence[int] = DEFAULT_PROMPT_EDGES,
    output_edges: Sequence[int] = DEFAULT_OUTPUT_EDGES,
) -> RequestMix:
    """Bucket requests by size. Raises InvalidRequestError for no requests, bad edges, or a
    request with no prompt or output token."""
    prompts = np.asarray(prompt_tokens, dtype=np.float64)
    outputs = np.asarray(output_tokens, dtype=np.float64)
    if prompts.size == 0 or prompts.shape != outputs.shape:
        raise InvalidRequestError("a request mix needs requests with one prompt and output each")
    for name, edges in (("prompt", prompt_edges), ("output", output_edges)):
        if not edges or edges[0] != 0 or any(b <= a for a, b in pairwise(edges)):
            raise InvalidRequestError(
                f"{name} bucket edges must start at 0 and increase: {list(edges)}"
            )
    if prompts.min() < 1 or outputs.min() < 1:
        raise InvalidRequestError("every request needs at least one prompt and one output token")
    grid = _grid_index(prompt_edges, output_edges, prompts, outputs)
    buckets = []
    for cell in np.unique(grid):
        members = grid == cell
        p_bin, o_bin = divmod(int(cell), len(output_edges))
        buckets.append(
            Bucket(
                index=int(cell),
                prompt_range=(prompt_edges[p_bin], _upper(prompt_edges, p_bin)),
                output_range=(output_edges[o_bin], _upper(output_edges, o_bin)),
                share=float(members.mean()),
                size=RequestSize(
                    prompt_tokens=float(prompts[members].mean()),
                    output_tokens=float(outputs[members].mean()),
                    max_prompt_tokens=float(prompts[members].max()),
                    min_output_tokens=_shortest_decoded(outputs[members]),
                    max_output_tokens=float(outputs[members].max()),
                ),
            )
        )
    return RequestMix(tuple(buckets), tuple(prompt_edges), tuple(output_edges))


def _shortest_decoded(outputs: np.ndarray) -> float | None:
    """The fewest output tokens among requests that decode (two or more), None if none do."""
    decoded = outputs[outputs >= 2]
    return float(decoded.min()) if decoded.size else None


def _upper(edges: Sequence[int], index: int) -> int | None:
    return edges[index + 1] if index + 1 < len(edges) else None
