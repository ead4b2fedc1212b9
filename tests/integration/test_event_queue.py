"""Events queued off the binding threads reach the API server in order; beyond the queue's
capacity they are dropped and counted, and a closed queue takes none."""

from __future__ import annotations

from kubernetes import client

from tests.integration.conftest import pod_manifest
from voltpack.operator.kube.async_post import AsyncPoster, attach
from voltpack.operator.kube.event_queue import EventQueue


def scheduled_events(core: client.CoreV1Api) -> list[client.CoreV1Event]:
    return [e for e in core.list_namespaced_event("default").items if e.reason == "Scheduled"]


def test_queued_events_are_written_and_an_overflow_is_dropped_and_counted(
    core: client.CoreV1Api,
) -> None:
    pod = core.create_namespaced_pod("default", pod_manifest("p0")).to_dict()
    involved = {"kind": "Pod", "apiVersion": "v1", "metadata": pod["metadata"]}
    events = EventQueue(core)
    assert all(events.record(involved, "Scheduled", f"message {i}") for i in range(5))
    assert events.wait_idle(30)
    assert (events.written, events.dropped) == (5, 0)
    written = scheduled_events(core)
    assert sorted(e.message for e in written) == [f"message {i}" for i in range(5)]
    uid = pod["metadata"]["uid"]
    assert {(e.type, e.involved_object.uid) for e in written} == {("Normal", uid)}
    events.close()
    assert events.record(involved, "Scheduled", "after close") is False

    full = EventQueue(core, capacity=0)
    assert full.record(involved, "Scheduled", "no room") is False
    assert full.dropped == 1
    full.close()
    assert len(scheduled_events(core)) == 5


def test_events_through_the_operators_poster_are_written_and_counted(
    api_client: client.ApiClient, core: client.CoreV1Api
) -> None:
    pod = core.create_namespaced_pod("default", pod_manifest("p0")).to_dict()
    involved = {"kind": "Pod", "apiVersion": "v1", "metadata": pod["metadata"]}
    poster = AsyncPoster(api_client)
    attach(api_client, poster)
    try:
        events = EventQueue(core)
        assert all(events.record(involved, "Scheduled", f"message {i}") for i in range(20))
        # one the API server refuses (no such namespace): counted as not written, said once
        elsewhere = {"kind": "Pod", "metadata": {"name": "x", "namespace": "no-such-namespace"}}
        assert events.record(elsewhere, "Scheduled", "refused")
        assert events.wait_idle(30)
        assert (events.written, events.dropped) == (20, 0)
        messages = sorted(e.message for e in scheduled_events(core))
        assert messages == sorted(f"message {i}" for i in range(20))
        events.close()
    finally:
        poster.close()
        attach(api_client, None)
