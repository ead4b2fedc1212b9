"""Submit a policy dry run to the admin API and wait for it, as a client would."""

from __future__ import annotations

import time
from typing import Any

import httpx

DRY_RUNS = "/api/v1/policy/dry-runs"


def finished_dry_run(
    url: str, headers: dict[str, str], text: str, timeout_s: float = 120.0
) -> dict[str, Any]:
    """POST the policy `text` (202 expected), then poll the run's Location until it is done or
    failed; its view."""
    submitted = httpx.post(url + DRY_RUNS, headers=headers, json={"text": text}, timeout=30)
    assert submitted.status_code == 202, submitted.text
    location = submitted.headers["location"]
    assert location == f"{DRY_RUNS}/{submitted.json()['id']}"
    deadline = time.monotonic() + timeout_s
    while True:
        answer = httpx.get(url + location, headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        view: dict[str, Any] = answer.json()
        if view["status"] in ("done", "failed"):
            return view
        assert time.monotonic() < deadline, f"dry run still {view['status']} after {timeout_s} s"
        time.sleep(0.05)
