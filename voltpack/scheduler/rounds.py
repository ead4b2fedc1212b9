"""The round mechanism: turn an allocation (time shares per GPU model) into the next round's jobs.

Time is cut into rounds. Before each round, every job gets a priority per GPU model: the share
of that model's time the allocation gives it, divided by the share it has actually received
(Gavel, OSDI'20, section 5). Jobs are then taken greedily in priority order, per model, each
job at most once per round, while its scale factor fits in the model's free GPUs. Jobs that
cannot be preempted and are running keep their GPUs first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
UNSERVED_PRIORITY_SCALE = 1e9
"""A job that has received nothing on a model gets priority allocation x this (runs first)."""


def round_priorities(
    allocation: FloatArray, job_time_s: FloatArray, model_time_s: FloatArray
) -> FloatArray:
    """[job, model]: allocation / share of the model's time received; 0 where allocation is 0."""
    fraction = np.divide(
        job_time_s,
        model_time_s[None, :],
        out=np.zeros_like(job_time_s),
        where=model_time_s[None, :] > 0,
    )
    ratio = np.divide(allocation, fraction, out=np.zeros_like(allocation), where=fraction > 0)
    unserved = allocation * UNSERVED_PRIORITY_SCALE
    return np.where(allocation <= 0, 0.0, np.where(fraction > 0, ratio, unserved))


@dataclass(frozen=True)
class RoundChoice:
    """One job chosen for the next round: its row, the model, and whether it actually runs.

    `runs` is False for a job that took GPUs in the selection but has no allocation yet (see
    `select_round`'s `unallocated`): it holds the GPUs idle for the round.
    """

    job: int
    model: int
    runs: bool = True


def select_round(
    priorities: FloatArray,
    deficits: FloatArray,
    allocation: FloatArray,
    scale_factors: NDArray[np.int64],
    capacity_gpus: NDArray[np.int64],
    runnable: NDArray[np.bool_],
    model_order: Sequence[int],
    *,
    pinned: Sequence[tuple[int, int]] = (),
    skip_zero_priority: bool = False,
    unallocated: NDArray[np.bool_] | None = None,
) -> list[RoundChoice]:
    """The jobs of the next round, greedily by (priority, deficit, allocation), per model.

    `pinned` (job, model) pairs are non-preemptible jobs already running: they are placed
    first on their model. Ties keep job order (arrival). `unallocated` marks jobs with no
    allocation yet; with it set, such a job still takes GPUs when chosen but does not run, as
    in Gavel's simulator (kept only to reproduce its published numbers).
    """
    free = capacity_gpus.astype(np.int64).copy()
    taken: set[int] = set()
    chosen: list[RoundChoice] = []
    for job, model in pinned:
        if scale_factors[job] <= free[model]:
            free[model] -= int(scale_factors[job])
            taken.add(job)
            chosen.append(RoundChoice(job, model))
    for model in model_order:
        keys = [
            (float(priorities[i, model]), float(deficits[i, model]), float(allocation[i, model]))
            for i in range(len(scale_factors))
        ]
        order = sorted(range(len(scale_factors)), key=keys.__getitem__, reverse=True)
        for job in order:
            if free[model] == 0:
                break
            if job in taken or not runnable[job, model]:
                continue
            if skip_zero_priority and priorities[job, model] <= 0:
                continue
            needed = int(scale_factors[job])
            if needed > free[model]:
                continue
            free[model] -= needed
            taken.add(job)
            runs = unallocated is None or not bool(unallocated[job])
            chosen.append(RoundChoice(job, model, runs))
    return chosen
