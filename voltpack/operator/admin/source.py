"""The admin API's view of a live cluster, read through the official Kubernetes client.

Implements the API's `ClusterSource` and `PolicyHolder` protocols. Reads come from watch-fed
caches, as the operator's own (`ResourceCache`: one list, then a watch): no request lists the
API server. The cluster summary is kept current by the watch events themselves
(`ClusterTally`), so it costs the same whatever the cluster's size and however often it
changes; the node, job and power-domain views are kept by `AdminViews` from the same events
(an event marks the few views it touches stale; a read builds the stale ones of its page, so a
page costs O(limit)). The caches start with the first request, which waits until nodes, pods
and events are listed. An API server that cannot be reached then, or that the caches have not
heard from for `stale_after_s`, makes the reads raise `SourceUnavailableError` (the API answers
503). A dry run plans one scheduling cycle with the given policy on a copy of the cluster,
exactly as the operator would, and writes nothing; it runs in a child process
(`dry_run_process`), so that it never holds this process's interpreter for seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes.client import ApiClient, CoreV1Api, CustomObjectsApi, ResourceV1Api
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from voltpack.api.paging import ListPage
from voltpack.api.sources import SourceUnavailableError
from voltpack.model.admin import (
    ClusterSummary,
    DryRunResult,
    JobView,
    NodeView,
    PowerDomainView,
    QueueView,
)
from voltpack.model.errors import PolicyError
from voltpack.model.resources import API_GROUP, API_VERSION
from voltpack.operator.admin.cluster_tally import ClusterTally
from voltpack.operator.admin.dry_run import DRY_RUN_KINDS
from voltpack.operator.admin.dry_run_process import run_in_child
from voltpack.operator.admin.views import AdminViews
from voltpack.operator.kube.cache import ResourceCache
from voltpack.operator.kube.conventions import (
    MANUAL_CAP_ANNOTATION,
    SERVED_SCHEDULERS,
)
from voltpack.operator.kube.policy_reload import POLICY_KEY
from voltpack.operator.kube.setup_problems import setup_log_for
from voltpack.policies.schema import PolicyFile, parse_policy

CUSTOM_KINDS = ("gpunodes", "gpujobs", "queues", "powerbudgets")
REQUIRED = ("nodes", "pods", "events")
"""Caches a read needs; the voltpack kinds may be missing (CRDs not installed: none of them)."""


class KubeAdminSource:
    """ClusterSource and PolicyHolder over the Kubernetes API, read through watch-fed caches."""

    def __init__(
        self,
        api_client: ApiClient,
        policy: PolicyFile,
        policy_text: str,
        namespace: str = "voltpack-system",
        policy_configmap: str = "voltpack-policy",
        clock: Callable[[], float] = time.time,
        sync_timeout_s: float = 60.0,
        stale_after_s: float = 10.0,
        scheduler_names: frozenset[str] = SERVED_SCHEDULERS,
    ) -> None:
        """`sync_timeout_s`: how long the first read waits for the first lists;
        `stale_after_s`: how long the caches may fail to reach the API server before reads
        answer 503 rather than the last state they heard of; `scheduler_names`: the
        `schedulerName`s the operator serves (its `--scheduler-name`), whose pods are
        voltpack's jobs, pending and unbound pods."""
        self._client = api_client
        self._core = CoreV1Api(api_client)
        self._custom = CustomObjectsApi(api_client)
        self._policy = (policy, policy_text)
        self._namespace = namespace
        self._configmap = policy_configmap
        self._clock = clock
        self._sync_timeout_s = sync_timeout_s
        self._stale_after_s = stale_after_s
        self.scheduler_names = scheduler_names
        self._start_lock = threading.Lock()
        self._stop = threading.Event()
        self._started = False
        custom = self._custom

        def custom_list(plural: str) -> Callable[..., Any]:
            return lambda **kw: custom.list_cluster_custom_object(
                API_GROUP, API_VERSION, plural, **kw
            )

        setup = setup_log_for(str(api_client.configuration.host))  # each problem said once
        # Dynamic Resource Allocation: pods' claims and the devices they hold (none where the
        # cluster does not serve resource.k8s.io/v1)
        resource = ResourceV1Api(api_client)
        self._caches = {
            "nodes": ResourceCache("nodes", self._core.list_node, setup),
            "pods": ResourceCache("pods", self._core.list_pod_for_all_namespaces, setup),
            "events": ResourceCache(
                "events",
                lambda **kw: self._core.list_event_for_all_namespaces(
                    field_selector="reason=FailedScheduling", **kw
                ),
                setup,
            ),
            **{
                plural: ResourceCache(plural, custom_list(plural), setup) for plural in CUSTOM_KINDS
            },
            "resourceslices": ResourceCache("resourceslices", resource.list_resource_slice, setup),
            "resourceclaims": ResourceCache(
                "resourceclaims", resource.list_resource_claim_for_all_namespaces, setup
            ),
        }
        self.tally = ClusterTally(clock, scheduler_names)
        """The summary's counters, fed by the caches' watch events."""
        self._caches["nodes"].add_listener(self.tally.nodes_listener)
        self._caches["pods"].add_listener(self.tally.pods_listener)
        self._caches["gpunodes"].add_listener(self.tally.gpunodes_listener)
        self._caches["powerbudgets"].add_listener(self.tally.budgets_listener)
        self._caches["queues"].add_listener(self.tally.queues_listener)
        self.views = AdminViews(scheduler_names)
        """Node, job and power-domain views, kept from the caches' watch events."""
        for kind, listener in (
            ("nodes", self.views.nodes_listener),
            ("pods", self.views.pods_listener),
            ("gpunodes", self.views.gpunodes_listener),
            ("powerbudgets", self.views.budgets_listener),
            ("gpujobs", self.views.gpujobs_listener),
            ("events", self.views.events_listener),
            ("resourceclaims", self.views.claims_listener),
            ("resourceslices", self.views.slices_listener),
        ):
            self._caches[kind].add_listener(listener)

    # -- reading ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start the caches (list, then watch) if they are not running; return at once."""
        with self._start_lock:
            if not self._started:
                for cache in self._caches.values():
                    cache.start(self._stop)
                self._started = True

    def wait_synced(self, timeout_s: float) -> bool:
        """Whether the caches a read needs held their first lists within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        return all(
            self._caches[name].wait_synced(max(0.0, deadline - time.monotonic()))
            for name in REQUIRED
        )

    def close(self) -> None:
        """Stop the caches' watches."""
        self._stop.set()

    def watched_changes(self) -> int:
        """How many changes the caches have taken in (grows with every watch event)."""
        return sum(cache.generation for cache in self._caches.values())

    def _ready(self) -> None:
        """Start the caches and wait for the first lists; raise SourceUnavailableError when
        the API server cannot be reached (or has not been reached for `stale_after_s`)."""
        self.start()
        deadline = time.monotonic() + self._sync_timeout_s
        for name in REQUIRED:
            cache = self._caches[name]
            while not cache.wait_synced(0.02):
                if cache.last_error is not None:
                    raise self._unavailable(name, cache)
                if time.monotonic() > deadline:
                    raise SourceUnavailableError(
                        f"Kubernetes API: {name} not listed within {self._sync_timeout_s:g} s"
                    )
            failing = cache.failing_since
            if failing is not None and time.monotonic() - failing > self._stale_after_s:
                raise self._unavailable(name, cache)
        for cache in self._caches.values():  # the optional kinds: listed, or not served
            while not cache.settled.wait(0.02) and cache.last_error is None:
                if time.monotonic() > deadline:
                    break

    def _unavailable(self, name: str, cache: ResourceCache) -> SourceUnavailableError:
        error = cache.last_error
        if isinstance(error, ApiException):
            return SourceUnavailableError(
                f"Kubernetes API: listing {name} failed: {error.status} {error.reason}"
            )
        return SourceUnavailableError(f"Kubernetes API unreachable ({name}): {error}")

    def _call(self, what: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except ApiException as exc:
            if exc.status == 404:
                return {"items": []}  # a CRD not installed: nothing of that kind
            raise SourceUnavailableError(
                f"Kubernetes API: {what} failed: {exc.status} {exc.reason}"
            ) from None
        except (HTTPError, OSError) as exc:
            raise SourceUnavailableError(f"Kubernetes API unreachable ({what}): {exc}") from None

    def invalidate(self) -> None:
        """Build every node, job and domain view again on its next read (the watch keeps the
        views and the summary's counters current; this is for tests and benchmarks)."""
        self.views.invalidate()

    # -- ClusterSource ---------------------------------------------------------------------

    def summary(self) -> ClusterSummary:
        """Counts over the whole cluster, from the counters the watch keeps current."""
        self._ready()
        return self.tally.summary()

    def nodes(self) -> list[NodeView]:
        """Every node with GPUs, allocation and power, by name (O(cluster): the API pages)."""
        self._ready()
        return self.views.nodes()

    def node_page(self, after: str | None, limit: int) -> ListPage[NodeView]:
        """Up to `limit` nodes after `after`, by name; O(limit)."""
        self._ready()
        return self.views.node_page(after, limit)

    def node(self, name: str) -> NodeView | None:
        """One node (None: no such node)."""
        self._ready()
        return self.views.node(name)

    def jobs(self) -> list[JobView]:
        """GPUJobs, pod groups and single pods of the served scheduler names, by namespace/name
        (O(cluster))."""
        self._ready()
        return self.views.jobs()

    def job_page(
        self, after: str | None, limit: int, pending: bool | None, queue: str | None
    ) -> ListPage[JobView]:
        """Up to `limit` jobs after `after` (namespace/name), filtered; O(limit)."""
        self._ready()
        return self.views.job_page(after, limit, pending, queue)

    def job(self, namespace: str, name: str) -> JobView | None:
        """One job (None: no such job)."""
        self._ready()
        return self.views.job(namespace, name)

    def queues(self) -> list[QueueView]:
        """Queues with their quotas and status."""
        self._ready()
        views = []
        for obj in self._caches["queues"].values():
            spec = obj.get("spec") or {}
            status = obj.get("status") or {}
            guaranteed: dict[str, float] = {}
            limits: dict[str, float] = {}
            for quota in spec.get("quotas") or []:
                model = str(quota.get("gpuModel", "*"))
                guaranteed[model] = float(quota.get("guaranteed") or 0)
                if quota.get("limit") is not None:
                    limits[model] = float(quota["limit"])
            views.append(
                QueueView(
                    name=obj["metadata"]["name"],
                    parent=spec.get("parent"),
                    weight=float(spec.get("weight", 1.0)),
                    guaranteed_gpus=guaranteed,
                    limit_gpus=limits,
                    allocated_gpus={
                        k: float(v) for k, v in (status.get("allocatedGpus") or {}).items()
                    },
                    pending_jobs=int(status.get("pendingJobs") or 0),
                    conditions={
                        str(c.get("type")): str(c.get("message") or c.get("status"))
                        for c in status.get("conditions") or []
                    },
                )
            )
        return views

    def power_domains(self) -> list[PowerDomainView]:
        """PowerBudgets with their status; O(nodes in domains)."""
        self._ready()
        return self.views.domains()

    def domain_gpu_models(self, domain: str) -> list[str] | None:
        """The model of every GPU of the domain's nodes; O(its nodes), no pods read."""
        self._ready()
        return self.views.domain_gpu_models(domain)

    def set_manual_cap(self, domain: str, cap_w: float | None) -> PowerDomainView:
        """Annotate the PowerBudget; the power loop budgets min(budget, manual cap)."""
        self._ready()
        if domain not in self.views.budget_names():
            raise KeyError(domain)
        value = None if cap_w is None else f"{cap_w:g}"
        body = {"metadata": {"annotations": {MANUAL_CAP_ANNOTATION: value}}}
        patched = self._call(
            f"patching powerbudget {domain}",
            lambda: self._custom.patch_cluster_custom_object(
                API_GROUP, API_VERSION, "powerbudgets", domain, body
            ),
        )
        if isinstance(patched, dict) and patched.get("metadata"):
            self._caches["powerbudgets"].assume(patched)  # read your write: before the watch
        for view in self.power_domains():
            if view.name == domain:
                return view
        raise KeyError(domain)

    def dry_run(self, policy: PolicyFile) -> DryRunResult:
        """One scheduling cycle and one power tick with `policy` on the cluster as it is, for the
        pods of the served scheduler names, in a child process over a copy of the caches
        (`dry_run_process`); nothing is written."""
        self._ready()
        objects = {kind: self._caches[kind].values() for kind in DRY_RUN_KINDS}
        return run_in_child(objects, policy, self._clock(), scheduler_names=self.scheduler_names)

    # -- PolicyHolder ----------------------------------------------------------------------

    def active(self) -> tuple[PolicyFile, str]:
        """The policy in the ConfigMap if there is one, else the one the API started with."""
        try:
            found = self._core.read_namespaced_config_map(self._configmap, self._namespace)
        except ApiException as exc:
            if exc.status == 404:
                return self._policy
            raise SourceUnavailableError(
                f"Kubernetes API: reading configmap {self._configmap}: {exc.status} {exc.reason}"
            ) from None
        except (HTTPError, OSError) as exc:
            raise SourceUnavailableError(f"Kubernetes API unreachable: {exc}") from None
        text = (found.data or {}).get(POLICY_KEY)
        if text:
            try:
                return parse_policy(text, f"configmap {self._configmap}"), text
            except PolicyError:
                pass  # a broken ConfigMap: the running policy stays the last good one
        return self._policy

    def apply(self, policy: PolicyFile, text: str) -> None:
        """Write the policy into the ConfigMap the operator reads."""
        body: Any = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": self._configmap, "namespace": self._namespace},
            "data": {POLICY_KEY: text},
        }

        def write() -> Any:
            try:
                return self._core.replace_namespaced_config_map(
                    self._configmap, self._namespace, body
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise
                return self._core.create_namespaced_config_map(self._namespace, body)

        self._call(f"configmap {self._configmap}", write)
        self._policy = (policy, text)
