"""Runs a policy dry run in a child process, over a copy of the admin API's caches.

A dry run plans a whole scheduling cycle (seconds at thousands of nodes). Run in a thread of
the API process it would hold the interpreter lock for all that time and every request would
wait its turn (measured: the summary's p99 went from 7 to 98 ms at 200 nodes while a dry run
ran). So the API starts `python -m voltpack.operator.admin.dry_run_process`, streams it the policy
and the cached objects (pickled in chunks, so that requests run between two chunks), and reads
back the result; the child plans with `plan_dry_run` and exits. After the first dry run the
next child is started ahead, so a dry run does not wait for its imports. The channel is the two
processes' own pipes, never a file or a socket.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from kubernetes.client import ApiClient, CoreV1Api, CustomObjectsApi

from voltpack.api.pipes import receive, send
from voltpack.model.admin import DryRunResult
from voltpack.model.errors import VoltpackError
from voltpack.operator.admin.dry_run import DRY_RUN_KINDS, plan_dry_run
from voltpack.operator.kube.cache import ResourceCache
from voltpack.operator.kube.conventions import SERVED_SCHEDULERS
from voltpack.policies.schema import PolicyFile

CHUNK_OBJECTS = 500
"""Objects pickled at once: a few milliseconds of the API's interpreter per chunk."""
TIMEOUT_S = 600.0
"""A child that has not answered by then is killed and the dry run fails."""


class DryRunProcessError(VoltpackError):
    """The dry run's process failed or did not answer; the message says how."""


def run_in_child(
    objects: Mapping[str, list[dict[str, Any]]],
    policy: PolicyFile,
    now_s: float,
    timeout_s: float = TIMEOUT_S,
    scheduler_names: frozenset[str] = SERVED_SCHEDULERS,
) -> DryRunResult:
    """Plan `policy` over `objects` (per kind of `DRY_RUN_KINDS`) at `now_s` in a child
    process, for the pods of `scheduler_names`; DryRunProcessError when it fails or does not
    answer within `timeout_s`."""
    child = _CHILDREN.take()
    assert child.stdin is not None
    try:
        send(
            child.stdin,
            {"policy": policy, "now_s": now_s, "scheduler_names": sorted(scheduler_names)},
        )
        for kind in DRY_RUN_KINDS:
            items = objects.get(kind, [])
            send(child.stdin, {"kind": kind, "count": len(items)})
            for start in range(0, len(items), CHUNK_OBJECTS):
                send(child.stdin, items[start : start + CHUNK_OBJECTS])
                time.sleep(0)  # let a waiting request have the interpreter
    except BrokenPipeError:
        pass  # the child died: its exit status and stderr say why
    finally:
        with contextlib.suppress(BrokenPipeError):
            child.stdin.close()
        child.stdin = None  # sent; `communicate` only reads
    try:
        output, errors = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        raise DryRunProcessError(f"the dry run did not finish within {timeout_s:g} s") from None
    if child.returncode != 0:
        last = errors.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        raise DryRunProcessError(f"the dry run's process failed ({child.returncode}): {last[0]}")
    return DryRunResult.model_validate_json(output)


def _spawn() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "voltpack.operator.admin.dry_run_process"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


class _Children:
    """Dry-run processes: once one has been asked for, the next is started ahead and waits
    with its modules loaded (about 3 s of imports), so that a dry run does not wait for them.
    The waiting child exits when this process does (its stdin closes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: subprocess.Popen[bytes] | None = None

    def take(self) -> subprocess.Popen[bytes]:
        """A child for one dry run: the one started ahead if it is still alive."""
        with self._lock:
            child, self._ready = self._ready, None
        if child is None or child.poll() is not None:
            child = _spawn()
        with self._lock:
            if self._ready is None:
                self._ready = _spawn()
        return child


_CHILDREN = _Children()


def main() -> None:
    """The child: read the policy and the objects from stdin, write the result to stdout."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    try:
        header = receive(stdin)
    except EOFError:  # started ahead and never used: the API exited
        return
    caches: dict[str, ResourceCache] = {}
    for _ in DRY_RUN_KINDS:
        kind = receive(stdin)
        items: list[dict[str, Any]] = []
        while len(items) < kind["count"]:
            items += receive(stdin)
        caches[kind["kind"]] = ResourceCache.holding(kind["kind"], items)
    policy: PolicyFile = header["policy"]
    unused = ApiClient()  # a dry run reads the caches only; nothing is ever sent through it
    result = plan_dry_run(
        caches,
        policy,
        lambda: float(header["now_s"]),
        CoreV1Api(unused),
        CustomObjectsApi(unused),
        frozenset(header["scheduler_names"]),
    )
    stdout.write(result.model_dump_json().encode())
    stdout.flush()


if __name__ == "__main__":
    main()
