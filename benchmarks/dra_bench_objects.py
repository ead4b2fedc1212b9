"""The objects of the DRA side-by-side benchmark and its correctness check (pure functions).

`dra_node` (a kwok Node without `nvidia.com/gpu`), `gpu_claim` (one ResourceClaim per pod:
one GPU of class `gpu.nvidia.com`, or a GPU and an RDMA NIC on the same PCIe root) and
`claiming_pod` build the request bodies; `check_allocations` verifies, from what the API
server holds after a run, that every pod is bound, every claim allocated and reserved for its
pod on the pod's node, no device is in two claims and every `matchAttribute` constraint holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

API_VERSION = "resource.k8s.io/v1"
GPU_CLASS = "gpu.nvidia.com"
NIC_CLASS = "dra.net"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
CLAIM_REFERENCE = "devices"
"""The name the pod gives its claim (`spec.resourceClaims[].name`)."""
VARIANTS = ("gpu", "gpu-nic")
"""`gpu`: one GPU per claim; `gpu-nic`: a GPU and an RDMA NIC with the same PCIe root."""

DeviceKey = tuple[str, str, str]
"""(driver, pool, device)."""


def dra_node(name: str, cpu_milli: int = 96_000, memory_mib: int = 1_536_000) -> dict[str, Any]:
    """A Node kwok manages, whose GPUs are only in ResourceSlices (no `nvidia.com/gpu`)."""
    if not name:
        raise ValueError("a node needs a name")
    resources = {"cpu": f"{cpu_milli}m", "memory": f"{memory_mib}Mi", "pods": "1000"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "type": "kwok"},
            "annotations": {KWOK_ANNOTATION: "fake"},
        },
        "status": {"capacity": resources, "allocatable": dict(resources)},
    }


def gpu_claim(name: str, namespace: str, variant: str = "gpu") -> dict[str, Any]:
    """A ResourceClaim for one GPU (`gpu`), or one GPU and one RDMA NIC on the same PCIe root
    (`gpu-nic`)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown claim variant {variant!r}; expected one of {VARIANTS}")
    requests: list[dict[str, Any]] = [
        {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": 1}}
    ]
    devices: dict[str, Any] = {"requests": requests}
    if variant == "gpu-nic":
        rdma = {"cel": {"expression": f'device.attributes["{NIC_CLASS}"].rdma == true'}}
        requests.append(
            {"name": "nic", "exactly": {"deviceClassName": NIC_CLASS, "selectors": [rdma]}}
        )
        devices["constraints"] = [{"requests": ["gpu", "nic"], "matchAttribute": PCIE_ROOT}]
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": devices},
    }


def claiming_pod(name: str, namespace: str, claim: str, scheduler_name: str) -> dict[str, Any]:
    """A pod (1 CPU, 1 GiB) whose container uses the ResourceClaim `claim`, by name."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": scheduler_name,
            "resourceClaims": [{"name": CLAIM_REFERENCE, "resourceClaimName": claim}],
            "containers": [
                {
                    "name": "main",
                    "image": "bench:1",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi"},
                        "claims": [{"name": CLAIM_REFERENCE}],
                    },
                }
            ],
        },
    }


def _requirement_matches(requirement: Mapping[str, Any], value: str | None) -> bool:
    operator, values = requirement.get("operator"), requirement.get("values") or []
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    raise ValueError(f"node selector operator {operator!r} is not checked here")


def node_selector_matches(
    selector: Mapping[str, Any] | None, node_name: str, labels: Mapping[str, str]
) -> bool:
    """Whether a v1 NodeSelector (terms ORed; a term's requirements ANDed) selects the node.
    None selects every node (a claim usable anywhere)."""
    if selector is None:
        return True
    for term in selector.get("nodeSelectorTerms") or []:
        fields = term.get("matchFields") or []
        expressions = term.get("matchExpressions") or []
        if not fields and not expressions:
            continue  # an empty term selects nothing
        ok = all(
            _requirement_matches(r, node_name if r.get("key") == "metadata.name" else None)
            for r in fields
        ) and all(_requirement_matches(r, labels.get(str(r.get("key")))) for r in expressions)
        if ok:
            return True
    return False


def device_attributes(slices: Iterable[Mapping[str, Any]]) -> dict[DeviceKey, dict[str, Any]]:
    """Every published device by (driver, pool, name): its attributes as plain values (names
    without a domain qualified with the driver's), and `node` (the slice's nodeName)."""
    found: dict[DeviceKey, dict[str, Any]] = {}
    for item in slices:
        spec = item["spec"]
        driver, pool = spec["driver"], spec["pool"]["name"]
        for device in spec.get("devices") or []:
            values: dict[str, Any] = {"node": spec.get("nodeName")}
            for name, value in (device.get("attributes") or {}).items():
                qualified = name if "/" in name else f"{driver}/{name}"
                values[qualified] = next(iter(value.values()), None)
            found[(driver, pool, device["name"])] = values
    return found


@dataclass
class CheckResult:
    """What `check_allocations` found: counts and the first problems, in words."""

    pods: int = 0
    bound: int = 0
    claims_allocated: int = 0
    devices_allocated: int = 0
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0

    def problem(self, text: str, keep: int = 20) -> None:
        self.problem_count += 1
        if len(self.problems) < keep:
            self.problems.append(text)

    @property
    def ok(self) -> bool:
        return self.problem_count == 0 and self.bound == self.pods

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "pods": self.pods,
            "bound": self.bound,
            "claims_allocated": self.claims_allocated,
            "devices_allocated": self.devices_allocated,
            "problem_count": self.problem_count,
            "problems": self.problems,
        }


def _pod_claim(pod: Mapping[str, Any]) -> str | None:
    for reference in (pod.get("spec") or {}).get("resourceClaims") or []:
        if reference.get("resourceClaimName"):
            return str(reference["resourceClaimName"])
    return None


def _check_claim(
    result: CheckResult,
    pod: Mapping[str, Any],
    claim: Mapping[str, Any],
    devices: Mapping[DeviceKey, Mapping[str, Any]],
    node_labels: Mapping[str, Mapping[str, str]],
    owner: dict[DeviceKey, str],
) -> None:
    pod_name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
    claim_name = claim["metadata"]["name"]
    status = claim.get("status") or {}
    allocation = status.get("allocation")
    if not allocation:
        result.problem(f"claim {claim_name} of bound pod {pod_name} has no allocation")
        return
    result.claims_allocated += 1
    if not node_selector_matches(allocation.get("nodeSelector"), node, node_labels.get(node, {})):
        result.problem(f"claim {claim_name}: node selector does not select {pod_name}'s {node}")
    reserved = {(r.get("name"), r.get("uid")) for r in status.get("reservedFor") or []}
    if (pod_name, pod["metadata"].get("uid")) not in reserved:
        result.problem(f"claim {claim_name} is not reserved for pod {pod_name}")
    by_request: dict[str, Mapping[str, Any]] = {}
    for item in (allocation.get("devices") or {}).get("results") or []:
        key: DeviceKey = (item["driver"], item["pool"], item["device"])
        result.devices_allocated += 1
        if key in owner:
            result.problem(f"device {'/'.join(key)} in claims {owner[key]} and {claim_name}")
        owner[key] = claim_name
        attributes = devices.get(key)
        if attributes is None:
            result.problem(f"claim {claim_name}: device {'/'.join(key)} is not published")
            continue
        if attributes.get("node") != node:
            result.problem(
                f"claim {claim_name}: device {'/'.join(key)} is on {attributes.get('node')}, "
                f"pod {pod_name} on {node}"
            )
        by_request[item["request"]] = attributes
    requests = [r["name"] for r in (claim["spec"]["devices"].get("requests") or [])]
    if sorted(by_request) != sorted(requests):
        result.problem(f"claim {claim_name}: requests {requests}, allocated {sorted(by_request)}")
    for constraint in claim["spec"]["devices"].get("constraints") or []:
        attribute = constraint.get("matchAttribute")
        names = constraint.get("requests") or list(by_request)
        values = {str(by_request[n].get(attribute)) for n in names if n in by_request}
        if attribute and len(values) > 1:
            result.problem(f"claim {claim_name}: {attribute} differs across {names}: {values}")


def check_allocations(
    pods: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
    slices: Sequence[Mapping[str, Any]],
    node_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> CheckResult:
    """Check a finished run from the objects as listed from the API server.

    Every pod must be bound; the claim it names must have `status.allocation` with a node
    selector that selects the pod's node, be reserved for the pod, hold one published device on
    that node per request, and satisfy its `matchAttribute` constraints; no device may be in two
    claims (claims of unbound pods count too).
    """
    labels = node_labels or {}
    devices = device_attributes(slices)
    by_name = {c["metadata"]["name"]: c for c in claims}
    result = CheckResult(pods=len(pods))
    owner: dict[DeviceKey, str] = {}
    for pod in pods:
        pod_name = pod["metadata"]["name"]
        claim_name = _pod_claim(pod)
        if not (pod.get("spec") or {}).get("nodeName"):
            result.problem(f"pod {pod_name} is not bound")
            continue
        result.bound += 1
        claim = by_name.pop(claim_name, None) if claim_name else None
        if claim is None:
            result.problem(f"pod {pod_name}: its claim {claim_name!r} is missing")
            continue
        _check_claim(result, pod, claim, devices, labels, owner)
    for name, claim in by_name.items():  # claims no bound pod uses: must not share devices
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for item in (allocation.get("devices") or {}).get("results") or []:
            key = (item["driver"], item["pool"], item["device"])
            if key in owner:
                result.problem(f"device {'/'.join(key)} in claims {owner[key]} and {name}")
            owner[key] = name
    return result
