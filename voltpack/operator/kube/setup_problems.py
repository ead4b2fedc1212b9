"""Setup problems a first run meets, each said once in one line with its fix.

Against a bare API server the operator meets predictable errors: the API server cannot be
reached, the Lease namespace does not exist, the voltpack CRDs are not installed, or its account
may not do something. Each is said once, as one line naming what is missing and how to fix it
(never the client's HTTP dump); the retries that follow stay quiet, and one line says when the
problem is gone. Any other error is left to the caller to log as before.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubernetes.client import CustomObjectsApi
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError, NewConnectionError

from voltpack.model.resources import API_GROUP, API_VERSION, RESOURCE_KINDS
from voltpack.operator.kube.client import call_json

log = logging.getLogger(__name__)

CRD_FIX = "install them: kubectl apply -f helm/voltpack/crds/ (or helm install the chart)"
RBAC_FIX = (
    "grant it: the chart's RBAC (helm/voltpack/templates/rbac.yaml) gives the operator's "
    "account exactly what it needs"
)
VOLTPACK_PLURALS = tuple(kind.plural for kind in RESOURCE_KINDS)
CRDS_KEY = "voltpack CRDs"


@dataclass(frozen=True)
class SetupProblem:
    """A predictable setup error: `key` names what is missing, `message` says it and the fix."""

    key: str
    message: str


def _status_body(error: ApiException) -> dict[str, Any]:
    try:
        body = json.loads(error.body) if error.body else {}
    except (ValueError, TypeError):
        return {}
    return body if isinstance(body, dict) else {}


def _errno_text(error: BaseException) -> str:
    """`Connection refused` out of urllib3's nested connection errors, else the error's type."""
    found = re.search(r"\[Errno -?\d+\] ([^\"')]+)", str(error))
    return found.group(1).strip() if found else type(error).__name__


def classify(
    error: BaseException, *, server: str = "", namespace: str | None = None, resource: str = ""
) -> SetupProblem | None:
    """The setup problem behind `error`, or None when it is not a predictable setup error.

    `server` is the API server's URL, `namespace` the namespace the call was about, `resource`
    the plural of the resource it read or wrote (e.g. `gpujobs`, `leases`).
    """
    if isinstance(error, ApiException):
        body = _status_body(error)
        message = str(body.get("message") or error.reason or "")
        details = body.get("details") or {}
        if error.status == 404 and details.get("kind") == "namespaces":
            name = details.get("name") or namespace or "?"
            held = {"leases": "its leader Lease", "configmaps": "its policy ConfigMap"}
            where = f", where the operator keeps {held[resource]}," if resource in held else ""
            return SetupProblem(
                f"namespace {name}",
                f"namespace {name}{where} does not exist: create it (kubectl create namespace "
                f"{name}) or pass --namespace with one that exists",
            )
        if error.status == 404 and resource in VOLTPACK_PLURALS:
            return crds_missing([resource])
        if error.status == 403:
            return SetupProblem(
                f"forbidden: {message}", f"no permission: {message or resource}; {RBAC_FIX}"
            )
        if error.status == 401:
            return SetupProblem(
                "unauthorized",
                f"the API server {server} refused the credentials (401 Unauthorized): check the "
                "kubeconfig's user or the service-account token",
            )
        return None
    if isinstance(error, MaxRetryError | NewConnectionError | ConnectionError):
        where = server
        pool = getattr(error, "pool", None)
        if not where and pool is not None:
            where = f"{pool.scheme}://{pool.host}:{pool.port}"
        return SetupProblem(
            "unreachable",
            f"cannot reach the API server at {where or '?'} ({_errno_text(error)}): start it "
            "(e.g. voltpack emulator) or pass --server URL (or set KUBECONFIG)",
        )
    return None


def crds_missing(plurals: Iterable[str]) -> SetupProblem:
    """The problem of voltpack CRDs not being served (one key for all of them)."""
    names = ", ".join(f"{p}.{API_GROUP}" for p in sorted(plurals))
    return SetupProblem(
        CRDS_KEY, f"the voltpack CRDs are not installed ({names} not served): {CRD_FIX}"
    )


class SetupLog:
    """Says each setup problem once; says once when the last place that met it works again.

    A *site* is a place that makes calls (`cache gpujobs`, `lease voltpack-scheduler`). Thread
    safe: the caches run in their own threads.
    """

    def __init__(self, server: str = "", logger: logging.Logger = log) -> None:
        """`server`: the API server's URL, named when it cannot be reached."""
        self.server = server
        self.served_crds: Callable[[], set[str]] | None = None
        """The voltpack resources the server serves (discovery), to name every CRD missing
        in one line; None: name the one a call met."""
        self._log = logger
        self._lock = threading.Lock()
        self._open: dict[str, SetupProblem] = {}
        self._sites: dict[str, str] = {}

    def report(self, site: str, problem: SetupProblem) -> None:
        """`site` met `problem`: one warning the first time anyone meets it, then quiet."""
        with self._lock:
            gone = self._release(site) if self._sites.get(site) != problem.key else None
            self._sites[site] = problem.key
            first = problem.key not in self._open
            if first:
                self._open[problem.key] = problem
        if gone is not None:  # e.g. the server answers now, with the next problem
            self._log.info("fixed: %s (%s gets further now)", gone.key, site)
        if first:
            self._log.warning("%s; retrying quietly", problem.message)
        else:
            self._log.debug("%s: still %s", site, problem.key)

    def handle(
        self,
        site: str,
        error: BaseException,
        *,
        namespace: str | None = None,
        resource: str = "",
    ) -> bool:
        """Report `error` if it is a setup problem; True if it was (the caller stays quiet)."""
        problem = classify(error, server=self.server, namespace=namespace, resource=resource)
        if problem is None:
            return False
        if problem.key == CRDS_KEY and self.served_crds is not None and not self.is_open(CRDS_KEY):
            try:
                served = self.served_crds()
            except Exception:  # the call's own problem is still said
                served = set()
            problem = crds_missing({resource} | {p for p in VOLTPACK_PLURALS if p not in served})
        self.report(site, problem)
        return True

    def is_open(self, key: str) -> bool:
        """True while a problem with `key` has been said and is not gone."""
        with self._lock:
            return key in self._open

    def works(self, site: str) -> None:
        """`site`'s call succeeded: a problem no other site still meets is said to be gone."""
        with self._lock:
            gone = self._release(site)
        if gone is not None:
            self._log.info("fixed: %s (%s works now)", gone.key, site)

    def _release(self, site: str) -> SetupProblem | None:
        """Forget `site`'s problem; the problem if no other site meets it (lock held)."""
        key = self._sites.pop(site, None)
        if key is None or key in self._sites.values():
            return None
        return self._open.pop(key, None)

    def open_problems(self) -> list[str]:
        """Keys of the problems met and not yet gone."""
        with self._lock:
            return sorted(self._open)


def served_voltpack_plurals(custom: CustomObjectsApi) -> set[str]:
    """The voltpack resources the API server serves (its discovery document for the group)."""
    try:
        document = call_json(custom.get_api_resources, API_GROUP, API_VERSION)
    except ApiException as error:
        if error.status == 404:
            return set()
        raise
    return {str(r.get("name", "")) for r in document.get("resources") or []}


_LOGS: dict[str, SetupLog] = {}
_LOGS_LOCK = threading.Lock()


def setup_log_for(server: str) -> SetupLog:
    """The process's one SetupLog for the API server at `server` (so a problem met by a cache, the
    Lease and an Event is still said once)."""
    with _LOGS_LOCK:
        found = _LOGS.get(server)
        if found is None:
            found = _LOGS[server] = SetupLog(server)
        return found
