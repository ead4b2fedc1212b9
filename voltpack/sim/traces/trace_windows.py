"""Windows of a request trace by time: the part a plan is made from and the part it is
checked on (out-of-sample), and a trace's first requests.

A plan sized on the same requests that are replayed against it (in-sample) has seen every
burst it is judged on. `split_by_time` cuts a trace at a moment: everything a planner may use
(the request mix, the burst-aware planning rate) comes from the earlier window, and the plan
is judged on the later one, whose bursts it has never seen.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from voltpack.model.errors import InvalidRequestError
from voltpack.sim.traces.azure_llm import LlmRequests

DEFAULT_PLANNING_SHARE = 0.5
"""Share of a trace's time span that the planning window covers (the first half)."""


class TraceSplit(NamedTuple):
    """A trace cut at `split_s`: the planning window before it, the held-out window after it.
    Each window's arrivals are relative to its own start (the trace's first arrival for the
    planning window, `split_s` for the held-out one)."""

    planning: LlmRequests
    holdout: LlmRequests
    split_s: float
    """The cut, in seconds after the trace's first arrival."""


def _subset(requests: LlmRequests, keep: np.ndarray, origin_s: float) -> LlmRequests:
    """The requests `keep` selects (a mask or indices), arrivals measured from `origin_s`."""
    return LlmRequests(
        arrival_s=np.asarray(requests.arrival_s[keep] - origin_s, dtype=np.float64),
        prompt_tokens=requests.prompt_tokens[keep],
        output_tokens=requests.output_tokens[keep],
    )


def split_by_time(
    requests: LlmRequests, planning_share: float = DEFAULT_PLANNING_SHARE
) -> TraceSplit:
    """Cut `requests` at `planning_share` of the time from its first to its last arrival:
    requests arriving before the cut form the planning window, the others the held-out
    window. Raises InvalidRequestError for a share outside (0, 1), unsorted arrivals, or
    a cut that leaves either window empty."""
    if not 0.0 < planning_share < 1.0:
        raise InvalidRequestError(
            f"planning_share must be in (0, 1), got {planning_share}: e.g. 0.5 plans on the "
            "first half of the trace's time and replays the second half"
        )
    arrivals = np.asarray(requests.arrival_s, dtype=np.float64)
    if arrivals.size < 2:
        raise InvalidRequestError("a trace needs at least two requests to split by time")
    if np.any(np.diff(arrivals) < 0):
        raise InvalidRequestError("arrival_s must be sorted (arrival order) to split by time")
    first_s = float(arrivals[0])
    split_s = planning_share * (float(arrivals[-1]) - first_s)
    before = arrivals - first_s < split_s
    if before.all() or not before.any():
        raise InvalidRequestError(
            f"cutting at {split_s:g} s leaves a window without requests: the trace's arrivals "
            "are too concentrated in time; choose another planning_share"
        )
    return TraceSplit(
        planning=_subset(requests, before, first_s),
        holdout=_subset(requests, ~before, first_s + split_s),
        split_s=split_s,
    )


def first_requests(requests: LlmRequests, count: int) -> LlmRequests:
    """The first `count` requests in arrival order (all of them if there are fewer): a
    contiguous stretch of the trace, so its bursts stay as they were."""
    if count < 1:
        raise InvalidRequestError(f"count must be at least 1, got {count}")
    return _subset(requests, np.argsort(requests.arrival_s, kind="stable")[:count], 0.0)
