"""The walk `auto` and `ensemble` both validate on: how many origins a history of a given
length gets, and that short histories are walked on their own scale, not skipped."""

from __future__ import annotations

from voltpack.forecast.models.tail_walk import MIN_ORIGINS, TailPlan, plan_tail


def test_a_long_history_gets_every_origin_at_the_full_horizon() -> None:
    plan = plan_tail(4000, max_horizon=48, origins=16, min_fit_samples=200)
    assert plan == TailPlan(horizon=48, stride=24, origins=16)
    assert plan.tail == 15 * 24 + 48
    assert plan_tail(4000, 48, 24, 200, stride=12) == TailPlan(48, 12, 24)


def test_a_short_history_is_walked_on_an_eighth_of_its_length() -> None:
    # 268 samples (a day at 5 minutes): horizon 33, stride 16, the head keeps 134
    plan = plan_tail(268, max_horizon=48, origins=16, min_fit_samples=200)
    assert plan == TailPlan(horizon=33, stride=16, origins=7)
    assert 268 - plan.tail >= 134


def test_too_short_for_the_minimum_origins_is_not_walked() -> None:
    assert plan_tail(20, 48, 16, 200, stride=12).origins == 0
    assert plan_tail(20, 48, 16, 200) == TailPlan(2, 1, 9)  # stride 1: 2-step forecasts
    assert MIN_ORIGINS == 4
    assert plan_tail(1, 48, 16, 200).origins == 0
    assert plan_tail(4000, 48, 0, 200) == TailPlan(48, 24, 0)


def test_the_head_keeps_two_seasons_for_seasonal_models() -> None:
    # 100 hourly samples, daily season: half would be 50 samples, two seasons are 48
    assert plan_tail(100, 48, 24, 200, stride=12, min_head=48).origins == 4
    # 90 samples: 45 would not fit two seasons; with 48 kept, 3 origins fit: no walk
    assert plan_tail(90, 48, 24, 200, stride=12, min_head=48).origins == 0
    # a daily season at 5 minutes (288) on 864 samples: the head keeps 576, not 200
    plan = plan_tail(864, 48, 24, 200, stride=12, min_head=576)
    assert 864 - plan.tail >= 576 and plan.origins == 21
