"""Pure translations between Kubernetes objects and the power mechanism's inputs and outputs.

PowerBudgets and the policy file's domains to a validated domain tree; GPUNode status and pods
to per-GPU telemetry; ladder rungs to and from GPUNode settings; domain reports to PowerBudget
status. No API calls: the power loop (power_loop.py) reads the caches and writes the results.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from voltpack.model.errors import InvalidRequestError, VoltpackError
from voltpack.model.gpu_sku import default_catalog
from voltpack.model.resources import API_GROUP, API_VERSION, GpuNodeSpec, PowerBudgetSpec
from voltpack.operator.conventions import (
    GPU_MODEL_LABELS,
    MANUAL_CAP_ANNOTATION,
    REQUEST_DRIVEN_OWNERS,
    WORKLOAD_ANNOTATION,
)
from voltpack.operator.translate import gpu_indices, pod_from_k8s, pod_priority
from voltpack.policies.power.ladder import ActionLadder, GpuSetting
from voltpack.policies.schema import PowerSpec
from voltpack.power.controller import DomainReport
from voltpack.power.domains import DomainSelector, PowerDomainTree

log = logging.getLogger(__name__)

POWER_LIMIT_TOLERANCE_W = 1.0
"""A reported power limit this close to a ladder's floor counts as the floor cap."""
BUDGET_CONDITION = "BudgetRespected"
VOLTPACK_API_VERSION = f"{API_GROUP}/{API_VERSION}"
ENDED_PHASES = ("Succeeded", "Failed")


# -- domains ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Domains:
    """The usable domains of a tick and why the others cannot be used."""

    tree: PowerDomainTree
    budgets: dict[str, dict[str, Any]]
    """The usable PowerBudget objects by name (policy-file domains have none)."""
    invalid: dict[str, str]
    """PowerBudget name -> the problem, for every PowerBudget that cannot be used."""
    node_overhead_w: dict[str, float]


def accept_selectors(
    selectors: Sequence[DomainSelector], node_labels: Mapping[str, Mapping[str, str]]
) -> tuple[list[DomainSelector], dict[str, str]]:
    """The selectors that form a valid tree (parents first) and the problem of each other one.

    Each candidate is checked by building the tree with it, so the rules are the tree's own.
    """
    accepted: list[DomainSelector] = []
    rejected: dict[str, str] = {}
    pending = list(selectors)
    progress = True
    while progress:
        progress = False
        names = {s.name for s in accepted}
        for selector in list(pending):
            if selector.parent is not None and selector.parent not in names:
                continue
            pending.remove(selector)
            progress = True
            try:
                PowerDomainTree.from_selectors([*accepted, selector], node_labels)
            except VoltpackError as exc:
                rejected[selector.name] = str(exc)
                continue
            accepted.append(selector)
            names.add(selector.name)
    by_name = {s.name: s for s in selectors}
    invalid_before = set(rejected)
    for selector in pending:  # parent unknown, invalid, or a cycle
        rejected[selector.name] = _parent_problem(selector, by_name, invalid_before)
    return accepted, rejected


def _parent_problem(
    selector: DomainSelector, by_name: Mapping[str, DomainSelector], invalid: set[str]
) -> str:
    """Why `selector`'s chain of parents never reaches a root."""
    chain = [selector.name]
    current = selector
    while current.parent is not None:
        parent = current.parent
        if parent in invalid:
            return f"power domain {selector.name!r}: its parent {parent!r} is invalid"
        if parent not in by_name:
            known = ", ".join(sorted(by_name)) or "none"
            return (
                f"power domain {current.name!r}: parent {parent!r} is not a domain "
                f"(known domains: {known}); fix spec.parent or create {parent!r}"
            )
        if parent in chain:
            return f"power domain {selector.name!r}: parents form a cycle: " + " -> ".join(
                [*chain, parent]
            )
        chain.append(parent)
        current = by_name[parent]
    return f"power domain {selector.name!r}: its parent chain is invalid"


def manual_cap_w(budget: Mapping[str, Any]) -> float | None:
    """The hand-set cap of a PowerBudget (annotation), None when unset or not a positive number."""
    text = ((budget.get("metadata") or {}).get("annotations") or {}).get(MANUAL_CAP_ANNOTATION)
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        log.warning("PowerBudget %s: %s=%r is not a number; ignored",
                    budget["metadata"].get("name"), MANUAL_CAP_ANNOTATION, text)  # fmt: skip
        return None
    return value if value > 0 and math.isfinite(value) else None


def resolve_domains(
    spec: PowerSpec, budgets: Sequence[dict[str, Any]], node_labels: Mapping[str, Mapping[str, str]]
) -> Domains:
    """PowerBudgets plus the policy file's `spec.power.domains`, validated one by one."""
    selectors = [DomainSelector(d.name, d.budget_w, d.match_labels, d.parent) for d in spec.domains]
    from_policy = {d.name for d in spec.domains}
    invalid: dict[str, str] = {}
    objects: dict[str, dict[str, Any]] = {}
    overhead_w: dict[str, float] = {}
    for budget in budgets:
        name = budget["metadata"]["name"]
        try:
            parsed = PowerBudgetSpec.model_validate(budget.get("spec") or {})
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            invalid[name] = f"PowerBudget {name}: field spec.{where}: {error['msg']}"
            continue
        if name in from_policy:
            invalid[name] = (
                f"PowerBudget {name}: the policy file's spec.power.domains also declares a "
                f"domain {name!r}; rename one of them"
            )
            continue
        match = parsed.node_selector.match_labels
        budget_w = min(parsed.budget_w, manual_cap_w(budget) or parsed.budget_w)
        selectors.append(DomainSelector(name, budget_w, match, parsed.parent))
        objects[name] = budget
        overhead_w[name] = parsed.node_overhead_w
    accepted, rejected = accept_selectors(selectors, node_labels)
    for name, problem in rejected.items():
        if name in objects:
            invalid[name] = problem
            del objects[name]
        else:
            log.warning("policy file: %s; the domain is not controlled", problem)
    tree = PowerDomainTree.from_selectors(accepted, node_labels)
    node_overhead: dict[str, float] = {}
    for domain in tree.domains:
        for node in domain.nodes:
            node_overhead[node] = max(node_overhead.get(node, 0.0), overhead_w.get(domain.name, 0))
    return Domains(tree, objects, invalid, node_overhead)


# -- GPUs and telemetry ----------------------------------------------------------------------


def catalog_model(reported: str | None, node_labels: Mapping[str, str]) -> str | None:
    """The catalog name of a GPU: its reported model, or the node's GPU-model label."""
    catalog = default_catalog()
    candidates = [reported, (reported or "").removeprefix("NVIDIA ")]
    candidates += [node_labels.get(label) for label in GPU_MODEL_LABELS]
    for name in candidates:
        if name and name in catalog:
            return catalog.get(name).name
    return None


def rung_of(ladder: ActionLadder, setting: Mapping[str, Any]) -> int:
    """The rung a GPUNode spec or status entry shows: floor cap -> top, lock -> its rung,
    nothing -> 0, a lock no rung has -> -1 (unknown)."""
    floor_w = ladder.settings[ladder.top].power_limit_w
    limit_w = setting.get("powerLimitW")
    tolerance_w = POWER_LIMIT_TOLERANCE_W
    if limit_w is not None and floor_w is not None and abs(float(limit_w) - floor_w) <= tolerance_w:
        return ladder.top
    clocks = setting.get("lockedClocks")
    if clocks:
        for rung, candidate in enumerate(ladder.settings):
            if candidate.locked_clock_mhz is not None and candidate.locked_clock_mhz == clocks.get(
                "maxMhz"
            ):
                return rung
        return -1
    return 0


def gpus_running(
    pods: Sequence[dict[str, Any]], wanted: Callable[[dict[str, Any]], bool]
) -> tuple[dict[str, set[int]], set[str]]:
    """GPUs running pods for which `wanted(pod)` holds: indices by node, and nodes where all
    GPUs count.

    A GPU pod without the GPU-indices annotation counts for every GPU of its node; a pod that
    asks for no GPU counts for none.
    """
    indices: dict[str, set[int]] = {}
    whole: set[str] = set()
    for pod in pods:
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in ENDED_PHASES:
            continue
        if not wanted(pod):
            continue
        given = gpu_indices(pod)
        if given is not None:
            indices.setdefault(node, set()).update(given)
            continue
        try:
            uses_gpus = pod_from_k8s(pod).gpu_milli > 0
        except InvalidRequestError:
            uses_gpus = True  # cannot tell: count it, the safe side for its work
        if uses_gpus:
            whole.add(node)
    return indices, whole


def high_priority_gpus(
    pods: Sequence[dict[str, Any]], min_priority: int
) -> tuple[dict[str, set[int]], set[str]]:
    """GPUs running pods whose priority is at least `min_priority`."""

    def is_high(pod: dict[str, Any]) -> bool:
        try:
            return pod_priority(pod) >= min_priority
        except InvalidRequestError:
            return True  # cannot tell: protect its GPUs, the safe side for its work

    return gpus_running(pods, is_high)


def is_throughput_bound(pod: dict[str, Any]) -> bool:
    """Whether slowing the pod's GPUs costs throughput (training, batch) rather than latency."""
    meta = pod.get("metadata") or {}
    declared = (meta.get("annotations") or {}).get(WORKLOAD_ANNOTATION)
    if declared is not None:
        return str(declared).strip().lower() != "inference"
    owners = meta.get("ownerReferences") or []
    return not any(owner.get("kind") in REQUEST_DRIVEN_OWNERS for owner in owners)


def epoch_s(text: str | None) -> float:
    """An RFC 3339 time as Unix seconds (NaN when missing or unreadable)."""
    if not text:
        return float("nan")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return float("nan")
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def rfc3339(seconds: float) -> str:
    """Unix seconds as an RFC 3339 UTC time."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def devices_of(gpunode: Mapping[str, Any] | None) -> dict[int, dict[str, Any]]:
    gpus = ((gpunode or {}).get("status") or {}).get("gpus") or []
    return {int(gpu["index"]): gpu for gpu in gpus if "index" in gpu}


def spec_gpus(gpunode: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A GPUNode's `spec.gpus` normalised for comparison (invalid: treated as empty)."""
    try:
        spec = GpuNodeSpec.model_validate(gpunode.get("spec") or {})
    except ValidationError:
        return []
    entries = spec.model_dump(by_alias=True, exclude_none=True)["gpus"]
    return sorted(entries, key=lambda entry: int(entry["index"]))


# -- status ----------------------------------------------------------------------------------


def budget_condition(report: DomainReport) -> dict[str, str]:
    """`BudgetRespected` for a domain after a tick."""
    budget = f"{report.budget_w:.0f} W"
    if report.power_w >= report.budget_w:
        return {"status": "False", "reason": "OverBudget",
                "message": f"power {report.power_w:.0f} W of {budget}"}  # fmt: skip
    if report.worst_case_w > report.budget_w:
        return {
            "status": "False",
            "reason": "WorstCaseOverBudget",
            "message": f"{report.stale_gpus} GPUs stale: worst case {report.worst_case_w:.0f} W "
            f"exceeds {budget}",
        }
    return {"status": "True", "reason": "WithinBudget",
            "message": f"power {report.power_w:.0f} W of {budget}"}  # fmt: skip


def with_transition(
    condition: dict[str, str], previous: Mapping[str, Any], now: str
) -> dict[str, Any]:
    conditions: list[dict[str, Any]] = previous.get("conditions") or []
    old = next((c for c in conditions if c.get("type") == BUDGET_CONDITION), {})
    since = old.get("lastTransitionTime") if old.get("status") == condition["status"] else None
    return {"type": BUDGET_CONDITION, **condition, "lastTransitionTime": since or now}


def status_of(report: DomainReport) -> dict[str, Any]:
    return {
        "powerW": round(max(report.power_w, 0.0), 1),
        "worstCaseW": round(max(report.worst_case_w, 0.0), 1),
        "level": report.level,
        "lockedGpus": report.locked_gpus,
        "cappedGpus": report.capped_gpus,
        "staleGpus": report.stale_gpus,
    }


def invalid_status() -> dict[str, Any]:
    return {"powerW": None, "worstCaseW": None, "level": None,
            "lockedGpus": 0, "cappedGpus": 0, "staleGpus": 0}  # fmt: skip


def action_of(setting: GpuSetting) -> str:
    if setting.power_limit_w is not None:
        return "cap_power"
    return "lock_clocks" if setting.locked_clock_mhz is not None else "release"
