"""Status writes guarded by resourceVersion, where two writers can exist.

A merge patch of `status` without a resourceVersion is last-write-wins: during a leader
handover the old leader (still finishing its cycle) and the new one both write, and the older
view can overwrite the newer. With the object's `metadata.resourceVersion` in the patch the
API server applies it only to that version (optimistic concurrency, as an update does) and
answers 409 Conflict otherwise; the writer then reads the object again and computes the status
from what it finds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from voltpack.operator.kube.client import status_code

log = logging.getLogger(__name__)

JsonObj = dict[str, Any]

ATTEMPTS = 3
"""Writes tried (each after a fresh read) before the conflict is left to the next cycle."""


def patch_status_guarded(
    patch: Callable[[JsonObj], JsonObj],
    read: Callable[[], JsonObj],
    obj: JsonObj,
    status_for: Callable[[JsonObj], JsonObj | None],
    attempts: int = ATTEMPTS,
) -> JsonObj | None:
    """Write `status_for(obj)` onto the version of `obj` it was computed from.

    `patch(body)` sends a merge patch to the status subresource and returns the object written;
    `read()` gets the object fresh. On 409 Conflict the status is computed again from the fresh
    object (`status_for` returns None when there is nothing to write) and written on its
    version. Returns the object written, or None when nothing was. After `attempts` conflicts
    the last one is raised (the caller logs it and the next cycle tries again).
    """
    current = obj
    for attempt in range(attempts):
        status = status_for(current)
        if status is None:
            return None
        version = (current.get("metadata") or {}).get("resourceVersion")
        body: JsonObj = {"status": status}
        if version:
            body["metadata"] = {"resourceVersion": version}
        try:
            return patch(body)
        except Exception as error:
            if status_code(error) != 409 or attempt == attempts - 1:
                raise
            log.debug("status of %s: stale (409), read again", current["metadata"].get("name"))
            current = read()
    return None  # not reached: the last attempt returns or raises
