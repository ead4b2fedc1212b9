"""A fault-injecting HTTP proxy in front of kube-apiserver (aiohttp, in its own thread).

Clients (the operator) speak plain HTTP to 127.0.0.1:PORT; the proxy forwards every request to
the apiserver over TLS (verified with its CA) and copies the answer back, watch streams
included (forwarded line by line, so an event can be injected between two). On command it:

- answers a share of `POST .../pods/<name>/binding` with 500, either without forwarding
  (`share_before`: the binding never happened) or after forwarding (`share_after`: the pod IS
  bound but the client is told it failed, as when a response is lost);
- closes every open watch (`drop_watches`), or sends each one an `ERROR` event with a 410
  `Expired` Status and then closes it (`expire_watches`), as the apiserver does when a watch's
  resourceVersion is compacted away.

While the apiserver is down the proxy answers 503 (a load balancer with no backend).
Counts of what it did are in `stats`; `bindings_ok` maps a pod (uid, else namespace/name) to
the number of bindings the apiserver accepted for it (more than one is a double binding).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import ssl
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from aiohttp import web

BINDING_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding/?$")
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
     "transfer-encoding", "upgrade", "host", "content-length", "content-encoding"}
)  # fmt: skip
EXPIRED_EVENT = {
    "type": "ERROR",
    "object": {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "too old resource version: injected by the soak proxy",
        "reason": "Expired",
        "code": 410,
    },
}


def _status(code: int, message: str, reason: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}  # fmt: skip
    return web.json_response(body, status=code)


@dataclass
class ProxyStats:
    """What the proxy has done so far (read under `FaultProxy.lock`)."""

    requests: int = 0
    bindings: int = 0
    bindings_failed_before: int = 0
    bindings_failed_after: int = 0
    bindings_ok: Counter[str] = field(default_factory=Counter)
    watches_opened: int = 0
    watches_dropped: int = 0
    watches_expired: int = 0
    upstream_errors: int = 0


class FaultProxy:
    """The proxy; `start()` serves on a free loopback port, `stop()` ends it."""

    def __init__(self, upstream_url: str, ca_file: Path, *, seed: int = 0) -> None:
        self.upstream_url = upstream_url.rstrip("/")
        self.ca_file = ca_file
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.stats = ProxyStats()
        self.share_before = 0.0
        self.share_after = 0.0
        self.skip_first = 0
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._watches: dict[asyncio.Task[object], web.StreamResponse] = {}
        self._expire: set[asyncio.Task[object]] = set()
        self._ready = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- commands (any thread) ------------------------------------------------------------

    def fail_bindings(
        self, share_before: float, share_after: float = 0.0, *, skip_first: int = 0
    ) -> None:
        """From now on (after `skip_first` more bindings), answer these shares of binding POSTs
        with 500 (0, 0: none)."""
        with self.lock:
            self.share_before, self.share_after = share_before, share_after
            self.skip_first = skip_first

    def drop_watches(self) -> int:
        """Close every open watch stream; how many were open."""
        return self._call(self._drop_all, expire=False)

    def expire_watches(self) -> int:
        """Send every open watch a 410 Expired ERROR event, then close it; how many."""
        return self._call(self._drop_all, expire=True)

    def open_watches(self) -> int:
        return self._call(lambda: len(self._watches))

    def _call(self, function: object, **kwargs: object) -> int:
        assert self._loop is not None and callable(function)
        future = asyncio.run_coroutine_threadsafe(self._run(function, kwargs), self._loop)
        return int(future.result(timeout=10))

    @staticmethod
    async def _run(function: object, kwargs: dict[str, object]) -> int:
        assert callable(function)
        return int(function(**kwargs))

    def _drop_all(self, *, expire: bool) -> int:
        tasks = list(self._watches)
        for task in tasks:
            if expire:
                self._expire.add(task)
            task.cancel()
        with self.lock:
            if expire:
                self.stats.watches_expired += len(tasks)
            else:
                self.stats.watches_dropped += len(tasks)
        return len(tasks)

    # -- life cycle ---------------------------------------------------------------------

    def start(self) -> FaultProxy:
        self._thread = threading.Thread(target=self._serve, name="soak-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the soak proxy did not start within 30 s")
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=15)

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        loop.run_until_complete(self._setup())
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            for task in list(self._watches):
                task.cancel()
            assert self._runner is not None and self._session is not None
            loop.run_until_complete(self._runner.cleanup())
            loop.run_until_complete(self._session.close())
            loop.close()

    async def _setup(self) -> None:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        connector = aiohttp.TCPConnector(ssl=context, limit=256)
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
            auto_decompress=False,
        )  # fmt: skip
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = int(server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    # -- forwarding ---------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        with self.lock:
            self.stats.requests += 1
        body = await request.read()
        binding = request.method == "POST" and BINDING_PATH.match(request.path)
        fail_after = False
        if binding:
            with self.lock:
                self.stats.bindings += 1
                draw = self.random.random()
                if self.skip_first > 0:
                    self.skip_first -= 1
                    draw = 1.0  # passes
                if draw < self.share_before:
                    self.stats.bindings_failed_before += 1
                    return _status(
                        500, "injected by the soak proxy (not forwarded)", "InternalError"
                    )
                fail_after = draw < self.share_before + self.share_after
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        watch = request.query.get("watch") in ("true", "1")
        assert self._session is not None
        try:
            upstream = await self._session.request(
                request.method, self.upstream_url + request.path_qs, headers=headers,
                data=body or None, allow_redirects=False,
                # as sent: aiohttp would add `application/octet-stream`, which the apiserver
                # refuses (the kubernetes client sends JSON bodies without a Content-Type)
                skip_auto_headers=("Content-Type",),
            )  # fmt: skip
        except (aiohttp.ClientError, OSError) as error:
            with self.lock:
                self.stats.upstream_errors += 1
            return _status(503, f"soak proxy: apiserver unreachable: {error}", "ServiceUnavailable")
        async with upstream:
            out_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP}
            if watch and upstream.status == 200:
                return await self._stream(request, upstream, out_headers)
            try:
                payload = await upstream.read()
            except (aiohttp.ClientError, OSError) as error:
                with self.lock:
                    self.stats.upstream_errors += 1
                return _status(
                    503, f"soak proxy: apiserver went away: {error}", "ServiceUnavailable"
                )
        if binding and 200 <= upstream.status < 300:
            with self.lock:
                self.stats.bindings_ok[_pod_key(binding, body)] += 1
                if fail_after:
                    self.stats.bindings_failed_after += 1
            if fail_after:
                return _status(500, "injected by the soak proxy (after binding)", "InternalError")
        return web.Response(status=upstream.status, body=payload, headers=out_headers)

    async def _stream(
        self, request: web.Request, upstream: aiohttp.ClientResponse, headers: dict[str, str]
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream.status, headers=headers)
        await response.prepare(request)
        task = asyncio.current_task()
        assert task is not None
        self._watches[task] = response
        with self.lock:
            self.stats.watches_opened += 1
        pending = b""
        try:
            async for chunk in upstream.content.iter_any():
                pending += chunk
                cut = pending.rfind(b"\n")
                if cut >= 0:
                    await response.write(pending[: cut + 1])
                    pending = pending[cut + 1 :]
        except asyncio.CancelledError:
            if task in self._expire:
                with contextlib.suppress(Exception):
                    await asyncio.shield(response.write(json.dumps(EXPIRED_EVENT).encode() + b"\n"))
            else:
                transport = request.transport
                if transport is not None:
                    transport.close()  # dropped: the connection ends mid-stream
            self._expire.discard(task)
            if task.cancelling():
                task.uncancel()
            return response
        except (aiohttp.ClientError, OSError, ConnectionResetError):
            return response  # the apiserver or the client went away: the stream ends
        finally:
            self._watches.pop(task, None)
        with contextlib.suppress(Exception):
            await response.write_eof()
        return response


def _pod_key(match: re.Match[str], body: bytes) -> str:
    try:
        uid = (json.loads(body).get("metadata") or {}).get("uid")
    except (ValueError, AttributeError):
        uid = None
    return str(uid) if uid else f"{match.group(1)}/{match.group(2)}"


@contextlib.contextmanager
def running_proxy(upstream_url: str, ca_file: Path, *, seed: int = 0) -> Iterator[FaultProxy]:
    proxy = FaultProxy(upstream_url, ca_file, seed=seed).start()
    try:
        yield proxy
    finally:
        proxy.stop()
