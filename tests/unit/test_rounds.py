"""The round mechanism: priorities from an allocation, and the greedy choice of a round's jobs."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from voltpack.scheduler.rounds import (
    UNSERVED_PRIORITY_SCALE,
    RoundChoice,
    round_priorities,
    select_round,
)


def ints(values: list[int]) -> NDArray[np.int64]:
    return np.asarray(values, dtype=np.int64)


def floats(values: object) -> NDArray[np.float64]:
    return np.asarray(values, dtype=np.float64)


# --- round_priorities -----------------------------------------------------------------------


def test_priority_is_allocation_over_fraction_received() -> None:
    allocation = floats([[0.5, 0.25], [0.2, 0.0]])
    job_time = floats([[10.0, 30.0], [40.0, 5.0]])
    model_time = floats([50.0, 60.0])
    priorities = round_priorities(allocation, job_time, model_time)
    expected = [[0.5 / (10 / 50), 0.25 / (30 / 60)], [0.2 / (40 / 50), 0.0]]
    np.testing.assert_allclose(priorities, expected)


def test_unserved_job_gets_allocation_times_1e9() -> None:
    assert UNSERVED_PRIORITY_SCALE == 1e9
    allocation = floats([[0.3, 0.7]])
    priorities = round_priorities(allocation, floats([[0.0, 0.0]]), floats([100.0, 0.0]))
    np.testing.assert_allclose(priorities, [[0.3e9, 0.7e9]])


def test_zero_allocation_gives_zero_priority_even_when_unserved() -> None:
    allocation = floats([[0.0, 0.0], [0.0, 0.4]])
    job_time = floats([[0.0, 10.0], [5.0, 0.0]])
    priorities = round_priorities(allocation, job_time, floats([20.0, 20.0]))
    np.testing.assert_array_equal(priorities[0], [0.0, 0.0])
    assert priorities[1, 0] == 0.0
    assert priorities[1, 1] == pytest.approx(0.4e9)


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    jobs=st.integers(1, 10),
    models=st.integers(1, 3),
)
def test_priorities_are_non_negative_and_finite(
    data: st.DataObject, jobs: int, models: int
) -> None:
    share = st.one_of(st.just(0.0), st.floats(0.0, 1.0))
    seconds = st.one_of(st.just(0.0), st.floats(1e-3, 1e6))
    allocation = floats(
        data.draw(
            st.lists(
                st.lists(share, min_size=models, max_size=models), min_size=jobs, max_size=jobs
            )
        )
    )
    job_time = floats(
        data.draw(
            st.lists(
                st.lists(seconds, min_size=models, max_size=models), min_size=jobs, max_size=jobs
            )
        )
    )
    model_time = job_time.sum(axis=0) + floats(
        data.draw(st.lists(seconds, min_size=models, max_size=models))
    )
    priorities = round_priorities(allocation, job_time, model_time)
    assert priorities.shape == allocation.shape
    assert np.isfinite(priorities).all()
    assert (priorities >= 0).all()
    assert (priorities[allocation <= 0] == 0).all()
    assert (priorities[allocation > 0] > 0).all()


# --- select_round ---------------------------------------------------------------------------


def _select(
    priorities: list[list[float]] | NDArray[np.float64],
    scale_factors: list[int],
    capacity: list[int],
    *,
    runnable: NDArray[np.bool_] | None = None,
    model_order: list[int] | None = None,
    deficits: list[list[float]] | None = None,
    allocation: list[list[float]] | None = None,
    **kwargs: object,
) -> list[RoundChoice]:
    pri = floats(priorities)
    return select_round(
        pri,
        floats(deficits) if deficits is not None else np.zeros_like(pri),
        floats(allocation) if allocation is not None else np.zeros_like(pri),
        ints(scale_factors),
        ints(capacity),
        runnable if runnable is not None else np.ones(pri.shape, dtype=bool),
        model_order if model_order is not None else list(range(pri.shape[1])),
        **kwargs,  # type: ignore[arg-type]
    )


@st.composite
def round_inputs(draw: st.DrawFn) -> dict[str, object]:
    jobs = draw(st.integers(0, 15))
    models = draw(st.integers(1, 3))
    grid = st.lists(
        st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 1e9]), min_size=models, max_size=models),
        min_size=jobs,
        max_size=jobs,
    )
    priorities = floats(draw(grid)).reshape(jobs, models)
    deficits = floats(draw(grid)).reshape(jobs, models)
    allocation = floats(draw(grid)).reshape(jobs, models)
    sfs = ints(draw(st.lists(st.integers(1, 8), min_size=jobs, max_size=jobs)))
    capacity = ints(draw(st.lists(st.integers(0, 16), min_size=models, max_size=models)))
    runnable = np.array(
        draw(
            st.lists(
                st.lists(st.booleans(), min_size=models, max_size=models),
                min_size=jobs,
                max_size=jobs,
            )
        ),
        dtype=bool,
    ).reshape(jobs, models)
    order = draw(st.permutations(list(range(models))))
    # Pinned: distinct jobs on models where, together, they fit (they were running together).
    pinned: list[tuple[int, int]] = []
    free = capacity.copy()
    for job in draw(st.lists(st.integers(0, max(jobs - 1, 0)), unique=True, max_size=jobs)):
        model = draw(st.integers(0, models - 1))
        if sfs[job] <= free[model]:
            free[model] -= sfs[job]
            pinned.append((job, model))
    unallocated = np.array(draw(st.lists(st.booleans(), min_size=jobs, max_size=jobs)), dtype=bool)
    return {
        "priorities": priorities,
        "deficits": deficits,
        "allocation": allocation,
        "scale_factors": sfs,
        "capacity_gpus": capacity,
        "runnable": runnable,
        "model_order": order,
        "pinned": pinned,
        "skip_zero_priority": draw(st.booleans()),
        "unallocated": draw(st.one_of(st.none(), st.just(unallocated))),
    }


@settings(max_examples=300, deadline=None)
@given(inputs=round_inputs())
def test_select_round_respects_capacity_and_takes_each_job_once(inputs: dict[str, object]) -> None:
    choices = select_round(**inputs)  # type: ignore[arg-type]
    sfs: NDArray[np.int64] = inputs["scale_factors"]  # type: ignore[assignment]
    capacity: NDArray[np.int64] = inputs["capacity_gpus"]  # type: ignore[assignment]
    runnable: NDArray[np.bool_] = inputs["runnable"]  # type: ignore[assignment]
    priorities: NDArray[np.float64] = inputs["priorities"]  # type: ignore[assignment]
    pinned = dict(inputs["pinned"])  # type: ignore[call-overload]
    unallocated = inputs["unallocated"]
    jobs = [c.job for c in choices]
    assert len(jobs) == len(set(jobs))
    used = np.zeros_like(capacity)
    for choice in choices:
        used[choice.model] += sfs[choice.job]
        if choice.job in pinned:
            assert pinned[choice.job] == choice.model
            assert choice.runs
            continue
        assert runnable[choice.job, choice.model]
        if inputs["skip_zero_priority"]:
            assert priorities[choice.job, choice.model] > 0
        expected_runs = unallocated is None or not unallocated[choice.job]  # type: ignore[index]
        assert choice.runs == expected_runs
    assert (used <= capacity).all()
    # Every pinned job is placed (they fit together by construction).
    assert set(pinned) <= set(jobs)


@settings(max_examples=200, deadline=None)
@given(inputs=round_inputs())
def test_select_round_leaves_no_gpu_idle_that_a_waiting_job_could_take(
    inputs: dict[str, object],
) -> None:
    choices = select_round(**inputs)  # type: ignore[arg-type]
    sfs: NDArray[np.int64] = inputs["scale_factors"]  # type: ignore[assignment]
    capacity: NDArray[np.int64] = inputs["capacity_gpus"]  # type: ignore[assignment]
    runnable: NDArray[np.bool_] = inputs["runnable"]  # type: ignore[assignment]
    priorities: NDArray[np.float64] = inputs["priorities"]  # type: ignore[assignment]
    free = capacity.copy()
    for choice in choices:
        free[choice.model] -= sfs[choice.job]
    taken = {c.job for c in choices}
    for job in range(len(sfs)):
        if job in taken:
            continue
        for model in range(len(capacity)):
            if inputs["skip_zero_priority"] and priorities[job, model] <= 0:
                continue
            if runnable[job, model]:
                assert sfs[job] > free[model], (job, model, free)


def test_higher_priority_first_then_deficit_then_allocation() -> None:
    choices = _select(
        [[1.0], [2.0], [1.0], [1.0]],
        [1, 1, 1, 1],
        [3],
        deficits=[[0.0], [0.0], [5.0], [0.0]],
        allocation=[[0.1], [0.1], [0.1], [0.9]],
    )
    assert [c.job for c in choices] == [1, 2, 3]


def test_ties_keep_job_order() -> None:
    choices = _select([[1.0]] * 6, [1] * 6, [4])
    assert [c.job for c in choices] == [0, 1, 2, 3]


def test_a_job_that_does_not_fit_is_skipped_for_smaller_ones() -> None:
    choices = _select([[3.0], [2.0], [1.0]], [2, 4, 1], [3])
    assert [c.job for c in choices] == [0, 2]


def test_each_job_runs_on_at_most_one_model_in_model_order() -> None:
    # Job 0 has top priority on both models: it goes to the first model in the order.
    choices = _select([[5.0, 5.0], [1.0, 1.0]], [1, 1], [1, 1], model_order=[1, 0])
    assert [(c.job, c.model) for c in choices] == [(0, 1), (1, 0)]


def test_pinned_jobs_are_placed_first_whatever_their_priority() -> None:
    choices = _select([[9.0], [8.0], [0.0]], [1, 1, 2], [3], pinned=[(2, 0)])
    assert [(c.job, c.model) for c in choices] == [(2, 0), (0, 0)]
    assert all(c.runs for c in choices)


def test_pinned_job_keeps_its_model_even_if_another_is_free() -> None:
    choices = _select([[0.0, 9.0], [1.0, 1.0]], [1, 1], [1, 1], pinned=[(0, 0)])
    assert (0, 0) in [(c.job, c.model) for c in choices]
    assert [c.job for c in choices].count(0) == 1


def test_skip_zero_priority_leaves_gpus_idle() -> None:
    without = _select([[0.0], [1.0], [0.0]], [1, 1, 1], [3])
    assert [c.job for c in without] == [1, 0, 2]
    with_skip = _select([[0.0], [1.0], [0.0]], [1, 1, 1], [3], skip_zero_priority=True)
    assert [c.job for c in with_skip] == [1]


def test_not_runnable_jobs_are_never_chosen() -> None:
    runnable = np.array([[False, True], [True, True]])
    choices = _select([[9.0, 0.0], [1.0, 1.0]], [1, 1], [1, 1], runnable=runnable)
    assert [(c.job, c.model) for c in choices] == [(1, 0), (0, 1)]


def test_unallocated_jobs_take_gpus_but_do_not_run() -> None:
    unallocated = np.array([True, False, False])
    choices = _select([[0.0], [1.0], [0.5]], [2, 1, 1], [3], unallocated=unallocated)
    assert [(c.job, c.runs) for c in choices] == [(1, True), (2, True)]
    # With the unallocated job ahead in priority it holds its GPUs idle.
    choices = _select([[5.0], [1.0], [0.5]], [2, 1, 1], [3], unallocated=unallocated)
    assert [(c.job, c.runs) for c in choices] == [(0, False), (1, True)]
    held = Counter(c.model for c in choices if not c.runs)
    assert held == {0: 1}


def test_empty_round() -> None:
    assert _select(np.zeros((0, 2)), [], [4, 4]) == []
    assert _select([[1.0]], [1], [0]) == []
