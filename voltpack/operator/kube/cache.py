"""A cache of one kind of Kubernetes object, kept current by list + watch.

Level-triggered: it starts from a full list, follows the watch from the list's
resourceVersion, and lists again whenever the watch ends with `410 Gone` (the server no longer
has the history) or any other error (after a backoff). Nothing is kept that the cluster does
not hold.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import ProtocolError

from voltpack.operator.kube.client import REQUEST_TIMEOUT_S, api_message, call_json, status_code
from voltpack.operator.kube.setup_problems import SetupLog
from voltpack.operator.kube.watch_stream import watch_events

log = logging.getLogger(__name__)

WATCH_TIMEOUT_S = 30
MAX_BACKOFF_S = 10.0


class CacheListener(Protocol):
    """Told of every change a cache takes in, from the cache's watch thread."""

    def reset(self, objects: Iterable[dict[str, Any]]) -> None:
        """The cache now holds exactly `objects` (after a list)."""
        ...

    def changed(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """One object was added (old None), replaced, or deleted (new None)."""
        ...


def older_pod(cached: dict[str, Any], event: dict[str, Any]) -> bool:
    """True when a watch event's pod is older than the cached one: the cache holds it bound
    (e.g. assumed right after its binding) and the event does not, for the same pod. A pod's
    `spec.nodeName` is never unset, so such an event (say, the rank-label patch the binder
    made just before the binding) predates the binding and would show a bound pod pending."""
    return (
        bool((cached.get("spec") or {}).get("nodeName"))
        and not (event.get("spec") or {}).get("nodeName")
        and cached.get("metadata", {}).get("uid") == event.get("metadata", {}).get("uid")
    )


def object_key(obj: dict[str, Any]) -> str:
    """`namespace/name`, or `name` for cluster-scoped objects."""
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def _uid(obj: Mapping[str, Any]) -> str | None:
    return (obj.get("metadata") or {}).get("uid")


def _never_listed(**_: Any) -> Any:
    raise RuntimeError("this cache holds a copy of objects; it does not list")


class ResourceCache:
    """Objects of one kind by key; `changed` is set whenever something changes."""

    def __init__(
        self,
        name: str,
        list_function: Callable[..., Any],
        setup: SetupLog | None = None,
        older: Callable[[dict[str, Any], dict[str, Any]], bool] | None = None,
    ) -> None:
        """`setup`: where predictable setup errors (no CRD, no permission, no API server) are
        said once; None: a log of this cache's own. `older(cached, event)`: True when a
        MODIFIED event is older than what the cache holds (an object assumed by this
        process), which the cache then keeps."""
        self._older = older
        self.name = name
        self._setup = setup or SetupLog()
        self._site = f"cache {name}"
        self._list = list_function
        self._objects: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._synced = threading.Event()
        self.changed = threading.Event()
        self.relists = 0
        self._missing_reported = False
        self._thread: threading.Thread | None = None
        self._listeners: list[CacheListener] = []
        self.generation = 0
        """Bumped on every change: a reader's memo of derived views is current while equal."""
        self.settled = threading.Event()
        """Set once the first list answered: synced, or the kind is not served (404)."""
        self.last_error: BaseException | None = None
        self.failing_since: float | None = None
        """`time.monotonic()` of the first failure since the last successful list or event."""

    @classmethod
    def holding(cls, name: str, objects: list[dict[str, Any]]) -> ResourceCache:
        """A synced cache of `objects` that never lists or watches (a copy of the cluster, e.g.
        in a dry run's process)."""
        cache = cls(name, _never_listed)
        cache._objects = {object_key(obj): obj for obj in objects}
        cache.generation = 1
        cache._synced.set()
        cache.settled.set()
        return cache

    def add_listener(self, listener: CacheListener) -> None:
        """`listener` hears every change from now on (call before `start`)."""
        self._listeners.append(listener)

    def values(self) -> list[dict[str, Any]]:
        """The cached objects themselves, not copies: read them, never change them (the watch
        replaces an object, it never edits one, so a reader's list stays consistent)."""
        with self._lock:
            return list(self._objects.values())

    def items(self) -> list[dict[str, Any]]:
        """A copy of every cached object."""
        with self._lock:
            return [copy.deepcopy(obj) for obj in self._objects.values()]

    def peek(self, key: str) -> dict[str, Any] | None:
        """One cached object itself, not a copy (as `values`): read it, never change it."""
        with self._lock:
            return self._objects.get(key)

    def get(self, key: str) -> dict[str, Any] | None:
        """A copy of one cached object."""
        with self._lock:
            found = self._objects.get(key)
            return copy.deepcopy(found) if found is not None else None

    def assume(self, obj: dict[str, Any]) -> bool:
        """Record a change this process made to a cached object before the watch reports it;
        False (nothing changed) when the cache no longer holds that object (the same uid): the
        watch has reported it deleted since it was read, and bringing it back would keep a
        pod that is gone, whose GPUs no later event would free."""
        new = copy.deepcopy(obj)
        key = object_key(obj)
        with self._lock:
            old = self._objects.get(key)
            if old is None or _uid(old) != _uid(new):
                return False
            self._objects[key] = new
            self.generation += 1
            self._tell(old, new)
            return True

    def forget(self, key: str) -> None:
        """Record a deletion this process made before the watch reports it."""
        with self._lock:
            old = self._objects.pop(key, None)
            self.generation += 1
            if old is not None:
                self._tell(old, None)

    def _tell(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """Every listener hears one change (lock held: in order with the cache)."""
        for listener in self._listeners:
            listener.changed(old, new)

    def wait_synced(self, timeout_s: float) -> bool:
        """Wait until the first list has completed."""
        return self._synced.wait(timeout_s)

    def start(self, stop: threading.Event) -> None:
        """Run list + watch in a daemon thread until `stop` is set."""
        self._thread = threading.Thread(
            target=self._run, args=(stop,), name=f"cache-{self.name}", daemon=True
        )
        self._thread.start()

    def load_once(self) -> None:
        """List once, without watching (a one-off read, e.g. a dry run)."""
        self._relist()

    def _relist(self) -> str:
        reply = call_json(self._list)
        objects = {object_key(obj): obj for obj in reply.get("items") or []}
        with self._lock:
            self._objects = objects
            self.generation += 1
            for listener in self._listeners:
                listener.reset(objects.values())
        self.relists += 1
        self._setup.works(self._site)
        self.failing_since = None
        self._synced.set()
        self.settled.set()
        self.changed.set()
        return str(reply.get("metadata", {}).get("resourceVersion", ""))

    def _run(self, stop: threading.Event) -> None:
        backoff_s = 0.2
        resource_version = ""
        while not stop.is_set():
            try:
                if not resource_version:
                    resource_version = self._relist()
                    backoff_s = 0.2
                resource_version = self._follow(resource_version, stop)
                backoff_s = 0.2
            except Exception as error:
                code = status_code(error)
                self.last_error = error
                if code == 404:
                    self.settled.set()  # not served: nothing of this kind, for now
                elif self.failing_since is None:
                    self.failing_since = time.monotonic()
                if isinstance(error, ProtocolError):  # the stream broke: the list says why
                    log.debug("cache %s: watch ended (%s), listing again", self.name, error)
                elif code == 410:
                    log.info("cache %s: watch expired (410), listing again", self.name)
                else:
                    if self._setup.handle(self._site, error, resource=self.name):
                        pass  # said once, with its fix; retried quietly
                    elif code == 404:
                        if not self._missing_reported:
                            log.info("cache %s: not served; retrying", self.name)
                            self._missing_reported = True
                    else:
                        log.warning(
                            "cache %s: %s; listing again in %.1fs",
                            self.name,
                            api_message(error),
                            backoff_s,
                        )
                    stop.wait(backoff_s)
                    backoff_s = min(backoff_s * 2, MAX_BACKOFF_S)
                resource_version = ""

    def _follow(self, resource_version: str, stop: threading.Event) -> str:
        """Apply watch events until the stream ends; return the last resourceVersion."""
        for event in watch_events(
            self._list,
            resource_version,
            WATCH_TIMEOUT_S,
            # the server ends the watch after WATCH_TIMEOUT_S: a longer silence is a dead link
            (REQUEST_TIMEOUT_S[0], WATCH_TIMEOUT_S * 2),
        ):
            if stop.is_set():
                break
            kind = event["type"]
            obj = event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:  # the version is history (etcd compacted it): relist
                    raise ApiException(status=410, reason=str(obj.get("message", "Expired")))
                raise RuntimeError(f"watch error: {obj.get('message', obj)}")
            resource_version = obj.get("metadata", {}).get("resourceVersion", resource_version)
            if kind == "BOOKMARK":
                continue
            key = object_key(obj)
            with self._lock:
                old = self._objects.pop(key, None) if kind == "DELETED" else self._objects.get(key)
                if kind == "MODIFIED" and old is not None and self._older and self._older(old, obj):
                    continue  # the assumed object is newer: the event after it will carry it
                if kind != "DELETED":
                    self._objects[key] = obj
                self.generation += 1
                self._tell(old, None if kind == "DELETED" else obj)
            self.failing_since = None
            self.changed.set()
        return resource_version
