"""Context classes: the longest context (prompt + output tokens) a replica is sized for.

A unified or decode replica's batch cap must keep its worst iteration (a full batch, every
sequence at the longest context it may hold, plus a chunk for unified) within the TPOT SLO.
Sized for the mix's longest request, a replica meant for short requests gets a small batch;
sized for a class of contexts, it gets the batch its requests allow, and the router sends it
no request longer than its class (vLLM's `max_model_len` does the same on a real replica).

Classes come from the mix (`context_classes`): each bucket's context bound is the longest
context a request of the bucket can have (`bucket_context_tokens`); the distinct bounds are
merged into at most `limit` classes, each class the largest bound of its members, chosen by
dynamic programming to waste least decode capacity (see `context_classes`). The largest class
is open-ended: it takes every request, also one longer than any the mix saw (the last
buckets are open-ended too), and is sized for the longest context of the mix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from voltpack.model.errors import InvalidRequestError
from voltpack.policies.inference.buckets import Bucket, RequestMix

MAX_CONTEXT_CLASSES = 3
"""Default number of context classes: each multiplies the unified and decode options."""


@dataclass(frozen=True)
class ContextClass:
    """Replicas sized for contexts up to `tokens` (prompt + output); an `open_ended` class
    also takes longer requests (the plan's largest class, sized for the mix's longest)."""

    tokens: int
    open_ended: bool = False

    def __post_init__(self) -> None:
        if self.tokens < 2:
            raise InvalidRequestError(
                f"a context class holds at least 2 tokens (one prompt, one output), "
                f"got tokens={self.tokens}"
            )

    def covers(self, context_tokens: ArrayLike) -> NDArray[np.bool_]:
        """Per context (prompt + output tokens), whether a replica of this class takes it."""
        contexts = np.asarray(context_tokens)
        if self.open_ended:
            return np.ones(contexts.shape, dtype=np.bool_)
        return np.asarray(contexts <= self.tokens, dtype=np.bool_)

    @property
    def label(self) -> str:
        """Text such as `ctx <= 2,048` or `ctx any, sized for 14,089`."""
        if self.open_ended:
            return f"ctx any, sized for {self.tokens:,}"
        return f"ctx <= {self.tokens:,}"


def bucket_context_tokens(bucket: Bucket) -> int:
    """The longest context a request of `bucket` can have: the upper edges of its prompt and
    output ranges (exclusive, so each less one); for an open-ended range the longest prompt
    or output the bucket holds (its mean output when the bucket does not record one)."""
    size = bucket.size
    prompt_high = bucket.prompt_range[1]
    output_high = bucket.output_range[1]
    prompt = float(prompt_high - 1) if prompt_high is not None else size.max_prompt_tokens
    output: float
    if output_high is not None:
        output = float(output_high - 1)
    else:
        output = (
            size.max_output_tokens if size.max_output_tokens is not None else size.output_tokens
        )
    return max(2, int(np.ceil(prompt + output)))


def context_classes(mix: RequestMix, limit: int = MAX_CONTEXT_CLASSES) -> tuple[ContextClass, ...]:
    """At most `limit` classes covering the mix's buckets, shortest first, the last one
    open-ended and sized for the longest bucket bound.

    The distinct bucket bounds c_1 < ... < c_n are cut into at most `limit` runs; each run's
    class is its largest bound C. A bucket served at class C instead of its own bound c gets
    about c / C of the batch (the decode step reads batch x context KV tokens), so the cuts
    minimise sum over buckets of share x output tokens x C / c (the decode work, scaled by
    the capacity lost), by dynamic programming over the sorted bounds (O(limit x n^2)).
    The planner may still serve a bucket from any class at least its bound.

    Raises InvalidRequestError for `limit` below 1."""
    if limit < 1:
        raise InvalidRequestError(f"context class limit must be at least 1, got {limit}")
    bounds = np.array([bucket_context_tokens(b) for b in mix.buckets], dtype=np.int64)
    weights = np.array([b.share * b.size.output_tokens for b in mix.buckets])
    distinct = np.unique(bounds)
    weight = np.array([weights[bounds == c].sum() for c in distinct])
    n = distinct.size
    # waste[i, j]: buckets i..j served by class distinct[j]
    ratio = distinct[None, :] / distinct[:, None]  # [i, j] = c_j / c_i
    per = weight[:, None] * ratio
    waste = np.full((n, n), np.inf)
    for j in range(n):
        waste[: j + 1, j] = np.cumsum(per[: j + 1, j][::-1])[::-1]
    classes = min(limit, n)
    # best[k, j]: buckets 0..j in k + 1 classes, the last ending at j
    best = np.full((classes, n), np.inf)
    cut = np.zeros((classes, n), dtype=np.int64)
    best[0] = waste[0]
    for k in range(1, classes):
        for j in range(k, n):
            candidates = best[k - 1, k - 1 : j] + waste[k : j + 1, j]
            choice = int(np.argmin(candidates))
            best[k, j] = candidates[choice]
            cut[k, j] = k - 1 + choice
    k = int(np.argmin(best[:, n - 1]))
    ends = [n - 1]
    while k > 0:
        ends.append(int(cut[k, ends[-1]]))
        k -= 1
    tops = sorted(int(distinct[end]) for end in ends)
    return tuple(ContextClass(top, open_ended=top == tops[-1]) for top in tops)
