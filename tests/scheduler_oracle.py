"""kube-scheduler's own Filter plugins as an oracle for the tests: is this binding one
kube-scheduler would allow?

`make oracle` builds `tools/scheduler-oracle` (a Go program linked against the pinned
k8s.io/kubernetes module's scheduler framework and plugins) into
`.tools/k8s/<version>/scheduler-oracle` (or the path in VOLTPACK_SCHEDULER_ORACLE).
`SchedulerOracle` starts it once and talks JSON lines to it:

    with SchedulerOracle() as oracle:
        answer = oracle.feasible(FilterCase(pod=pod, nodes=nodes, pods=bound_pods))
        answer.feasible   # the nodes every Filter plugin allows, sorted
        answer.reasons    # node -> the reasons its failing plugin gave
        answer.message    # FitError.Error() when no node is feasible (no preemption part)
        oracle.replay(nodes=nodes, bindings=pods_in_bind_order).violations

Objects are dicts as the Kubernetes API serialises them (camelCase), or `kubernetes.client`
models (serialised with the client's own `sanitize_for_serialization`). The oracle defaults
them as kube-apiserver would store them (requests from limits, allocatable from capacity, ...).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from kubernetes.client import ApiClient

REPO = Path(__file__).resolve().parents[1]
ORACLE_ENV = "VOLTPACK_SCHEDULER_ORACLE"
GO_MOD = REPO / "tools" / "scheduler-oracle" / "go.mod"
BUILD_HINT = "run `make oracle` (builds it from the Go module proxy, a few minutes)"
ANSWER_TIMEOUT_S = 300.0
"""A replay of 30,000 bindings on 5,000 nodes answers in seconds; this is only a hang guard."""


class OracleError(RuntimeError):
    """The oracle could not answer (not built, exited, refused the request)."""


class OracleMissingError(OracleError):
    """The binary is not built: the message says how to build it."""


def kubernetes_version() -> str:
    """The k8s.io/kubernetes version tools/scheduler-oracle/go.mod requires (e.g. v1.34.4)."""
    found = re.search(r"^\s*(?:require\s+)?k8s\.io/kubernetes\s+(v\S+)", GO_MOD.read_text(), re.M)
    if found is None:
        raise OracleError(f"{GO_MOD} does not require k8s.io/kubernetes")
    return found[1]


def oracle_path() -> Path:
    """Where the binary is: VOLTPACK_SCHEDULER_ORACLE, else where `make oracle` puts it."""
    configured = os.environ.get(ORACLE_ENV)
    if configured:
        return Path(configured)
    return REPO / ".tools" / "k8s" / kubernetes_version() / "scheduler-oracle"


def missing_oracle() -> list[str]:
    """What `SchedulerOracle` needs that is not built (empty when it is), like
    `tests.k8s_control_plane.missing_binaries`."""
    return [] if os.access(oracle_path(), os.X_OK) else ["scheduler-oracle"]


def to_json_object(obj: Any) -> Any:
    """A dict as the API serialises `obj` (a dict already, or a kubernetes.client model)."""
    if isinstance(obj, Mapping):
        return dict(obj)
    if hasattr(obj, "openapi_types"):
        return ApiClient().sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]
    raise TypeError(f"not a Kubernetes object: {type(obj).__name__}")


def _objects(items: Iterable[Any]) -> list[Any]:
    return [to_json_object(item) for item in items]


@dataclass
class FilterCase:
    """A "filter" request: may `pod` go on each of `nodes`, given the bound `pods`?"""

    pod: Any
    nodes: Sequence[Any]
    pods: Sequence[Any] = ()
    """Pods already bound (spec.nodeName set); the others are ignored, as the scheduler's
    cache ignores them, and so are Succeeded or Failed ones."""
    namespaces: Sequence[Any] = ()
    pvs: Sequence[Any] = ()
    pvcs: Sequence[Any] = ()
    storage_classes: Sequence[Any] = ()
    csi_nodes: Sequence[Any] = ()
    """storage.k8s.io/v1 CSINodes: the attach limits NodeVolumeLimits enforces."""
    id: Any = None

    def request(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "nodes": _objects(self.nodes),
            "pods": _objects(self.pods),
            "namespaces": _objects(self.namespaces),
            "pvs": _objects(self.pvs),
            "pvcs": _objects(self.pvcs),
            "storageClasses": _objects(self.storage_classes),
            "csiNodes": _objects(self.csi_nodes),
            "pod": to_json_object(self.pod),
        }


@dataclass(frozen=True)
class OracleAnswer:
    """What kube-scheduler's PreFilter and Filter plugins say about a pod on each node."""

    id: Any
    feasible: list[str]
    """The nodes every Filter plugin allows, sorted."""
    reasons: dict[str, list[str]]
    """For each infeasible node, the reasons its failing plugin gave (Status.Reasons())."""
    plugins: dict[str, str]
    """For each infeasible node, the plugin that rejected it (for a node a PreFilterResult
    left out, the PreFilter plugins that narrowed the nodes)."""
    message: str
    """kube-scheduler's FitError.Error() when no node is feasible, without the preemption
    part; "" when some node is."""
    gated: bool
    """The pod has scheduling gates: kube-scheduler would not try it at all."""
    gated_message: str = ""
    scheduling_error: str = ""
    """A plugin failed with an error (not a rejection): kube-scheduler would retry the pod."""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    def allows(self, node: str) -> bool:
        return node in self.feasible


@dataclass(frozen=True)
class Violation:
    """A binding kube-scheduler's filters would not have allowed."""

    index: int
    """Its position in the replay's bindings."""
    pod: str
    """namespace/name"""
    node: str
    plugin: str
    reasons: list[str]


@dataclass(frozen=True)
class ReplayAnswer:
    id: Any
    checked: int
    violations: list[Violation]
    seconds: float
    """The oracle's own time for the replay (building the snapshot included)."""


class SchedulerOracle:
    """The oracle binary as a long-lived subprocess: one JSON line in, one JSON line out."""

    def __init__(self, binary: Path | None = None, *, timeout_s: float = ANSWER_TIMEOUT_S) -> None:
        self.binary = binary or oracle_path()
        self.timeout_s = timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._files = contextlib.ExitStack()
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._next_id = 0
        self._lock = threading.Lock()

    def __enter__(self) -> SchedulerOracle:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def start(self) -> None:
        if not os.access(self.binary, os.X_OK):
            raise OracleMissingError(
                f"scheduler-oracle is not built at {self.binary}: {BUILD_HINT}"
            )
        stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close(), with the process
        self._stderr = self._files.enter_context(stderr)
        self._process = subprocess.Popen(
            [str(self.binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
        )
        stdout = self._process.stdout
        assert stdout is not None

        def read() -> None:
            for line in stdout:
                self._lines.put(line)
            self._lines.put(b"")  # end of output: the process exited

        threading.Thread(target=read, name="scheduler-oracle-stdout", daemon=True).start()

    def close(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
        self._files.close()
        self._stderr = None

    def stderr_tail(self, lines: int = 30) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        text = self._stderr.read().decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def send_line(self, line: str) -> dict[str, Any]:
        """Writes one raw line and returns the answer (for tests of the protocol itself)."""
        process = self._process
        if process is None or process.stdin is None:
            raise OracleError("the oracle is not running (use `with SchedulerOracle() as oracle`)")
        with self._lock:
            try:
                process.stdin.write(line.encode() + b"\n")
                process.stdin.flush()
            except OSError as error:
                raise OracleError(f"the oracle exited: {error}\n{self.stderr_tail()}") from error
            try:
                answer = self._lines.get(timeout=self.timeout_s)
            except queue.Empty:
                raise OracleError(f"no answer after {self.timeout_s:.0f} s") from None
        if not answer:
            raise OracleError(f"the oracle exited (status {process.poll()}):\n{self.stderr_tail()}")
        decoded: dict[str, Any] = json.loads(answer)
        return decoded

    def request(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Sends a request object (an "id" is added when it has none) and returns the answer
        object as decoded, "error" included."""
        body = dict(request)
        if body.get("id") is None:
            self._next_id += 1
            body["id"] = self._next_id
        answer = self.send_line(json.dumps(body, separators=(",", ":")))
        if answer.get("id") != body["id"]:
            raise OracleError(f"answer {answer.get('id')!r} to request {body['id']!r}: out of step")
        return answer

    def _checked(self, request: Mapping[str, Any]) -> dict[str, Any]:
        answer = self.request(request)
        if "error" in answer:
            raise OracleError(f"the oracle refused the request: {answer['error']}")
        return answer

    def feasible(self, case: FilterCase | Mapping[str, Any]) -> OracleAnswer:
        """Runs PreFilter and Filter for the case's pod over its nodes."""
        request = case.request() if isinstance(case, FilterCase) else case
        answer = self._checked(request)
        return OracleAnswer(
            id=answer["id"],
            feasible=answer["feasible"],
            reasons=answer["reasons"],
            plugins=answer["plugins"],
            message=answer["message"],
            gated=answer["gated"],
            gated_message=answer.get("gatedMessage", ""),
            scheduling_error=answer.get("schedulingError", ""),
            raw=answer,
        )

    def replay(
        self,
        *,
        nodes: Sequence[Any],
        bindings: Sequence[Any],
        pods: Sequence[Any] = (),
        namespaces: Sequence[Any] = (),
        pvs: Sequence[Any] = (),
        pvcs: Sequence[Any] = (),
        storage_classes: Sequence[Any] = (),
        csi_nodes: Sequence[Any] = (),
        id: Any = None,
    ) -> ReplayAnswer:
        """Checks each binding (a pod whose spec.nodeName is the node it was bound to), in
        order, against the nodes, `pods` (bound before) and the bindings before it."""
        answer = self._checked(
            {
                "id": id,
                "mode": "replay",
                "nodes": _objects(nodes),
                "pods": _objects(pods),
                "namespaces": _objects(namespaces),
                "pvs": _objects(pvs),
                "pvcs": _objects(pvcs),
                "storageClasses": _objects(storage_classes),
                "csiNodes": _objects(csi_nodes),
                "bindings": _objects(bindings),
            }
        )
        return ReplayAnswer(
            id=answer["id"],
            checked=answer["checked"],
            violations=[Violation(**v) for v in answer["violations"]],
            seconds=answer["seconds"],
        )
