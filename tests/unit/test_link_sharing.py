"""Max-min fair link sharing: textbook examples and the allocation's defining properties."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voltpack.model.errors import InvalidRequestError
from voltpack.perf.link_sharing import max_min_fair_rates_gbit_s

TOL = 1e-6


def test_linear_network_long_flow_gets_half() -> None:
    # Bertsekas & Gallager sec. 6.5.2: one flow over three unit links, one short flow per link.
    rates = max_min_fair_rates_gbit_s([1.0, 1.0, 1.0], [[0, 1, 2], [0], [1], [2]])
    np.testing.assert_allclose(rates, [0.5, 0.5, 0.5, 0.5])


def test_a_flow_bottlenecked_elsewhere_leaves_the_rest_to_others() -> None:
    # link 0: 10, link 1: 4. b crosses both; c only link 1; a only link 0.
    rates = max_min_fair_rates_gbit_s([10.0, 4.0], [[0], [0, 1], [1]])
    np.testing.assert_allclose(rates, [8.0, 2.0, 2.0])


def test_parking_lot() -> None:
    # Two links of 1 and 2; the long flow is held to 1/3 by link 0, shared three ways.
    rates = max_min_fair_rates_gbit_s([1.0, 2.0], [[0, 1], [0], [0], [1]])
    np.testing.assert_allclose(rates, [1 / 3, 1 / 3, 1 / 3, 5 / 3])


def test_demands_cap_flows_and_free_the_rest() -> None:
    rates = max_min_fair_rates_gbit_s([10.0], [[0], [0], [0]], [2.0, math.inf, 5.0])
    np.testing.assert_allclose(rates, [2.0, 4.0, 4.0])
    rates = max_min_fair_rates_gbit_s([10.0], [[0], [0]], [1.0, 3.0])
    np.testing.assert_allclose(rates, [1.0, 3.0])


def test_zero_capacity_link_and_flows_crossing_no_link() -> None:
    rates = max_min_fair_rates_gbit_s([0.0, 5.0], [[0, 1], [1], [], []], [math.inf] * 3 + [7.0])
    np.testing.assert_allclose(rates, [0.0, 5.0, math.inf, 7.0])


def test_a_link_listed_twice_counts_once() -> None:
    np.testing.assert_allclose(max_min_fair_rates_gbit_s([4.0], [[0, 0], [0]]), [2.0, 2.0])


def test_no_flows() -> None:
    assert max_min_fair_rates_gbit_s([1.0], []).shape == (0,)


def test_bad_input_is_refused_naming_it() -> None:
    with pytest.raises(InvalidRequestError, match="flow 1 crosses link 3, but the links are"):
        max_min_fair_rates_gbit_s([1.0, 1.0], [[0], [1, 3]])
    with pytest.raises(InvalidRequestError, match="capacity_gbit_s must be finite and >= 0"):
        max_min_fair_rates_gbit_s([-1.0], [[0]])
    with pytest.raises(InvalidRequestError, match="2 values for 1 flows"):
        max_min_fair_rates_gbit_s([1.0], [[0]], [1.0, 2.0])
    with pytest.raises(InvalidRequestError, match="demand_gbit_s must be >= 0"):
        max_min_fair_rates_gbit_s([1.0], [[0]], [-1.0])


def test_thousands_of_flows_on_hundreds_of_links() -> None:
    rng = np.random.default_rng(0)
    capacity = rng.uniform(50, 400, size=300)
    flows = [rng.choice(300, size=rng.integers(1, 6), replace=False) for _ in range(5000)]
    rates = max_min_fair_rates_gbit_s(capacity, [list(f) for f in flows])
    _check_feasible_and_bottlenecked(capacity, [list(f) for f in flows], None, rates)


@st.composite
def networks(draw: st.DrawFn) -> tuple[list[float], list[list[int]], list[float] | None]:
    link_count = draw(st.integers(1, 6))
    capacity = draw(
        st.lists(
            st.one_of(st.just(0.0), st.floats(0.5, 400.0)), min_size=link_count, max_size=link_count
        )
    )
    flows = draw(
        st.lists(
            st.lists(st.integers(0, link_count - 1), min_size=1, max_size=link_count, unique=True),
            min_size=1,
            max_size=12,
        )
    )
    demand = draw(
        st.one_of(
            st.none(),
            st.lists(
                st.one_of(st.just(math.inf), st.floats(0.0, 300.0)),
                min_size=len(flows),
                max_size=len(flows),
            ),
        )
    )
    return capacity, flows, demand


def _check_feasible_and_bottlenecked(
    capacity: object, flows: list[list[int]], demand: list[float] | None, rates: np.ndarray
) -> None:
    caps = np.asarray(capacity, dtype=np.float64)
    load = np.zeros(caps.size)
    for flow, links in enumerate(flows):
        load[links] += rates[flow]
    assert np.all(load <= caps * (1 + 1e-7) + TOL), "a link is over capacity"
    wants = np.full(len(flows), math.inf) if demand is None else np.asarray(demand)
    assert np.all(rates <= wants + TOL), "a flow gets more than its demand"
    for flow, links in enumerate(flows):
        if rates[flow] >= wants[flow] - TOL:
            continue
        bottlenecks = [
            link
            for link in links
            if load[link] >= caps[link] - TOL * max(1.0, caps[link])
            and all(rates[other] <= rates[flow] + TOL for other, o in enumerate(flows) if link in o)
        ]
        assert bottlenecks, f"flow {flow} is not bottlenecked"


@settings(max_examples=300, deadline=None)
@given(networks())
def test_allocation_is_feasible_and_every_flow_bottlenecked(
    network: tuple[list[float], list[list[int]], list[float] | None],
) -> None:
    capacity, flows, demand = network
    rates = max_min_fair_rates_gbit_s(capacity, flows, demand)
    _check_feasible_and_bottlenecked(capacity, flows, demand, rates)


@settings(max_examples=200, deadline=None)
@given(networks(), st.randoms(use_true_random=False))
def test_allocation_does_not_depend_on_flow_order(
    network: tuple[list[float], list[list[int]], list[float] | None], shuffle: random.Random
) -> None:
    capacity, flows, demand = network
    order = list(range(len(flows)))
    shuffle.shuffle(order)
    rates = max_min_fair_rates_gbit_s(capacity, flows, demand)
    permuted = max_min_fair_rates_gbit_s(
        capacity,
        [list(reversed(flows[i])) for i in order],
        None if demand is None else [demand[i] for i in order],
    )
    np.testing.assert_allclose(permuted, rates[order], rtol=1e-9, atol=1e-9)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0.0, 400.0), min_size=1, max_size=8),
    st.one_of(st.just(math.inf), st.floats(0.0, 500.0)),
    st.data(),
)
def test_a_single_flow_gets_its_narrowest_link_or_its_demand(
    capacity: list[float], demand: float, data: st.DataObject
) -> None:
    path = data.draw(
        st.lists(st.integers(0, len(capacity) - 1), min_size=1, max_size=len(capacity), unique=True)
    )
    rates = max_min_fair_rates_gbit_s(capacity, [path], [demand])
    expected = min(*(capacity[link] for link in path), demand)
    assert rates[0] == pytest.approx(expected, rel=1e-9, abs=1e-9)
