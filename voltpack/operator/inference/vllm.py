"""An InferenceService's request rate from its replicas' own vLLM metrics (rateSource: vllm).

Every `scaling.sampleSeconds` slot the operator scrapes each Running replica's Prometheus
endpoint (`http://<status.podIP>:<metrics.port><metrics.path>`, vLLM's 8000 and /metrics by
default) and reads `vllm:request_success_total` (every finish reason) and the in-flight gauges
`vllm:num_requests_running` + `vllm:num_requests_waiting`.

Arrivals, not completions: between two scrapes of a pod, requests that arrived = requests
finished + the change of requests in flight (conservation). Completions alone are capped by
the fleet's throughput, so a saturated fleet would never measure more than it serves; the
waiting gauge carries the demand it has not served yet. A counter that went down is a
restarted server (a reset): its arrivals since are its new count plus what it holds; never a
negative count. A pod seen for the first time counts from that scrape, unless it started
after the counting began (then from zero, its server's start). Counting begins at the first
scrape every replica answered; no slot before it is complete. A pod that fails to
answer keeps its last sample, so its next answer covers the gap; a pod that is gone takes
its requests since its last scrape with it (an undercount). The arrivals of an interval are
spread over the slots it covers in proportion to time.

A slot is complete once the counting has covered it whole and a later slot has begun; only
complete slots are planned from. The history lives in the operator's memory (two days at
most), like the annotation's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
from prometheus_client.parser import text_string_to_metric_families

from voltpack.model.errors import InvalidRequestError
from voltpack.model.resources.inferenceservice import MetricsEndpoint
from voltpack.operator.kube.timestamps import pod_start_s

SUCCESS_FAMILY = "vllm:request_success"
"""vLLM's counter of finished requests (sample `vllm:request_success_total`)."""
RUNNING_GAUGE = "vllm:num_requests_running"
WAITING_GAUGE = "vllm:num_requests_waiting"
T = TypeVar("T")
SCRAPE_WORKERS = 8
"""Replicas scraped at once (a scrape waits at most `metrics.timeoutSeconds`)."""


@dataclass(frozen=True)
class PodSample:
    """One replica's counters at one scrape."""

    success_total: float
    running: float
    waiting: float

    @property
    def in_flight(self) -> float:
        """Requests the server holds: running and waiting."""
        return self.running + self.waiting


@dataclass(frozen=True)
class Endpoint:
    """A Running replica and where its metrics are served."""

    pod: str
    uid: str
    url: str
    started_s: float | None


def family_sums(
    text: str, counters: tuple[str, ...], gauges: tuple[str, ...] = ()
) -> dict[str, float]:
    """Every series of each named family of a Prometheus text page summed (a counter: its
    `_total` samples only, not e.g. `_created`). Families absent from the page are absent
    from the result. InvalidRequestError when the page is not Prometheus text."""
    sums: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            if family.name not in counters and family.name not in gauges:
                continue
            for sample in family.samples:
                if family.name in counters and sample.name != family.name + "_total":
                    continue
                sums[family.name] = sums.get(family.name, 0.0) + float(sample.value)
    except ValueError as exc:
        raise InvalidRequestError(f"not Prometheus text format: {exc}") from None
    return sums


def finite_counts(values: list[float], what: str) -> list[float]:
    """`values` if every one is finite and >= 0, else InvalidRequestError naming `what`."""
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise InvalidRequestError(f"negative or non-finite {what}: {values}")
    return values


def parse_vllm_metrics(text: str) -> PodSample:
    """The counters of one vLLM metrics page (Prometheus text format, every series of a
    family summed). InvalidRequestError naming what is missing or unreadable."""
    sums = family_sums(text, (SUCCESS_FAMILY,), (RUNNING_GAUGE, WAITING_GAUGE))
    if SUCCESS_FAMILY not in sums:
        raise InvalidRequestError(
            f"no {SUCCESS_FAMILY}_total counter (is it a vLLM server, and the right port/path?)"
        )
    values = [sums[SUCCESS_FAMILY], sums.get(RUNNING_GAUGE, 0.0), sums.get(WAITING_GAUGE, 0.0)]
    return PodSample(*finite_counts(values, "vLLM counters"))


def arrivals_between(before: PodSample, after: PodSample) -> float:
    """Requests that arrived at one server between two samples: finished plus the change of
    those in flight; after a counter reset, its new count plus those in flight. Never < 0."""
    if after.success_total < before.success_total:
        return after.success_total + after.in_flight
    finished = after.success_total - before.success_total
    return max(0.0, finished + after.in_flight - before.in_flight)


def endpoints_of(pods: Iterable[dict[str, Any]], metrics: MetricsEndpoint) -> list[Endpoint]:
    """The Running replicas with an IP, and their metrics URL."""
    found = []
    for pod in pods:
        meta, status = pod["metadata"], pod.get("status") or {}
        if meta.get("deletionTimestamp") or status.get("phase") != "Running":
            continue
        ip = status.get("podIP")
        if not ip:
            continue
        host = f"[{ip}]" if ":" in ip else ip
        found.append(
            Endpoint(
                pod=meta["name"],
                uid=str(meta.get("uid") or meta["name"]),
                url=f"http://{host}:{metrics.port}{metrics.path}",
                started_s=pod_start_s(pod),
            )
        )
    return sorted(found, key=lambda e: e.pod)


Fetch = Callable[[str, float], str]
"""(url, timeout_s) -> the page's text; raises on any failure."""


def http_fetch(url: str, timeout_s: float) -> str:
    """GET `url` (no redirects, no proxy from the environment)."""
    with httpx.Client(timeout=timeout_s, trust_env=False) as client:
        response = client.get(url)
        response.raise_for_status()
        return response.text


def scrape(
    endpoints: Sequence[Endpoint], timeout_s: float, fetch: Fetch = http_fetch
) -> dict[str, PodSample | str]:
    """Each endpoint's request counters, or why it failed (by pod uid); never raises."""
    return scrape_pages(endpoints, timeout_s, fetch, parse_vllm_metrics)


def scrape_pages(
    endpoints: Sequence[Endpoint], timeout_s: float, fetch: Fetch, parse: Callable[[str], T]
) -> dict[str, T | str]:
    """Each endpoint's page read by `parse`, or why it failed (by pod uid); never raises."""

    def one(endpoint: Endpoint) -> T | str:
        try:
            return parse(fetch(endpoint.url, timeout_s))
        except Exception as exc:  # unreachable, HTTP error, malformed: said, never raised
            return f"pod {endpoint.pod} ({endpoint.url}): {type(exc).__name__}: {exc}"[:500]

    if not endpoints:
        return {}
    with ThreadPoolExecutor(max_workers=min(SCRAPE_WORKERS, len(endpoints))) as pool:
        results = list(pool.map(one, endpoints))
    return {e.uid: r for e, r in zip(endpoints, results, strict=True)}


@dataclass
class CounterSlots:
    """Arrivals per slot of `step_s` seconds, from successive scrapes of a service's pods."""

    step_s: float
    max_slots: int
    counts: dict[int, float] = field(default_factory=dict)
    last: dict[str, tuple[float, PodSample]] = field(default_factory=dict)
    """Per pod uid: the time and sample of its last answer."""
    counting_since_s: float | None = None
    last_scrape_s: float | None = None
    failures: list[str] = field(default_factory=list)
    """Why pods of the latest scrape did not answer."""
    waiting: float | None = None
    """Requests waiting over the pods that answered the latest scrape."""
    version: int = 0

    def due(self, now_s: float) -> bool:
        """Whether a new slot began since the last scrape."""
        last = self.last_scrape_s
        return last is None or now_s < last or int(now_s // self.step_s) > int(last // self.step_s)

    def record(
        self, now_s: float, endpoints: Sequence[Endpoint], results: dict[str, PodSample | str]
    ) -> None:
        """Add one scrape's arrivals (`results` by pod uid, from `scrape`)."""
        if self.last_scrape_s is not None and now_s < self.last_scrape_s:
            return  # a clock that went back: keep the history as it is
        self.failures = []
        waiting = 0.0
        live = {e.uid for e in endpoints}
        for endpoint in endpoints:
            result = results.get(endpoint.uid, f"pod {endpoint.pod} ({endpoint.url}): no answer")
            if isinstance(result, str):
                self.failures.append(result)
                continue
            waiting += result.waiting
            known = self.last.get(endpoint.uid)
            since = self.counting_since_s
            started = endpoint.started_s
            if known is None and since is not None and started is not None and started >= since:
                known = (min(started, now_s), PodSample(0.0, 0.0, 0.0))  # its server from 0
            if known is not None:
                self._spread(known[0], now_s, arrivals_between(known[1], result))
            self.last[endpoint.uid] = (now_s, result)
        for uid in set(self.last) - live:
            del self.last[uid]
        self.waiting = waiting if len(self.failures) < len(endpoints) else None
        if self.counting_since_s is None and endpoints and not self.failures:
            self.counting_since_s = now_s  # every replica answered: counted whole from here
        self.last_scrape_s = now_s
        newest = int(now_s // self.step_s)
        for slot in [s for s in self.counts if s <= newest - self.max_slots]:
            del self.counts[slot]
        self.version += 1

    def _spread(self, start_s: float, end_s: float, arrivals: float) -> None:
        if arrivals <= 0:
            return
        if end_s <= start_s:
            slot = int(end_s // self.step_s)
            self.counts[slot] = self.counts.get(slot, 0.0) + arrivals
            return
        slot = int(start_s // self.step_s)
        while slot * self.step_s < end_s:
            overlap = min(end_s, (slot + 1) * self.step_s) - max(start_s, slot * self.step_s)
            if overlap > 0:
                share = arrivals * overlap / (end_s - start_s)
                self.counts[slot] = self.counts.get(slot, 0.0) + share
            slot += 1

    def complete(self, now_s: float) -> tuple[int, list[float]]:
        """(first slot, arrivals per slot) of the complete slots: counted whole, before the
        slot of the latest scrape (and of `now_s`); empty when none is."""
        if self.counting_since_s is None or self.last_scrape_s is None:
            return 0, []
        first = math.ceil(self.counting_since_s / self.step_s - 1e-9)
        first = max(first, int(now_s // self.step_s) - self.max_slots + 1)
        last = int(min(now_s, self.last_scrape_s) // self.step_s) - 1
        if last < first:
            return first, []
        return first, [self.counts.get(slot, 0.0) for slot in range(first, last + 1)]
