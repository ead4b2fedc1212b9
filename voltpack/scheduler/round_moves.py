"""Time-slicing live training jobs: at a round boundary, which running jobs change GPU model.

The round mechanism (`rounds.py`, the simulator's) picks the next round's jobs per model from
the allocation and the time each job has received on each model. A running job it puts on
another model is moved (preempted whole; its controller recreates the workers, which resume
from their checkpoint) when the move is worth it:

- the round gives the job's current model to other jobs (its GPUs there are needed: fairness),
- or the new model is faster by more than the restart costs: rate_new x (round - restart cost)
  > rate_now x round.

Jobs that cannot move (not preemptible, or younger than the minimum runtime) are pinned to
their model first. A job the round does not pick at all keeps running (the operator moves jobs
between models; it does not suspend them). Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from voltpack.policies.hetero.model_choice import ModelChoice
from voltpack.scheduler.rounds import round_priorities, select_round


@dataclass(frozen=True)
class RoundJob:
    """A training job taking part in the round: where it runs, and whether it may move."""

    name: str
    gpus: int
    choice: ModelChoice
    running_model: str | None = None
    movable: bool = False
    """Running, preemptible and past its minimum runtime."""
    job_time_s: Mapping[str, float] | None = None
    """Time received on each model since the allocation was last solved."""


@dataclass(frozen=True)
class Move:
    """A running job to move to another GPU model, and why."""

    job: str
    from_model: str
    to_model: str
    reason: str


def plan_moves(
    jobs: Sequence[RoundJob],
    capacity_gpus: Mapping[str, int],
    model_time_s: Mapping[str, float],
    *,
    round_index: int,
    round_s: float,
    restart_cost_s: float,
) -> list[Move]:
    """The moves of the round that starts now (see the module's rules)."""
    models = tuple(sorted(m for m, n in capacity_gpus.items() if n > 0))
    if not jobs or not models:
        return []
    column = {m: j for j, m in enumerate(models)}
    allocation = np.array([[job.choice.shares.get(m, 0.0) for m in models] for job in jobs])
    rates = np.array([[job.choice.rates_steps_per_s.get(m, 0.0) for m in models] for job in jobs])
    job_time = np.array([[(job.job_time_s or {}).get(m, 0.0) for m in models] for job in jobs])
    model_time = np.array([model_time_s.get(m, 0.0) for m in models])
    scale = np.array([job.gpus for job in jobs], dtype=np.int64)
    capacity = np.array([capacity_gpus[m] for m in models], dtype=np.int64)
    pinned = [
        (row, column[job.running_model])
        for row, job in enumerate(jobs)
        if job.running_model in column and not job.movable
    ]
    # fastest models first (mean throughput over the jobs), as Gavel orders V100, P100, K80
    order = sorted(range(len(models)), key=lambda j: (-float(rates[:, j].mean()), models[j]))
    chosen = select_round(
        round_priorities(allocation, job_time, model_time),
        np.zeros_like(allocation),
        allocation,
        scale,
        capacity,
        rates > 0,
        order,
        pinned=pinned,
    )
    next_model = {c.job: models[c.model] for c in chosen}
    moves = []
    for row, job in enumerate(jobs):
        target = next_model.get(row)
        current = job.running_model
        if not job.movable or current is None or target is None or target == current:
            continue
        others = [jobs[r] for r, m in next_model.items() if m == current and r != row]
        needed = sum(j.gpus for j in others) + job.gpus > capacity_gpus.get(current, 0)
        rate_now = job.choice.rates_steps_per_s.get(current, 0.0)
        rate_new = job.choice.rates_steps_per_s.get(target, 0.0)
        faster = rate_new * (round_s - restart_cost_s) > rate_now * round_s
        shares = (
            f"allocation {job.choice.shares.get(target, 0.0):.2f} on {target}, "
            f"{job.choice.shares.get(current, 0.0):.2f} on {current}"
        )
        if needed:
            why = f"the round gives {current} to {', '.join(j.name for j in others)}"
        elif faster:
            why = (
                f"{rate_new / rate_now:.1f}x the throughput, worth the {restart_cost_s:g} s restart"
                if rate_now > 0
                else "it cannot run on its current model"
            )
        else:
            continue
        moves.append(
            Move(
                job.name,
                current,
                target,
                f"round {round_index}: job {job.name} moves from {current} to {target} "
                f"({shares}; {why})",
            )
        )
    return moves
