"""Several inference services sharing a row: server shares, assignment order, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voltpack.model import InvalidRequestError, TraceFormatError
from voltpack.sim.power_row import RowScenario, build_workload
from voltpack.sim.traces.azure_llm import (
    CODE_TRACE,
    CONVERSATION_TRACE,
    LlmRequests,
    azure_llm_dir,
    load_azure_llm_trace,
)
from voltpack.sim.traces.service_mix import ServiceMix, as_mix, load_service_mix

SCENARIO = RowScenario(servers=10, budget_servers=8, training_share=0.2, duration_s=900, seed=5)


def requests(count: int, span_s: float) -> LlmRequests:
    """`count` evenly spaced requests over `span_s` (each with the same sizes)."""
    arrival = np.linspace(0.0, span_s * (count - 1) / count, count)
    sizes = np.full(count, 100, dtype=np.int64)
    return LlmRequests(arrival, sizes, sizes.copy())


@pytest.fixture(scope="module")
def both() -> ServiceMix:
    folder = azure_llm_dir()
    return load_service_mix([folder / CONVERSATION_TRACE, folder / CODE_TRACE])


def test_shares_follow_each_trace_request_rate(both: ServiceMix) -> None:
    assert both.names == ("conv", "code")
    conv, code = both.shares
    # 19,366 and 8,819 requests over the same hour
    assert conv == pytest.approx(19_366 / (19_366 + 8_819), abs=0.005)
    assert conv + code == pytest.approx(1.0)
    assert both.label() == "conv 68% + code 32%"  # the spans differ slightly


@pytest.mark.parametrize("servers", [1, 3, 7, 10, 40, 53])
def test_every_first_n_servers_hold_the_services_in_proportion(servers: int) -> None:
    mix = ServiceMix(("a", "b", "c"), (requests(60, 60), requests(30, 60), requests(10, 60)))
    services = mix.services_of(servers)
    assert len(services) == servers
    for prefix in range(1, servers + 1):
        counts = np.bincount(services[:prefix], minlength=3)
        assert np.all(np.abs(counts - np.array(mix.shares) * prefix) < 1.0)


def test_two_services_get_their_rounded_share_at_every_prefix(both: ServiceMix) -> None:
    share = both.shares[0]
    services = both.services_of(120)
    for prefix in range(1, 121):
        assert abs(services[:prefix].count(0) - share * prefix) <= 0.5 + 1e-9


def test_a_service_with_a_rate_share_gets_servers_before_rarer_ones() -> None:
    mix = ServiceMix(("busy", "quiet"), (requests(90, 60), requests(10, 60)))
    assert mix.services_of(10).count(0) == 9


def test_a_bare_trace_is_a_mix_of_one_and_builds_the_same_row() -> None:
    trace = load_azure_llm_trace(azure_llm_dir() / CONVERSATION_TRACE)
    mix = as_mix(trace)
    assert mix.services_of(5) == [0] * 5
    assert as_mix(mix) is mix
    bare, mixed = build_workload(SCENARIO, trace), build_workload(SCENARIO, mix)
    for a, b in zip(bare.inference, mixed.inference, strict=True):
        assert np.array_equal(a.arrival_s, b.arrival_s)


def test_mixed_row_servers_replay_their_own_service(both: ServiceMix) -> None:
    workload = build_workload(SCENARIO, both)
    services = both.services_of(workload.n_inference)
    assert set(services) == {0, 1}
    code_sizes = set(both.traces[1].prompt_tokens.tolist())
    for service, stream in zip(services, workload.inference, strict=True):
        assert stream.arrival_s.size > 0
        from_code = set(stream.prompt_tokens.tolist()) <= code_sizes
        if service == 1:
            assert from_code
        else:
            assert not from_code  # conversation prompts are not all code prompt sizes


def test_bad_mixes_are_refused_with_the_reason(tmp_path: Path) -> None:
    good = requests(10, 60)
    empty = LlmRequests(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    with pytest.raises(InvalidRequestError, match="at least one trace"):
        ServiceMix((), ())
    with pytest.raises(InvalidRequestError, match="one name per trace"):
        ServiceMix(("a", "b"), (good,))
    with pytest.raises(InvalidRequestError, match="service 'quiet': its trace holds no requests"):
        ServiceMix(("busy", "quiet"), (good, empty))
    folder = azure_llm_dir()
    with pytest.raises(InvalidRequestError, match="same service name"):
        load_service_mix([folder / CODE_TRACE, folder / CODE_TRACE])
    bad = tmp_path / "AzureLLMInferenceTrace_bad.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,2\n", encoding="utf-8")
    with pytest.raises(TraceFormatError, match=f"{bad}:2: field TIMESTAMP"):
        load_service_mix([folder / CODE_TRACE, bad])
