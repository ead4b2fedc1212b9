"""The operator's power loop: keep every PowerBudget under its budget through GPUNode specs.

Run by the leader every control interval. Each tick reads the caches (nodes and their labels,
GPUNodes, pods, PowerBudgets), turns them into the power mechanism's inputs (a domain tree,
the GPUs to control, per-GPU telemetry), steps the `PowerController` with the clock, and writes
back: each GPUNode's `spec.gpus` (only when it changes), each PowerBudget's status, and Events.

Level-triggered: the controller is rebuilt only when the domains, the budgets or the GPU set
change, carrying over each GPU's commanded rung; a new leader starts from the settings the
GPUNode specs hold and the brakes the PowerBudget statuses persist. Fail closed
(docs/power.md, "Fail closed"): a malformed PowerBudget is controlled with its last valid spec
(memory, or `status.acceptedSpec`), with a Warning Event and `SpecValid=False`; one never valid
gets `BudgetRespected=Unknown`/`Invalid`; no node in no domain is released while any budget is
invalid. It never stops the loop. API failures are logged and retried at the next interval.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from kubernetes.client import CoreV1Api, CustomObjectsApi

from voltpack.model.errors import VoltpackError
from voltpack.model.power_headroom import PowerHeadroom
from voltpack.model.resources import API_GROUP, API_VERSION, PowerBudgetSpec
from voltpack.model.snapshot import NO_GPU_MODEL, ClusterSnapshot
from voltpack.operator.kube.binder import record_event
from voltpack.operator.kube.cache import ResourceCache
from voltpack.operator.kube.client import api_message, call_json
from voltpack.operator.kube.status_writes import patch_status_guarded
from voltpack.operator.power.forecasts import ForecastPeaks
from voltpack.operator.power.metrics import PowerFigures
from voltpack.operator.power.objects import (
    VOLTPACK_API_VERSION,
    Domains,
    action_of,
    budget_condition,
    catalog_model,
    devices_of,
    epoch_s,
    gpus_running,
    high_priority_gpus,
    invalid_status,
    is_throughput_bound,
    longer_brake,
    persisted_brake,
    resolve_domains,
    rfc3339,
    rung_of,
    spec_condition,
    spec_gpus,
    status_of,
    with_transition,
)
from voltpack.operator.power.phase_floors import floor_rungs
from voltpack.perf.gpu_power import power_model_for
from voltpack.policies.power.ladder import ActionLadder, GpuSetting, IntArray
from voltpack.policies.schema import PowerSpec
from voltpack.power.controller import DomainReport, PowerController, PowerDecision, Telemetry
from voltpack.power.domains import PowerDomainTree
from voltpack.power.freshness import ArrivalClock
from voltpack.power.nameplate import has_power_model, nameplate_w
from voltpack.power.placement import power_headroom
from voltpack.power.setup import GpuLocation, build_controller, ladder_for
from voltpack.store import BufferedStore, PowerSample

log = logging.getLogger(__name__)


# -- the loop --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PowerCaches:
    """The operator's caches the power loop reads."""

    nodes: ResourceCache
    pods: ResourceCache
    gpunodes: ResourceCache
    budgets: ResourceCache
    services: ResourceCache | None = None
    """InferenceServices (their replicas' phase mixes, for the phase-aware clocks)."""

    def synced(self) -> bool:
        """Whether every cache has completed its first list (CRDs installed)."""
        return all(c.wait_synced(0) for c in (self.nodes, self.pods, self.gpunodes, self.budgets))


class PowerLoop:
    """Steps a `PowerController` over the cluster's power domains, one tick per interval."""

    def __init__(
        self,
        core: CoreV1Api,
        custom: CustomObjectsApi,
        spec: PowerSpec,
        caches: PowerCaches,
        clock: Callable[[], float] = time.time,
        interval_s: float | None = None,
        history: BufferedStore | None = None,
        read_only: bool = False,
    ) -> None:
        """`history`: where each domain's power is recorded (rolled up per minute), if set;
        with it (and `spec.forecast.enabled`) the scheduler's headroom also leaves room under
        each domain's forecast peak (`power_forecasts.ForecastPeaks`).

        `read_only`: plan without writing anything (a dry run): GPUNode spec changes are
        collected in `planned` instead of written; no status, Event or history is written.
        """
        self.history = history
        self.read_only = read_only
        self.planned: list[tuple[str, int, GpuSetting, GpuSetting]] = []
        self.core = core
        self.custom = custom
        self.interval_s = interval_s or spec.interval_s
        self.spec = spec.model_copy(update={"interval_s": self.interval_s})
        self.caches = caches
        self.clock = clock
        self.controller: PowerController | None = None
        self.figures = PowerFigures()
        self._key: object = None
        self._tree: PowerDomainTree | None = None
        self.last_decision: PowerDecision | None = None
        self._commanded: dict[tuple[str, int], GpuSetting] = {}
        self._ladders: dict[str, ActionLadder | str] = {}
        self._reported: dict[str, str] = {}  # problems already told, by object name
        self._actions: Counter[tuple[str, str]] = Counter()
        self._last_valid: dict[str, PowerBudgetSpec] = {}  # by PowerBudget name
        self._arrivals = ArrivalClock()  # heartbeats by arrival on this loop's clock
        self._phase_arrivals = ArrivalClock()  # replica phase mixes, likewise
        self._actuation_failures: dict[str, str] = {}  # GPUNode -> SettingsApplied reason
        self.forecasts = (
            ForecastPeaks(self.spec.forecast, history)
            if history is not None and self.spec.forecast.enabled
            else None
        )

    def run(self, stop: threading.Event, is_leader: Callable[[], bool]) -> None:
        """Tick every interval while `is_leader()`, until `stop` is set."""
        while not stop.is_set():
            started = time.monotonic()
            if is_leader():
                self.tick_safely()
            stop.wait(max(self.interval_s - (time.monotonic() - started), 0.0))

    def tick_safely(self) -> PowerDecision | None:
        """`tick`, logging (never raising) an unexpected error; retried next interval."""
        try:
            return self.tick()
        except Exception:  # a tick must never take the operator down
            self.figures = replace(self.figures, failed_ticks=self.figures.failed_ticks + 1)
            log.exception("power tick failed; retrying next interval")
            return None

    def headroom(self, snapshot: ClusterSnapshot) -> PowerHeadroom | None:
        """Each domain's headroom for the scheduler: budget minus the largest of measured and
        worst-case power at the last tick and the domain's current forecast peak; None before
        the first tick or without domains."""
        tree, decision = self._tree, self.last_decision
        if tree is None or decision is None:
            return None
        forecast = self._forecast_peaks_w()
        peaks = {
            r.name: max(r.power_w, r.worst_case_w, forecast.get(r.name, 0.0))
            for r in decision.domains
        }
        models = [
            snapshot.gpu_models[m] if m != NO_GPU_MODEL else None
            for m in snapshot.node_gpu_model.tolist()
        ]
        return power_headroom(tree, peaks, snapshot.node_names, models, self.spec.high_priority_min)

    def tick(self) -> PowerDecision | None:
        """One control tick; None when there is nothing to control yet."""
        if not self.caches.synced():
            return None
        nodes = self.caches.nodes.values()  # read only: names and labels, no copy of 1,000s
        node_labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in nodes}
        budgets = {b["metadata"]["name"]: b for b in self.caches.budgets.items()}
        gpunodes = {g["metadata"]["name"]: g for g in self.caches.gpunodes.items()}
        domains = resolve_domains(self.spec, list(budgets.values()), node_labels, self._last_valid)
        self._last_valid = {
            name: spec
            for name, spec in {**self._last_valid, **domains.specs}.items()
            if name in budgets and (name in domains.kept or name not in domains.invalid)
        }
        self._report_invalid(domains, budgets)
        self._report_actuation(gpunodes)
        gpus = self._gpus(domains, gpunodes, node_labels)
        self._ensure_controller(domains, gpus, gpunodes)
        decision = None
        now_s = self.clock()
        if self.controller is not None and self._tree is not None:
            telemetry = self._telemetry(gpunodes, now_s)
            decision = self.controller.step(now_s, telemetry, self._phase_floors(now_s))
            self.last_decision = decision
            self._write_settings(decision, gpunodes, hold=bool(domains.invalid))
            self._write_statuses(decision.domains, domains)
            self._record(decision)
            if self.forecasts is not None:
                self.forecasts.start_refresh(
                    self.clock(), [(r.name, r.budget_w) for r in decision.domains]
                )
            for event in decision.events:
                budget = domains.budgets.get(event.domain)
                if budget is not None:
                    self._event(budget, "PowerBudget", event.reason, event.message, event.warning)
                else:
                    log.info("domain %s: %s: %s", event.domain, event.reason, event.message)
        else:
            self._release_unmanaged(gpunodes, set(), hold=bool(domains.invalid))
        figures = self.figures
        self.figures = PowerFigures(
            decision.domains if decision is not None else (),
            tuple(sorted(domains.invalid)),
            dict(self._actions),
            figures.ticks + 1,
            figures.failed_ticks,
            self._forecast_peaks_w(),
            dict(self._actuation_failures),
        )
        return decision

    def _phase_floors(self, now_s: float) -> IntArray | None:
        """Each GPU's phase-aware clock floor (phase_floors.py); None when the policy sets no
        phase clocks or the loop has no InferenceService cache. Unreadable or unsynced:
        no floor (the budget's fail-safes still act)."""
        services = self.caches.services
        if self.spec.efficiency.phase_clocks is None or services is None:
            return None
        assert self.controller is not None
        if not services.wait_synced(0):
            return None
        return floor_rungs(
            self.controller.gpus, services.items(), self.caches.pods.items(), self.spec,
            self._phase_arrivals, now_s,
        )  # fmt: skip

    def _forecast_peaks_w(self) -> dict[str, float]:
        """Each domain's forecast peak now (none without forecasts)."""
        return self.forecasts.current(self.clock()) if self.forecasts is not None else {}

    def _record(self, decision: PowerDecision) -> None:
        """One power sample per domain into the history (buffered; never raises)."""
        if self.history is None or self.read_only:
            return
        now = self.clock()
        for report in decision.domains:
            sample = PowerSample(
                at_s=now,
                power_w=report.power_w,
                budget_w=report.budget_w,
                actions=report.locked_gpus + report.capped_gpus,
            )
            self.history.add_power_samples(report.name, [sample])

    # -- inputs ------------------------------------------------------------------------------

    def _ladder(self, model: str) -> ActionLadder | str:
        """The model's ladder, or why it has none (cached per model)."""
        if model not in self._ladders:
            try:
                self._ladders[model] = ladder_for(model, self.spec)
            except VoltpackError as exc:
                self._ladders[model] = str(exc)
        return self._ladders[model]

    def _gpus(
        self,
        domains: Domains,
        gpunodes: Mapping[str, dict[str, Any]],
        node_labels: Mapping[str, Mapping[str, str]],
    ) -> list[GpuLocation]:
        """Every GPU a GPUNode reports on a node of some domain, with its model's ladder.

        Fail closed: a model the catalog has no power model for is counted at nameplate and
        capped like the rest (`power.nameplate`), with a Warning Event on its innermost
        PowerBudget. A GPU whose ladder cannot be built is left alone, with a Warning Event.
        """
        tree = domains.tree
        members = sorted(set().union(*(d.nodes for d in tree.domains)))
        gpus = []
        for node in members:
            for index, device in sorted(devices_of(gpunodes.get(node)).items()):
                reported = str(device.get("model") or "unknown")
                model = catalog_model(reported, node_labels.get(node, {})) or reported
                ladder = self._ladder(model)
                if not isinstance(ladder, str) and not has_power_model(model):
                    problem = (
                        f"GPU {node}/{index}: model {reported!r} has no power model in the "
                        f"catalog: counted at its nameplate {nameplate_w(model):.0f} W unless "
                        f"it reports fresh power, and capped at "
                        f"{ladder.settings[ladder.top].power_limit_w:.0f} W when its domain "
                        "needs watts (add the model to voltpack/model/gpu_skus.yaml)"
                    )
                    budget = domains.budgets.get(tree.domains_of_node(node)[0].name)
                    self._warn_once(
                        f"gpu/{node}/{index}", problem, budget, "PowerBudget", "GpuModelUnknown"
                    )
                if isinstance(ladder, str):
                    problem = f"GPU {node}/{index} is neither controlled nor counted: {ladder}"
                    budget = domains.budgets.get(tree.domains_of_node(node)[0].name)
                    self._warn_once(
                        f"gpu/{node}/{index}", problem, budget, "PowerBudget", "GpuNotControlled"
                    )
                    continue
                gpus.append(GpuLocation(node, index, ladder.sku))
        return gpus

    def _tell_once(self, key: str, message: str) -> bool:
        """Log `message` unless it was the last one told for `key`; whether it is new."""
        if self._reported.get(key) == message:
            return False
        self._reported[key] = message
        log.warning("%s", message)
        return True

    def _warn_once(
        self,
        key: str,
        problem: str,
        obj: dict[str, Any] | None,
        kind: str,
        reason: str,
        message: str | None = None,
    ) -> None:
        """A Warning Event on `obj` (`message`, default the problem) the first time `problem`
        is told for `key`; one the API server did not take is tried again on the next tick.
        Without an object the problem is only logged."""
        if (
            self._tell_once(key, problem)
            and obj is not None
            and not self._event(obj, kind, reason, message or problem, warning=True)
        ):
            self._reported.pop(key, None)

    def _ensure_controller(
        self, domains: Domains, gpus: list[GpuLocation], gpunodes: Mapping[str, dict[str, Any]]
    ) -> None:
        """Rebuild the controller when domains, budgets or GPUs changed; keep rungs by GPU."""
        key = (
            tuple(domains.tree.domains),
            tuple(gpus),
            tuple(sorted(domains.node_overhead_w.items())),
        )
        if key == self._key:
            return
        if not domains.tree.domains:
            self.controller, self._tree, self._key = None, None, key
            return
        old = {(g.node, g.index): int(r) for g, r in self._slots_and_rungs()}
        controller = build_controller(self.spec, domains.tree, gpus, domains.node_overhead_w)
        rung = np.zeros(len(controller.gpus), dtype=np.int64)
        for i, slot in enumerate(controller.gpus):
            if (slot.node, slot.index) not in old:  # a new leader: start from the spec
                wanted = {int(e["index"]): e for e in spec_gpus(gpunodes.get(slot.node, {}))}
                rung[i] = max(rung_of(slot.ladder, wanted.get(slot.index, {})), 0)
        controller.rung = rung
        if self.controller is not None:  # keep rungs, histories, stages and brakes
            controller.adopt(self.controller)
        else:  # a new leader: the brakes its predecessor persisted hold as they were
            for name, budget in domains.budgets.items():
                brake = persisted_brake(budget)
                if brake is not None:
                    controller.restore_brake(name, *brake)
        rung = controller.rung
        self._commanded = {
            (s.node, s.index): s.ladder.settings[r]
            for s, r in zip(controller.gpus, rung, strict=True)
        }
        self.controller, self._tree, self._key = controller, domains.tree, key
        log.info(
            "power controller built: %d domains, %d GPUs", len(domains.tree.domains), len(gpus)
        )

    def _slots_and_rungs(self) -> list[tuple[Any, int]]:
        if self.controller is None:
            return []
        return list(zip(self.controller.gpus, self.controller.rung, strict=True))

    def _telemetry(self, gpunodes: Mapping[str, dict[str, Any]], now_s: float) -> Telemetry:
        """Per-GPU arrays in the controller's order from GPUNode status and pods.

        A reading's time is when this loop saw its heartbeat arrive (`ArrivalClock`), never
        the agent's own clock."""
        assert self.controller is not None
        slots = self.controller.gpus
        pods = self.caches.pods.items()
        indices, whole = high_priority_gpus(pods, self.spec.high_priority_min)
        busy_indices, busy_whole = gpus_running(pods, is_throughput_bound)
        power_w = np.full(len(slots), np.nan)
        read_at_s = np.full(len(slots), np.nan)
        high = np.zeros(len(slots), dtype=np.bool_)
        throughput_bound = np.zeros(len(slots), dtype=np.bool_)
        applied = np.full(len(slots), -1, dtype=np.int64)
        nodes = {s.node for s in slots}
        devices = {node: devices_of(gpunodes.get(node)) for node in nodes}
        arrived_s = {}
        for node in nodes:
            heartbeat = ((gpunodes.get(node) or {}).get("status") or {}).get("lastHeartbeatTime")
            arrived_s[node] = self._arrivals.observe(node, heartbeat, epoch_s(heartbeat), now_s)
        self._arrivals.forget_except(set(nodes))
        for i, slot in enumerate(slots):
            device = devices[slot.node].get(slot.index)
            high[i] = slot.node in whole or slot.index in indices.get(slot.node, set())
            throughput_bound[i] = slot.node in busy_whole or slot.index in busy_indices.get(
                slot.node, set()
            )
            if device is None:
                continue
            if device.get("powerDrawW") is not None:
                power_w[i] = float(device["powerDrawW"])
            read_at_s[i] = arrived_s[slot.node]
            applied[i] = rung_of(slot.ladder, device)
        return Telemetry(power_w, read_at_s, high, applied, throughput_bound)

    # -- outputs -----------------------------------------------------------------------------

    def _entry(self, index: int, setting: GpuSetting, model: str) -> dict[str, Any] | None:
        if setting.power_limit_w is not None:
            return {"index": index, "powerLimitW": setting.power_limit_w}
        if setting.locked_clock_mhz is not None:
            min_mhz = min(int(power_model_for(model).min_clock_mhz), setting.locked_clock_mhz)
            clocks = {"minMhz": min_mhz, "maxMhz": setting.locked_clock_mhz}
            return {"index": index, "lockedClocks": clocks}
        return None

    def _write_settings(
        self, decision: PowerDecision, gpunodes: Mapping[str, dict[str, Any]], hold: bool
    ) -> None:
        """Each managed GPUNode's `spec.gpus`, when it differs; Events and action counts."""
        assert self.controller is not None and self._tree is not None
        wanted: dict[str, list[dict[str, Any]]] = {}
        changed: dict[str, list[tuple[int, GpuSetting, GpuSetting]]] = {}
        for slot, setting in zip(self.controller.gpus, decision.settings, strict=True):
            entries = wanted.setdefault(slot.node, [])
            entry = self._entry(slot.index, setting, slot.ladder.sku)
            if entry is not None:
                entries.append(entry)
            before = self._commanded.get((slot.node, slot.index), GpuSetting())
            if before != setting:
                changed.setdefault(slot.node, []).append((slot.index, before, setting))
                innermost = self._tree.domains_of_node(slot.node)[0].name
                self._actions[(innermost, action_of(setting))] += 1
            self._commanded[(slot.node, slot.index)] = setting
        for node, entries in wanted.items():
            gpunode = gpunodes.get(node)
            if gpunode is not None and spec_gpus(gpunode) != entries:
                self._patch_spec(gpunode, entries, changed.get(node, []))
        self._release_unmanaged(gpunodes, set(wanted), hold)

    def _release_unmanaged(
        self, gpunodes: Mapping[str, dict[str, Any]], managed: set[str], hold: bool
    ) -> None:
        """GPUNodes in no domain keep no power settings (the power loop owns `spec.gpus`).

        Fail closed: while some PowerBudget is invalid (`hold`), a node in no domain may be
        one of its nodes, so it keeps its settings until every PowerBudget is valid again."""
        for name, gpunode in gpunodes.items():
            if name in managed or not spec_gpus(gpunode):
                continue
            if hold:
                self._tell_once(
                    f"held/{name}",
                    f"GPUNode {name}: in no power domain while a PowerBudget is invalid; its "
                    "settings are kept until every PowerBudget is valid again",
                )
                continue
            self._reported.pop(f"held/{name}", None)
            released = [(int(e["index"]), GpuSetting(), GpuSetting()) for e in spec_gpus(gpunode)]
            self._patch_spec(gpunode, [], released, note="the node is in no power domain")

    def _patch_spec(
        self,
        gpunode: dict[str, Any],
        entries: list[dict[str, Any]],
        changed: list[tuple[int, GpuSetting, GpuSetting]],
        note: str = "",
    ) -> None:
        if self.read_only:
            node = gpunode["metadata"]["name"]
            self.planned.extend((node, index, before, after) for index, before, after in changed)
            return
        name = gpunode["metadata"]["name"]
        try:
            updated = call_json(
                self.custom.patch_cluster_custom_object,
                API_GROUP, API_VERSION, "gpunodes", name, {"spec": {"gpus": entries}},
            )  # fmt: skip
        except Exception as error:
            log.warning("GPUNode %s: spec not written (retrying): %s", name, api_message(error))
            return
        if updated:
            self.caches.gpunodes.assume(updated)
        groups: dict[str, list[str]] = {}
        for index, before, after in changed:
            what = after.describe() + (f" (was {before.describe()})" if before != after else "")
            groups.setdefault(what, []).append(str(index))
        parts = [f"GPU {', '.join(indices)}: {what}" for what, indices in groups.items()]
        message = (
            f"{name}: "
            + ("; ".join(parts) or "settings re-applied")
            + (f"; {note}" if note else "")
        )
        self._event(gpunode, "GPUNode", "PowerSettingsChanged", message, warning=False)

    def _write_statuses(self, reports: Sequence[DomainReport], domains: Domains) -> None:
        for report in reports:
            budget = domains.budgets.get(report.name)
            if budget is None:
                continue
            status = status_of(report)
            accepted = self._last_valid.get(report.name)
            if accepted is not None:
                status["acceptedSpec"] = accepted.model_dump(by_alias=True, exclude_none=True)
            valid = spec_condition(domains.invalid.get(report.name), kept=True)
            self._write_status(budget, status, [budget_condition(report), valid])

    def _report_invalid(self, domains: Domains, budgets: Mapping[str, dict[str, Any]]) -> None:
        """A Warning Event (once per problem) per invalid budget, and for one that has no last
        valid spec to be controlled by, an `Invalid` condition."""
        for name in list(self._reported):
            if name.startswith("budget/") and name[7:] not in domains.invalid:
                del self._reported[name]  # fixed: tell again if it breaks again
        for name, problem in domains.invalid.items():
            budget = budgets[name]
            kept = name in domains.kept
            told = spec_condition(problem, kept)["message"]
            self._warn_once(
                f"budget/{name}", problem, budget, "PowerBudget", "InvalidPowerBudget", told
            )
            if kept:
                continue  # its status comes from the domain's report, as any other
            condition = {"status": "Unknown", "reason": "Invalid", "message": problem}
            self._write_status(budget, invalid_status(), [condition, spec_condition(problem, kept)])

    def _report_actuation(self, gpunodes: Mapping[str, dict[str, Any]]) -> None:
        """A Warning Event (once per message) on each GPUNode whose agent reports settings it
        could not apply (`SettingsApplied=False`); the nodes feed a metric and an alert."""
        failing: dict[str, str] = {}
        for name, gpunode in gpunodes.items():
            conditions = (gpunode.get("status") or {}).get("conditions") or []
            applied: dict[str, Any] = next(
                (c for c in conditions if c.get("type") == "SettingsApplied"), {}
            )
            key = f"actuation/{name}"
            if applied.get("status") != "False":
                self._reported.pop(key, None)
                continue
            reason = str(applied.get("reason") or "NotApplied")
            failing[name] = reason
            message = (
                f"{name}: power settings not applied ({reason}): {applied.get('message') or ''}; "
                "the power loop counts these GPUs at what they report applied"
            )
            self._warn_once(key, message, gpunode, "GPUNode", "PowerSettingsNotApplied")
        self._actuation_failures = failing

    def _write_status(
        self, budget: dict[str, Any], status: dict[str, Any], conditions: list[dict[str, str]]
    ) -> None:
        if self.read_only:
            return

        def status_for(current: dict[str, Any]) -> dict[str, Any] | None:
            previous = current.get("status") or {}
            now = rfc3339(self.clock())
            written = {
                **status,
                "brake": longer_brake(status.get("brake"), previous.get("brake"), self.clock()),
                "conditions": [with_transition(c, previous, now) for c in conditions],
            }
            if "brake" not in status and written["brake"] is None:
                del written["brake"]
            return None if {key: previous.get(key) for key in written} == written else written

        name = budget["metadata"]["name"]
        try:
            updated = patch_status_guarded(
                lambda body: call_json(
                    self.custom.patch_cluster_custom_object_status,
                    API_GROUP, API_VERSION, "powerbudgets", name, body,
                ),
                lambda: call_json(
                    self.custom.get_cluster_custom_object,
                    API_GROUP, API_VERSION, "powerbudgets", name,
                ),
                budget,
                status_for,
            )  # fmt: skip
        except Exception as error:
            log.warning(
                "PowerBudget %s: status not written (retrying): %s", name, api_message(error)
            )
            return
        if updated:
            self.caches.budgets.assume(updated)

    def _event(
        self, obj: dict[str, Any], kind: str, reason: str, message: str, warning: bool
    ) -> bool:
        """Whether the Event was recorded (a read-only loop records none and counts it so)."""
        if self.read_only:
            return True
        involved = {"apiVersion": VOLTPACK_API_VERSION, "kind": kind, "metadata": obj["metadata"]}
        return record_event(
            self.core, involved, reason, message, "Warning" if warning else "Normal"
        )
