"""What an InferenceService publishes for the power policy's efficiency mechanisms
(`spec.power.efficiency` of the policy file): router weights for a low-priority pool
(routing.py) and each replica's phase mix for the power loop's phase-aware clocks (phases.py).

Called by the InferenceService controller every cycle with the service's status about to be
written; adds `status.routing` and `status.replicaPhases` and keeps each replica pod's
`voltpack.io/router-weight` annotation in line. A service the mechanisms do not apply to (high
priority, or the policy sets neither) carries neither, and its pods lose the annotation.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import CoreV1Api

from voltpack.model.errors import VoltpackError
from voltpack.model.resources.inferenceservice import (
    PRIORITY_VALUES,
    InferenceServiceSpec,
    PlannedGroup,
    ReplicaPhase,
)
from voltpack.operator.inference.phases import (
    PhaseCost,
    ServicePhases,
    TokenSample,
    parse_token_counters,
    phase_cost,
)
from voltpack.operator.inference.plans import group_key
from voltpack.operator.inference.pods import GROUP_LABEL
from voltpack.operator.inference.routing import (
    RateWindow,
    RequestCost,
    decide_routing,
    pool_pods,
    request_cost,
    weight_annotation,
)
from voltpack.operator.inference.vllm import Fetch, endpoints_of, scrape_pages
from voltpack.operator.kube.client import call_json, status_code
from voltpack.operator.kube.conventions import ROUTER_WEIGHT_ANNOTATION
from voltpack.operator.kube.timestamps import rfc3339
from voltpack.operator.kube.translate import pod_priority
from voltpack.perf.inference_profile import ProfileBook, default_profile_book
from voltpack.policies.schema import PowerSpec

log = logging.getLogger(__name__)

MIN_PHASE_SCRAPE_S = 0.5
"""Replicas are scraped for their token counters every quarter window, at most this often."""


def is_low_priority(
    spec: InferenceServiceSpec, pods: Sequence[dict[str, Any]], high_priority_min: int
) -> bool:
    """Whether the service's replicas rank below `high_priority_min`: its `spec.priority`, or
    with a PriorityClass its pods' priority (unknown without pods, or unreadable: high, the
    side that is never consolidated or slowed)."""
    if spec.priority_class_name is None:
        return PRIORITY_VALUES[spec.priority] < high_priority_min
    if not pods:
        return False
    try:
        return all(pod_priority(pod) < high_priority_min for pod in pods)
    except VoltpackError:
        return False


@dataclass
class ServiceEfficiency:
    """Routing and phase-mix state of every service (in memory; the active set also lives in
    each service's status)."""

    core: CoreV1Api
    power: PowerSpec
    fetch: Fetch
    book: ProfileBook | None = None
    windows: dict[str, RateWindow] = field(default_factory=dict)
    phases: dict[str, ServicePhases] = field(default_factory=dict)
    _costs: dict[tuple[str, ...], RequestCost | None] = field(default_factory=dict)
    _phase_costs: dict[tuple[str, str], PhaseCost] = field(default_factory=dict)

    def keep_only(self, keys: set[str]) -> None:
        """Forget services that are gone."""
        self.windows = {k: v for k, v in self.windows.items() if k in keys}
        self.phases = {k: v for k, v in self.phases.items() if k in keys}

    def publish(
        self,
        key: str,
        service: dict[str, Any],
        spec: InferenceServiceSpec,
        groups: Sequence[PlannedGroup] | None,
        pods: list[dict[str, Any]],
        observed_rate_per_s: float | None,
        status: dict[str, Any],
        now_s: float,
    ) -> None:
        """Add `routing` and `replicaPhases` to `status` (the one about to be written) and
        annotate the replica pods; `groups`: the plan in effect's (None: no plan)."""
        efficiency = self.power.efficiency
        low = is_low_priority(spec, pods, self.power.high_priority_min)
        previous = (service.get("status") or {}).get("routing")
        weights: dict[str, float] = {}
        pool = pool_pods(pods, groups or ())
        if efficiency.routing is not None and low and groups and pool:
            cost = self._request_cost(spec, groups)
            window = self.windows.setdefault(key, RateWindow())
            decision = decide_routing(
                pool, previous, observed_rate_per_s, window, cost, efficiency.routing, now_s
            )
            status["routing"] = decision.status
            weights = decision.weights
        else:
            self.windows.pop(key, None)
        self._annotate(pods, weights)
        if (
            efficiency.phase_clocks is not None
            and groups
            and (low or efficiency.phase_clocks_high_priority)
        ):
            phases = self._replica_phases(key, spec, groups, pods, now_s)
            if phases:
                status["replicaPhases"] = phases
        else:
            self.phases.pop(key, None)

    def _request_cost(
        self, spec: InferenceServiceSpec, groups: Sequence[PlannedGroup]
    ) -> RequestCost | None:
        params = self.power.efficiency.routing
        assert params is not None
        sizes = [f"{s.prompt_tokens}/{s.output_tokens}/{s.share}" for s in spec.request_sizes]
        cache_key = (spec.model, *sorted(group_key(g) for g in groups), *sizes, repr(params))
        if cache_key not in self._costs:
            self._costs[cache_key] = request_cost(spec, groups, self._book(), params)
        return self._costs[cache_key]

    def _book(self) -> ProfileBook:
        return self.book or default_profile_book()

    def _annotate(self, pods: list[dict[str, Any]], weights: dict[str, float]) -> None:
        """Each pod's router weight as `weights` says; pods outside them lose the annotation."""
        for pod in pods:
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            name = meta["name"]
            current = (meta.get("annotations") or {}).get(ROUTER_WEIGHT_ANNOTATION)
            wanted = weight_annotation(weights[name]) if name in weights else None
            if current == wanted:
                continue
            body = {"metadata": {"annotations": {ROUTER_WEIGHT_ANNOTATION: wanted}}}
            try:
                call_json(self.core.patch_namespaced_pod, name, meta.get("namespace"), body)
            except Exception as error:
                if status_code(error) != 404:  # gone meanwhile: nothing to route to
                    raise

    def _replica_phases(
        self,
        key: str,
        spec: InferenceServiceSpec,
        groups: Sequence[PlannedGroup],
        pods: list[dict[str, Any]],
        now_s: float,
    ) -> dict[str, Any]:
        """Scrape the replicas' token counters (every quarter window) and return each one's
        phase mix as the status shows it (replicas without a mix are left out)."""
        params = self.power.efficiency.phase_clocks
        assert params is not None
        tracker = self.phases.setdefault(key, ServicePhases())
        endpoints = endpoints_of(pods, spec.scaling.metrics)
        if tracker.due(now_s, max(MIN_PHASE_SCRAPE_S, params.window_s / 4)):
            results: dict[str, TokenSample | str] = scrape_pages(
                endpoints, spec.scaling.metrics.timeout_seconds, self.fetch,
                parse_token_counters,
            )  # fmt: skip
            tracker.record(now_s, results, [e.uid for e in endpoints], params.window_s)
        by_key = {group_key(g): g for g in groups}
        labels = {
            p["metadata"]["name"]: (p["metadata"].get("labels") or {}).get(GROUP_LABEL)
            for p in pods
        }
        phases: dict[str, Any] = {}
        for endpoint in endpoints:
            window = tracker.windows.get(endpoint.uid)
            group = by_key.get(labels.get(endpoint.pod) or "")
            if window is None or group is None:
                continue
            mix = window.mix(self._phase_cost(spec, group), params.window_s)
            if mix is None:
                continue
            phase = ReplicaPhase(
                prefill_share=mix.prefill_share,
                decode_share=mix.decode_share,
                observed_at=rfc3339(mix.at_s),
            )
            phases[endpoint.pod] = phase.model_dump(mode="json", by_alias=True)
        return phases

    def _phase_cost(self, spec: InferenceServiceSpec, group: PlannedGroup) -> PhaseCost:
        sizes = ",".join(
            f"{s.prompt_tokens}/{s.output_tokens}/{s.share}" for s in spec.request_sizes
        )
        cache_key = (f"{spec.model}/{group.gpu_type}/{group.tensor_parallel}", sizes)
        if cache_key not in self._phase_costs:
            profile = self._book().profile(spec.model, group.gpu_type, group.tensor_parallel)
            self._phase_costs[cache_key] = phase_cost(spec, profile)
        return self._phase_costs[cache_key]
