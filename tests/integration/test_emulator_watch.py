"""Watch through `kubernetes.watch.Watch`: event order, selectors, 410 after compaction, drops."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.integration.conftest import TIME_FACTOR, pod_manifest, wait_for, watcher_count
from voltpack.emulator import EmulatorConfig, RunningEmulator, running_emulator


def events_of(stream: Any, count: int) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    for event in stream:
        obj = event["raw_object"]
        seen.append((event["type"], obj.get("metadata", {}).get("name", "")))
        if len(seen) == count:
            break
    return seen


def test_watch_replays_added_modified_deleted_in_order(core: client.CoreV1Api) -> None:
    start = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", {"metadata": {"name": "w"}, "data": {"a": "1"}})
    core.patch_namespaced_config_map("w", "default", {"data": {"a": "2"}})
    core.delete_namespaced_config_map("w", "default")
    stream = watch.Watch().stream(
        core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=5
    )
    assert events_of(stream, 3) == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]


def test_watch_streams_live_events(core: client.CoreV1Api, emulator: RunningEmulator) -> None:
    start = core.list_namespaced_pod("default").metadata.resource_version
    received: list[tuple[str, str, str]] = []
    watcher = watch.Watch()

    def consume() -> None:
        for event in watcher.stream(
            core.list_namespaced_pod, "default", resource_version=start, timeout_seconds=20
        ):
            pod = event["object"]
            received.append((event["type"], pod.metadata.name, pod.metadata.resource_version))
            if event["type"] == "DELETED":
                watcher.stop()

    thread = threading.Thread(target=consume)
    thread.start()
    wait_for(lambda: watcher_count(emulator) == 1, what="the watch to open")
    core.create_namespaced_pod("default", pod_manifest("live"))
    core.patch_namespaced_pod("live", "default", {"metadata": {"labels": {"x": "y"}}})
    core.delete_namespaced_pod("live", "default")
    thread.join(timeout=20)
    assert not thread.is_alive()
    assert [(t, n) for t, n, _ in received] == [
        ("ADDED", "live"),
        ("MODIFIED", "live"),
        ("DELETED", "live"),
    ]
    versions = [int(rv) for _, _, rv in received]
    assert versions == sorted(versions) and int(start) < versions[0]


def test_watch_without_resource_version_starts_with_current_objects(
    core: client.CoreV1Api,
) -> None:
    stream = watch.Watch().stream(core.list_node, timeout_seconds=1)
    first = events_of(stream, 4)
    assert {t for t, _ in first} == {"ADDED"}
    assert sorted(n for _, n in first) == ["cpu-0", "gpu-a100-0", "gpu-a100-1", "gpu-v100-0"]


def test_watch_with_selectors(core: client.CoreV1Api) -> None:
    start = core.list_namespaced_pod("default").metadata.resource_version
    core.create_namespaced_pod("default", pod_manifest("sel-a", labels={"team": "a"}))
    core.create_namespaced_pod("default", pod_manifest("sel-b", labels={"team": "b"}))
    core.patch_namespaced_pod("sel-a", "default", {"metadata": {"labels": {"team": "c"}}})
    core.patch_namespaced_pod("sel-b", "default", {"metadata": {"labels": {"team": "a"}}})
    by_label = watch.Watch().stream(
        core.list_namespaced_pod,
        "default",
        resource_version=start,
        label_selector="team=a",
        timeout_seconds=1,
    )
    # an object that leaves the selector is DELETED for this watch; one that enters is ADDED
    assert events_of(by_label, 3) == [
        ("ADDED", "sel-a"),
        ("DELETED", "sel-a"),
        ("ADDED", "sel-b"),
    ]
    by_field = watch.Watch().stream(
        core.list_namespaced_pod,
        "default",
        resource_version=start,
        field_selector="metadata.name=sel-b",
        timeout_seconds=1,
    )
    assert [t for t, _ in events_of(by_field, 2)] == ["ADDED", "MODIFIED"]


def test_watch_from_compacted_resource_version_raises_410(
    core: client.CoreV1Api, emulator: RunningEmulator
) -> None:
    old = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", {"metadata": {"name": "after"}})
    emulator.compact_history()
    with pytest.raises(ApiException) as expired:
        for _ in watch.Watch().stream(
            core.list_namespaced_config_map, "default", resource_version=old, timeout_seconds=5
        ):
            raise AssertionError("a compacted watch delivered an event")
    assert expired.value.status == 410
    assert "too old resource version" in str(expired.value.reason)
    # a fresh list gives a resourceVersion that can be watched again
    fresh = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", {"metadata": {"name": "later"}})
    stream = watch.Watch().stream(
        core.list_namespaced_config_map, "default", resource_version=fresh, timeout_seconds=5
    )
    assert events_of(stream, 1) == [("ADDED", "later")]


def test_bounded_history_expires_old_resource_versions() -> None:
    config = EmulatorConfig(history_size=3, time_factor=TIME_FACTOR)
    with (
        running_emulator(config=config) as small,
        client.ApiClient(client.Configuration(host=small.url)) as api,
    ):
        core = client.CoreV1Api(api)
        old = core.list_namespaced_config_map("default").metadata.resource_version
        for index in range(5):
            core.create_namespaced_config_map("default", {"metadata": {"name": f"h{index}"}})
        with pytest.raises(ApiException) as expired:
            list(
                watch.Watch().stream(
                    core.list_namespaced_config_map,
                    "default",
                    resource_version=old,
                    timeout_seconds=5,
                )
            )
        assert expired.value.status == 410
        latest = core.list_namespaced_config_map("default").metadata.resource_version
        stream = watch.Watch().stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=str(int(latest) - 1),
            timeout_seconds=5,
        )
        assert events_of(stream, 1) == [("ADDED", "h4")]


def test_bookmarks_carry_the_current_resource_version(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "bm"}})
    current = core.list_namespaced_config_map("default").metadata.resource_version
    for event in watch.Watch().stream(
        core.list_namespaced_config_map,
        "default",
        resource_version=current,
        allow_watch_bookmarks=True,
        timeout_seconds=10,
    ):
        assert event["type"] == "BOOKMARK"
        assert event["raw_object"]["kind"] == "ConfigMap"
        assert event["raw_object"]["metadata"]["resourceVersion"] == current
        break


def test_dropped_watch_ends_the_stream_and_resuming_loses_nothing(
    core: client.CoreV1Api, emulator: RunningEmulator
) -> None:
    start = core.list_namespaced_config_map("default").metadata.resource_version
    seen: list[tuple[str, str]] = []
    last_rv: list[str] = []
    watcher = watch.Watch()

    def consume() -> None:
        for event in watcher.stream(
            core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=30
        ):
            seen.append((event["type"], event["object"].metadata.name))
            last_rv.append(event["object"].metadata.resource_version)

    thread = threading.Thread(target=consume)
    thread.start()
    wait_for(lambda: watcher_count(emulator) == 1, what="the watch to open")
    core.create_namespaced_config_map("default", {"metadata": {"name": "before-drop"}})
    wait_for(lambda: seen, what="the first event")
    assert emulator.drop_watches() == 1
    thread.join(timeout=20)
    assert not thread.is_alive(), "the dropped stream did not end"
    core.create_namespaced_config_map("default", {"metadata": {"name": "after-drop"}})
    assert seen == [("ADDED", "before-drop")]
    resumed = watch.Watch().stream(
        core.list_namespaced_config_map,
        "default",
        resource_version=last_rv[-1],
        timeout_seconds=5,
    )
    assert events_of(resumed, 1) == [("ADDED", "after-drop")]


def test_client_reconnects_after_a_dropped_watch(
    core: client.CoreV1Api, emulator: RunningEmulator
) -> None:
    """Without timeout_seconds, Watch.stream resumes from the last resourceVersion it saw."""
    start = core.list_namespaced_config_map("default").metadata.resource_version
    seen: list[str] = []
    watcher = watch.Watch()

    def consume() -> None:
        for event in watcher.stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=start,
            _request_timeout=30,
        ):
            seen.append(event["object"].metadata.name)
            if len(seen) == 2:
                watcher.stop()

    thread = threading.Thread(target=consume)
    thread.start()
    wait_for(lambda: watcher_count(emulator) == 1, what="the watch to open")
    core.create_namespaced_config_map("default", {"metadata": {"name": "one"}})
    wait_for(lambda: seen == ["one"], what="the first event")
    emulator.drop_watches()
    core.create_namespaced_config_map("default", {"metadata": {"name": "two"}})
    thread.join(timeout=20)
    assert not thread.is_alive()
    assert seen == ["one", "two"]


def test_aborted_watch_breaks_the_connection(
    core: client.CoreV1Api, emulator: RunningEmulator
) -> None:
    errors: list[BaseException] = []

    def consume() -> None:
        try:
            for _ in watch.Watch().stream(core.list_node, timeout_seconds=30):
                pass
        except Exception as exc:
            errors.append(exc)

    thread = threading.Thread(target=consume)
    thread.start()
    wait_for(lambda: watcher_count(emulator) == 1, what="the watch to open")
    assert emulator.drop_watches(abort=True) == 1
    thread.join(timeout=20)
    assert not thread.is_alive()
    assert errors, "an aborted connection should surface as an error in the client"
