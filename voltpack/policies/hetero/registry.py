"""Allocation policy names (Gavel's, so results compare line by line) and what they select."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from voltpack.model.errors import PolicyError
from voltpack.policies.hetero.allocation import AllocationInput, FloatArray
from voltpack.policies.hetero.completion import (
    shortest_remaining_agnostic,
    shortest_remaining_aware,
)
from voltpack.policies.hetero.efficiency import (
    max_total_throughput_agnostic,
    max_total_throughput_aware,
    min_makespan_agnostic,
    min_makespan_aware,
)
from voltpack.policies.hetero.fairness import (
    finish_time_fairness_agnostic,
    finish_time_fairness_aware,
    max_min_fairness_agnostic,
    max_min_fairness_aware,
)
from voltpack.policies.hetero.fifo import FifoAllocator

Allocate = Callable[[AllocationInput], FloatArray]


@dataclass(frozen=True)
class AllocationPolicy:
    """A named allocation policy; `heterogeneity_aware` policies see throughputs per model."""

    name: str
    allocate: Allocate
    heterogeneity_aware: bool
    summary: str
    whole_gpus_in_order: bool = False
    """FIFO-like: a job with no allocation is never run (no back-filling)."""
    reset: Callable[[], None] | None = None
    """Forget state kept between calls (FIFO), for a new run."""


_STATELESS: dict[str, tuple[Allocate, bool, str]] = {
    "max_min_fairness": (
        max_min_fairness_agnostic,
        False,
        "least attained service: equal GPU time per job, every GPU alike",
    ),
    "max_min_fairness_perf": (
        max_min_fairness_aware,
        True,
        "heterogeneity-aware least attained service: equal throughput relative to fair share",
    ),
    "finish_time_fairness": (
        finish_time_fairness_agnostic,
        False,
        "finish-time fairness (Themis's rho), every GPU alike",
    ),
    "finish_time_fairness_perf": (
        finish_time_fairness_aware,
        True,
        "heterogeneity-aware finish-time fairness: minimise the worst slowdown vs fair share",
    ),
    "min_total_duration": (
        min_makespan_agnostic,
        False,
        "minimum makespan believing each job runs at its mean speed everywhere",
    ),
    "min_total_duration_perf": (
        min_makespan_aware,
        True,
        "heterogeneity-aware minimum makespan: every active job done as early as possible",
    ),
    "max_sum_throughput": (
        max_total_throughput_agnostic,
        False,
        "maximum GPU time in use, every GPU alike",
    ),
    "max_sum_throughput_perf": (
        max_total_throughput_aware,
        True,
        "heterogeneity-aware maximum total normalized throughput",
    ),
    "shortest_remaining": (
        shortest_remaining_agnostic(),
        False,
        "shortest remaining time first (max sum of completion rates), every GPU alike",
    ),
    "shortest_remaining_perf": (
        shortest_remaining_aware(),
        True,
        "voltpack: heterogeneity-aware shortest remaining time (max sum of completion rates)",
    ),
}
_FIFO: dict[str, tuple[bool, str]] = {
    "fifo": (False, "first in, first out on a random GPU model with room"),
    "fifo_perf": (True, "first in, first out on the job's fastest GPU model with room"),
}


def allocation_policy_names() -> list[str]:
    """Every allocation policy name."""
    return [*_FIFO, *_STATELESS]


def allocation_policy_summaries() -> dict[str, str]:
    """Name to one-sentence definition of every allocation policy."""
    return {
        **{name: summary for name, (_, summary) in _FIFO.items()},
        **{name: summary for name, (_, _, summary) in _STATELESS.items()},
    }


def make_allocation_policy(name: str, seed: int = 0) -> AllocationPolicy:
    """A fresh instance of the policy called `name` (FIFO keeps state between calls)."""
    if name in _FIFO:
        aware, summary = _FIFO[name]
        fifo = FifoAllocator(aware, seed)
        return AllocationPolicy(name, fifo, aware, summary, True, fifo.reset)
    try:
        allocate, aware, summary = _STATELESS[name]
    except KeyError:
        raise PolicyError(
            f"unknown allocation policy {name!r}; allowed values: "
            f"{', '.join(allocation_policy_names())}"
        ) from None
    return AllocationPolicy(name, allocate, aware, summary)
