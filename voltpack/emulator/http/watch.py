"""Watch streams: newline-delimited JSON events over a chunked HTTP response.

Semantics follow the API server: without a resourceVersion (or with "0") the stream starts
with a synthetic ADDED per existing object; with resourceVersion N it replays every change
after N from the history, or sends one ERROR event (a Status with code 410, reason Expired)
when N is older than the history. Label and field selectors apply to both the object before
and after a change, so an object that stops matching is reported as DELETED and one that
starts matching as ADDED. BOOKMARK events are sent every `bookmark_interval_s` when asked
for (`allowWatchBookmarks=true`), and after the initial events with `sendInitialEvents=true`.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from voltpack.emulator.errors import ApiError, bad_request
from voltpack.emulator.http.tables import table
from voltpack.emulator.objects import JsonObj
from voltpack.emulator.operations import Operations
from voltpack.emulator.resources import ResourceType
from voltpack.emulator.selectors import FieldSelector, LabelSelector
from voltpack.emulator.store import ADDED, DELETED, MODIFIED, Bookmark, Event, Watcher

if TYPE_CHECKING:
    from voltpack.emulator.state import EmulatorState

_CHECK_INTERVAL_S = 1.0
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass(frozen=True)
class WatchRequest:
    rtype: ResourceType
    namespace: str | None
    labels: LabelSelector
    fields: FieldSelector
    resource_version: str
    timeout_s: float
    bookmarks: bool
    send_initial_events: bool
    as_table: bool
    include_object: str


def _matches(request: WatchRequest, obj: JsonObj | None) -> bool:
    return (
        obj is not None
        and request.labels.matches(obj)
        and request.fields.matches(request.rtype, obj)
    )


def filter_event(request: WatchRequest, event: Event) -> tuple[str, JsonObj] | None:
    """The (type, object) a watcher with selectors sees for one change, or None."""
    now_matches = _matches(request, event.obj)
    if event.type == ADDED:
        return (ADDED, event.obj) if now_matches else None
    if event.type == DELETED:
        return (DELETED, event.obj) if _matches(request, event.prev) or now_matches else None
    before = _matches(request, event.prev)
    if before and now_matches:
        return (MODIFIED, event.obj)
    if now_matches:
        return (ADDED, event.obj)
    if before:
        gone = dict(event.obj)
        return (DELETED, gone)
    return None


class WatchStream:
    """Writes one watch's events to its HTTP response."""

    def __init__(self, state: EmulatorState, request: WatchRequest) -> None:
        self._state = state
        self._request = request
        self._ops: Operations = state.ops

    def _encode(self, event_type: str, obj: JsonObj) -> bytes:
        request = self._request
        if event_type in (ADDED, MODIFIED, DELETED):
            obj = self._ops.present(request.rtype, obj)
            if request.as_table:
                obj = table(
                    request.rtype,
                    [obj],
                    self._state.clock(),
                    {"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                    request.include_object,
                )
        return (
            json.dumps({"type": event_type, "object": obj}, separators=(",", ":")) + "\n"
        ).encode()

    def _bookmark(self, rv: int, initial_end: bool = False) -> bytes:
        metadata: JsonObj = {"resourceVersion": str(rv)}
        if initial_end:
            metadata["annotations"] = {INITIAL_EVENTS_END: "true"}
        obj = {
            "kind": self._request.rtype.kind,
            "apiVersion": self._request.rtype.api_version,
            "metadata": metadata,
        }
        return (
            json.dumps({"type": "BOOKMARK", "object": obj}, separators=(",", ":")) + "\n"
        ).encode()

    def _start(self) -> tuple[list[bytes], Watcher | None]:
        """Initial events and the registered watcher, computed atomically (no awaits)."""
        request = self._request
        store = self._state.store
        key = request.rtype.key
        scope = request.namespace if request.rtype.namespaced else None
        lines: list[bytes] = []
        rv_text = request.resource_version
        if request.send_initial_events or rv_text in ("", "0"):
            for obj in store.objects(key, scope):
                if _matches(request, obj):
                    lines.append(self._encode(ADDED, obj))
            if request.send_initial_events and request.bookmarks:
                lines.append(self._bookmark(store.resource_version, initial_end=True))
        else:
            try:
                since = int(rv_text)
            except ValueError:
                raise bad_request(f"invalid resource version: {rv_text!r}") from None
            try:
                events = store.events_since(key, since, scope)
            except ApiError as exc:
                error = json.dumps({"type": "ERROR", "object": exc.status()}) + "\n"
                return [error.encode()], None
            for event in events:
                seen = filter_event(request, event)
                if seen is not None:
                    lines.append(self._encode(*seen))
        watcher = Watcher(key, scope)
        store.add_watcher(watcher)
        return lines, watcher

    async def serve(self, http_request: web.Request) -> web.StreamResponse:
        lines, watcher = self._start()
        response = web.StreamResponse(
            status=200,
            headers={"Content-Type": "application/json", "Cache-Control": "no-cache, private"},
        )
        response.enable_chunked_encoding()
        try:
            await response.prepare(http_request)
            for line in lines:
                await response.write(line)
            if watcher is not None:
                await self._follow(http_request, response, watcher)
            if watcher is not None and watcher.abort:
                if http_request.transport is not None:
                    http_request.transport.abort()
                response.force_close()
                return response
            await response.write_eof()
        except ConnectionResetError:
            # the client went away (it stopped watching); nothing left to send
            response.force_close()
        finally:
            if watcher is not None:
                self._state.store.remove_watcher(watcher)
        return response

    async def _follow(
        self, http_request: web.Request, response: web.StreamResponse, watcher: Watcher
    ) -> None:
        loop = asyncio.get_running_loop()
        request = self._request
        deadline = loop.time() + request.timeout_s
        interval = self._state.config.bookmark_interval_s
        next_bookmark = loop.time() + interval
        store = self._state.store
        while True:
            now = loop.time()
            if now >= deadline:
                return
            if request.bookmarks and now >= next_bookmark:
                watcher.queue.put_nowait(Bookmark(store.resource_version))
                next_bookmark = now + interval
            wait = min(deadline - now, _CHECK_INTERVAL_S)
            if request.bookmarks:
                wait = min(wait, max(next_bookmark - now, 0.0))
            try:
                item = await asyncio.wait_for(watcher.queue.get(), timeout=wait)
            except TimeoutError:
                transport = http_request.transport
                if transport is None or transport.is_closing():
                    return
                continue
            if item is None:
                return
            if isinstance(item, Bookmark):
                await response.write(self._bookmark(item.rv, item.initial_events_end))
                continue
            seen = filter_event(request, item)
            if seen is not None:
                await response.write(self._encode(*seen))
