"""Every API request the operator makes has a timeout: a silent server fails it, never hangs it."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from urllib3.exceptions import ReadTimeoutError

from voltpack.operator.kube.client import REQUEST_TIMEOUT_S, call_json


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A TCP server that accepts connections and never answers (a dead API server link)."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            held.append(connection)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    listener.close()


def test_a_request_without_a_timeout_gets_the_default() -> None:
    seen: dict[str, Any] = {}

    class Reply:
        data = b'{"kind": "NodeList"}'

    def list_node(**kwargs: Any) -> Reply:
        seen.update(kwargs)
        return Reply()

    assert call_json(list_node) == {"kind": "NodeList"}
    assert seen["_request_timeout"] == REQUEST_TIMEOUT_S and seen["_preload_content"] is False
    call_json(list_node, _request_timeout=(1.0, 2.0))
    assert seen["_request_timeout"] == (1.0, 2.0)


def test_a_server_that_never_answers_fails_the_call_within_its_timeout(silent_server: str) -> None:
    configuration = client.Configuration(host=silent_server)
    configuration.retries = False  # the timeout itself, not urllib3's retries of it
    api = client.ApiClient(configuration)
    core = client.CoreV1Api(api)
    started = time.monotonic()
    with pytest.raises(ReadTimeoutError):
        call_json(core.list_node, _request_timeout=(1.0, 0.5))
    assert time.monotonic() - started < 5.0
    api.close()  # type: ignore[no-untyped-call]
