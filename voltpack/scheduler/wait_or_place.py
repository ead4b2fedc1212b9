"""Wait-or-place for the head of a FIFO queue, with EASY backfill behind it: pure decisions.

The head gang either starts now on the placement it gets now, or waits for one of the next
`WaitRule.lookahead` predicted departures of running gangs when the placement it would get on the
GPUs free then (free now plus those departing gangs' GPUs) completes it sooner: by at least
`min_completion_gain` of its completion time from now, and starting no later than
`max_wait_s` after it first could have started (the head's *deadline*). A head that waits, or
that does not fit now at all, holds a `Reservation`: the departure time and the GPUs of that
future placement. A head that does not fit now reserves the earliest departure after which it
fits (classic EASY backfill).

Backfill: a later gang may start now only if its placement takes none of the reserved GPUs or
its predicted end is no later than the reservation's start (`backfill_allowed`). With exact
predictions of departures, the reserved GPUs are then free at the reservation's start, so
backfill never delays the head.

Bound on a waiting head (exact predictions, a placer that places a gang whenever the GPUs of
a placement it chose before are free): it starts no later than its deadline, `first fit +
max_wait_s`; a head that does not fit starts no later than its first reservation. When a
departure is predicted too early by d seconds, the head's start moves by at most the sum of the
overruns of the departures it waits for (it re-plans at every instant).

Nothing here knows the simulator or the operator: the driver gives the running gangs with
their predicted ends, the snapshot, and a callback that places the head on a snapshot.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.errors import InvalidRequestError
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.workload import Pod

if TYPE_CHECKING:
    from voltpack.policies.schema import TopologyPolicySpec

GpuSet = frozenset[tuple[int, int]]
"""(node index, GPU index) pairs."""

DEFAULT_MAX_WAIT_S = 600.0
DEFAULT_MIN_COMPLETION_GAIN = 0.05
DEFAULT_LOOKAHEAD = 4


@dataclass(frozen=True)
class WaitRule:
    """When the head may wait for a better placement (see the module docstring)."""

    max_wait_s: float = DEFAULT_MAX_WAIT_S
    """Latest start after the head first could have started; 0: never wait."""
    min_completion_gain: float = DEFAULT_MIN_COMPLETION_GAIN
    """Waiting must cut the completion time from now by at least this fraction."""
    lookahead: int = DEFAULT_LOOKAHEAD
    """How many of the next predicted departures (distinct times) are considered."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.max_wait_s) and self.max_wait_s >= 0):
            raise InvalidRequestError(
                f"wait rule: max_wait_s={self.max_wait_s} must be a finite number of seconds >= 0"
            )
        if not (0 <= self.min_completion_gain < 1):
            raise InvalidRequestError(
                f"wait rule: min_completion_gain={self.min_completion_gain} must be in [0, 1)"
            )
        if self.lookahead < 1:
            raise InvalidRequestError(f"wait rule: lookahead={self.lookahead} must be >= 1")

    @classmethod
    def from_policy(cls, spec: TopologyPolicySpec) -> WaitRule:
        """The rule a policy file's `spec.topology` sets."""
        return cls(
            max_wait_s=spec.max_wait_for_better_placement_s,
            min_completion_gain=spec.min_completion_gain,
        )


@dataclass(frozen=True)
class RunningGang:
    """A running gang as the rule sees it: its predicted departure and what it holds."""

    key: int
    end_s: float
    allocations: tuple[tuple[int, Pod, tuple[int, ...]], ...]
    """(node index, pod, GPU indices) of each of its pods."""


@dataclass(frozen=True)
class Candidate:
    """A placement of the head: its GPUs and predicted step time."""

    step_s: float
    gpus: GpuSet


PlaceOn = Callable[[ClusterSnapshot], "Candidate | None"]
"""Places the head on a snapshot (a scratch copy the callback may change), or None."""


@dataclass(frozen=True)
class Reservation:
    """What the waiting head holds: the GPUs of its placement at `start_s`."""

    start_s: float
    gpus: GpuSet
    step_s: float
    waiting: bool
    """True: it fits now but waits for a better placement; False: it does not fit now."""


@dataclass(frozen=True)
class HeadPlan:
    """What to do with the head now, and why."""

    action: Literal["place", "wait", "reserve", "never"]
    reservation: Reservation | None
    reason: str


def departures(running: Sequence[RunningGang], now_s: float) -> list[tuple[float, list[int]]]:
    """Predicted departure times (a late prediction counts as now), ascending, with the
    positions in `running` of the gangs departing at each."""
    by_time: dict[float, list[int]] = {}
    for position, gang in enumerate(running):
        by_time.setdefault(max(gang.end_s, now_s), []).append(position)
    return sorted(by_time.items())


def _free_gpus(snapshot: ClusterSnapshot) -> int:
    return int((snapshot.gpu_present & (snapshot.gpu_free_milli >= MILLI_PER_GPU)).sum())


def plan_head(
    now_s: float,
    snapshot: ClusterSnapshot,
    running: Sequence[RunningGang],
    *,
    steps: int,
    gpus_needed: int,
    place_now: Candidate | None,
    place_on: PlaceOn,
    rule: WaitRule | None,
    first_fit_s: float | None = None,
    ideal_step_s: float | None = None,
) -> HeadPlan:
    """Place the head now, let it wait with a reservation, reserve for it (it does not fit
    now), or drop it (`never`: it does not fit even when every running gang has left).

    `place_now` is the head's placement now (None: it does not fit); `first_fit_s` the first
    time it could have started (default now); `ideal_step_s`, when given, prunes departures
    too late to win even at the ideal step time."""
    if place_now is not None:
        if rule is None or rule.max_wait_s <= 0:
            return HeadPlan("place", None, "no wait rule")
        return _wait_or_place(
            now_s, snapshot, running, steps, place_now, place_on, rule, first_fit_s, ideal_step_s
        )
    if not running:
        return HeadPlan("never", None, "does not fit on the cluster with nothing running")
    step_scratch = snapshot.copy()
    for time_s, positions in departures(running, now_s):
        for position in positions:
            for node, pod, gpus in running[position].allocations:
                step_scratch.release(node, pod, gpus)
        if _free_gpus(step_scratch) < gpus_needed:
            continue
        found = place_on(step_scratch.copy())
        if found is not None:
            reservation = Reservation(time_s, found.gpus, found.step_s, waiting=False)
            return HeadPlan(
                "reserve", reservation, f"does not fit now; fits after departures at {time_s:g} s"
            )
    return HeadPlan("never", None, "does not fit even when every running gang has left")


def _wait_or_place(
    now_s: float,
    snapshot: ClusterSnapshot,
    running: Sequence[RunningGang],
    steps: int,
    place_now: Candidate,
    place_on: PlaceOn,
    rule: WaitRule,
    first_fit_s: float | None,
    ideal_step_s: float | None,
) -> HeadPlan:
    now_end_s = now_s + steps * place_now.step_s
    bar_s = now_s + (1.0 - rule.min_completion_gain) * (now_end_s - now_s)
    deadline_s = (now_s if first_fit_s is None else first_fit_s) + rule.max_wait_s
    best: Reservation | None = None
    best_end_s = math.inf
    scratch = snapshot.copy()
    for count, (time_s, positions) in enumerate(departures(running, now_s)):
        if count >= rule.lookahead or time_s > deadline_s:
            break
        if ideal_step_s is not None and time_s + steps * ideal_step_s > bar_s:
            break  # this and every later departure cannot beat the bar
        for position in positions:
            for node, pod, gpus in running[position].allocations:
                scratch.release(node, pod, gpus)
        found = place_on(scratch.copy())
        if found is None:
            continue
        end_s = time_s + steps * found.step_s
        if end_s < best_end_s:
            best_end_s = end_s
            best = Reservation(time_s, found.gpus, found.step_s, waiting=True)
    if best is not None and best_end_s <= bar_s:
        return HeadPlan(
            "wait",
            best,
            f"completes at {best_end_s:g} s if it starts at {best.start_s:g} s, against "
            f"{now_end_s:g} s placed now",
        )
    return HeadPlan("place", None, "no departure within the bound completes it sooner enough")


def backfill_allowed(reservation: Reservation, gpus: GpuSet, end_s: float) -> bool:
    """A later gang may start now: it ends by the reservation's start, or takes none of its
    GPUs."""
    return end_s <= reservation.start_s or not (gpus & reservation.gpus)


def gpu_set(allocations: Sequence[tuple[int, Pod, tuple[int, ...]]]) -> GpuSet:
    """The (node, GPU) pairs of a gang's allocations."""
    return frozenset((node, gpu) for node, _, gpus in allocations for gpu in gpus)
