"""The operator's hot POSTs (each pod's Binding and `Scheduled` Event) over aiohttp.

Through the official client (urllib3, `http.client`'s header parsing, the client's request
plumbing) one POST cost this process 0.52 CPU ms on a real kube-apiserver; through this
module's one aiohttp session (its C HTTP parser) on an asyncio loop of its own, 0.305 ms, both
from 16 threads (`benchmarks/kube_request_path.py`, `benchmarks/results/kube_request_path.md`).
Each pod voltpack binds costs two POSTs (its Binding and its Event), and they were most of its
CPU per pod on kube-scheduler's cheap scheduler_perf shapes.

`AsyncPoster` is made from the client's own `Configuration` (host, TLS files, SNI, the
credentials its auth settings produce, refreshed every `HEADER_REFRESH_S` and at once after a
401), so it talks to the same API server as the same user. A set-up it cannot reproduce (a
proxy, `assert_hostname`) gets no poster, and `post_json` keeps the client's path. Callers see
the client's errors: `ApiException` for a non-2xx answer, `ConnectionError` for a refused
connection, `TimeoutError` for no answer in time.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
import time
from concurrent.futures import Future
from typing import Any

import aiohttp
import orjson
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)

HEADER_REFRESH_S = 30.0
"""Credentials are read again from the client this often (a projected ServiceAccount token is
rotated on disk; the client's refresh hook reads it), and at once after a 401."""
MAX_IN_FLIGHT = 64
"""Requests on the wire at once (connections to the API server at most)."""

_ATTRIBUTE = "voltpack_async_poster"


class AsyncPoster:
    """POSTs JSON bodies from one asyncio loop in a daemon thread of its own, started on the
    first request; `close` stops it."""

    def __init__(self, api: ApiClient, max_in_flight: int = MAX_IN_FLIGHT) -> None:
        configuration: Configuration = api.configuration
        self.api = api
        self.host = str(configuration.host).rstrip("/")
        self.max_in_flight = max_in_flight
        self._ssl = _ssl_context(configuration) if self.host.startswith("https") else None
        self._server_hostname = configuration.tls_server_name or None
        self._headers: dict[str, str] = {}
        self._headers_due = 0.0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: aiohttp.ClientSession | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._failure: Exception | None = None

    @classmethod
    def for_client(cls, api: ApiClient) -> AsyncPoster | None:
        """A poster for `api`'s API server, or None where this module cannot talk to it as the
        client does (a proxy, `assert_hostname`)."""
        configuration = api.configuration
        if configuration.proxy or configuration.assert_hostname is not None:
            return None
        return cls(api)

    def post(
        self, resource_path: str, body: dict[str, Any], timeout_s: tuple[float, float]
    ) -> dict[str, Any]:
        """POST `body` (JSON) to `resource_path`; the reply's JSON object."""
        future = self.submit(resource_path, body, timeout_s)
        return future.result(timeout=sum(timeout_s) + 5.0)

    def submit(
        self, resource_path: str, body: dict[str, Any], timeout_s: tuple[float, float]
    ) -> Future[dict[str, Any]]:
        """The same, answered in a `Future`."""
        loop = self._started()
        return asyncio.run_coroutine_threadsafe(
            self._post(resource_path, orjson.dumps(body), timeout_s), loop
        )

    def close(self) -> None:
        """Stop the loop and close its connections (requests in flight fail)."""
        with self._lock:
            self._closed = True
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._close_session(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._closed:
                raise RuntimeError("poster closed")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(
                    target=self._run, args=(loop, ready), name="api-posts", daemon=True
                )
                thread.start()
                ready.wait()
                if self._failure is not None:
                    raise RuntimeError(f"API poster not started: {self._failure}")
                self._loop, self._thread = loop, thread
            return self._loop

    def _run(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._open())
        except Exception as error:  # said by `_started`, in the caller's thread
            self._failure = error
            ready.set()
            loop.close()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _open(self) -> None:
        """The session, opened on the loop (aiohttp needs it running)."""
        connector = aiohttp.TCPConnector(limit=self.max_in_flight, ssl=self._ssl or False)
        self._session = aiohttp.ClientSession(connector=connector)

    async def _close_session(self) -> None:
        if self._session is not None:
            await self._session.close()

    def _current_headers(self, path: str) -> dict[str, str]:
        """The client's headers and credentials, read again every `HEADER_REFRESH_S`."""
        now = time.monotonic()
        if now >= self._headers_due:
            headers = {
                **self.api.default_headers,
                "Content-Type": "application/json",
                "Accept": "application/json",
            }
            if self.api.cookie:
                headers["Cookie"] = self.api.cookie
            self.api.update_params_for_auth(headers, [], ["BearerToken"], path, "POST", None)
            self._headers, self._headers_due = headers, now + HEADER_REFRESH_S
        return self._headers

    async def _post(self, path: str, data: bytes, timeout_s: tuple[float, float]) -> dict[str, Any]:
        assert self._session is not None
        timeout = aiohttp.ClientTimeout(sock_connect=timeout_s[0], sock_read=timeout_s[1])
        try:
            async with self._session.post(
                self.host + path,
                data=data,
                headers=self._current_headers(path),
                timeout=timeout,
                server_hostname=self._server_hostname,
            ) as reply:
                raw = await reply.read()
                status, reason = reply.status, reply.reason
        except aiohttp.ClientConnectorError as error:
            raise ConnectionError(f"API server {self.host} unreachable: {error}") from error
        except TimeoutError as error:
            raise TimeoutError(f"no answer from {self.host} within {timeout_s} s") from error
        if status == 401:
            self._headers_due = 0.0  # credentials rotated: read them again
        if not 200 <= status <= 299:
            raise ApiException(status=status, reason=reason, body=raw.decode(errors="replace"))
        parsed = orjson.loads(raw) if raw else {}
        return parsed if isinstance(parsed, dict) else {}


def _ssl_context(configuration: Configuration) -> ssl.SSLContext:
    """TLS as the client's urllib3 pool verifies it: its CA (file or data), or none when
    `verify_ssl` is off; its client certificate."""
    context = ssl.create_default_context(
        cafile=configuration.ssl_ca_cert or None, cadata=configuration.ca_cert_data or None
    )
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    return context


def attach(api: ApiClient, poster: AsyncPoster | None) -> None:
    """`post_json` on `api` goes through `poster` from now on (None: the client's own path)."""
    setattr(api, _ATTRIBUTE, poster)


def attached(api: ApiClient) -> AsyncPoster | None:
    """The poster `post_json` uses for `api`, if any."""
    poster = getattr(api, _ATTRIBUTE, None)
    return poster if isinstance(poster, AsyncPoster) else None
