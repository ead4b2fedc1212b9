"""The admin API's view of InferenceServices, read through the official Kubernetes client.

Implements the API's `InferenceSource` over a watch-fed `ResourceCache` (one list, then a
watch), as `KubeAdminSource` reads everything else: no request lists the API server. The views
are built from each service's spec and the status the operator wrote, and kept: a service's
view is built again only when the watch replaces that service, the sorted list only when the
cache's generation moved, and one plan is found by its key. The cache starts with the first
read (or `start()`); a cache that could not reach the API server then, or has not reached it
for `stale_after_s`, makes reads raise `SourceUnavailableError` (the API answers 503); a
cluster without the CRD has no services.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

from kubernetes.client import ApiClient, CustomObjectsApi
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from voltpack.api.sources import SourceUnavailableError
from voltpack.model.inference_views import (
    BucketView,
    InferencePlanView,
    InferenceServiceView,
    ReplicaGroupView,
)
from voltpack.model.resources import API_GROUP, API_VERSION
from voltpack.model.resources.inferenceservice import InferenceServiceStatus
from voltpack.operator.inference.services import PLURAL
from voltpack.operator.kube.cache import ResourceCache, object_key
from voltpack.operator.kube.setup_problems import setup_log_for

Obj = dict[str, Any]


def _slo(spec: dict[str, Any], field: str) -> float | None:
    value = (spec.get("slo") or {}).get(field)
    return float(value) if isinstance(value, int | float) else None


def _status(service: dict[str, Any]) -> InferenceServiceStatus:
    try:
        return InferenceServiceStatus.model_validate(service.get("status") or {})
    except ValidationError:
        return InferenceServiceStatus()


def service_view(service: dict[str, Any]) -> InferenceServiceView:
    """One service at a glance."""
    meta = service["metadata"]
    spec = service.get("spec") or {}
    status = _status(service)
    return InferenceServiceView(
        namespace=meta.get("namespace") or "default",
        name=meta["name"],
        model=str(spec.get("model") or ""),
        phase=status.phase,
        slo_ttft_ms=_slo(spec, "ttftMs"),
        slo_tpot_ms=_slo(spec, "tpotMs"),
        replicas=status.replicas,
        ready_replicas=status.ready_replicas,
        predicted_cost_per_hour=status.predicted_cost_per_hour,
        predicted_slo_attainment=status.predicted_slo_attainment,
        planning_rate_per_s=status.planning_rate_per_second,
        rate_source=status.rate_source,
        observed_slo_attainment=status.observed_slo_attainment,
        conditions={c.type: c.message for c in status.conditions},
    )


def plan_view(service: dict[str, Any]) -> InferencePlanView:
    """The plan in effect for one service, and why."""
    meta = service["metadata"]
    spec = service.get("spec") or {}
    status = _status(service)
    groups = [
        ReplicaGroupView(
            gpu_type=g.gpu_type,
            tensor_parallel=g.tensor_parallel,
            role=g.role,
            replicas=g.replicas,
            ready_replicas=g.ready_replicas,
            cost_per_hour=g.cost_per_hour,
            load=g.load,
            extrapolated=g.extrapolated,
            basis=g.basis,
            buckets=[BucketView(bucket=b.bucket, rate_per_s=b.rate_per_second) for b in g.buckets],
        )
        for g in status.plan
    ]
    gpus: dict[str, int] = {}
    for group in status.plan:
        gpus[group.gpu_type] = gpus.get(group.gpu_type, 0) + group.replicas * group.tensor_parallel
    conditions = {c.type: c for c in status.conditions}
    planned = conditions.get("Planned")
    infeasible = conditions.get("SLOInfeasible")
    return InferencePlanView(
        namespace=meta.get("namespace") or "default",
        name=meta["name"],
        model=str(spec.get("model") or ""),
        phase=status.phase,
        slo_ttft_ms=_slo(spec, "ttftMs"),
        slo_tpot_ms=_slo(spec, "tpotMs"),
        split=status.split,
        groups=groups,
        gpus_by_type=gpus,
        predicted_cost_per_hour=status.predicted_cost_per_hour,
        predicted_slo_attainment=status.predicted_slo_attainment,
        predicted_slo_attainment_basis=status.predicted_slo_attainment_basis,
        planning_rate_per_s=status.planning_rate_per_second,
        rate_source=status.rate_source,
        latest_rate_per_s=status.latest_rate_per_second,
        reason=planned.message if planned is not None else "",
        infeasible=infeasible.message
        if infeasible is not None and infeasible.status == "True"
        else None,
        last_plan_time=status.last_plan_time,
    )


class _PlanMemo:
    """Plan views by service key, each with the cached object it was built from; the cache's
    listener drops a deleted service's (so the memo holds no more than the cache)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.plans: dict[str, tuple[Obj, InferencePlanView]] = {}

    def reset(self, objects: Iterable[Obj]) -> None:
        keys = {object_key(obj) for obj in objects}
        with self.lock:
            self.plans = {k: v for k, v in self.plans.items() if k in keys}

    def changed(self, old: Obj | None, new: Obj | None) -> None:
        if new is None and old is not None:
            with self.lock:
                self.plans.pop(object_key(old), None)


class KubeInferenceSource:
    """InferenceSource over the Kubernetes API, read through a watch-fed cache."""

    def __init__(
        self,
        api_client: ApiClient,
        sync_timeout_s: float = 60.0,
        stale_after_s: float = 10.0,
    ) -> None:
        """`sync_timeout_s`: how long the first read waits for the first list;
        `stale_after_s`: how long the cache may fail to reach the API server before reads
        answer 503 rather than the last state it heard of."""
        custom = CustomObjectsApi(api_client)
        self._sync_timeout_s = sync_timeout_s
        self._stale_after_s = stale_after_s
        self.cache = ResourceCache(
            PLURAL,
            lambda **kw: custom.list_cluster_custom_object(API_GROUP, API_VERSION, PLURAL, **kw),
            setup_log_for(str(api_client.configuration.host)),
        )
        """The InferenceServices, as the watch keeps them (read them, never change them)."""
        self._plans = _PlanMemo()
        self.cache.add_listener(self._plans)
        self._start_lock = threading.Lock()
        self._stop = threading.Event()
        self._started = False
        self._list_lock = threading.Lock()
        self._services: tuple[int, list[InferenceServiceView]] | None = None
        self._service_views: dict[str, tuple[Obj, InferenceServiceView]] = {}

    def start(self) -> None:
        """Start the cache (list, then watch) if it is not running; return at once."""
        with self._start_lock:
            if not self._started:
                self.cache.start(self._stop)
                self._started = True

    def close(self) -> None:
        """Stop the cache's watch."""
        self._stop.set()

    def _ready(self) -> None:
        """Start the cache and wait for its first list; raise SourceUnavailableError when the
        API server cannot be reached (or has not been reached for `stale_after_s`)."""
        self.start()
        cache = self.cache
        deadline = time.monotonic() + self._sync_timeout_s
        while not cache.wait_synced(0.02):
            if cache.settled.is_set():
                break  # the CRD is not installed (404): no services, until it is
            if cache.last_error is not None:
                raise self._unavailable()
            if time.monotonic() > deadline:
                raise SourceUnavailableError(
                    f"Kubernetes API: {PLURAL} not listed within {self._sync_timeout_s:g} s"
                )
        failing = cache.failing_since
        if failing is not None and time.monotonic() - failing > self._stale_after_s:
            raise self._unavailable()

    def _unavailable(self) -> SourceUnavailableError:
        error = self.cache.last_error
        if isinstance(error, ApiException):
            return SourceUnavailableError(
                f"Kubernetes API: listing {PLURAL} failed: {error.status} {error.reason}"
            )
        return SourceUnavailableError(f"Kubernetes API unreachable ({PLURAL}): {error}")

    def inference_services(self) -> list[InferenceServiceView]:
        """Every service, by namespace/name; built again only after the watch changed one
        (and then only the changed services' views)."""
        self._ready()
        with self._list_lock:
            generation = self.cache.generation  # before the read: a change after it rebuilds
            if self._services is None or self._services[0] != generation:
                known = self._service_views
                views: dict[str, tuple[Obj, InferenceServiceView]] = {}
                for raw in self.cache.values():
                    key = object_key(raw)
                    found = known.get(key)
                    # the watch replaces an object, never edits it: the same object, the same view
                    views[key] = (
                        found if found is not None and found[0] is raw else (raw, service_view(raw))
                    )
                self._service_views = views
                ordered = sorted(
                    (v for _, v in views.values()), key=lambda v: (v.namespace, v.name)
                )
                self._services = (generation, ordered)
            return list(self._services[1])

    def inference_plan(self, namespace: str, name: str) -> InferencePlanView | None:
        """One service's plan, found by its key; None when there is no such service."""
        self._ready()
        key = f"{namespace}/{name}"
        raw = self.cache.peek(key)
        if raw is None:
            return None
        with self._plans.lock:
            found = self._plans.plans.get(key)
        if found is not None and found[0] is raw:
            return found[1]
        plan = plan_view(raw)
        with self._plans.lock:
            self._plans.plans[key] = (raw, plan)
        # the cache is never asked with the memo's lock held (its listener takes the two the
        # other way round); a service deleted meanwhile must not stay in the memo
        if self.cache.peek(key) is not raw:
            with self._plans.lock:
                entry = self._plans.plans.get(key)
                if entry is not None and entry[0] is raw:
                    del self._plans.plans[key]
        return plan
