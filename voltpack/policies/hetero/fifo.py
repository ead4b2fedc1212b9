"""First in, first out: jobs hold whole GPUs of one model in arrival order until they finish.

The agnostic form picks a model at random among those with enough free GPUs (seeded); the
aware form picks the job's fastest model among them. As in Gavel's FIFO, a job keeps its model
once given one, and a finished job's GPUs go first to the head of the queue (if they are enough
once every still-running job is counted: Gavel's FIFO does not count them first and can give a
model more GPUs than it has).
"""

from __future__ import annotations

import random

import numpy as np

from voltpack.policies.hetero.allocation import AllocationInput, FloatArray, empty_allocation


class FifoAllocator:
    """Stateful FIFO allocation; `job_ids` in the input must be arrival-ordered integers."""

    def __init__(self, heterogeneity_aware: bool, seed: int = 0) -> None:
        self.heterogeneity_aware = heterogeneity_aware
        self._seed = seed
        self._rng = random.Random(seed)
        self._model_of: dict[int, int] = {}

    def reset(self) -> None:
        """Forget every assignment and restart the random stream (a new run)."""
        self._rng = random.Random(self._seed)
        self._model_of = {}

    def __call__(self, problem: AllocationInput) -> FloatArray:
        """Whole-GPU assignments (1.0 on one model) for as many queued jobs as fit, in order."""
        ids = problem.job_ids or tuple(range(problem.job_count))
        row = {job: i for i, job in enumerate(ids)}
        free = problem.capacity_gpus.astype(np.int64).copy()
        if self.heterogeneity_aware:
            self._model_of = {}
        queue = sorted(job for job in ids if job not in self._model_of)
        finished = sorted(job for job in self._model_of if job not in row)
        for job, model in self._model_of.items():
            if job in row:
                free[model] -= int(problem.scale_factors[row[job]])
        for job in finished:
            model = self._model_of.pop(job)
            if queue:
                head = queue.pop(0)
                needed = int(problem.scale_factors[row[head]])
                if needed <= free[model] and problem.runnable[row[head], model]:
                    self._model_of[head] = model
                    free[model] -= needed
        open_models = sorted(j for j in range(len(free)) if free[j] > 0)
        while queue and open_models:
            job = queue.pop(0)
            needed = int(problem.scale_factors[row[job]])
            fits = [j for j in open_models if free[j] >= needed and problem.runnable[row[job], j]]
            if not fits:
                break
            if self.heterogeneity_aware:
                rates = problem.throughputs_steps_per_s[row[job]]
                model = max(fits, key=lambda j: rates[j])
            else:
                model = fits[self._rng.randrange(len(fits))]
            self._model_of[job] = model
            free[model] -= needed
            if free[model] == 0:
                open_models.remove(model)
        allocation = empty_allocation(problem)
        for job, model in self._model_of.items():
            if job in row:
                allocation[row[job], model] = 1.0
        return allocation
