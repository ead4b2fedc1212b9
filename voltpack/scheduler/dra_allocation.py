"""DRA allocation: choose devices on a node for a pod's ResourceClaims (`resource.k8s.io/v1`).

Pure and deterministic. All claims of a pod are allocated together on one node: each request
gets exactly `count` devices (or, with `allocationMode: All`, every matching device of the
node, at least one), every selector accepts each device, every constraint's `matchAttribute`
has one value across the devices of its requests (a device without the attribute fails it),
and no device is handed out twice (neither one in use nor one chosen for another request),
except devices that allow multiple allocations (each use gets its own share id) and requests
with admin access (which, as in Kubernetes, may use devices in use and block none).

The search is depth-first with backtracking, like Kubernetes' own allocator: it tries devices
in the caller's preferred order first (the devices voltpack's placement chose), then by
DeviceId, and gives up after `step_limit` device choices (the reason then says so). A
selector that fails to evaluate raises `SelectorError`, which aborts the allocation.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace

from voltpack.model.devices import (
    AttributeValue,
    ClaimAllocation,
    ClaimRequest,
    Device,
    DeviceId,
    DeviceRequest,
    DeviceResult,
    OpaqueConfig,
)
from voltpack.model.errors import InvalidRequestError
from voltpack.scheduler.device_selectors import DeviceSelectors, parse_semver

__all__ = [
    "DEFAULT_STEP_LIMIT",
    "Unsatisfiable",
    "allocate_gang",
    "allocate_on_node",
    "nodes_that_fit",
]

DEFAULT_STEP_LIMIT = 50_000
"""Device choices one node's search may try before it gives up."""

_SHARE_NAMESPACE = uuid.UUID("6f1c3c2e-5d7e-4b8a-9a51-7d0c2b9f4e11")
_MAX_VALUES_SHOWN = 4


@dataclass(frozen=True)
class Unsatisfiable:
    """No allocation exists (or none was found within the step limit); `reason` says why, naming
    the claim and request."""

    reason: str


# --- planning -----------------------------------------------------------------------------


@dataclass
class _Plan:
    """One request to fill: its candidates in trial order and what constrains them."""

    claim: ClaimRequest
    request: DeviceRequest
    candidates: list[Device]
    need: int
    constraints: list[tuple[int, str]] = field(default_factory=list)
    """(constraint number, attribute) pairs this request's devices must agree on."""

    @property
    def exclusive(self) -> bool:
        return not self.request.admin_access


def _validate(claim: ClaimRequest) -> None:
    names = [request.name for request in claim.requests]
    if not names:
        raise InvalidRequestError(f"claim {claim.key}: it has no requests")
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise InvalidRequestError(f"claim {claim.key}: request names repeat: {duplicates}")
    for request in claim.requests:
        if not request.all_devices and request.count < 1:
            raise InvalidRequestError(
                f"claim {claim.key}: request {request.name}: count is {request.count}, "
                "needs at least 1"
            )
    for constraint in claim.constraints:
        unknown = sorted(set(constraint.requests) - set(names))
        if unknown:
            raise InvalidRequestError(
                f"claim {claim.key}: constraint matchAttribute {constraint.match_attribute} "
                f"names unknown requests {unknown} (requests: {names})"
            )


def _unique_claims(claims: Sequence[ClaimRequest]) -> list[ClaimRequest]:
    seen: dict[str, ClaimRequest] = {}
    for claim in claims:
        if claim.key not in seen:
            _validate(claim)
            seen[claim.key] = claim
    return list(seen.values())


def _selectors_text(request: DeviceRequest) -> str:
    return " && ".join(request.selectors) if request.selectors else "no selectors"


def _value_key(device: Device, attribute: str) -> tuple[str, object] | None:
    value: AttributeValue | None = device.attribute(attribute)
    if value is None:
        return None
    if attribute in device.versions:
        try:
            return ("version", parse_semver(str(value)))
        except ValueError:
            return ("version-text", value)
    return (type(value).__name__, value)


def _plans(
    claims: list[ClaimRequest],
    node: str,
    node_devices: list[Device],
    in_use: AbstractSet[DeviceId],
    selectors: DeviceSelectors,
    rank: Callable[[Device], tuple[int, int, DeviceId]],
) -> list[_Plan] | Unsatisfiable:
    plans: list[_Plan] = []
    constraint_number = 0
    total = len(node_devices)
    for claim in claims:
        claim_plans: dict[str, _Plan] = {}
        for request in claim.requests:
            matching = [d for d in node_devices if selectors.matches(d, request.selectors)]
            where = f"claim {claim.key}: request {request.name}"
            if not matching:
                if total == 0:
                    return Unsatisfiable(f"{where}: node {node} has no devices")
                return Unsatisfiable(
                    f"{where}: 0 of {total} devices of {node} match its selectors "
                    f"({_selectors_text(request)})"
                )
            free = [
                d
                for d in matching
                if request.admin_access or d.allow_multiple_allocations or d.id not in in_use
            ]
            if request.all_devices:
                if len(free) < len(matching):
                    return Unsatisfiable(
                        f"{where}: allocationMode All needs every one of the {len(matching)} "
                        f"devices of {node} that match its selectors, "
                        f"{len(matching) - len(free)} of them are in use"
                    )
                need = len(matching)
            else:
                need = request.count
                if len(free) < need:
                    return Unsatisfiable(
                        f"{where}: needs {need} devices; {len(matching)} of {total} devices "
                        f"of {node} match its selectors ({_selectors_text(request)}), "
                        f"{len(free)} of them free"
                    )
            plan = _Plan(claim, request, sorted(free, key=rank), need)
            claim_plans[request.name] = plan
            plans.append(plan)
        for constraint in claim.constraints:
            names = constraint.requests or tuple(r.name for r in claim.requests)
            for name in names:
                claim_plans[name].constraints.append(
                    (constraint_number, constraint.match_attribute)
                )
            blocked = _constraint_blocked(
                claim, [claim_plans[n] for n in names], constraint.match_attribute, node
            )
            if blocked:
                return Unsatisfiable(blocked)
            constraint_number += 1
    return plans


def _constraint_blocked(claim: ClaimRequest, plans: list[_Plan], attribute: str, node: str) -> str:
    """Why no single value of `attribute` has enough free devices for every request of the
    constraint ('' when some value may)."""
    per_value: dict[tuple[str, object], dict[str, int]] = {}
    for plan in plans:
        for device in plan.candidates:
            key = _value_key(device, attribute)
            if key is not None:
                counts = per_value.setdefault(key, {})
                counts[plan.request.name] = counts.get(plan.request.name, 0) + 1
    for counts in per_value.values():
        if all(counts.get(plan.request.name, 0) >= plan.need for plan in plans):
            return ""
    wanted = " and ".join(
        f"{plan.need} device{'s' if plan.need != 1 else ''} for request {plan.request.name}"
        for plan in plans
    )
    if not per_value:
        return (
            f"claim {claim.key}: no free matching device of {node} has {attribute}, "
            f"which {wanted} must share"
        )
    shown = []
    for key in sorted(per_value, key=str)[:_MAX_VALUES_SHOWN]:
        counts = per_value[key]
        parts = ", ".join(
            f"{plan.request.name} {counts.get(plan.request.name, 0)}" for plan in plans
        )
        shown.append(f"{key[1]}: {parts}")
    more = len(per_value) - len(shown)
    tail = f"; {more} more values" if more > 0 else ""
    return (
        f"claim {claim.key}: no {wanted} on {node} share one value of {attribute} "
        f"(free matching devices per value: {'; '.join(shown)}{tail})"
    )


# --- search -------------------------------------------------------------------------------


class _Search:
    """Depth-first search over the plans' device combinations."""

    def __init__(self, plans: list[_Plan], step_limit: int) -> None:
        self.plans = plans
        self.step_limit = step_limit
        self.steps = 0
        self.exhausted = False
        self.chosen: list[list[Device]] = [[] for _ in plans]
        self.used: set[DeviceId] = set()
        self.values: dict[int, tuple[str, object]] = {}

    def run(self) -> list[list[Device]] | None:
        if self._fill(0, 0):
            return [list(devices) for devices in self.chosen]
        return None

    def _fill(self, index: int, start: int) -> bool:
        if index == len(self.plans):
            return True
        plan = self.plans[index]
        picked = self.chosen[index]
        if len(picked) == plan.need:
            return self._fill(index + 1, 0)
        still_needed = plan.need - len(picked)
        candidates = plan.candidates
        for position in range(start, len(candidates) - still_needed + 1):
            if self.steps >= self.step_limit:
                self.exhausted = True
                return False
            self.steps += 1
            device = candidates[position]
            blocks = plan.exclusive and not device.allow_multiple_allocations
            if blocks and device.id in self.used:
                continue
            fixed = self._agree(plan, device)
            if fixed is None:
                continue
            picked.append(device)
            if blocks:
                self.used.add(device.id)
            if self._fill(index, position + 1):
                return True
            picked.pop()
            if blocks:
                self.used.discard(device.id)
            for number in fixed:
                del self.values[number]
            if self.exhausted:
                return False
        return False

    def _agree(self, plan: _Plan, device: Device) -> list[int] | None:
        """The constraints this device fixes (None: it breaks one)."""
        fixed: list[int] = []
        for number, attribute in plan.constraints:
            key = _value_key(device, attribute)
            current = self.values.get(number)
            if key is None or (current is not None and current != key):
                for undo in fixed:
                    del self.values[undo]
                return None
            if current is None:
                self.values[number] = key
                fixed.append(number)
        return fixed


# --- results ------------------------------------------------------------------------------


def _share_id(claim: ClaimRequest, request: str, device: DeviceId) -> str:
    return str(uuid.uuid5(_SHARE_NAMESPACE, f"{claim.uid}/{claim.key}/{request}/{device}"))


def _configs(claim: ClaimRequest) -> tuple[OpaqueConfig, ...]:
    names = {request.name for request in claim.requests}
    kept: list[OpaqueConfig] = []
    for config in claim.config:
        if not config.requests:
            kept.append(config)
            continue
        requests = tuple(name for name in config.requests if name in names)
        if requests:
            kept.append(
                config if requests == config.requests else replace(config, requests=requests)
            )
    return tuple(kept)


def _allocations(
    claims: list[ClaimRequest], node: str, plans: list[_Plan], chosen: list[list[Device]]
) -> tuple[ClaimAllocation, ...]:
    results: dict[str, list[DeviceResult]] = {claim.key: [] for claim in claims}
    for plan, devices in zip(plans, chosen, strict=True):
        for device in devices:
            share = (
                _share_id(plan.claim, plan.request.name, device.id)
                if device.allow_multiple_allocations
                else None
            )
            results[plan.claim.key].append(DeviceResult(plan.request.name, device.id, share))
    return tuple(
        ClaimAllocation(claim.key, node, tuple(results[claim.key]), _configs(claim))
        for claim in claims
    )


# --- public API -----------------------------------------------------------------------------


def _ranker(prefer: Sequence[DeviceId]) -> Callable[[Device], tuple[int, int, DeviceId]]:
    order: dict[DeviceId, int] = {}
    for position, device_id in enumerate(prefer):
        order.setdefault(device_id, position)

    def rank(device: Device) -> tuple[int, int, DeviceId]:
        position = order.get(device.id)
        return (0, position, device.id) if position is not None else (1, 0, device.id)

    return rank


def _search(plans: list[_Plan], step_limit: int) -> tuple[list[list[Device]] | None, _Search]:
    search = _Search(plans, step_limit)
    return search.run(), search


def _explain(claims: list[ClaimRequest], node: str, plans: list[_Plan], step_limit: int) -> str:
    """Why the full search failed: the first claim that cannot be allocated alone, else the
    claims compete for the same devices."""
    for claim in claims:
        own = [plan for plan in plans if plan.claim.key == claim.key]
        found, search = _search(own, step_limit)
        if found is None and not search.exhausted:
            names = ", ".join(f"{p.request.name} ({p.need})" for p in own)
            tied = " that satisfy its constraints" if claim.constraints else ""
            return (
                f"claim {claim.key}: requests {names} cannot get distinct free devices"
                f"{tied} on {node}"
            )
    keys = ", ".join(claim.key for claim in claims)
    return (
        f"claims {keys}: each could be allocated alone on {node}, but not all together "
        "(they compete for the same free devices)"
    )


def allocate_on_node(
    claims: Sequence[ClaimRequest],
    node: str,
    devices: Sequence[Device],
    in_use: AbstractSet[DeviceId],
    selectors: DeviceSelectors,
    prefer: Sequence[DeviceId] = (),
    *,
    step_limit: int = DEFAULT_STEP_LIMIT,
) -> tuple[ClaimAllocation, ...] | Unsatisfiable:
    """Devices of `node` for all `claims` together (one ClaimAllocation per distinct claim key,
    in order), trying `prefer` first; Unsatisfiable with a reason when there are none.
    Raises SelectorError when a selector fails, InvalidRequestError for a malformed claim."""
    unique = _unique_claims(claims)
    if not unique:
        return ()
    by_id: dict[DeviceId, Device] = {}
    for device in devices:
        if device.node == node:
            by_id.setdefault(device.id, device)
    node_devices = [by_id[device_id] for device_id in sorted(by_id)]
    plans = _plans(unique, node, node_devices, in_use, selectors, _ranker(prefer))
    if isinstance(plans, Unsatisfiable):
        return plans
    found, search = _search(plans, step_limit)
    if found is not None:
        return _allocations(unique, node, plans, found)
    if search.exhausted:
        keys = ", ".join(claim.key for claim in unique)
        return Unsatisfiable(
            f"claims {keys}: search on {node} stopped after {step_limit} steps (the limit) "
            "without finding devices"
        )
    return Unsatisfiable(_explain(unique, node, plans, step_limit))


def nodes_that_fit(
    claims: Sequence[ClaimRequest],
    devices_by_node: Mapping[str, Sequence[Device]],
    in_use: AbstractSet[DeviceId],
    selectors: DeviceSelectors,
    *,
    step_limit: int = DEFAULT_STEP_LIMIT,
) -> dict[str, str]:
    """For each node, '' when this pod's claims could be allocated there alone, else the
    reason (counts of matching free devices are checked before any search)."""
    verdicts: dict[str, str] = {}
    for node, devices in devices_by_node.items():
        result = allocate_on_node(claims, node, devices, in_use, selectors, step_limit=step_limit)
        verdicts[node] = result.reason if isinstance(result, Unsatisfiable) else ""
    return verdicts


def allocate_gang(
    pods: Sequence[tuple[str, Sequence[ClaimRequest]]],
    node_of: Mapping[str, str],
    devices_by_node: Mapping[str, Sequence[Device]],
    in_use: AbstractSet[DeviceId],
    selectors: DeviceSelectors,
    prefer_by_pod: Mapping[str, Sequence[DeviceId]] | None = None,
    *,
    step_limit: int = DEFAULT_STEP_LIMIT,
) -> dict[str, tuple[ClaimAllocation, ...]] | Unsatisfiable:
    """Every pod's claims on its node (`node_of`), or Unsatisfiable: never a part. The claims of
    all pods on one node are allocated together (no device twice); a claim several pods share
    (same key) is allocated once, on their common node, and given to each of them."""
    prefer_by_pod = prefer_by_pod or {}
    claims_of_node: dict[str, list[ClaimRequest]] = {}
    prefer_of_node: dict[str, list[DeviceId]] = {}
    pods_of_node: dict[str, list[str]] = {}
    claim_home: dict[str, tuple[str, str]] = {}
    pod_claims: dict[str, list[str]] = {}
    for pod, claims in pods:
        if pod in pod_claims:
            raise InvalidRequestError(f"pod {pod} appears twice in the gang")
        node = node_of.get(pod)
        if node is None:
            raise InvalidRequestError(f"pod {pod} has no node in node_of")
        pods_of_node.setdefault(node, []).append(pod)
        prefer_of_node.setdefault(node, []).extend(prefer_by_pod.get(pod, ()))
        keys: list[str] = []
        for claim in claims:
            home = claim_home.get(claim.key)
            if home is None:
                claim_home[claim.key] = (pod, node)
                claims_of_node.setdefault(node, []).append(claim)
            elif home[1] != node:
                return Unsatisfiable(
                    f"claim {claim.key} is shared by pods {home[0]} (node {home[1]}) and {pod} "
                    f"(node {node}); a claim's devices are on one node"
                )
            if claim.key not in keys:
                keys.append(claim.key)
        pod_claims[pod] = keys
    used = set(in_use)
    allocated: dict[str, ClaimAllocation] = {}
    for node, claims in claims_of_node.items():
        result = allocate_on_node(
            claims,
            node,
            devices_by_node.get(node, ()),
            used,
            selectors,
            prefer_of_node.get(node, ()),
            step_limit=step_limit,
        )
        if isinstance(result, Unsatisfiable):
            here = pods_of_node[node]
            label = "pod" if len(here) == 1 else "pods"
            return Unsatisfiable(f"{label} {', '.join(here)} on {node}: {result.reason}")
        for allocation in result:
            allocated[allocation.claim] = allocation
            used.update(r.device for r in allocation.results if r.share_id is None)
    return {pod: tuple(allocated[key] for key in keys) for pod, keys in pod_claims.items()}
