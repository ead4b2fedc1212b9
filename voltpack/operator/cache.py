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
from collections.abc import Callable
from typing import Any

from kubernetes import watch
from urllib3.exceptions import ProtocolError

from voltpack.operator.kube import api_message, call_json, status_code
from voltpack.operator.setup_problems import SetupLog

log = logging.getLogger(__name__)

WATCH_TIMEOUT_S = 30
MAX_BACKOFF_S = 10.0


def object_key(obj: dict[str, Any]) -> str:
    """`namespace/name`, or `name` for cluster-scoped objects."""
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


class ResourceCache:
    """Objects of one kind by key; `changed` is set whenever something changes."""

    def __init__(
        self, name: str, list_function: Callable[..., Any], setup: SetupLog | None = None
    ) -> None:
        """`setup`: where predictable setup errors (no CRD, no permission, no API server) are
        said once; None: a log of this cache's own."""
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

    def items(self) -> list[dict[str, Any]]:
        """A copy of every cached object."""
        with self._lock:
            return [copy.deepcopy(obj) for obj in self._objects.values()]

    def get(self, key: str) -> dict[str, Any] | None:
        """A copy of one cached object."""
        with self._lock:
            found = self._objects.get(key)
            return copy.deepcopy(found) if found is not None else None

    def assume(self, obj: dict[str, Any]) -> None:
        """Record a change this process made before the watch reports it."""
        with self._lock:
            self._objects[object_key(obj)] = copy.deepcopy(obj)

    def forget(self, key: str) -> None:
        """Record a deletion this process made before the watch reports it."""
        with self._lock:
            self._objects.pop(key, None)

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
        self.relists += 1
        self._setup.works(self._site)
        self._synced.set()
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
        watcher = watch.Watch()
        for event in watcher.stream(
            self._list,
            resource_version=resource_version,
            timeout_seconds=WATCH_TIMEOUT_S,
            allow_watch_bookmarks=True,
        ):
            if stop.is_set():
                watcher.stop()
                break
            kind = event["type"]
            obj = event.get("raw_object") or {}
            if kind == "ERROR":
                code = obj.get("code")
                if code == 410:
                    return ""  # relist
                raise RuntimeError(f"watch error: {obj.get('message', obj)}")
            resource_version = obj.get("metadata", {}).get("resourceVersion", resource_version)
            if kind == "BOOKMARK":
                continue
            with self._lock:
                if kind == "DELETED":
                    self._objects.pop(object_key(obj), None)
                else:
                    self._objects[object_key(obj)] = obj
            self.changed.set()
        return resource_version
