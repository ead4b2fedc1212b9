"""Replaying the conformance corpus against one backend, normalising answers, comparing two.

A backend is a base URL with (optionally) a bearer token and a CA file. `replay` sends each
`Step` of the corpus in order, filling `{step:dotted.path}` placeholders from earlier answers,
and returns one `Answer` per step. `normalise` turns an answer into a flat `{path: value}` view
in which what legitimately differs between two API servers (uids, resourceVersion values,
timestamps, generated names, managedFields, continue tokens, discovery hashes) is replaced by a
marker; `compare` lists the paths whose normalised values differ.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import urllib3

from tests.conformance.corpus import Known, Step

MISSING = "<absent>"
"""The value of a path that one side's answer does not have."""

_PLACEHOLDER = re.compile(r"\{([a-z0-9-]+):([A-Za-z0-9_.\[\]-]+)\}")
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
_AGE = re.compile(r"^(\d+[smhd])+$")
_HASH = re.compile(r"hash=[0-9A-Fa-f]+")
_VOLATILE_KEYS = {
    "uid": "<uid>",
    "resourceVersion": "<rv>",
    "continue": "<continue>",
}
_DROPPED_KEYS = frozenset({"managedFields"})
_ITEM_KEYS = (
    "metadata.name", "name", "resource", "subresource", "version", "type", "groupVersion"
)  # fmt: skip


@dataclass(frozen=True)
class Backend:
    """Where to send the corpus: `url` (http or https), bearer `token`, `ca_file` for https."""

    name: str
    url: str
    token: str = ""
    ca_file: str | None = None


@dataclass
class Answer:
    """What a backend answered one step: status code, parsed body (or watch events)."""

    step: str
    code: int
    body: Any
    events: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Difference:
    """One normalised path whose value differs: `real` and `emulator` (or `MISSING`)."""

    step: str
    path: str
    real: Any
    emulator: Any

    def __str__(self) -> str:
        return f"{self.step}: {self.path}: real={self.real!r} emulator={self.emulator!r}"


def matches(path: str, pattern: str) -> bool:
    """Whether a normalised path matches a pattern in which only `*` is a wildcard."""
    regex = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(regex, path) is not None


def documented(difference: Difference, step: Step) -> Known | None:
    """The note of `step` that documents this difference, if any."""
    return next((k for k in step.known if matches(difference.path, k.pattern)), None)


class ReplayError(RuntimeError):
    """A step could not be sent (a placeholder names an answer that lacks the value)."""


def _lookup(answers: dict[str, Answer], step: str, dotted: str) -> Any:
    if step not in answers:
        raise ReplayError(f"placeholder names step {step!r}, which has not run yet")
    value: Any = answers[step].body
    for part in dotted.split("."):
        if isinstance(value, list):
            value = value[int(part)] if part.isdigit() and int(part) < len(value) else None
        elif isinstance(value, dict):
            value = value.get(part)
        else:
            value = None
        if value is None:
            raise ReplayError(f"{step} answered without {dotted} ({answers[step].body!r:.300})")
    return value


TOKEN = "{token}"
"""Stands for the backend's bearer token (a TokenReview of the admin's own token)."""


def fill(value: Any, answers: dict[str, Answer], token: str = "") -> Any:
    """`value` with every `{step:dotted.path}` replaced by that earlier answer's value."""
    if value == TOKEN:
        return token
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value)
        if whole:
            return _lookup(answers, whole.group(1), whole.group(2))
        return _PLACEHOLDER.sub(lambda m: str(_lookup(answers, m.group(1), m.group(2))), value)
    if isinstance(value, dict):
        return {key: fill(item, answers, token) for key, item in value.items()}
    if isinstance(value, list):
        return [fill(item, answers, token) for item in value]
    return value


class Client:
    """Sends steps to one backend over a pooled HTTP connection."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        if backend.url.startswith("https"):
            self.http = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_certs=backend.ca_file)
        else:
            self.http = urllib3.PoolManager()

    def _headers(self, step: Step) -> dict[str, str]:
        headers = {"Accept": step.accept}
        if self.backend.token:
            headers["Authorization"] = f"Bearer {self.backend.token}"
        if step.body is not None:
            headers["Content-Type"] = step.content_type
        return headers

    def send(self, step: Step, answers: dict[str, Answer]) -> Answer:
        path = fill(step.path, answers)
        query = fill(dict(step.query), answers)
        url = self.backend.url + path + (f"?{urlencode(query)}" if query else "")
        body = fill(step.body, answers, self.backend.token)
        data = None
        if body is not None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        if step.watch_events:
            return self._watch(step, url)
        response = self.http.request(
            step.method, url, body=data, headers=self._headers(step), timeout=30, retries=False
        )
        return Answer(step.name, response.status, _parse(response.data))

    def _watch(self, step: Step, url: str) -> Answer:
        """Reads up to `step.watch_events` events (or until the server ends the stream)."""
        response = self.http.request(
            step.method,
            url,
            headers=self._headers(step),
            preload_content=False,
            timeout=urllib3.Timeout(connect=10, read=step.watch_wait_s),
            retries=False,
        )
        events: list[dict[str, Any]] = []
        body: Any = None
        try:
            if response.status != 200:
                body = _parse(response.read())
            else:
                for line in _lines(response):
                    events.append(json.loads(line))
                    if len(events) >= step.watch_events:
                        break
        except (urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.ProtocolError):
            pass  # no further event within the wait: what came is the answer
        finally:
            response.release_conn()
            response.close()
        return Answer(step.name, response.status, body, events)

    def close(self) -> None:
        self.http.clear()


def _lines(response: urllib3.BaseHTTPResponse) -> Iterator[str]:
    buffer = b""
    for chunk in response.stream(1024, decode_content=True):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line.decode()
    if buffer.strip():
        yield buffer.decode()


def _parse(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return data.decode(errors="replace")


def _settled(client: Client, step: Step, answers: dict[str, Answer]) -> Answer:
    """Repeats a `wait_until` step until its condition holds (or 30 s pass)."""
    deadline = time.monotonic() + 30
    while True:
        answer = client.send(step, answers)
        if answer.code == 429 and time.monotonic() < deadline:
            time.sleep(0.5)  # "retry after": clients retry, so does the replay
            continue
        if step.wait_until is None or step.wait_until(answer.body) or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def replay(backend: Backend, steps: list[Step]) -> dict[str, Answer]:
    """Sends every step in order; returns the answers by step name."""
    client = Client(backend)
    answers: dict[str, Answer] = {}
    try:
        for step in steps:
            if step.pause_s:
                time.sleep(step.pause_s)
            answers[step.name] = _settled(client, step, answers)
    finally:
        client.close()
    return answers


# --- normalising ---------------------------------------------------------------------------------


def _scalar(key: str, value: Any) -> Any:
    if key in _VOLATILE_KEYS and value not in (None, ""):
        return _VOLATILE_KEYS[key]
    if isinstance(value, str):
        if _TIMESTAMP.match(value):
            return "<time>"
        if "hash=" in value:
            return _HASH.sub("hash=<hash>", value)
    return value


def _item_key(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    for dotted in _ITEM_KEYS:
        value: Any = item
        for part in dotted.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, str) and value:
            return value
    return None


def _generated(obj: dict[str, Any]) -> dict[str, Any]:
    """Replaces a name made from `generateName` by a marker (its random suffix differs)."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict) and metadata.get("generateName") and metadata.get("name"):
        return {**obj, "metadata": {**metadata, "name": f"{metadata['generateName']}<random>"}}
    return obj


def flatten(value: Any, prefix: str = "", key: str = "") -> dict[str, Any]:
    """`{dotted.path: normalised scalar}`; list items are keyed by name where they have one."""
    if isinstance(value, dict):
        value = _generated(value)
        out: dict[str, Any] = {}
        if not value:
            return {prefix: {}} if prefix else {}
        kept = {child: item for child, item in value.items() if child not in _DROPPED_KEYS}
        if not kept:
            return {prefix: {}} if prefix else {}
        for child, item in kept.items():
            part = f"[{child}]" if "." in child or "[" in child else child
            joined = f"{prefix}{part}" if part.startswith("[") else f"{prefix}.{part}"
            out.update(flatten(item, joined if prefix else part, child))
        return out
    if isinstance(value, list):
        if not value:
            return {prefix: []}
        keys = [_item_key(_generated(item) if isinstance(item, dict) else item) for item in value]
        use_keys = all(keys) and len(set(keys)) == len(keys)
        out = {}
        for index, item in enumerate(value):
            out.update(flatten(item, f"{prefix}[{keys[index] if use_keys else index}]"))
        return out
    return {prefix: _scalar(key, value)}


def view(answer: Answer) -> dict[str, Any]:
    """The normalised, comparable form of an answer."""
    flat: dict[str, Any] = {"code": answer.code}
    if answer.events or answer.body is None:
        for index, event in enumerate(answer.events):
            flat.update(flatten(event, f"events[{index}]"))
        flat["events.count"] = len(answer.events)
        if answer.body is not None:
            flat.update(flatten(answer.body, "body"))
        return flat
    body = answer.body
    if isinstance(body, dict) and body.get("kind") == "Status":
        # a Status's message is prose that differs in wording; its reason and details do not
        details = body.get("details")
        if isinstance(details, dict) and isinstance(details.get("causes"), list):
            # kube-apiserver repeats some causes (metadata checked twice); once is enough, and
            # their order (which rule ran first) is no contract
            unique = []
            for cause in details["causes"]:
                if cause not in unique:
                    unique.append(cause)
            unique.sort(key=lambda c: (str(c.get("field")), str(c.get("reason"))))
            body = {**body, "details": {**details, "causes": unique}}
        flat.update(flatten({k: v for k, v in body.items() if k != "message"}, "body"))
        for path in [p for p in flat if p.endswith(".message") and ".causes[" in p]:
            del flat[path]
        return flat
    flat.update(flatten(body, "body"))
    if isinstance(body, dict) and body.get("kind") == "Table":
        for path, value in flat.items():  # the Age column: "3s" here, "4s" there
            if ".cells[" in path and isinstance(value, str) and _AGE.match(value):
                flat[path] = "<age>"
    return flat


def compare(step: Step, real: Answer, emulator: Answer) -> list[Difference]:
    """The normalised paths whose values differ between the two answers.

    A subtree (object or list item) present on one side only is one difference, its value
    the subtree's paths and values.
    """
    left, right = view(real), view(emulator)
    if step.compare_only is not None:
        chosen = step.compare_only
        left = {p: v for p, v in left.items() if any(matches(p, c) for c in chosen)}
        right = {p: v for p, v in right.items() if any(matches(p, c) for c in chosen)}
    prefixes = {"real": _prefixes(left), "emulator": _prefixes(right)}
    differences: list[Difference] = []
    seen: set[str] = set()
    for key in sorted(set(left) | set(right)):
        a, b = left.get(key, MISSING), right.get(key, MISSING)
        if a == b:
            continue
        path = key
        lacking = "emulator" if b == MISSING else "real" if a == MISSING else ""
        if lacking:
            head = next((p for p in _heads(path) if p not in prefixes[lacking]), path)
            if head in seen:
                continue
            seen.add(head)
            if head != path:
                source = left if lacking == "emulator" else right
                subtree = {p[len(head) :]: v for p, v in source.items() if _under(p, head)}
                a, b = (subtree, MISSING) if lacking == "emulator" else (MISSING, subtree)
            path = head
        differences.append(Difference(step.name, path, a, b))
    return differences


def _heads(path: str) -> list[str]:
    """The prefixes of a path at each `.` or `[` boundary, shortest first, then the path."""
    cuts, depth = [], 0
    for index, char in enumerate(path):
        if char == "[":
            if depth == 0 and index > 0:
                cuts.append(index)
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "." and depth == 0:
            cuts.append(index)
    return [path[:cut] for cut in cuts] + [path]


def _prefixes(flat: dict[str, Any]) -> set[str]:
    return {head for path in flat for head in _heads(path)}


def _under(path: str, head: str) -> bool:
    return path == head or path.startswith(head + ".") or path.startswith(head + "[")
