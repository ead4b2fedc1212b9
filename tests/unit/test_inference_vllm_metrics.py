"""Arrivals from vLLM's Prometheus counters: parsing, resets, pods coming and going, slots."""

from __future__ import annotations

import pytest

from voltpack.model.errors import InvalidRequestError
from voltpack.model.resources.inferenceservice import MetricsEndpoint
from voltpack.operator.inference.vllm import (
    CounterSlots,
    Endpoint,
    PodSample,
    arrivals_between,
    endpoints_of,
    parse_vllm_metrics,
)

PAGE = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B"} 2.0
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 120.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 30.0
vllm:request_success_total{engine="0",finished_reason="abort",model_name="m"} 1.0
vllm:request_success_created{engine="0",finished_reason="stop",model_name="m"} 1.7e9
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 77000.0
"""


def test_a_vllm_page_gives_finished_running_and_waiting_summed_over_series() -> None:
    assert parse_vllm_metrics(PAGE) == PodSample(151.0, 3.0, 2.0)


def test_a_page_without_the_counter_or_not_prometheus_is_refused_saying_why() -> None:
    with pytest.raises(InvalidRequestError, match="vllm:request_success_total"):
        parse_vllm_metrics("# TYPE other counter\nother_total 3\n")
    with pytest.raises(InvalidRequestError, match="Prometheus"):
        parse_vllm_metrics("<html>not found</html>")


def test_arrivals_are_finished_plus_the_change_in_flight_and_a_reset_is_never_negative() -> None:
    before = PodSample(100.0, 4.0, 0.0)
    assert arrivals_between(before, PodSample(110.0, 4.0, 6.0)) == 16.0  # a queue building
    assert arrivals_between(before, PodSample(110.0, 1.0, 0.0)) == 7.0  # draining
    assert arrivals_between(before, PodSample(3.0, 1.0, 1.0)) == 5.0  # restarted: 3 + 2
    assert arrivals_between(before, PodSample(100.0, 0.0, 0.0)) == 0.0  # aborted, not < 0


def _endpoint(uid: str, started_s: float | None = 0.0) -> Endpoint:
    return Endpoint(uid, uid, f"http://{uid}/metrics", started_s)


def test_counts_are_spread_over_slots_and_only_whole_slots_are_complete() -> None:
    slots = CounterSlots(step_s=10.0, max_slots=100)
    a = _endpoint("a")
    slots.record(105.0, [a], {"a": PodSample(50.0, 0.0, 0.0)})  # baseline, mid slot 10
    assert slots.complete(105.0) == (11, [])
    slots.record(125.0, [a], {"a": PodSample(70.0, 0.0, 0.0)})  # 20 over 105..125
    assert slots.complete(125.0) == (11, [10.0])  # slot 11 whole; 12 is still running
    # pod b is new (started after the previous scrape): counted from zero; a restarted
    b = _endpoint("b", started_s=128.0)
    slots.record(138.0, [a, b], {"a": PodSample(4.0, 0.0, 0.0), "b": PodSample(5.0, 0.0, 0.0)})
    first, counts = slots.complete(138.0)
    assert first == 11 and counts == pytest.approx([10.0, 5.0 + 4.0 * 5 / 13 + 5.0 * 2 / 10])
    # b does not answer: its last sample stays, and its next answer covers the gap
    slots.record(142.0, [a, b], {"a": PodSample(4.0, 0.0, 0.0), "b": "pod b: refused"})
    assert slots.failures == ["pod b: refused"] and slots.waiting == 0.0
    slots.record(152.0, [a, b], {"a": PodSample(4.0, 0.0, 0.0), "b": PodSample(19.0, 0.0, 1.0)})
    assert slots.failures == [] and slots.waiting == 1.0
    first, counts = slots.complete(152.0)
    # slot 13: a restarted (8 of 13 s), b new (8 of 10 s), b after its gap (2 of 14 s)
    assert counts[2] == pytest.approx(4.0 * 8 / 13 + 5.0 * 8 / 10 + 15.0 * 2 / 14)
    assert counts[3] == pytest.approx(15.0 * 10 / 14)
    # a is gone: forgotten, no negative count when a pod of that uid shows up again
    slots.record(162.0, [b], {"b": PodSample(19.0, 0.0, 1.0)})
    assert set(slots.last) == {"b"}


def test_a_pod_seen_first_in_its_life_counts_from_that_scrape() -> None:
    slots = CounterSlots(step_s=10.0, max_slots=100)
    old = _endpoint("old", started_s=0.0)
    slots.record(100.0, [], {})
    slots.record(110.0, [old], {"old": PodSample(500.0, 0.0, 0.0)})  # started long ago
    slots.record(120.0, [old], {"old": PodSample(510.0, 0.0, 0.0)})
    # counting began at 110, when every replica (one) answered; old started before it
    assert slots.complete(120.0) == (11, [10.0])


def test_endpoints_are_running_pods_with_an_ip() -> None:
    def pod(name: str, phase: str, ip: str | None) -> dict[str, object]:
        status = {"phase": phase, "startTime": "2024-01-01T00:00:10Z"}
        if ip:
            status["podIP"] = ip
        return {"metadata": {"name": name, "uid": f"u-{name}"}, "status": status}

    pods = [pod("a", "Running", "10.0.0.5"), pod("b", "Pending", None), pod("c", "Running", None)]
    pods.append(pod("d", "Running", "fd00::7"))
    found = endpoints_of(pods, MetricsEndpoint(port=9000, path="/m"))
    assert [(e.pod, e.url) for e in found] == [
        ("a", "http://10.0.0.5:9000/m"),
        ("d", "http://[fd00::7]:9000/m"),
    ]
    assert found[0].started_s == 1704067210.0 and found[0].uid == "u-a"
