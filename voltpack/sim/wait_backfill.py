"""The training simulator's queue pass with wait-or-place and EASY backfill.

`voltpack.sim.topology_training` runs this pass instead of its strict FIFO one when
`SimConfig.backfill` is on or `SimConfig.wait_rule` is set; the decisions are the core's
(`voltpack.scheduler.wait_or_place`), the same for every placement policy. Here is only how the
simulator feeds them: the head's placement now is tried on a copy of the cluster (kept only if
the head starts), its placements after future departures on scratch copies (with their own
random generator, so planning does not shift the policy's draws), and a backfill candidate is
placed as the policy would place it, else, when that takes reserved GPUs and runs past the
reservation, on the cluster with the reserved GPUs taken out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.workload import Pod
from voltpack.perf.training_models import default_parallelism
from voltpack.scheduler.wait_or_place import (
    Candidate,
    GpuSet,
    Reservation,
    RunningGang,
    backfill_allowed,
    gpu_set,
    plan_head,
)

if TYPE_CHECKING:
    from voltpack.sim.topology_training import Placed, _Run, _Runner


@dataclass(frozen=True)
class QueueEvent:
    """What the queue pass did, for observers (`SimConfig.queue_observer`).

    kind: `reserve` (the head holds `reservation`), `start` (the job started; `backfill`:
    ahead of a reservation), `drop` (it can never fit)."""

    kind: str
    job_id: str
    now_s: float
    reservation: Reservation | None = None
    first_fit_s: float | None = None
    gpus: GpuSet = frozenset()
    end_s: float | None = None
    backfill: bool = False


def _trial(
    runner: _Runner, run: _Run, index: int, masked: GpuSet = frozenset()
) -> tuple[ClusterSnapshot, Placed] | None:
    """The job placed now by the policy on a copy of the cluster (with the `masked` GPUs taken
    out): the copy, kept only if the job starts, and the placement; or None."""
    original = runner.snapshot
    trial = original.copy()
    fillers = _mask(trial, masked)
    runner.snapshot = trial
    try:
        placed = runner.try_place(run.jobs[index], run.groups[index])
    finally:
        runner.snapshot = original
    if placed is None:
        return None
    for node, pod, gpus in fillers:
        trial.release(node, pod, gpus)
    return trial, placed


def _mask(snapshot: ClusterSnapshot, gpus: GpuSet) -> list[tuple[int, Pod, tuple[int, ...]]]:
    """Take the free GPUs among `gpus` out of `snapshot` with one filler pod per node."""
    by_node: dict[int, list[int]] = {}
    for node, gpu in sorted(gpus):
        if snapshot.gpu_free_milli[node, gpu] >= MILLI_PER_GPU:
            by_node.setdefault(node, []).append(gpu)
    fillers = []
    for node, taken in by_node.items():
        pod = Pod(
            name=f"reserved-{node}",
            cpu_milli=0,
            memory_mib=0,
            num_gpu=len(taken),
            gpu_milli=MILLI_PER_GPU,
        )
        snapshot.allocate(node, pod, taken)
        fillers.append((node, pod, tuple(taken)))
    return fillers


def _place_on(
    runner: _Runner, run: _Run, index: int
) -> Callable[[ClusterSnapshot], Candidate | None]:
    """The core's callback: the head placed by the policy on a future snapshot."""
    from voltpack.sim.topology_training import place_with_policy  # noqa: PLC0415 (cycle)

    job, group = run.jobs[index], run.groups[index]
    model = runner.catalog.get(job.model)
    step_model = runner.step_model(model, job.num_gpus)
    tensor = default_parallelism(model, job.num_gpus).tensor
    if run.plan_rng is None:
        run.plan_rng = np.random.default_rng([runner.config.seed, 1])
    rng = run.plan_rng
    pod = group.pods[0]

    def place(snapshot: ClusterSnapshot) -> Candidate | None:
        free = (snapshot.gpu_free_milli >= MILLI_PER_GPU).sum(axis=1)
        if int((free // pod.num_gpu).sum()) < len(group.pods):
            return None
        placed = place_with_policy(
            snapshot, runner.topology, group, runner.policy, runner.scheduler, tensor,
            step_model, rng,
        )  # fmt: skip
        if placed is None:
            return None
        decision, step_s = placed
        gpus = frozenset(
            (snapshot.node_index(p.node), gpu) for p in decision.placements for gpu in p.gpu_indices
        )
        return Candidate(step_s, gpus)

    return place


def queue_pass(
    runner: _Runner,
    run: _Run,
    now_s: float,
    start: Callable[[int, Placed], None],
    drop: Callable[[int], None],
) -> None:
    """Start the head (or let it wait with a reservation), then backfill behind it."""
    config = runner.config
    observe = config.queue_observer
    reservation: Reservation | None = None
    while run.queue:
        index = run.queue[0]
        job = run.jobs[index]
        trial = _trial(runner, run, index)
        place_now = None
        if trial is not None:
            step_s, _, allocations, _ = trial[1]
            place_now = Candidate(step_s, gpu_set(allocations))
            run.first_fit_s.setdefault(index, now_s)
        running = [
            RunningGang(key, runner._predicted_end_s(run, key), tuple(allocations))
            for key, allocations in run.running.items()
        ]
        ideal_s = float(runner.step_model(runner.catalog.get(job.model), job.num_gpus).ideal_s())
        plan = plan_head(
            now_s,
            runner.snapshot,
            running,
            steps=job.steps,
            gpus_needed=job.num_gpus,
            place_now=place_now,
            place_on=_place_on(runner, run, index),
            rule=config.wait_rule,
            first_fit_s=run.first_fit_s.get(index),
            ideal_step_s=ideal_s,
        )
        if plan.action == "place" and trial is not None:
            runner.snapshot = trial[0]
            _started(runner, run, index, trial[1], now_s, start, backfill=False)
            continue
        if plan.action == "never":
            if observe is not None:
                observe(QueueEvent("drop", job.job_id, now_s))
            drop(index)
            continue
        reservation = plan.reservation
        if observe is not None:
            observe(
                QueueEvent(
                    "reserve",
                    job.job_id,
                    now_s,
                    reservation=reservation,
                    first_fit_s=run.first_fit_s.get(index),
                )
            )
        break
    if not config.backfill or reservation is None:
        return
    for index in list(run.queue)[1:]:
        placed = _backfill(runner, run, index, now_s, reservation)
        if placed is not None:
            _started(runner, run, index, placed, now_s, start, backfill=True)


def _backfill(
    runner: _Runner, run: _Run, index: int, now_s: float, reservation: Reservation
) -> Placed | None:
    """The job's placement now if it may start ahead of the reservation (the cluster then
    holds it), else None."""
    job = run.jobs[index]
    ideal_s = float(runner.step_model(runner.catalog.get(job.model), job.num_gpus).ideal_s())
    if now_s + job.steps * ideal_s <= reservation.start_s:
        trial = _trial(runner, run, index)
        if trial is not None:
            step_s, _, allocations, _ = trial[1]
            end_s = now_s + job.steps * step_s
            if backfill_allowed(reservation, gpu_set(allocations), end_s):
                runner.snapshot = trial[0]
                return trial[1]
    trial = _trial(runner, run, index, masked=reservation.gpus)
    if trial is None:
        return None
    step_s, _, allocations, _ = trial[1]
    if not backfill_allowed(reservation, gpu_set(allocations), now_s + job.steps * step_s):
        return None  # cannot happen: the reserved GPUs were taken out
    runner.snapshot = trial[0]
    return trial[1]


def _started(
    runner: _Runner,
    run: _Run,
    index: int,
    placed: Placed,
    now_s: float,
    start: Callable[[int, Placed], None],
    *,
    backfill: bool,
) -> None:
    start(index, placed)
    run.first_fit_s.pop(index, None)
    observe = runner.config.queue_observer
    if observe is not None:
        observe(
            QueueEvent(
                "start",
                run.jobs[index].job_id,
                now_s,
                gpus=gpu_set(placed[2]),
                end_s=runner._predicted_end_s(run, index),
                backfill=backfill,
            )
        )
