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
from voltpack.policies.inference.attainment import window_attainment
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
    window_attainment: float
    plans_tried: int
    met: bool
    """Whether the window's replay reached the goal (else `plan` is the best one tried)."""


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
            ratio = window_attainment(plan, arrival_s, prompt_tokens, output_tokens).ratio
            if ratio >= goal:
                return WindowSizedPlan(plan, factor, ratio, tried, True)
            if best is None or ratio > best.window_attainment:
                best = WindowSizedPlan(plan, factor, ratio, tried, False)
        factor *= RATE_STEP
    if best is None:
        raise InvalidRequestError("make_plans made no plan to size")
    return WindowSizedPlan(best.plan, best.rate_factor, best.window_attainment, tried, False)


def candidate_plans(request: PlanRequest) -> list[ServingPlan]:
    """voltpack's plans for `request`, cheapest model cost first: the MILP over every option,
    and the optimal plans of two restricted option sets (one GPU type; Mélange's one
    configuration per bucket), each with split rights. All three lie in the MILP's space;
    the restricted ones are fleets the window's replay may trust where the MILP's cheapest
    one rests on a capacity the model overstates. Raises InfeasiblePlanError when none is
    feasible."""
    plans: list[ServingPlan] = []
    errors: list[str] = []
    makers: tuple[Callable[[PlanRequest], ServingPlan], ...] = (
        plan_service,
        partial(best_single_type_plan, split=True),
        partial(melange_plan, split=True),
    )
    for make in makers:
        try:
            plans.append(make(request))
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
) -> WindowSizedPlan:
    """voltpack's plan for `request` sized on the window it was made from: the cheapest of
    `candidate_plans` that meets `goal` on the window, at the least rate that has one."""
    return size_on_window(
        lambda rate_per_s: candidate_plans(replace(request, rate_per_s=rate_per_s)),
        request.rate_per_s,
        arrival_s,
        prompt_tokens,
        output_tokens,
        goal,
    )
