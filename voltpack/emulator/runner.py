"""Running the emulator: in a background thread (tests, `voltpack demo`) or in the foreground."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ipaddress
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from aiohttp import web

from voltpack.emulator.errors import EmulatorError
from voltpack.emulator.faults import Faults
from voltpack.emulator.http.server import create_app
from voltpack.emulator.state import EmulatorConfig, EmulatorState
from voltpack.model import Node

T = TypeVar("T")
log = logging.getLogger(__name__)
_SHUTDOWN_TIMEOUT_S = 2.0


async def _start_site(state: EmulatorState, host: str, port: int) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(
        create_app(state),
        handle_signals=False,
        access_log=None,
        shutdown_timeout=_SHUTDOWN_TIMEOUT_S,
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    bound = runner.addresses[0]
    return runner, int(bound[1])


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses (127.0.0.0/8, ::1); false for anything that
    other machines could reach, `0.0.0.0` and `::` included."""
    if host.strip().lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, insecure_bind: bool) -> None:
    """EmulatorError unless `host` is loopback or `insecure_bind` says it may be reachable:
    the emulator authenticates nothing and serves every request (Secrets, RBAC, bindings)."""
    if is_loopback(host) or insecure_bind:
        return
    raise EmulatorError(
        f"--host {host} would serve the emulator beyond this machine, and it answers every "
        "request without authentication (anyone reaching it can read Secrets and change RBAC); "
        "listen on 127.0.0.1 (the default), or pass --insecure-bind if this is what you want"
    )


def _url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


class RunningEmulator:
    """An emulator serving from a background thread; `url` is its base URL."""

    def __init__(self, state: EmulatorState, host: str, port: int) -> None:
        self.state = state
        self.host = host
        self._requested_port = port
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="voltpack-emulator", daemon=True)

    @property
    def url(self) -> str:
        return _url(self.host, self.port)

    @property
    def faults(self) -> Faults:
        """Rules that make matching requests fail or wait (thread-safe)."""
        return self.state.faults

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._runner, self.port = self._loop.run_until_complete(
                _start_site(self.state, self.host, self._requested_port)
            )
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            self._loop.close()
            return
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            if self._runner is not None:
                self._loop.run_until_complete(self._runner.cleanup())
            self._loop.close()

    def start(self) -> RunningEmulator:
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise EmulatorError(
                f"emulator could not listen on {self.host}:{self._requested_port}: {self._error}"
                " (pick another port, or 0 for any free one)"
            ) from self._error
        return self

    def call(self, function: Callable[[], T], timeout_s: float = 30.0) -> T:
        """Run `function` on the server's loop thread and return its result."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(function())
            except BaseException as exc:
                future.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return future.result(timeout=timeout_s)

    def drop_watches(self, resource: str | None = None, *, abort: bool = False) -> int:
        """End open watch streams now (see `EmulatorState.drop_watches`)."""
        return self.call(lambda: self.state.drop_watches(resource, abort=abort))

    def compact_history(self) -> int:
        """Forget the watch history, so watches from older resourceVersions get 410."""
        return self.call(self.state.compact_history)

    def add_node(self, node: Node) -> None:
        self.call(lambda: self.state.add_node(node))

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=_SHUTDOWN_TIMEOUT_S + 10)


def run(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    nodes: Iterable[Node] = (),
    config: EmulatorConfig | None = None,
    state: EmulatorState | None = None,
) -> RunningEmulator:
    """Start an emulator in a background thread; port 0 picks a free port. Call `stop()`."""
    if state is None:
        state = EmulatorState(config, nodes=nodes)
    elif nodes:
        for node in nodes:
            state.add_node(node)
    return RunningEmulator(state, host, port).start()


@contextlib.contextmanager
def running_emulator(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    nodes: Iterable[Node] = (),
    config: EmulatorConfig | None = None,
    state: EmulatorState | None = None,
) -> Iterator[RunningEmulator]:
    """`with running_emulator(nodes=...) as emu:` ... `emu.url` ... (stopped on exit)."""
    emulator = run(host, port, nodes=nodes, config=config, state=state)
    try:
        yield emulator
    finally:
        emulator.stop()


def serve(
    host: str = "127.0.0.1",
    port: int = 8080,
    *,
    nodes: Iterable[Node] = (),
    config: EmulatorConfig | None = None,
    on_ready: Callable[[str], None] | None = None,
    state: EmulatorState | None = None,
) -> None:
    """Serve in the foreground until interrupted (Ctrl-C); `on_ready(url)` once listening.

    Pass `state` to serve a state built beforehand (then `nodes` and `config` are unused).
    """
    if state is None:
        state = EmulatorState(config, nodes=nodes)

    async def main() -> None:
        runner, bound_port = await _start_site(state, host, port)
        if on_ready is not None:
            on_ready(_url(host, bound_port))
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
