"""Pure translations between Kubernetes objects and the power mechanism's inputs and outputs.

PowerBudgets and the policy file's domains to a validated domain tree; GPUNode status and pods
to per-GPU telemetry; ladder rungs to and from GPUNode settings; domain reports to PowerBudget
status. No API calls: the power loop (power_loop.py) reads the caches and writes the results.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from voltpack.model.errors import InvalidRequestError, VoltpackError
from voltpack.model.gpu_sku import default_catalog
from voltpack.model.resources import API_GROUP, API_VERSION, GpuNodeSpec, PowerBudgetSpec
from voltpack.operator.kube.conventions import (
    GPU_MODEL_LABELS,
    MANUAL_CAP_ANNOTATION,
    REQUEST_DRIVEN_OWNERS,
    WORKLOAD_ANNOTATION,
)
from voltpack.operator.kube.translate import gpu_indices, pod_from_k8s, pod_priority
from voltpack.policies.power.ladder import ActionLadder, GpuSetting
from voltpack.policies.schema import PowerSpec
from voltpack.power.controller import DomainReport
from voltpack.power.domains import DomainSelector, PowerDomainTree

log = logging.getLogger(__name__)

POWER_LIMIT_TOLERANCE_W = 1.0
"""A reported power limit this close to a ladder's floor counts as the floor cap."""
BUDGET_CONDITION = "BudgetRespected"
SPEC_CONDITION = "SpecValid"
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
    """PowerBudget name -> the problem, for every PowerBudget whose spec cannot be used."""
    node_overhead_w: dict[str, float]
    kept: frozenset[str] = frozenset()
    """Invalid PowerBudgets controlled with their last valid spec (fail closed)."""
    specs: dict[str, PowerBudgetSpec] = field(default_factory=dict)
    """The spec each usable PowerBudget is controlled with."""


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


def accepted_spec_of(budget: Mapping[str, Any]) -> PowerBudgetSpec | None:
    """The last spec the power loop accepted for `budget` (its status), None if none/unreadable."""
    stored = (budget.get("status") or {}).get("acceptedSpec")
    if not stored:
        return None
    try:
        return PowerBudgetSpec.model_validate(stored)
    except ValidationError:
        return None


def resolve_domains(
    spec: PowerSpec,
    budgets: Sequence[dict[str, Any]],
    node_labels: Mapping[str, Mapping[str, str]],
    last_valid: Mapping[str, PowerBudgetSpec] | None = None,
) -> Domains:
    """PowerBudgets plus the policy file's `spec.power.domains`, validated one by one.

    Fail closed: a PowerBudget whose spec is invalid (unreadable, or not fitting the tree) is
    controlled with its last valid spec (`last_valid`, else its status's `acceptedSpec`) and is
    listed in `invalid` and `kept`; only one that never had a valid spec is left out.
    """
    selectors = [DomainSelector(d.name, d.budget_w, d.match_labels, d.parent) for d in spec.domains]
    from_policy = {d.name for d in spec.domains}
    invalid: dict[str, str] = {}
    objects = {b["metadata"]["name"]: b for b in budgets}
    current: dict[str, PowerBudgetSpec] = {}
    fallback: dict[str, PowerBudgetSpec] = {}
    for name, budget in objects.items():
        if name in from_policy:
            invalid[name] = (
                f"PowerBudget {name}: the policy file's spec.power.domains also declares a "
                f"domain {name!r}; rename one of them"
            )
            continue
        previous = (last_valid or {}).get(name) or accepted_spec_of(budget)
        if previous is not None:
            fallback[name] = previous
        try:
            current[name] = PowerBudgetSpec.model_validate(budget.get("spec") or {})
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            invalid[name] = f"PowerBudget {name}: field spec.{where}: {error['msg']}"
    using = dict(current)
    kept: set[str] = set()
    for name in invalid:  # unreadable now: its last valid spec, if any
        if name in fallback and name not in from_policy:
            using[name] = fallback[name]
            kept.add(name)
    while True:
        chosen = [_selector(name, using[name], objects[name]) for name in sorted(using)]
        accepted, rejected = accept_selectors([*selectors, *chosen], node_labels)
        swap = [n for n in rejected if n in fallback and n not in kept and n in using]
        for name in swap:
            invalid[name] = rejected[name]
            using[name] = fallback[name]
            kept.add(name)
        if not swap:
            break
    for name, problem in rejected.items():
        if name in objects:
            invalid.setdefault(name, problem)
            kept.discard(name)
            using.pop(name, None)
        else:
            log.warning("policy file: %s; the domain is not controlled", problem)
    tree = PowerDomainTree.from_selectors(accepted, node_labels)
    node_overhead: dict[str, float] = {}
    for domain in tree.domains:
        overhead_w = using[domain.name].node_overhead_w if domain.name in using else 0.0
        for node in domain.nodes:
            node_overhead[node] = max(node_overhead.get(node, 0.0), overhead_w)
    usable = {name: objects[name] for name in using}
    return Domains(tree, usable, invalid, node_overhead, frozenset(kept), using)


def _selector(name: str, spec: PowerBudgetSpec, budget: Mapping[str, Any]) -> DomainSelector:
    budget_w = min(spec.budget_w, manual_cap_w(budget) or spec.budget_w)
    return DomainSelector(name, budget_w, spec.node_selector.match_labels, spec.parent)


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
    condition: Mapping[str, Any], previous: Mapping[str, Any], now: str
) -> dict[str, Any]:
    """`condition` (type `BudgetRespected` unless it names one) with its transition time: kept
    from the same condition in `previous` status while its status is unchanged, else `now`."""
    kind = condition.get("type", BUDGET_CONDITION)
    conditions: list[dict[str, Any]] = previous.get("conditions") or []
    old = next((c for c in conditions if c.get("type") == kind), {})
    since = old.get("lastTransitionTime") if old.get("status") == condition["status"] else None
    return {**condition, "type": kind, "lastTransitionTime": since or now}


def spec_condition(problem: str | None, kept: bool) -> dict[str, str]:
    """`SpecValid`: whether the PowerBudget's spec is used, and what is done if not."""
    if problem is None:
        return {"type": SPEC_CONDITION, "status": "True", "reason": "Accepted", "message": ""}
    if kept:
        return {"type": SPEC_CONDITION, "status": "False", "reason": "LastValidSpecKept",
                "message": f"{problem}; its nodes stay controlled under the last valid spec "
                "(status.acceptedSpec) until the spec is fixed"}  # fmt: skip
    return {
        "type": SPEC_CONDITION,
        "status": "False",
        "reason": "Invalid",
        "message": f"{problem}; its nodes keep their current settings until it is fixed",
    }


def status_of(report: DomainReport) -> dict[str, Any]:
    """A domain's PowerBudget status after a tick, the brake (persisted for a new leader)
    included: `since` rounded down, `holdUntil` up, so a new leader never releases early."""
    brake = None
    if report.brake_since_s is not None:
        hold_until_s = report.brake_hold_until_s or report.brake_since_s
        brake = {
            "since": rfc3339(math.floor(report.brake_since_s)),
            "holdUntil": rfc3339(math.ceil(hold_until_s)),
        }
    return {
        "powerW": round(max(report.power_w, 0.0), 1),
        "worstCaseW": round(max(report.worst_case_w, 0.0), 1),
        "level": report.level,
        "lockedGpus": report.locked_gpus,
        "cappedGpus": report.capped_gpus,
        "staleGpus": report.stale_gpus,
        "brake": brake,
    }


def persisted_brake(budget: Mapping[str, Any]) -> tuple[float, float] | None:
    """(since, hold until) of the brake a PowerBudget's status records, None when off."""
    brake = (budget.get("status") or {}).get("brake") or {}
    since_s, hold_until_s = epoch_s(brake.get("since")), epoch_s(brake.get("holdUntil"))
    if math.isnan(since_s):
        return None
    return since_s, hold_until_s if not math.isnan(hold_until_s) else since_s


def longer_brake(
    ours: Mapping[str, Any] | None, theirs: Mapping[str, Any] | None, now_s: float
) -> Mapping[str, Any] | None:
    """The brake a status write persists: `ours`, unless the status already there (`theirs`,
    perhaps another leader's) holds a brake past `now_s` and longer than ours; a write never
    drops a brake still holding (fail closed)."""
    their_hold_s = epoch_s((theirs or {}).get("holdUntil"))
    if theirs is None or math.isnan(their_hold_s) or their_hold_s <= now_s:
        return ours
    our_hold_s = epoch_s((ours or {}).get("holdUntil"))
    return theirs if ours is None or math.isnan(our_hold_s) or their_hold_s > our_hold_s else ours


def invalid_status() -> dict[str, Any]:
    return {"powerW": None, "worstCaseW": None, "level": None,
            "lockedGpus": 0, "cappedGpus": 0, "staleGpus": 0}  # fmt: skip


def action_of(setting: GpuSetting) -> str:
    if setting.power_limit_w is not None:
        return "cap_power"
    return "lock_clocks" if setting.locked_clock_mhz is not None else "release"
