"""The Prometheus exporter: the node agent's latest GPU samples as metrics in base units.

`GpuCollector` is a `prometheus_client` custom collector that reads a `NodeReadings` snapshot
from a callable each time it is scraped. `TelemetryExporter` registers one in its own
`CollectorRegistry` (never the global one) and renders the text exposition format (0.0.4).

Names follow Prometheus' guidelines: base units as suffixes (`_watts`, `_joules_total`,
`_bytes`, `_hertz`, `_ratio`, `_seconds`), counters end in `_total`, and labels identify a GPU
(`node`, `gpu`, `uuid`, `model`, plus `namespace`, `pod`, `container` when a pod mapping is
given). A value the backend cannot read (None) is left out, never exported as 0. A GPU that is
not healthy exports only `voltpack_gpu_healthy 0` (and its fault metrics), so no stale reading
looks current.

Fault signals (`voltpack.telemetry.faults`), for every GPU, answering or not:
`voltpack_gpu_fault_action{action}` is 1 for the most severe action the GPU's active faults call
for (`none` without faults) and 0 for the other three; `voltpack_gpu_fault_active{signal,code,
action}` is 1 per active fault (`code` is the XID, empty for other signals); and
`voltpack_gpu_xid_errors_by_code_total{xid}` counts XID events by number.
`voltpack_gpu_healthy` keeps its meaning (the GPU answers its reads).

With `dcgm_compat=True` the exporter also serves the dcgm-exporter names that existing
dashboards use, in dcgm-exporter's units and labels (`gpu`, `UUID`, `device`, `modelName`,
`Hostname`). `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` is a counter without the `_total` suffix
in dcgm-exporter, which this client library cannot express, so it is served untyped under the
same name; `DCGM_FI_DEV_XID_ERRORS` is, as in DCGM, the last XID seen (a gauge), not a count.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from voltpack.telemetry.device import GpuInventory, GpuSample
from voltpack.telemetry.faults import ACTION_ORDER, ActiveFault, worst_action

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""Content type of `TelemetryExporter.render()`."""

_log = logging.getLogger(__name__)
_MHZ = 1e6
_MIB = 1024 * 1024


@dataclass(frozen=True)
class PodRef:
    """The container a GPU is assigned to (from the kubelet's pod-resources API)."""

    namespace: str
    pod: str
    container: str


PodMapping = Callable[[], Mapping[str, PodRef]]
"""Returns the pod of each assigned GPU, keyed by GPU UUID; called once per scrape."""


@dataclass(frozen=True)
class GpuReading:
    """The latest state of one GPU: its inventory, last good sample, and health."""

    inventory: GpuInventory
    sample: GpuSample | None
    healthy: bool
    faults: tuple[ActiveFault, ...] = ()


@dataclass(frozen=True)
class NodeReadings:
    """Everything the exporter serves for one node at one instant."""

    node: str
    gpus: tuple[GpuReading, ...] = ()
    last_sample_timestamp_s: float | None = None
    """Unix time of the last completed sampling pass."""
    sample_duration_s: float | None = None
    """How long the last sampling pass took."""


ReadingsSource = Callable[[], NodeReadings]


class _Families:
    """The metric families of one scrape, created on first use so empty ones are not served."""

    def __init__(self) -> None:
        self._families: dict[str, GaugeMetricFamily | CounterMetricFamily | Metric] = {}

    def gauge(self, name: str, doc: str, labels: list[str], values: list[str], v: float) -> None:
        family = self._families.get(name)
        if family is None:
            family = GaugeMetricFamily(name, doc, labels=labels)
            self._families[name] = family
        assert isinstance(family, GaugeMetricFamily)
        family.add_metric(values, v)

    def counter(self, name: str, doc: str, labels: list[str], values: list[str], v: float) -> None:
        family = self._families.get(name)
        if family is None:
            family = CounterMetricFamily(name, doc, labels=labels)
            self._families[name] = family
        assert isinstance(family, CounterMetricFamily)
        family.add_metric(values, v)

    def untyped(self, name: str, doc: str, labels: dict[str, str], v: float) -> None:
        family = self._families.get(name)
        if family is None:
            family = Metric(name, doc, "unknown")
            self._families[name] = family
        family.add_sample(name, labels, v)

    def __iter__(self) -> Iterator[Metric]:
        return iter(self._families.values())


class GpuCollector(Collector):
    """A custom collector turning the latest `NodeReadings` into Prometheus metrics."""

    def __init__(
        self,
        source: ReadingsSource,
        *,
        dcgm_compat: bool = False,
        pod_mapping: PodMapping | None = None,
    ) -> None:
        self._source = source
        self._dcgm_compat = dcgm_compat
        self._pod_mapping = pod_mapping
        self._seen_throttle: dict[str, set[str]] = {}

    def describe(self) -> Iterable[Metric]:
        """Nothing up front: the families depend on what the backend can read."""
        return []

    def collect(self) -> Iterable[Metric]:
        """One scrape: every metric of every GPU of the node."""
        readings = self._source()
        pods = self._pods()
        label_names = ["node", "gpu", "uuid", "model"]
        if pods is not None:
            label_names += ["namespace", "pod", "container"]
        out = _Families()
        for gpu in readings.gpus:
            inv = gpu.inventory
            values = [readings.node, str(inv.index), inv.uuid, inv.name]
            pod = pods.get(inv.uuid) if pods is not None else None
            if pods is not None:
                values += [pod.namespace, pod.pod, pod.container] if pod else ["", "", ""]
            self._collect_gpu(out, label_names, values, gpu)
            if self._dcgm_compat:
                dcgm_labels = {
                    "gpu": str(inv.index),
                    "UUID": inv.uuid,
                    "device": f"nvidia{inv.index}",
                    "modelName": inv.name,
                    "Hostname": readings.node,
                }
                if pod is not None:
                    dcgm_labels |= {
                        "namespace": pod.namespace,
                        "pod": pod.pod,
                        "container": pod.container,
                    }
                self._collect_dcgm(out, dcgm_labels, gpu)
        if readings.last_sample_timestamp_s is not None:
            out.gauge(
                "voltpack_agent_last_sample_timestamp_seconds",
                "Unix time of the agent's last completed sampling pass.",
                ["node"],
                [readings.node],
                readings.last_sample_timestamp_s,
            )
        if readings.sample_duration_s is not None:
            out.gauge(
                "voltpack_agent_sample_duration_seconds",
                "How long the agent's last sampling pass over all GPUs took.",
                ["node"],
                [readings.node],
                readings.sample_duration_s,
            )
        return list(out)

    def _pods(self) -> dict[str, PodRef] | None:
        if self._pod_mapping is None:
            return None
        try:
            return dict(self._pod_mapping())
        except Exception:
            # A failing pod look-up must not cost the node its GPU metrics.
            _log.warning("pod mapping failed; serving GPU metrics without pods", exc_info=True)
            return {}

    def _collect_gpu(
        self, out: _Families, names: list[str], values: list[str], gpu: GpuReading
    ) -> None:
        out.gauge(
            "voltpack_gpu_healthy",
            "1 if the GPU answered its last reading and reports healthy, else 0.",
            names,
            values,
            1.0 if gpu.healthy else 0.0,
        )
        self._collect_faults(out, names, values, gpu)
        inv, s = gpu.inventory, gpu.sample
        if inv.memory_total_bytes is not None:
            out.gauge(
                "voltpack_gpu_memory_total_bytes",
                "Total framebuffer memory of the GPU.",
                names,
                values,
                inv.memory_total_bytes,
            )
        if not gpu.healthy or s is None:
            return
        gauges: list[tuple[str, str, float | None]] = [
            ("voltpack_gpu_power_watts", "Power draw of the GPU.", s.power_w),
            ("voltpack_gpu_utilization_ratio", "GPU (SM) utilization, 0..1.", s.utilization_ratio),
            (
                "voltpack_gpu_memory_used_bytes",
                "Framebuffer memory in use.",
                None if s.memory_used_bytes is None else float(s.memory_used_bytes),
            ),
            ("voltpack_gpu_power_limit_watts", "Power cap in force.", s.power_limit_w),
            (
                "voltpack_gpu_sm_clock_hertz",
                "Current SM clock.",
                None if s.sm_clock_mhz is None else s.sm_clock_mhz * _MHZ,
            ),
            (
                "voltpack_gpu_memory_clock_hertz",
                "Current memory clock.",
                None if s.memory_clock_mhz is None else s.memory_clock_mhz * _MHZ,
            ),
            ("voltpack_gpu_temperature_celsius", "GPU die temperature.", s.temperature_c),
        ]
        for name, doc, value in gauges:
            if value is not None:
                out.gauge(name, doc, names, values, value)
        counters: list[tuple[str, str, float | None]] = [
            ("voltpack_gpu_energy_joules_total", "Energy used by the GPU.", s.energy_j),
            (
                "voltpack_gpu_xid_errors_total",
                "XID errors the driver reported for the GPU.",
                None if s.xid_errors_total is None else float(s.xid_errors_total),
            ),
            (
                "voltpack_gpu_ecc_errors_total",
                "Uncorrected ECC errors of the GPU.",
                None if s.ecc_errors_total is None else float(s.ecc_errors_total),
            ),
        ]
        for name, doc, value in counters:
            if value is not None:
                out.counter(name, doc, names, values, value)
        for xid, count in s.xid_counts:
            out.counter(
                "voltpack_gpu_xid_errors_by_code",
                "XID events the driver delivered for the GPU, by XID number.",
                [*names, "xid"],
                [*values, str(xid)],
                float(count),
            )
        seen = self._seen_throttle.setdefault(inv.uuid, set())
        seen.update(s.throttle_reasons)
        for reason in sorted(seen):
            out.gauge(
                "voltpack_gpu_throttled",
                "1 while the GPU's clocks are held down for this reason, else 0.",
                [*names, "reason"],
                [*values, reason],
                1.0 if reason in s.throttle_reasons else 0.0,
            )

    @staticmethod
    def _collect_faults(
        out: _Families, names: list[str], values: list[str], gpu: GpuReading
    ) -> None:
        worst = worst_action(gpu.faults)
        for action in ACTION_ORDER:
            out.gauge(
                "voltpack_gpu_fault_action",
                "1 for the most severe action the GPU's active faults call for (none, reset, "
                "reboot, replace), else 0.",
                [*names, "action"],
                [*values, action],
                1.0 if action == worst else 0.0,
            )
        for fault in gpu.faults:
            code = "" if fault.code is None else str(fault.code)
            out.gauge(
                "voltpack_gpu_fault_active",
                "1 per active fault signal of the GPU (xid, ecc, row-remap, nvlink, "
                "fell-off-bus, thermal, power-brake); code is the XID.",
                [*names, "signal", "code", "action"],
                [*values, fault.signal, code, fault.action],
                1.0,
            )

    @staticmethod
    def _collect_dcgm(out: _Families, labels: dict[str, str], gpu: GpuReading) -> None:
        s = gpu.sample
        if not gpu.healthy or s is None:
            return
        names = list(labels)
        values = list(labels.values())
        gauges: list[tuple[str, str, float | None]] = [
            ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", s.power_w),
            (
                "DCGM_FI_DEV_GPU_UTIL",
                "GPU utilization (in %).",
                None if s.utilization_ratio is None else s.utilization_ratio * 100.0,
            ),
            (
                "DCGM_FI_DEV_FB_USED",
                "Framebuffer memory used (in MiB).",
                None if s.memory_used_bytes is None else s.memory_used_bytes / _MIB,
            ),
            ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", s.sm_clock_mhz),
            ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", s.temperature_c),
            (
                "DCGM_FI_DEV_XID_ERRORS",
                "Value of the last XID error encountered.",
                None if s.xid_errors_total is None else float(s.last_xid or 0),
            ),
        ]
        for name, doc, value in gauges:
            if value is not None:
                out.gauge(name, doc, names, values, value)
        if s.energy_j is not None:
            out.untyped(
                "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
                "Total energy consumption since boot (in mJ).",
                labels,
                s.energy_j * 1000.0,
            )


class TelemetryExporter:
    """A `GpuCollector` in a registry of its own; `render()` gives the text exposition."""

    def __init__(
        self,
        source: ReadingsSource,
        *,
        dcgm_compat: bool = False,
        pod_mapping: PodMapping | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = GpuCollector(source, dcgm_compat=dcgm_compat, pod_mapping=pod_mapping)
        self.registry.register(self.collector)

    def render(self) -> bytes:
        """The metrics in the Prometheus text format 0.0.4 (`CONTENT_TYPE`)."""
        return generate_latest(self.registry)
