"""A small raw JSON client of the apiserver for the soak's own parts (agents, workload,
checkers): urllib3 with the admin token, dicts in and out, short timeouts, no retries. The soak
talks to the apiserver directly, never through the fault proxy the operator uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import urllib3

GROUP_PATH = "/apis/voltpack.io/v1alpha1"


class KubeError(RuntimeError):
    """An answer other than 2xx (`status` 0: no answer at all)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Kube:
    def __init__(self, url: str, token: str, ca_file: Path, *, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self.http = urllib3.PoolManager(
            num_pools=4, maxsize=16, cert_reqs="CERT_REQUIRED", ca_certs=str(ca_file),
            timeout=urllib3.Timeout(total=timeout_s), retries=False,
        )  # fmt: skip

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        headers = dict(self.headers)
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body).encode()
        try:
            reply = self.http.request(method, self.url + path, body=data, headers=headers)
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise KubeError(0, str(error)) from None
        if not 200 <= reply.status < 300:
            raise KubeError(reply.status, reply.data.decode(errors="replace")[:300])
        return json.loads(reply.data) if reply.data else None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def items(self, path: str) -> list[dict[str, Any]]:
        return list(self.get(path).get("items") or [])

    def create(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("POST", path, body)

    def merge_patch(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("PATCH", path, body, "application/merge-patch+json")

    def delete(self, path: str, grace_s: int | None = 0) -> None:
        query = "" if grace_s is None else f"?gracePeriodSeconds={grace_s}"
        try:
            self.request("DELETE", path + query)
        except KubeError as error:
            if error.status != 404:
                raise

    def close(self) -> None:
        self.http.clear()
