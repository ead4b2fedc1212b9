"""Running the API's ASGI app with uvicorn in a background thread (tests, benchmarks, demos)."""

from __future__ import annotations

import gc
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


def freeze_heap() -> None:
    """Put every object alive now out of the cyclic collector's reach (`gc.freeze`).

    Called once the caches hold their first lists: at 5,000 nodes and 50,000 pods that is
    millions of objects, and each full collection walked them all, pausing every request for
    up to a second (benchmarks/api_latency.py counts the pauses). Frozen objects are still freed
    when their last reference goes; only reference cycles among them are never collected.
    """
    gc.collect()
    gc.freeze()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(
    app: Any, host: str = "127.0.0.1", port: int = 0, timeout_s: float = 30.0
) -> Iterator[str]:
    """Serve `app` until the block ends; yields its base URL (`port` 0: a free one)."""
    config = uvicorn.Config(app, host=host, port=port or free_port(host), log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="voltpack-api", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the API did not start on {host}:{config.port}")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
