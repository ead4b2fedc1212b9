"""Time windows of a request trace: the out-of-sample split (plan on the first part, replay
the rest) and a trace's first requests."""

from __future__ import annotations

import numpy as np
import pytest

from voltpack.model import InvalidRequestError
from voltpack.sim.traces.azure_llm import LlmRequests
from voltpack.sim.traces.trace_windows import first_requests, split_by_time


def trace(arrival_s: list[float]) -> LlmRequests:
    count = len(arrival_s)
    return LlmRequests(
        np.asarray(arrival_s, dtype=np.float64),
        np.arange(1, count + 1, dtype=np.int64) * 10,
        np.arange(1, count + 1, dtype=np.int64),
    )


def test_split_cuts_at_the_share_of_the_time_span_not_of_the_requests() -> None:
    # a burst of five requests early, then three spread out: the cut at half the span (50 s
    # after the first arrival at 10 s) puts the burst and one more before it
    requests = trace([10.0, 10.1, 10.2, 10.3, 10.4, 40.0, 70.0, 110.0])
    split = split_by_time(requests, 0.5)
    assert split.split_s == pytest.approx(50.0)
    assert split.planning.prompt_tokens.tolist() == [10, 20, 30, 40, 50, 60]
    assert split.holdout.prompt_tokens.tolist() == [70, 80]
    assert split.holdout.output_tokens.tolist() == [7, 8]
    # each window's clock starts at its own start
    np.testing.assert_allclose(split.planning.arrival_s, [0.0, 0.1, 0.2, 0.3, 0.4, 30.0])
    np.testing.assert_allclose(split.holdout.arrival_s, [10.0, 50.0])


def test_split_keeps_every_request_exactly_once() -> None:
    rng = np.random.default_rng(3)
    requests = trace(sorted(rng.uniform(0, 1000, 500).tolist()))
    split = split_by_time(requests, 0.3)
    assert split.planning.arrival_s.size + split.holdout.arrival_s.size == 500
    joined = np.concatenate([split.planning.prompt_tokens, split.holdout.prompt_tokens])
    assert joined.tolist() == requests.prompt_tokens.tolist()
    assert split.planning.arrival_s.max() < split.split_s


@pytest.mark.parametrize("share", [0.0, 1.0, -0.5, 1.5])
def test_split_rejects_a_share_outside_the_open_interval(share: float) -> None:
    with pytest.raises(InvalidRequestError, match="planning_share"):
        split_by_time(trace([0.0, 1.0, 2.0]), share)


def test_split_rejects_unsorted_or_too_short_traces() -> None:
    with pytest.raises(InvalidRequestError, match="sorted"):
        split_by_time(trace([0.0, 5.0, 1.0]))
    with pytest.raises(InvalidRequestError, match="at least two"):
        split_by_time(trace([0.0]))
    with pytest.raises(InvalidRequestError, match="without requests"):
        split_by_time(trace([3.0, 3.0, 3.0]))


def test_first_requests_is_a_contiguous_prefix() -> None:
    requests = trace([0.0, 1.0, 2.0, 3.0])
    head = first_requests(requests, 2)
    assert head.arrival_s.tolist() == [0.0, 1.0]
    assert head.prompt_tokens.tolist() == [10, 20]
    assert first_requests(requests, 10).arrival_s.size == 4
    with pytest.raises(InvalidRequestError, match="count"):
        first_requests(requests, 0)
