"""In-memory object store: one global resourceVersion counter and a bounded event history.

Like etcd behind the real API server, every write of any object takes the next revision of
one cluster-wide counter; a list answers with the current revision; a watch can resume from
any revision still in the history and is told `410 Expired` for older ones. The store holds
plain JSON objects and never mutates one it has handed out: writers pass a new object.
All methods are called from the server's single event-loop thread.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from voltpack.emulator.errors import expired
from voltpack.emulator.objects import JsonObj, meta, name_of, namespace_of

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


@dataclass(frozen=True)
class Event:
    """One change of one object; `prev` is the object before it (None for ADDED)."""

    type: str
    key: str
    rv: int
    obj: JsonObj
    prev: JsonObj | None


@dataclass
class Bookmark:
    """Queued to a watcher to ask for a BOOKMARK at `rv` (all earlier events are queued)."""

    rv: int
    initial_events_end: bool = False


WatchItem = Event | Bookmark | None
"""What a watcher's queue carries; None ends the watch (drop or shutdown)."""


@dataclass(eq=False)
class Watcher:
    """An open watch: the events of one storage key (and namespace, if set) go to its queue."""

    key: str
    namespace: str | None
    queue: asyncio.Queue[WatchItem] = field(default_factory=asyncio.Queue)
    abort: bool = False
    """Set when the watch is dropped by closing the connection instead of ending the stream."""


Listener = Callable[[Event], None]


class Store:
    """Objects by storage key, namespace and name, with revisions and history."""

    def __init__(self, history_size: int = 10_000) -> None:
        if history_size < 1:
            raise ValueError("history_size must be at least 1")
        self._rv = 0
        self._objects: dict[str, dict[tuple[str, str], JsonObj]] = {}
        self._history: deque[Event] = deque(maxlen=history_size)
        self._compacted_rv = 0
        self._watchers: set[Watcher] = set()
        self._listeners: list[Listener] = []
        self._uids: dict[str, tuple[str, str, str]] = {}
        self._dependents: dict[str, set[tuple[str, str, str]]] = {}
        self._owned_by: dict[tuple[str, str, str], set[str]] = {}

    # --- reads -----------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """The current (latest) revision."""
        return self._rv

    @property
    def compacted_rv(self) -> int:
        """Watches must start at this revision or later; older ones get 410 Expired."""
        return self._compacted_rv

    def get(self, key: str, namespace: str, name: str) -> JsonObj | None:
        return self._objects.get(key, {}).get((namespace, name))

    def objects(self, key: str, namespace: str | None = None) -> list[JsonObj]:
        """Objects of a key (in one namespace if given), sorted by namespace and name."""
        bucket = self._objects.get(key, {})
        items = [
            (ref, obj) for ref, obj in bucket.items() if namespace is None or ref[0] == namespace
        ]
        items.sort(key=lambda item: item[0])
        return [obj for _, obj in items]

    def count(self, key: str, namespace: str | None = None) -> int:
        bucket = self._objects.get(key, {})
        if namespace is None:
            return len(bucket)
        return sum(1 for ns, _ in bucket if ns == namespace)

    def keys_in_use(self) -> list[str]:
        return [key for key, bucket in self._objects.items() if bucket]

    def find_uid(self, uid: str) -> tuple[str, str, str] | None:
        """(key, namespace, name) of the object with this UID, if it exists."""
        return self._uids.get(uid)

    # --- writes ----------------------------------------------------------------------------

    def create(self, key: str, obj: JsonObj) -> JsonObj:
        """Store a new object (the caller checked it does not exist); returns it with its RV."""
        self._rv += 1
        meta(obj)["resourceVersion"] = str(self._rv)
        ref = (namespace_of(obj), name_of(obj))
        self._objects.setdefault(key, {})[ref] = obj
        self._index_uid(key, obj)
        self._record(Event(ADDED, key, self._rv, obj, None))
        return obj

    def update(self, key: str, obj: JsonObj) -> JsonObj:
        """Replace an existing object; returns it with its new RV."""
        ref = (namespace_of(obj), name_of(obj))
        prev = self._objects.get(key, {}).get(ref)
        self._rv += 1
        meta(obj)["resourceVersion"] = str(self._rv)
        self._objects.setdefault(key, {})[ref] = obj
        self._index_uid(key, obj)
        self._record(Event(MODIFIED, key, self._rv, obj, prev))
        return obj

    def delete(
        self, key: str, namespace: str, name: str, final: JsonObj | None = None
    ) -> JsonObj | None:
        """Remove an object; returns its last state (`final` if given) with the deletion's RV."""
        bucket = self._objects.get(key, {})
        prev = bucket.pop((namespace, name), None)
        if prev is None:
            return None
        self._rv += 1
        source = final if final is not None else prev
        gone = dict(source)
        gone["metadata"] = dict(source.get("metadata", {}))
        gone["metadata"]["resourceVersion"] = str(self._rv)
        uid = gone["metadata"].get("uid")
        if isinstance(uid, str):
            self._uids.pop(uid, None)
        self._index_owners((key, namespace, name), None)
        self._record(Event(DELETED, key, self._rv, gone, prev))
        return gone

    def _index_uid(self, key: str, obj: JsonObj) -> None:
        uid = meta(obj).get("uid")
        ref = (key, namespace_of(obj), name_of(obj))
        if isinstance(uid, str):
            self._uids[uid] = ref
        self._index_owners(ref, obj)

    def _index_owners(self, ref: tuple[str, str, str], obj: JsonObj | None) -> None:
        for uid in self._owned_by.pop(ref, set()):
            dependents = self._dependents.get(uid)
            if dependents is not None:
                dependents.discard(ref)
                if not dependents:
                    del self._dependents[uid]
        if obj is None:
            return
        owners = meta(obj).get("ownerReferences")
        if not isinstance(owners, list):
            return
        uids = {o["uid"] for o in owners if isinstance(o, dict) and isinstance(o.get("uid"), str)}
        if uids:
            self._owned_by[ref] = uids
            for uid in uids:
                self._dependents.setdefault(uid, set()).add(ref)

    def dependents(self, owner_uid: str) -> list[tuple[str, str, str]]:
        """(key, namespace, name) of the objects listing `owner_uid` in their ownerReferences."""
        return sorted(self._dependents.get(owner_uid, set()))

    def _record(self, event: Event) -> None:
        if self._history.maxlen is not None and len(self._history) == self._history.maxlen:
            self._compacted_rv = self._history[0].rv
        self._history.append(event)
        for watcher in list(self._watchers):
            if watcher.key == event.key and (
                watcher.namespace is None or watcher.namespace == namespace_of(event.obj)
            ):
                watcher.queue.put_nowait(event)
        for listener in list(self._listeners):
            listener(event)

    # --- history and watch -----------------------------------------------------------------

    def compact(self) -> int:
        """Forget the whole history: every revision issued so far becomes too old to watch from.

        The counter moves one past the compaction point, so a list made afterwards returns a
        revision that can be watched (etcd compaction creates no revision; the step is
        invisible to clients, which must treat resourceVersions as opaque).
        """
        self._history.clear()
        self._rv += 1
        self._compacted_rv = self._rv
        return self._rv

    def events_since(self, key: str, rv: int, namespace: str | None = None) -> list[Event]:
        """Events of a key after revision `rv`; raises 410 Expired when `rv` is compacted."""
        if rv < self._compacted_rv:
            raise expired(f"too old resource version: {rv} ({self._compacted_rv})")
        return [
            event
            for event in self._history
            if event.rv > rv
            and event.key == key
            and (namespace is None or namespace == namespace_of(event.obj))
        ]

    def add_watcher(self, watcher: Watcher) -> None:
        self._watchers.add(watcher)

    def remove_watcher(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)

    def watchers(self) -> list[Watcher]:
        return list(self._watchers)

    def subscribe(self, listener: Listener) -> None:
        """Call `listener` synchronously after every change (used by the lifecycle simulator)."""
        self._listeners.append(listener)
