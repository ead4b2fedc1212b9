"""The walk `auto` and `ensemble` both validate on: how many origins a history of a given
length gets, and that short histories are walked on their own scale, not skipped."""

from __future__ import annotations

from voltpack.forecast.tail_walk import MIN_ORIGINS, TailPlan, plan_tail


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
    assert plan_tail(20, 48, 16, 200).origins >= MIN_ORIGINS  # stride 1: 2-step forecasts
    assert plan_tail(1, 48, 16, 200).origins == 0
    assert plan_tail(4000, 48, 0, 200) == TailPlan(48, 24, 0)
