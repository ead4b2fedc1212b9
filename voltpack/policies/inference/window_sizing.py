"""Size a plan until it meets the SLO on the window it was made from.

The capacity model sizes each replica for Poisson-like fluctuation around the planning
rate; a real window's arrivals are burstier at the time scale a decode batch lives on (tens
of seconds), and a full KV cache makes a request wait between its first and second token,
which the TPOT counts. Instead of guessing a larger margin, the plan is replayed on the
planning window's own requests (`window_attainment`) and, while it misses the goal there,
re-made for a rate RATE_STEP higher. A plan is then judged on requests it never saw; this
only makes sure it meets the ones it did.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
from numpy.typing import NDArray

from voltpack.model.errors import InvalidRequestError
from voltpack.perf.inference_profile import ProfileBook
from voltpack.policies.inference.attainment import (
    PredictedAttainment,
    draw_sizes,
    window_attainment,
)
from voltpack.policies.inference.buckets import RequestMix
from voltpack.policies.inference.melange import melange_plan
from voltpack.policies.inference.mix_planner import (
    InfeasiblePlanError,
    PlanRequest,
    best_single_type_plan,
    plan_service,
)
from voltpack.policies.inference.plan import ServingPlan

WINDOW_GOAL = 0.99
"""Share of the window's requests a plan must serve within both SLOs."""
RATE_STEP = 1.1
"""Factor the planning rate grows by each time the window's replay misses the goal."""
MAX_RATE_FACTOR = 2.0
"""The largest factor over the given rate tried; past it the best plan found is kept."""


@dataclass(frozen=True)
class WindowSizedPlan:
    """The plan, the factor its rate was raised by, and what its window's replay gave."""

    plan: ServingPlan
    rate_factor: float
    replay: PredictedAttainment
    """What the window's replay gave `plan`."""
    plans_tried: int
    met: bool
    """Whether the window's replay reached the goal (else `plan` is the best one tried)."""

    @property
    def window_attainment(self) -> float:
        """Share of the window's requests within both SLOs on `plan`."""
        return self.replay.ratio


def window_prediction(sized: WindowSizedPlan, window: str) -> PredictedAttainment:
    """The attainment the replay of `window` (what it held, in words) gave the plan sized on
    it, as the plan's predicted attainment."""
    factor = (
        f"; planned for {sized.rate_factor:.2f}x the given rate: that rate's cheapest plans "
        "missed the SLO on the window"
        if sized.rate_factor > 1.0
        else ""
    )
    closest = "" if sized.met else " (the closest plan tried: none up to 2x the rate met it)"
    return PredictedAttainment(
        ratio=sized.window_attainment,
        requests=sized.replay.requests,
        ttft_misses=sized.replay.ttft_misses,
        tpot_misses=sized.replay.tpot_misses,
        basis=f"{window} replayed through the plan's replicas{closest}{factor}",
    )


def size_on_window(
    make_plans: Callable[[float], Sequence[ServingPlan]],
    rate_per_s: float,
    arrival_s: NDArray[np.float64],
    prompt_tokens: NDArray[np.int64],
    output_tokens: NDArray[np.int64],
    goal: float = WINDOW_GOAL,
) -> WindowSizedPlan:
    """The cheapest of the plans `make_plans` makes for `rate_per_s` whose replay of the
    window meets `goal`; failing that, the same for rates RATE_STEP^k higher (k = 1, 2, ...
    up to MAX_RATE_FACTOR); failing that, the plan that came closest.

    Exceptions of `make_plans` (an infeasible rate) propagate.
    """
    if not (rate_per_s > 0 and 0 < goal <= 1):
        raise InvalidRequestError("need rate_per_s > 0 and goal in (0, 1]")
    best: WindowSizedPlan | None = None
    factor = 1.0
    tried = 0
    while factor <= MAX_RATE_FACTOR + 1e-9:
        plans = sorted(make_plans(rate_per_s * factor), key=lambda plan: plan.cost_per_hour)
        for plan in plans:
            tried += 1
            replay = window_attainment(plan, arrival_s, prompt_tokens, output_tokens)
            if replay.ratio >= goal:
                return WindowSizedPlan(plan, factor, replay, tried, True)
            if best is None or replay.ratio > best.window_attainment:
                best = WindowSizedPlan(plan, factor, replay, tried, False)
        factor *= RATE_STEP
    if best is None:
        raise InvalidRequestError("make_plans made no plan to size")
    return replace(best, plans_tried=tried)


def candidate_plans(request: PlanRequest, book: ProfileBook | None = None) -> list[ServingPlan]:
    """voltpack's plans for `request`, cheapest model cost first: the MILP over every option,
    and the optimal plans of two restricted option sets (one GPU type; Mélange's one
    configuration per bucket), each with split rights. All three lie in the MILP's space;
    the restricted ones are fleets the window's replay may trust where the MILP's cheapest
    one rests on a capacity the model overstates. Raises InfeasiblePlanError when none is
    feasible."""
    plans: list[ServingPlan] = []
    errors: list[str] = []
    makers: tuple[Callable[[PlanRequest, ProfileBook | None], ServingPlan], ...] = (
        plan_service,
        partial(best_single_type_plan, split=True),
        partial(melange_plan, split=True),
    )
    for make in makers:
        try:
            plans.append(make(request, book))
        except InfeasiblePlanError as exc:
            errors.append(str(exc))
    if not plans:
        raise InfeasiblePlanError(errors[0])
    return sorted(plans, key=lambda plan: plan.cost_per_hour)


def plan_service_on_window(
    request: PlanRequest,
    arrival_s: NDArray[np.float64],
    prompt_tokens: NDArray[np.int64],
    output_tokens: NDArray[np.int64],
    goal: float = WINDOW_GOAL,
    book: ProfileBook | None = None,
) -> WindowSizedPlan:
    """voltpack's plan for `request` sized on the window it was made from: the cheapest of
    `candidate_plans` that meets `goal` on the window, at the least rate that has one."""
    return size_on_window(
        lambda rate_per_s: candidate_plans(replace(request, rate_per_s=rate_per_s), book),
        request.rate_per_s,
        arrival_s,
        prompt_tokens,
        output_tokens,
        goal,
    )


MAX_WINDOW_REQUESTS = 3000
"""Requests a window built from slot counts holds at most (its busiest stretch): the replay
of each candidate plan takes about a second per thousand requests."""


def window_from_slots(
    counts: NDArray[np.float64],
    slot_s: float,
    mix: RequestMix,
    max_requests: int = MAX_WINDOW_REQUESTS,
    seed: int = 0,
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int64]]:
    """Requests (arrival times, prompt and output tokens) for a window known only as request
    counts per slot (what the operator measures): each slot's requests spread evenly over it,
    sizes drawn from `mix` (each its bucket's mean). When the slots hold more than
    `max_requests`, the busiest stretch of consecutive slots holding at most that many.
    Raises InvalidRequestError for negative or non-finite counts or a non-positive slot."""
    measured = np.asarray(counts, dtype=np.float64)
    if measured.ndim != 1 or not np.all(np.isfinite(measured)) or np.any(measured < 0):
        raise InvalidRequestError("need one finite non-negative count per slot")
    if not slot_s > 0:
        raise InvalidRequestError(f"slot_s must be positive, got {slot_s}")
    arrived = np.rint(measured).astype(np.int64)
    arrived = _busiest_stretch(arrived, max_requests)
    total = int(arrived.sum())
    slot = np.repeat(np.arange(arrived.size), arrived)
    within = np.concatenate([(np.arange(n) + 0.5) / n for n in arrived if n > 0] or [[]])
    arrival_s = (slot + within) * slot_s
    prompts, outputs = draw_sizes(mix, total, np.random.default_rng(seed))
    return np.asarray(arrival_s, dtype=np.float64), prompts, outputs


def _busiest_stretch(arrived: NDArray[np.int64], max_requests: int) -> NDArray[np.int64]:
    """The consecutive slots holding the most requests up to `max_requests`, the shortest
    such stretch on a tie (the densest); a slot holding more counts as `max_requests`."""
    clipped = np.minimum(arrived, max_requests)
    if int(clipped.sum()) <= max_requests:
        return clipped
    before = np.concatenate(([0], np.cumsum(clipped)))
    ends = np.arange(1, before.size)
    starts = np.searchsorted(before, before[ends] - max_requests, side="left")
    held = before[ends] - before[starts]
    best = np.lexsort((ends - starts, -held))[0]
    return clipped[starts[best] : ends[best]]
