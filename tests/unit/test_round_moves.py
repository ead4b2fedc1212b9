"""Moves of live training jobs at a round boundary: worth it, pinned, fairness, reasons."""

from __future__ import annotations

from voltpack.policies.hetero.model_choice import ModelChoice
from voltpack.scheduler.round_moves import Move, RoundJob, plan_moves

RATES = {"K80": 20.0, "V100": 13.0}  # a job that runs faster on the K80


def job(
    name: str,
    running: str | None,
    shares: dict[str, float],
    *,
    movable: bool = True,
    rates: dict[str, float] = RATES,
    gpus: int = 1,
) -> RoundJob:
    order = tuple(sorted(shares, key=lambda m: -shares[m]))
    choice = ModelChoice(name, order, shares, {m: rates[m] for m in order})
    times = dict.fromkeys(shares, 180.0)
    return RoundJob(name, gpus, choice, running, movable, times)


def moves(
    jobs: list[RoundJob], capacity: dict[str, int], restart_cost_s: float = 0.0
) -> dict[str, Move]:
    planned = plan_moves(
        jobs,
        capacity,
        {m: 180.0 * len(jobs) for m in capacity},
        round_index=7,
        round_s=360.0,
        restart_cost_s=restart_cost_s,
    )
    return {m.job: m for m in planned}


def test_a_job_on_a_slower_model_moves_to_its_allocation_when_there_is_room() -> None:
    found = moves([job("a", "V100", {"K80": 1.0, "V100": 0.0})], {"K80": 4, "V100": 4})
    assert set(found) == {"a"}
    assert (found["a"].from_model, found["a"].to_model) == ("V100", "K80")
    assert found["a"].reason == (
        "round 7: job a moves from V100 to K80 (allocation 1.00 on K80, 0.00 on V100; "
        "1.5x the throughput, worth the 0 s restart)"
    )


def test_a_move_must_gain_more_than_the_restart_costs() -> None:
    # 20 x (360 - 150) = 4,200 steps on the K80 against 13 x 360 = 4,680 staying
    jobs = [job("a", "V100", {"K80": 1.0, "V100": 0.0})]
    assert moves(jobs, {"K80": 4, "V100": 4}, restart_cost_s=150.0) == {}
    assert set(moves(jobs, {"K80": 4, "V100": 4}, restart_cost_s=100.0)) == {"a"}


def test_jobs_that_may_not_move_stay_and_keep_their_gpus() -> None:
    pinned = job("p", "V100", {"K80": 1.0, "V100": 0.0}, movable=False)
    assert moves([pinned], {"K80": 4, "V100": 4}) == {}


def test_no_move_without_room_on_the_new_model() -> None:
    holder = job("h", "K80", {"K80": 1.0, "V100": 0.0}, movable=False)
    mover = job("a", "V100", {"K80": 1.0, "V100": 0.0})
    assert moves([holder, mover], {"K80": 1, "V100": 1}) == {}


def test_a_job_gives_up_its_model_when_the_round_gives_it_to_another() -> None:
    # b has received nothing on the V100 it is allocated; a has had its share there
    fast_v100 = {"K80": 5.0, "V100": 10.0}
    a = RoundJob(
        "a", 1,
        ModelChoice("a", ("V100", "K80"), {"V100": 0.5, "K80": 0.5}, fast_v100),
        "V100", True, {"V100": 900.0, "K80": 0.0},
    )  # fmt: skip
    b = RoundJob(
        "b", 1,
        ModelChoice("b", ("V100", "K80"), {"V100": 0.5, "K80": 0.5}, fast_v100),
        "K80", True, {"V100": 0.0, "K80": 900.0},
    )  # fmt: skip
    found = plan_moves(
        [a, b], {"V100": 1, "K80": 1}, {"V100": 900.0, "K80": 900.0},
        round_index=3, round_s=360.0, restart_cost_s=0.0,
    )  # fmt: skip
    by_job = {m.job: m for m in found}
    assert (by_job["a"].from_model, by_job["a"].to_model) == ("V100", "K80")
    assert "the round gives V100 to b" in by_job["a"].reason
    assert (by_job["b"].from_model, by_job["b"].to_model) == ("K80", "V100")


def test_a_job_already_where_the_round_puts_it_stays() -> None:
    assert moves([job("a", "K80", {"K80": 1.0, "V100": 0.0})], {"K80": 4, "V100": 4}) == {}
