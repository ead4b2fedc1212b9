"""The InferenceService controller: plan the fleet, keep its replica pods, report why.

Every cycle (as leader), for each service:

1. Parse the spec (a malformed one: phase Invalid, a condition and an Event naming the field;
   existing replicas are left alone).
2. The planning rate (inference_rates.py): the spec's, or one derived from the measured rate.
3. Re-plan only when there is no plan, the plan-relevant spec changed (model, SLO, GPU types,
   prices, request sizes, split), or the planning rate left +-`scaling.replanRateChange`
   (default 10%) of the rate the plan in effect was made for (hysteresis: a rate that wobbles
   inside the band changes nothing; one that leaves it re-plans once, and the new plan's rate is
   the new centre). An infeasible plan is not retried until the spec or the rate moves likewise.
4. Create, replace and delete replica pods to match the plan in effect; an infeasible re-plan
   keeps the plan in effect and its replicas, and says so.
5. Status (plan, predicted cost, planning rate and its source, conditions Planned,
   SLOInfeasible and Scaled), an Event on every plan and on every new infeasibility.

The plan in effect is kept in the service's status (with the rate it was made for and the
spec's fingerprint), so a new leader carries on without re-planning.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
from kubernetes.client import CoreV1Api, CustomObjectsApi
from pydantic import ValidationError

from voltpack.model.errors import VoltpackError
from voltpack.model.resources import API_GROUP, API_VERSION
from voltpack.model.resources.inferenceservice import (
    OBSERVED_SLO_ATTAINMENT_ANNOTATION,
    InferenceServiceSpec,
    InferenceServiceStatus,
    PlannedGroup,
    RateSourceKind,
)
from voltpack.model.topology import ClusterTopology
from voltpack.operator.inference.efficiency import ServiceEfficiency
from voltpack.operator.inference.kv import (
    KvPlacement,
    links_fingerprint,
    links_of,
    plan_with_kv,
    restored,
)
from voltpack.operator.inference.plans import (
    ClusterProfiles,
    check_spec,
    cluster_fingerprint,
    cluster_gpu_shapes,
    groups_text,
    plan_request,
    plannable_types,
    planned_groups,
    replica_count,
    spec_hash,
)
from voltpack.operator.inference.pods import (
    KIND,
    SERVICE_LABEL,
    TEMPLATE_LABEL,
    kv_annotations,
    owner_uid,
    replica_name,
    replica_pod,
    template_hash,
)
from voltpack.operator.inference.rates import HISTORY_S, RateTracker, parse_observed_rate
from voltpack.operator.inference.vllm import (
    CounterSlots,
    Fetch,
    endpoints_of,
    http_fetch,
    scrape,
)
from voltpack.operator.kube.binder import record_event
from voltpack.operator.kube.client import api_message, call_json, status_code
from voltpack.operator.kube.conventions import (
    MIN_MEMBERS_ANNOTATION,
    POD_GROUP_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
)
from voltpack.perf.inference_profile import ProfileBook
from voltpack.policies.inference.attainment import predicted_attainment
from voltpack.policies.inference.kv_placement import LevelLink
from voltpack.policies.inference.mix_planner import InfeasiblePlanError, plan_service
from voltpack.policies.inference.plan import ServingPlan
from voltpack.policies.inference.scaling import PlanningRate, should_replan
from voltpack.policies.inference.window_sizing import (
    WindowSizedPlan,
    plan_service_on_window,
    window_from_slots,
    window_prediction,
)
from voltpack.policies.schema import PowerSpec

BURST_WINDOW = (
    "the burst window's requests (counted per slot, spread evenly over it, sizes drawn "
    "from spec.requestSizes)"
)

log = logging.getLogger(__name__)

PLURAL = "inferenceservices"
TERMINAL = ("Succeeded", "Failed")
PLACEMENT_ANNOTATIONS = (POD_GROUP_ANNOTATION, MIN_MEMBERS_ANNOTATION, TOPOLOGY_REQUIRED_ANNOTATION)
"""What keeps a split pool together; a replica whose values differ from the plan's is replaced."""


@dataclass(frozen=True)
class ServicePlan:
    """The plan in effect for one service, and why it was made."""

    uid: str
    spec_hash: str
    """`<spec fingerprint>/<cluster fingerprint>` (inference_plans.py)."""
    rate_per_s: float
    rate_source: str
    rate_source_kind: RateSourceKind | None
    """spec, annotation or vllm (None: a plan recorded before this field)."""
    groups: tuple[PlannedGroup, ...]
    cost_per_hour: float
    split: bool
    predicted_slo_attainment: float | None
    """The planner's request-level check of the plan (`predicted_attainment`)."""
    predicted_slo_attainment_basis: str | None
    reason: str
    """`Planned` (the first plan) or `Replanned`."""
    message: str
    planned_at: str


@dataclass(frozen=True)
class MetricsReading:
    """What the replicas' vLLM metrics gave this cycle (rateSource: vllm)."""

    rate: PlanningRate
    kind: RateSourceKind | None
    problems: list[str]
    """Replicas that did not answer, or why there was nothing to scrape."""
    waiting: float | None
    observed_rate_per_s: float | None
    """Arrivals per second in the latest complete slot."""
    endpoints: int


@dataclass(frozen=True)
class _Failure:
    spec_hash: str
    rate_per_s: float
    message: str


@dataclass
class ServiceFigures:
    """One service's gauges (read by the metrics collector)."""

    cost_per_hour: float | None
    replicas: dict[tuple[str, str], int] = field(default_factory=dict)
    """(GPU type, role) -> planned replicas."""
    planning_rate_per_s: float | None = None
    slo_attainment: float | None = None
    predicted_slo_attainment: float | None = None


def service_key(service: dict[str, Any]) -> str:
    """`namespace/name` of a service."""
    meta = service["metadata"]
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"


def rfc3339(seconds: float) -> str:
    """Unix seconds as an RFC 3339 UTC time."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def describe_invalid(error: ValidationError) -> str:
    """The first problem of a malformed spec, naming the field (`spec.slo.tpotMs: ...`)."""
    first = error.errors()[0]
    location = list(first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    names_itself = not location or (
        isinstance(location[-1], str) and message.startswith(location[-1])
    )
    if names_itself:  # a validator's message that starts with the field's own path
        location = location[:-1]
    path = "spec"
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return f"{path}.{message}" if names_itself else f"{path}: {message}"


def replan_reason(
    current: ServicePlan | None, fingerprint: str, rate: PlanningRate, threshold: float
) -> str | None:
    """Why the service needs a new plan, or None to keep the one in effect."""
    if current is None:
        return "first plan"
    if current.spec_hash != fingerprint:
        if current.spec_hash.partition("/")[0] != fingerprint.partition("/")[0]:
            return "the spec changed"
        return "the cluster's allowed GPU types or their largest nodes changed"
    if should_replan(current.rate_per_s, rate.rate_per_s, threshold):
        return (
            f"the planning rate moved from {current.rate_per_s:.4g}/s to {rate.rate_per_s:.4g}/s"
            f" (more than +-{threshold:.0%})"
        )
    return None


def observed_attainment(annotations: dict[str, str]) -> float | None:
    """The measured SLO attainment a metrics adapter reported (None if absent or unreadable)."""
    text = annotations.get(OBSERVED_SLO_ATTAINMENT_ANNOTATION)
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and 0.0 <= value <= 1.0 else None


class InferenceServiceController:
    """Reconciles every InferenceService: its plan, replica pods, status and Events."""

    def __init__(
        self,
        core: CoreV1Api,
        custom: CustomObjectsApi,
        clock: Callable[[], float] = time.time,
        book: ProfileBook | None = None,
        fetch: Fetch = http_fetch,
        power: PowerSpec | None = None,
    ) -> None:
        """`clock`: Unix seconds (rate history, plan times); `book`: the profiles to plan
        with (default: voltpack's calibrated book); `fetch`: how a replica's metrics page is
        read (rateSource: vllm; default HTTP GET); `power`: the policy file's power spec,
        whose `efficiency` makes low-priority services publish router weights and replica
        phase mixes (efficiency.py; None: neither)."""
        self.fetch = fetch
        self.efficiency = ServiceEfficiency(core, power, fetch, book) if power is not None else None
        self.counters: dict[str, CounterSlots] = {}
        """Per service with rateSource vllm: its replicas' request counts per slot."""
        self._metrics_said: dict[str, str] = {}
        self.core = core
        self.custom = custom
        self.clock = clock
        self.book = book
        self.rates = RateTracker()
        self.plans: dict[str, ServicePlan] = {}
        self._failures: dict[str, _Failure] = {}
        self._warned: dict[str, str] = {}
        self.figures: dict[str, ServiceFigures] = {}
        self.replans = 0
        """Plans made by this replica (first plans included)."""
        self.shapes: dict[str, int] | None = None
        """GPU type -> most GPUs on one node, this cycle (None: plans ignore the cluster)."""
        self._books: dict[tuple[tuple[str, int], ...], ClusterProfiles] = {}
        self.links: list[LevelLink] | None = None
        """The Topology's levels with their KV bandwidth this cycle (None: no Topology)."""
        self.kv: dict[str, KvPlacement] = {}
        """Per service: where its split pool is kept, and the KV bandwidth planned with."""
        self._kv_said: dict[str, str] = {}
        self._shapes_of: tuple[tuple[tuple[str, Any], ...], dict[str, int]] | None = None

    def list_function(self, **kwargs: Any) -> Any:
        """Cluster-wide list/watch of InferenceServices (for a ResourceCache)."""
        return self.custom.list_cluster_custom_object(API_GROUP, API_VERSION, PLURAL, **kwargs)

    def reconcile_all(
        self,
        services: Iterable[dict[str, Any]],
        pods: list[dict[str, Any]],
        unplaced: dict[str, str],
        synced: bool = True,
        nodes: list[dict[str, Any]] | None = None,
        topology: ClusterTopology | None = None,
    ) -> None:
        """Reconcile each service; one service's failure does not stop the others. With
        `synced` (the service cache has listed once), replica pods whose service is gone are
        deleted. With `nodes`, plans use only the GPU types the nodes carry, and replicas no
        larger than the largest node of their type. With `topology` (the scheduler's, from
        the active Topology), split pools are kept inside the level their KV traffic needs."""
        services = list(services)
        self.shapes = self._cluster_shapes(nodes) if nodes is not None and services else None
        self.links = links_of(topology) if services else None
        by_service: dict[str, list[dict[str, Any]]] = {}
        for pod in pods:
            meta = pod["metadata"]
            owner = (meta.get("labels") or {}).get(SERVICE_LABEL)
            if owner:
                by_service.setdefault(f"{meta.get('namespace')}/{owner}", []).append(pod)
        keys = set()
        for service in services:
            key = service_key(service)
            keys.add(key)
            try:
                self.reconcile(service, by_service.get(key, []), unplaced)
            except Exception as error:  # one service must not stop the loop
                log.warning("InferenceService %s: %s", key, api_message(error), exc_info=True)
        if synced:
            for key in set(by_service) - keys:
                for pod in by_service[key]:
                    try:
                        self._delete_pod(pod)
                    except Exception as error:
                        log.warning("replica %s of gone service %s: %s",
                                    pod["metadata"]["name"], key, api_message(error))  # fmt: skip
        self.plans = {k: v for k, v in self.plans.items() if k in keys}
        self._failures = {k: v for k, v in self._failures.items() if k in keys}
        self._warned = {k: v for k, v in self._warned.items() if k in keys}
        self.figures = {k: v for k, v in self.figures.items() if k in keys}
        self.kv = {k: v for k, v in self.kv.items() if k in keys}
        self.counters = {k: v for k, v in self.counters.items() if k in keys}
        self._metrics_said = {k: v for k, v in self._metrics_said.items() if k in keys}
        self._kv_said = {k: v for k, v in self._kv_said.items() if k in keys}
        self.rates.keep_only(keys)
        if self.efficiency is not None:
            self.efficiency.keep_only(keys)

    def reconcile(
        self, service: dict[str, Any], pods: list[dict[str, Any]], unplaced: dict[str, str]
    ) -> None:
        """Bring one service's plan, pods and status in line with its spec and rate."""
        meta = service["metadata"]
        key = service_key(service)
        if meta.get("deletionTimestamp"):
            return  # its pods go with it (owner references; or the orphan sweep)
        annotations = meta.get("annotations") or {}
        try:
            spec = InferenceServiceSpec.model_validate(service.get("spec") or {})
            check_spec(spec)
        except ValidationError as exc:
            self._invalid(service, describe_invalid(exc), pods)
            return
        except VoltpackError as exc:
            self._invalid(service, str(exc), pods)
            return
        now = self.clock()
        current = self._current(key, service)
        reading: MetricsReading | None = None
        rate_kind: RateSourceKind | None
        if spec.scaling.rate_source == "vllm":
            reading = self._vllm_rate(key, spec, pods, current, now)
            rate, rate_kind = reading.rate, reading.kind
            self.rates.forget_annotation(key)
        else:
            self.counters.pop(key, None)
            try:
                observed = parse_observed_rate(annotations)
                ignored = ""
            except VoltpackError as exc:
                observed, ignored = None, f"; {exc}"
            rate = self.rates.planning_rate(key, spec, observed, now)
            rate_kind = "spec" if observed is None else "annotation"
            if ignored:
                rate = PlanningRate(rate.rate_per_s, rate.source + ignored)
        fingerprint = f"{spec_hash(spec)}/{cluster_fingerprint(spec, self.shapes)}"
        if spec.split == "auto":
            fingerprint += f"/{links_fingerprint(self.links)}"
        threshold = spec.scaling.replan_rate_change
        why = replan_reason(current, fingerprint, rate, threshold)
        failure: str | None = None
        if why is not None:
            remembered = self._failures.get(key)
            if (
                remembered is not None
                and remembered.spec_hash == fingerprint
                and not should_replan(remembered.rate_per_s, rate.rate_per_s, threshold)
            ):
                failure = remembered.message
            else:
                window = self.rates.burst_window(key)
                try:
                    plan, kv, sized = self._plan(spec, rate.rate_per_s, window)
                except InfeasiblePlanError as exc:
                    failure = str(exc)
                    self._failures[key] = _Failure(fingerprint, rate.rate_per_s, failure)
                except VoltpackError as exc:
                    self._invalid(service, str(exc), pods)
                    return
                else:
                    self._failures.pop(key, None)
                    self.replans += 1
                    groups = tuple(planned_groups(plan))
                    reason = "Planned" if current is None else "Replanned"
                    predicted = (
                        window_prediction(sized, BURST_WINDOW)
                        if sized
                        else predicted_attainment(plan)
                    )
                    message = (
                        f"the cheapest fleet for {rate.rate_per_s:.4g} requests/s "
                        f"({rate.source}) within TTFT {spec.slo.ttft_ms:g} ms and TPOT "
                        f"{spec.slo.tpot_ms:g} ms: {plan.summary()}; predicted SLO "
                        f"attainment {predicted.ratio:.1%} ({predicted.basis})"
                    )
                    if plan.notes:
                        message += " (" + "; ".join(plan.notes) + ")"
                    if current is not None:
                        message += f"; re-planned because {why}"
                    new = ServicePlan(
                        uid=str(meta.get("uid") or ""),
                        spec_hash=fingerprint,
                        rate_per_s=rate.rate_per_s,
                        rate_source=rate.source,
                        rate_source_kind=rate_kind,
                        groups=groups,
                        cost_per_hour=round(plan.cost_per_hour, 6),
                        split=plan.split,
                        predicted_slo_attainment=round(predicted.ratio, 4),
                        predicted_slo_attainment_basis=predicted.basis,
                        reason=reason,
                        message=message,
                        planned_at=rfc3339(now),
                    )
                    self._plan_event(service, current, new, why)
                    current = new
                    self.plans[key] = new
                    self.kv[key] = kv
        if failure is not None:
            kept = replica_count(current.groups) if current is not None else 0
            failure_text = f"{failure}; " + (
                f"keeping the {kept} existing replicas of the plan in effect"
                if current is not None
                else "no replicas created"
            )
            if self._warned.get(key) != failure_text and not _condition_says(
                service, "SLOInfeasible", failure_text
            ):
                record_event(self.core, _event_object(service), "SLOInfeasible", failure_text)
            self._warned[key] = failure_text
        else:
            failure_text = None
            self._warned.pop(key, None)
        kv_placement: KvPlacement | None = None
        if current is not None:
            kv_placement = self.kv.get(key)
            if kv_placement is None:
                kv_placement = restored(spec, current.groups, self.links, pods)
                self.kv[key] = kv_placement
            said = self._kv_said.get(key)
            if (
                kv_placement.reason != "NotSplit"
                and said != kv_placement.message
                and not _condition_says(service, "KVPlacement", kv_placement.message)
            ):
                kind = "Normal" if kv_placement.controlled else "Warning"
                record_event(
                    self.core, _event_object(service), "KVPlacement", kv_placement.message, kind
                )
            self._kv_said[key] = kv_placement.message
        live = (
            self._scale(service, spec, current, pods, kv_placement) if current is not None else pods
        )
        status = self._status(service, current, rate, failure_text, live, unplaced, now)
        extra = [_kv_condition(kv_placement)] if kv_placement is not None else []
        if reading is not None:
            extra.append(self._metrics_condition(service, key, reading))
            if reading.observed_rate_per_s is not None:
                status["observedRatePerSecond"] = round(reading.observed_rate_per_s, 9)
            if reading.waiting is not None:
                status["observedRequestsWaiting"] = reading.waiting
        else:
            self._metrics_said.pop(key, None)
        if extra:
            status["conditions"] = _with_transition_times(
                [*status["conditions"], *extra], service, meta.get("generation"), now
            )
        if self.efficiency is not None:
            if reading is not None:
                measured = None if reading.problems else reading.observed_rate_per_s
            else:
                try:
                    measured = parse_observed_rate(annotations)
                except VoltpackError:
                    measured = None
            self.efficiency.publish(
                key, service, spec, current.groups if current is not None else None, live,
                measured, status, now,
            )  # fmt: skip
        self._write_status(service, status)
        self.figures[key] = ServiceFigures(
            cost_per_hour=current.cost_per_hour if current is not None else None,
            replicas=_replicas_by_type_and_role(current.groups if current else ()),
            planning_rate_per_s=current.rate_per_s if current is not None else None,
            slo_attainment=observed_attainment(annotations),
            predicted_slo_attainment=current.predicted_slo_attainment if current else None,
        )

    def _vllm_rate(
        self,
        key: str,
        spec: InferenceServiceSpec,
        pods: list[dict[str, Any]],
        current: ServicePlan | None,
        now: float,
    ) -> MetricsReading:
        """The planning rate from the replicas' vLLM counters (scraped once per slot). Fail
        safe: while a replica does not answer, or before a slot has been counted whole, the
        rate is never below the plan in effect's (or, without a plan, the spec's)."""
        scaling = spec.scaling
        step_s = scaling.sample_seconds
        slots = self.counters.get(key)
        if slots is None or slots.step_s != step_s:
            slots = self.counters[key] = CounterSlots(step_s, max(2, int(HISTORY_S // step_s)))
        endpoints = endpoints_of(pods, scaling.metrics)
        if slots.due(now):
            slots.record(
                now, endpoints, scrape(endpoints, scaling.metrics.timeout_seconds, self.fetch)
            )
        problems = list(slots.failures)
        if not endpoints:
            problems.append(
                f"no Running replica with a pod IP to scrape (port {scaling.metrics.port}, "
                f"path {scaling.metrics.path})"
            )
        first, counts = slots.complete(now)
        observed = counts[-1] / step_s if counts else None
        if current is not None:
            floor, floor_kind = current.rate_per_s, current.rate_source_kind
            floor_text = f"the plan in effect's {current.rate_per_s:.4g}/s"
        else:
            floor, floor_kind = spec.rate_per_second, "spec"
            floor_text = f"spec.ratePerSecond {spec.rate_per_second:g}/s"
        if not counts:
            why = problems[0] if problems else "no slot counted whole yet"
            return MetricsReading(
                PlanningRate(floor, f"{floor_text}: no vLLM request count yet ({why})"),
                floor_kind,
                problems,
                slots.waiting,
                observed,
                len(endpoints),
            )
        rate = self.rates.counted_planning_rate(key, spec, first, counts, slots.version)
        kind: RateSourceKind | None = "vllm"
        if problems and rate.rate_per_s < floor:
            rate = PlanningRate(
                floor,
                f"{floor_text}, not lowered: the vLLM counts are incomplete ({problems[0]}) and "
                f"give {rate.rate_per_s:.4g}/s",
            )
            kind = floor_kind
        return MetricsReading(rate, kind, problems, slots.waiting, observed, len(endpoints))

    def _metrics_condition(
        self, service: dict[str, Any], key: str, reading: MetricsReading
    ) -> dict[str, Any]:
        """The MetricsAvailable condition; a Warning Event when replicas stop answering."""
        if not reading.problems:
            self._metrics_said.pop(key, None)
            return _condition(
                "MetricsAvailable",
                "True",
                "Scraped",
                f"{reading.endpoints} replicas answered with their vLLM request counters",
            )
        message = "; ".join(reading.problems[:3])
        if len(reading.problems) > 3:
            message += f"; and {len(reading.problems) - 3} more"
        message += "; the planning rate is not lowered until every replica answers"
        if self._metrics_said.get(key) != message and not _condition_says(
            service, "MetricsAvailable", message
        ):
            record_event(self.core, _event_object(service), "MetricsUnavailable", message)
        self._metrics_said[key] = message
        return _condition("MetricsAvailable", "False", "ScrapeFailed", message)

    def _cluster_shapes(self, nodes: list[dict[str, Any]]) -> dict[str, int]:
        """`cluster_gpu_shapes(nodes)`, recomputed only when a node changed."""
        key = tuple((n["metadata"]["name"], n["metadata"].get("resourceVersion")) for n in nodes)
        if any(version is None for _, version in key):
            return cluster_gpu_shapes(nodes)
        if self._shapes_of is None or self._shapes_of[0] != key:
            self._shapes_of = (key, cluster_gpu_shapes(nodes))
        return self._shapes_of[1]

    # -- the plan in effect ----------------------------------------------------------------

    def _plan(
        self,
        spec: InferenceServiceSpec,
        rate_per_s: float,
        window: tuple[np.ndarray, float] | None = None,
    ) -> tuple[ServingPlan, KvPlacement, WindowSizedPlan | None]:
        """The planner's plan for the spec at `rate_per_s`, over the allowed GPU types the
        cluster has, with replicas that fit on one of their nodes, and where its split pool
        is kept (the KV bandwidth it is planned with is that level's: inference_kv.py).
        With the burst `window` (requests per slot, slot seconds) the plan is sized on it as
        the benchmark sizes its plans (`plan_service_on_window`); the sizing is returned."""
        if self.shapes is None:
            request = plan_request(spec, rate_per_s)
            book = self.book
        else:
            types = self._plannable(spec)
            key = tuple(sorted(self.shapes.items()))
            book = self._books.get(key)
            if book is None:
                book = self._books[key] = ClusterProfiles(self.shapes, self.book)
            request = plan_request(spec, rate_per_s, types)
        requests = (
            window_from_slots(window[0], window[1], request.mix)
            if window is not None and window[0].sum() >= 1
            else None
        )
        sizings: list[WindowSizedPlan] = []

        def plan_at(link_bytes_per_s: float) -> ServingPlan:
            linked = replace(request, kv_link_bytes_per_s_per_gpu=link_bytes_per_s)
            if requests is None:
                return plan_service(linked, book)
            sized = plan_service_on_window(linked, *requests, book=book)
            sizings.append(sized)
            return sized.plan

        plan, kv = plan_with_kv(plan_at, self.links if spec.split == "auto" else None)
        return plan, kv, next((sized for sized in sizings if sized.plan is plan), None)

    def _plannable(self, spec: InferenceServiceSpec) -> list[str]:
        """The allowed GPU types the cluster has; InfeasiblePlanError naming them if none."""
        assert self.shapes is not None
        types = plannable_types(spec, self.shapes)
        if not types:
            allowed = ", ".join(spec.gpu_types) or "every priced type"
            present = ", ".join(sorted(self.shapes)) or "no GPU node"
            raise InfeasiblePlanError(
                f"none of the allowed GPU types ({allowed}) is on a node of the cluster (it "
                f"has {present}); allow one of those in spec.gpuTypes (and price it)"
            )
        return types

    def _current(self, key: str, service: dict[str, Any]) -> ServicePlan | None:
        """The plan in effect: this replica's, else the one the status records (a restart or
        a failover), else None."""
        uid = str(service["metadata"].get("uid") or "")
        known = self.plans.get(key)
        if known is not None and known.uid == uid:
            return known
        self.plans.pop(key, None)
        status = service.get("status") or {}
        try:
            recorded = InferenceServiceStatus.model_validate(status)
        except ValidationError:
            return None
        if (
            recorded.spec_hash is None
            or recorded.planning_rate_per_second is None
            or not recorded.plan
        ):
            return None
        planned = next((c for c in recorded.conditions if c.type == "Planned"), None)
        restored = ServicePlan(
            uid=uid,
            spec_hash=recorded.spec_hash,
            rate_per_s=recorded.planning_rate_per_second,
            rate_source=recorded.rate_source or "",
            rate_source_kind=recorded.rate_source_kind,
            groups=tuple(g.model_copy(update={"ready_replicas": 0}) for g in recorded.plan),
            cost_per_hour=recorded.predicted_cost_per_hour or 0.0,
            split=bool(recorded.split),
            predicted_slo_attainment=recorded.predicted_slo_attainment,
            predicted_slo_attainment_basis=recorded.predicted_slo_attainment_basis,
            reason=planned.reason if planned is not None and planned.reason else "Planned",
            message=planned.message if planned is not None else "",
            planned_at=recorded.last_plan_time or "",
        )
        self.plans[key] = restored
        return restored

    def _plan_event(
        self, service: dict[str, Any], old: ServicePlan | None, new: ServicePlan, why: str
    ) -> None:
        if old is None:
            message = f"{new.message}"
        else:
            message = (
                f"{why}: {groups_text(old.groups)} (${old.cost_per_hour:.2f}/h) -> "
                f"{groups_text(new.groups)} (${new.cost_per_hour:.2f}/h); planning rate "
                f"{new.rate_per_s:.4g}/s ({new.rate_source})"
            )
        record_event(self.core, _event_object(service), new.reason, message, kind="Normal")

    # -- pods ------------------------------------------------------------------------------

    def _scale(
        self,
        service: dict[str, Any],
        spec: InferenceServiceSpec,
        plan: ServicePlan,
        pods: list[dict[str, Any]],
        kv: KvPlacement | None = None,
    ) -> list[dict[str, Any]]:
        """Create the plan's missing replicas; delete pods that are not the plan's (another
        group, a surplus index, an old template, other placement annotations, finished, or
        another owner). A split pool kept inside one domain is one gang: when some of its
        replicas must be created while others run, those go too, so the pool is placed whole
        again. Returns the pods that stay."""
        meta = service["metadata"]
        wanted = {
            replica_name(meta["name"], group, index): (group, index)
            for group in plan.groups
            for index in range(group.replicas)
        }
        pool = {name for name, (group, _) in wanted.items() if group.role != "unified"}
        placement: dict[str, str] = {}
        if kv is not None and kv.level is not None and pool:
            placement = kv_annotations(meta["name"], len(pool), kv.level.label)
        template = template_hash(spec)
        uid = str(meta.get("uid") or "")
        kept: list[dict[str, Any]] = []
        present: set[str] = set()
        for pod in pods:
            pod_meta = pod["metadata"]
            name = pod_meta["name"]
            present.add(name)
            if pod_meta.get("deletionTimestamp"):
                continue
            given = pod_meta.get("annotations") or {}
            placed = {k: given[k] for k in PLACEMENT_ANNOTATIONS if k in given}
            stale = (
                name not in wanted
                or (pod_meta.get("labels") or {}).get(TEMPLATE_LABEL) != template
                or placed != (placement if name in pool else {})
                or (pod.get("status") or {}).get("phase") in TERMINAL
                or (uid and owner_uid(pod) not in (uid, None))
            )
            if stale:
                self._delete_pod(pod)
            else:
                kept.append(pod)
        if placement and pool - present:
            running = [
                p
                for p in kept
                if p["metadata"]["name"] in pool and (p.get("spec") or {}).get("nodeName")
            ]
            for pod in running:  # a gang is placed whole: the pool goes and comes back
                self._delete_pod(pod)
            kept = [p for p in kept if p not in running]
        for name, (group, index) in wanted.items():
            if name in present:
                continue
            try:
                call_json(
                    self.core.create_namespaced_pod,
                    meta["namespace"],
                    replica_pod(service, spec, group, index, placement if name in pool else None),
                )
            except Exception as error:
                if status_code(error) != 409:
                    raise
        return kept

    def _delete_pod(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        try:
            call_json(self.core.delete_namespaced_pod, meta["name"], meta.get("namespace"))
        except Exception as error:
            if status_code(error) != 404:
                raise

    # -- status ----------------------------------------------------------------------------

    def _status(
        self,
        service: dict[str, Any],
        plan: ServicePlan | None,
        rate: PlanningRate,
        failure: str | None,
        pods: list[dict[str, Any]],
        unplaced: dict[str, str],
        now: float,
    ) -> dict[str, Any]:
        meta = service["metadata"]
        annotations = meta.get("annotations") or {}
        bound = {
            p["metadata"]["name"]
            for p in pods
            if (p.get("spec") or {}).get("nodeName")
            and (p.get("status") or {}).get("phase") not in TERMINAL
        }
        groups: list[PlannedGroup] = []
        if plan is not None:
            for group in plan.groups:
                ready = sum(
                    replica_name(meta["name"], group, i) in bound for i in range(group.replicas)
                )
                groups.append(group.model_copy(update={"ready_replicas": ready}))
        replicas = replica_count(groups)
        ready = sum(group.ready_replicas for group in groups)
        conditions = []
        if plan is not None:
            message = plan.message
            if failure is None and abs(rate.rate_per_s - plan.rate_per_s) > 1e-12:
                message += (
                    f"; the latest planning rate {rate.rate_per_s:.4g}/s ({rate.source}) is "
                    "within the re-planning band: plan kept"
                )
            conditions.append(_condition("Planned", "True", plan.reason, message))
        else:
            conditions.append(
                _condition("Planned", "False", "NoPlan", failure or "waiting for the first plan")
            )
        conditions.append(
            _condition("SLOInfeasible", "True", "SLOInfeasible", failure)
            if failure is not None
            else _condition("SLOInfeasible", "False", "Feasible", "")
        )
        waiting = sorted(
            unplaced[f"{meta['namespace']}/{p['metadata']['name']}"]
            for p in pods
            if f"{meta['namespace']}/{p['metadata']['name']}" in unplaced
        )
        if plan is None:
            conditions.append(_condition("Scaled", "False", "NoPlan", "no plan in effect"))
        elif ready == replicas:
            conditions.append(
                _condition("Scaled", "True", "AllReplicasBound", f"{ready}/{replicas} bound")
            )
        else:
            reason = "Unschedulable" if waiting else "Waiting"
            detail = f"{ready}/{replicas} bound" + (f"; {waiting[0]}" if waiting else "")
            conditions.append(_condition("Scaled", "False", reason, detail))
        if failure is not None:
            phase = "Infeasible"
        elif plan is None:
            phase = "Pending"
        else:
            phase = "Ready" if ready == replicas else "Scaling"
        observed_rate: float | None
        try:
            observed_rate = parse_observed_rate(annotations)
        except VoltpackError:
            observed_rate = None
        status = InferenceServiceStatus(
            phase=phase,
            conditions=_with_transition_times(conditions, service, meta.get("generation"), now),
            plan=groups,
            split=plan.split if plan is not None else None,
            replicas=replicas,
            ready_replicas=ready,
            predicted_cost_per_hour=plan.cost_per_hour if plan is not None else None,
            predicted_slo_attainment=plan.predicted_slo_attainment if plan is not None else None,
            predicted_slo_attainment_basis=(
                plan.predicted_slo_attainment_basis if plan is not None else None
            ),
            planning_rate_per_second=plan.rate_per_s if plan is not None else None,
            rate_source=plan.rate_source if plan is not None else None,
            rate_source_kind=plan.rate_source_kind if plan is not None else None,
            latest_rate_per_second=round(rate.rate_per_s, 9),
            observed_rate_per_second=observed_rate,
            observed_slo_attainment=observed_attainment(annotations),
            spec_hash=plan.spec_hash if plan is not None else None,
            last_plan_time=plan.planned_at if plan is not None and plan.planned_at else None,
            observed_generation=meta.get("generation"),
        )
        return status.model_dump(mode="json", by_alias=True, exclude_none=True)

    def _invalid(self, service: dict[str, Any], message: str, pods: list[dict[str, Any]]) -> None:
        """A spec voltpack cannot plan: say which field and why; leave the replicas alone."""
        key = service_key(service)
        meta = service["metadata"]
        kept = len([p for p in pods if not p["metadata"].get("deletionTimestamp")])
        text = message + (f"; keeping {kept} existing replicas" if kept else "")
        if self._warned.get(key) != text and not _condition_says(service, "Planned", text):
            record_event(self.core, _event_object(service), "InvalidSpec", text)
        self._warned[key] = text
        conditions = [_condition("Planned", "False", "InvalidSpec", text)]
        status = {
            **(service.get("status") or {}),  # the plan in effect stays, with its replicas
            "phase": "Invalid",
            "conditions": _with_transition_times(
                conditions, service, meta.get("generation"), self.clock()
            ),
        }
        if meta.get("generation") is not None:
            status["observedGeneration"] = meta["generation"]
        self._write_status(service, status)
        self.figures.pop(key, None)

    def _write_status(self, service: dict[str, Any], status: dict[str, Any]) -> None:
        """Patch the status when it changed; fields it no longer has are removed."""
        previous = service.get("status") or {}
        if status == previous:
            return
        body = merge_patch(previous, status)
        meta = service["metadata"]
        call_json(
            self.custom.patch_namespaced_custom_object_status,
            API_GROUP, API_VERSION, meta["namespace"], PLURAL, meta["name"], {"status": body},
        )  # fmt: skip


def merge_patch(previous: dict[str, Any], wanted: dict[str, Any]) -> dict[str, Any]:
    """The JSON merge patch that turns `previous` into `wanted`: keys it no longer has are
    removed (null), in nested maps too (e.g. a pod gone from `routing.weights`)."""
    body: dict[str, Any] = {k: None for k in previous if k not in wanted}
    for key, value in wanted.items():
        before = previous.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            body[key] = merge_patch(before, value)
        else:
            body[key] = value
    return body


def _kv_condition(kv: KvPlacement) -> dict[str, Any]:
    status = "True" if kv.controlled else "False"
    return _condition("KVPlacement", status, kv.reason, kv.message)


def _condition(kind: str, status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message[:4000]}


def _with_transition_times(
    conditions: list[dict[str, Any]],
    service: dict[str, Any],
    generation: int | None,
    now: float,
) -> list[dict[str, Any]]:
    """Conditions with `lastTransitionTime` kept from the status while their status holds."""
    before = {c.get("type"): c for c in ((service.get("status") or {}).get("conditions") or [])}
    stamped = []
    for condition in conditions:
        old = before.get(condition["type"]) or {}
        moment = old.get("lastTransitionTime") if old.get("status") == condition["status"] else None
        stamped.append({**condition, "lastTransitionTime": moment or rfc3339(now)})
        if generation is not None:
            stamped[-1]["observedGeneration"] = generation
    return stamped


def _condition_says(service: dict[str, Any], kind: str, message: str) -> bool:
    """Whether the service's status already shows this condition message (no second Event
    after a restart)."""
    for condition in (service.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("message") == message[:4000]:
            return True
    return False


def _event_object(service: dict[str, Any]) -> dict[str, Any]:
    return {**service, "apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": KIND}


def _replicas_by_type_and_role(groups: Iterable[PlannedGroup]) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for group in groups:
        key = (group.gpu_type, group.role)
        counts[key] = counts.get(key, 0) + group.replicas
    return counts
