"""The admin API's view of InferenceServices, read through the official Kubernetes client.

Implements the API's `InferenceSource`: every read lists the InferenceServices (cached for
`ttl_s`) and builds the views from their spec and the status the operator wrote. An
unreachable API server becomes `SourceUnavailableError` (the API answers 503); a cluster
without the CRD has no services.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from kubernetes.client import ApiClient, CustomObjectsApi
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError
from urllib3.exceptions import HTTPError

from voltpack.api.sources import SourceUnavailableError
from voltpack.model.inference_views import (
    BucketView,
    InferencePlanView,
    InferenceServiceView,
    ReplicaGroupView,
)
from voltpack.model.resources import API_GROUP, API_VERSION
from voltpack.model.resources.inferenceservice import InferenceServiceStatus
from voltpack.operator.inference_services import PLURAL


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


class KubeInferenceSource:
    """InferenceSource over the Kubernetes API."""

    def __init__(self, api_client: ApiClient, ttl_s: float = 1.0) -> None:
        self._custom = CustomObjectsApi(api_client)
        self._ttl_s = ttl_s
        self._lock = threading.Lock()
        self._cached: tuple[float, list[dict[str, Any]]] | None = None

    def _services(self) -> list[dict[str, Any]]:
        with self._lock:
            now = time.monotonic()
            if self._cached is not None and now - self._cached[0] < self._ttl_s:
                return self._cached[1]
            try:
                answer = self._custom.list_cluster_custom_object(API_GROUP, API_VERSION, PLURAL)
            except ApiException as exc:
                if exc.status != 404:  # 404: the CRD is not installed, so there is none
                    raise SourceUnavailableError(
                        f"Kubernetes API: listing {PLURAL} failed: {exc.status} {exc.reason}"
                    ) from None
                answer = {"items": []}
            except (HTTPError, OSError) as exc:
                raise SourceUnavailableError(
                    f"Kubernetes API unreachable ({PLURAL}): {exc}"
                ) from None
            items = list(answer.get("items") or []) if isinstance(answer, dict) else []
            self._cached = (now, items)
            return items

    def inference_services(self) -> list[InferenceServiceView]:
        """Every service, by namespace/name."""
        views = [service_view(s) for s in self._services()]
        return sorted(views, key=lambda v: (v.namespace, v.name))

    def inference_plan(self, namespace: str, name: str) -> InferencePlanView | None:
        """One service's plan; None when there is no such service."""
        for service in self._services():
            meta = service["metadata"]
            if meta.get("namespace") == namespace and meta.get("name") == name:
                return plan_view(service)
        return None
