"""DRA allocation on a node and for a gang: counts, selectors, matchAttribute, no double use."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from collections.abc import Set as AbstractSet

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from voltpack.model.devices import (
    PCIE_ROOT_ATTRIBUTE,
    ClaimAllocation,
    ClaimRequest,
    Device,
    DeviceConstraint,
    DeviceId,
    DeviceRequest,
    OpaqueConfig,
)
from voltpack.model.errors import InvalidRequestError
from voltpack.scheduler.device_selectors import DeviceSelectors, SelectorError
from voltpack.scheduler.dra_allocation import (
    Unsatisfiable,
    allocate_gang,
    allocate_on_node,
    nodes_that_fit,
)

GPU_CLASS = 'device.driver == "gpu.nvidia.com"'
NIC_CLASS = 'device.driver == "dra.net" && device.attributes["dra.net"].rdma'
H100 = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"'
ROOTS = ("pci0000:15", "pci0000:36", "pci0000:53", "pci0000:d5")


def gpu(node: str, index: int, root: str, product: str = "NVIDIA H100 80GB HBM3") -> Device:
    return Device(
        DeviceId("gpu.nvidia.com", node, f"gpu-{index}"),
        node,
        {
            "gpu.nvidia.com/type": "gpu",
            "gpu.nvidia.com/productName": product,
            "gpu.nvidia.com/uuid": f"GPU-{node}-{index}",
            "gpu.nvidia.com/index": index,
            "gpu.nvidia.com/architecture": "Hopper",
            "gpu.nvidia.com/driverVersion": "550.54.15",
            PCIE_ROOT_ATTRIBUTE: root,
        },
        frozenset({"gpu.nvidia.com/driverVersion"}),
        {"gpu.nvidia.com/memory": "80Gi"},
    )


def nic(node: str, index: int, root: str | None, shared: bool = False) -> Device:
    attributes: dict[str, bool | int | str] = {
        "dra.net/rdma": True,
        "dra.net/ifName": f"ib{index}",
        "dra.net/linkSpeed": 400000,
    }
    if root is not None:
        attributes[PCIE_ROOT_ATTRIBUTE] = root
    return Device(
        DeviceId("dra.net", node, f"mlx5-{index}"),
        node,
        attributes,
        allow_multiple_allocations=shared,
    )


def h100_node(node: str = "node-a") -> list[Device]:
    """Eight H100s, two per PCIe root, and one RDMA NIC per root."""
    gpus = [gpu(node, i, ROOTS[i // 2]) for i in range(8)]
    return gpus + [nic(node, i, ROOTS[i]) for i in range(4)]


def gpu_request(count: int = 1, *extra: str, name: str = "gpu") -> DeviceRequest:
    return DeviceRequest(name, "gpu.nvidia.com", (GPU_CLASS, *extra), count)


def nic_request(count: int = 1, name: str = "nic") -> DeviceRequest:
    return DeviceRequest(name, "rdma.dra.net", (NIC_CLASS,), count)


def aligned_claim(key: str = "ml/train-0", gpus: int = 1) -> ClaimRequest:
    return ClaimRequest(
        key,
        f"uid-{key}",
        (gpu_request(gpus), nic_request()),
        (DeviceConstraint(PCIE_ROOT_ATTRIBUTE),),
    )


def by_name(devices: Sequence[Device]) -> dict[str, Device]:
    return {device.id.name: device for device in devices}


def allocate(
    claims: Sequence[ClaimRequest],
    devices: Sequence[Device],
    in_use: AbstractSet[DeviceId] = frozenset(),
    prefer: Sequence[DeviceId] = (),
    node: str = "node-a",
) -> tuple[ClaimAllocation, ...]:
    result = allocate_on_node(claims, node, devices, in_use, DeviceSelectors(), prefer)
    assert not isinstance(result, Unsatisfiable), result.reason
    return result


def refused(
    claims: Sequence[ClaimRequest],
    devices: Sequence[Device],
    in_use: AbstractSet[DeviceId] = frozenset(),
    **options: int,
) -> str:
    result = allocate_on_node(claims, "node-a", devices, in_use, DeviceSelectors(), **options)
    assert isinstance(result, Unsatisfiable), result
    return result.reason


def root_of(devices: Sequence[Device], device_id: DeviceId) -> object:
    return next(d for d in devices if d.id == device_id).attribute(PCIE_ROOT_ATTRIBUTE)


# --- examples -------------------------------------------------------------------------------


def test_gpu_and_nic_share_a_pcie_root() -> None:
    devices = h100_node()
    (allocation,) = allocate([aligned_claim(gpus=2)], devices)
    assert allocation.node == "node-a" and allocation.claim == "ml/train-0"
    chosen = allocation.devices()
    assert [r.request for r in allocation.results] == ["gpu", "gpu", "nic"]
    assert len({root_of(devices, d) for d in chosen}) == 1


def test_nic_follows_the_gpu_when_its_root_neighbour_is_busy() -> None:
    devices = h100_node()
    names = by_name(devices)
    busy = {names["gpu-0"].id, names["gpu-1"].id, names["gpu-2"].id, names["mlx5-2"].id}
    (allocation,) = allocate([aligned_claim()], devices, busy)
    gpu_id, nic_id = allocation.devices()
    assert gpu_id == names["gpu-3"].id  # root 36 (its GPU-2 is busy) with NIC mlx5-1
    assert nic_id == names["mlx5-1"].id
    assert not set(allocation.devices()) & busy


def test_prefer_order_is_honoured_when_valid() -> None:
    devices = h100_node()
    names = by_name(devices)
    prefer = [names[n].id for n in ("gpu-5", "gpu-4", "mlx5-2")]
    (allocation,) = allocate([aligned_claim(gpus=2)], devices, prefer=prefer)
    assert allocation.devices() == tuple(prefer)


def test_prefer_order_is_overridden_when_it_breaks_the_constraint() -> None:
    devices = h100_node()
    names = by_name(devices)
    prefer = [names[n].id for n in ("gpu-0", "gpu-1", "mlx5-3")]  # NIC on another root
    (allocation,) = allocate([aligned_claim(gpus=2)], devices, prefer=prefer)
    assert allocation.devices() == (names["gpu-0"].id, names["gpu-1"].id, names["mlx5-0"].id)


def test_two_claims_never_share_a_device() -> None:
    devices = h100_node()
    claims = [aligned_claim(f"ml/train-{i}", gpus=2) for i in range(4)]
    allocations = allocate(claims, devices)
    chosen = [d for allocation in allocations for d in allocation.devices()]
    assert len(chosen) == len(set(chosen)) == 12
    for allocation in allocations:
        assert len({root_of(devices, d) for d in allocation.devices()}) == 1


def test_in_use_devices_are_never_handed_out() -> None:
    devices = h100_node()
    in_use = {d.id for d in devices if d.id.name in ("gpu-0", "gpu-3", "gpu-6", "mlx5-1")}
    claim = ClaimRequest("ml/a", "u", (gpu_request(5),))
    (allocation,) = allocate([claim], devices, in_use)
    assert len(allocation.devices()) == 5 and not set(allocation.devices()) & in_use
    reason = refused([ClaimRequest("ml/a", "u", (gpu_request(6),))], devices, in_use)
    assert reason == (
        "claim ml/a: request gpu: needs 6 devices; 8 of 12 devices of node-a match its "
        f"selectors ({GPU_CLASS}), 5 of them free"
    )


def test_all_mode_takes_every_matching_device() -> None:
    devices = h100_node()
    claim = ClaimRequest(
        "ml/all", "u", (DeviceRequest("nics", "rdma", (NIC_CLASS,), all_devices=True),)
    )
    (allocation,) = allocate([claim], devices)
    assert sorted(d.name for d in allocation.devices()) == [f"mlx5-{i}" for i in range(4)]
    busy = {by_name(devices)["mlx5-2"].id}
    assert "allocationMode All needs every one of the 4 devices" in refused([claim], devices, busy)


def test_all_mode_with_no_match_is_unsatisfiable() -> None:
    selector = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA B200"'
    claim = ClaimRequest(
        "ml/none", "u", (DeviceRequest("gpu", "gpu", (GPU_CLASS, selector), all_devices=True),)
    )
    reason = refused([claim], h100_node())
    assert reason == (
        "claim ml/none: request gpu: 0 of 12 devices of node-a match its selectors "
        f"({GPU_CLASS} && {selector})"
    )


def test_constraint_failure_names_the_attribute_and_requests() -> None:
    devices = h100_node()
    names = by_name(devices)
    busy = {names[f"mlx5-{i}"].id for i in (0, 1)} | {names[f"gpu-{i}"].id for i in (4, 6)}
    reason = refused([aligned_claim(gpus=2)], devices, busy)
    assert reason.startswith(
        "claim ml/train-0: no 2 devices for request gpu and 1 device for request nic on node-a "
        f"share one value of {PCIE_ROOT_ATTRIBUTE}"
    )
    assert "pci0000:53: gpu 1, nic 1" in reason


def test_a_device_without_the_attribute_fails_the_constraint() -> None:
    devices = [gpu("node-a", 0, ROOTS[0]), nic("node-a", 0, None)]
    reason = refused([aligned_claim()], devices)
    assert f"share one value of {PCIE_ROOT_ATTRIBUTE}" in reason


def test_constraint_over_named_requests_only() -> None:
    devices = h100_node()
    claim = ClaimRequest(
        "ml/c",
        "u",
        (gpu_request(2, name="a"), gpu_request(2, name="b"), nic_request()),
        (DeviceConstraint(PCIE_ROOT_ATTRIBUTE, ("a", "nic")),),
    )
    (allocation,) = allocate([claim], devices)
    a_and_nic = [r.device for r in allocation.results if r.request in ("a", "nic")]
    assert len({root_of(devices, d) for d in a_and_nic}) == 1
    assert len(allocation.devices()) == len(set(allocation.devices())) == 5


def test_claims_that_fit_alone_but_not_together() -> None:
    devices = h100_node()
    claims = [ClaimRequest(f"ml/{i}", "u", (gpu_request(5),)) for i in range(2)]
    reason = refused(claims, devices)
    assert reason.startswith("claims ml/0, ml/1: each could be allocated alone on node-a")


def test_requests_of_one_claim_compete() -> None:
    devices = h100_node()
    claim = ClaimRequest("ml/x", "u", (gpu_request(5, name="a"), gpu_request(4, name="b")))
    reason = refused([claim], devices)
    assert reason == "claim ml/x: requests a (5), b (4) cannot get distinct free devices on node-a"


def test_step_limit_is_reported() -> None:
    devices = h100_node()
    claims = [ClaimRequest(f"ml/{i}", "u", (gpu_request(3),)) for i in range(3)]
    reason = refused(claims, devices, step_limit=50)
    assert "stopped after 50 steps (the limit)" in reason


def test_devices_of_other_nodes_are_ignored() -> None:
    devices = h100_node("node-b")
    assert refused([aligned_claim()], devices) == (
        "claim ml/train-0: request gpu: node node-a has no devices"
    )


def test_shared_devices_get_a_share_id_and_may_be_in_use() -> None:
    devices = [
        gpu("node-a", 0, ROOTS[0]),
        gpu("node-a", 1, ROOTS[0]),
        nic("node-a", 0, ROOTS[0], shared=True),
    ]
    names = by_name(devices)
    claims = [aligned_claim("ml/a"), aligned_claim("ml/b")]
    first, second = allocate(claims, devices, in_use={names["mlx5-0"].id})
    share_ids = [r.share_id for a in (first, second) for r in a.results if r.request == "nic"]
    assert all(share_ids) and len(set(share_ids)) == 2
    assert all(r.share_id is None for a in (first, second) for r in a.results if r.request == "gpu")


def test_admin_access_may_use_busy_devices() -> None:
    devices = h100_node()
    in_use = {d.id for d in devices}
    claim = ClaimRequest(
        "ops/monitor",
        "u",
        (DeviceRequest("gpus", "gpu", (GPU_CLASS,), all_devices=True, admin_access=True),),
    )
    (allocation,) = allocate([claim], devices, in_use)
    assert len(allocation.devices()) == 8


def test_config_is_restricted_to_the_claims_requests() -> None:
    everything = OpaqueConfig("gpu.nvidia.com", {"sharing": "TimeSlicing"}, (), "FromClass")
    gpu_only = OpaqueConfig("gpu.nvidia.com", {"kind": "GpuConfig"}, ("gpu", "other"))
    elsewhere = OpaqueConfig("dra.net", {"mtu": 9000}, ("unknown",))
    claim = ClaimRequest(
        "ml/cfg", "u", (gpu_request(), nic_request()), (), (everything, gpu_only, elsewhere)
    )
    (allocation,) = allocate([claim], h100_node())
    assert allocation.config == (
        everything,
        OpaqueConfig("gpu.nvidia.com", {"kind": "GpuConfig"}, ("gpu",)),
    )


def test_same_claim_twice_is_allocated_once() -> None:
    claim = aligned_claim()
    allocations = allocate([claim, claim], h100_node())
    assert len(allocations) == 1


def test_selector_error_propagates() -> None:
    bad = 'device.attributes["gpu.nvidia.com"].memoryBandwidth > 3'
    claim = ClaimRequest("ml/bad", "u", (gpu_request(1, bad),))
    with pytest.raises(SelectorError, match="memoryBandwidth"):
        allocate_on_node([claim], "node-a", h100_node(), frozenset(), DeviceSelectors())


@pytest.mark.parametrize(
    ("claim", "words"),
    [
        (ClaimRequest("ml/x", "u", ()), "no requests"),
        (ClaimRequest("ml/x", "u", (gpu_request(), gpu_request())), "repeat"),
        (ClaimRequest("ml/x", "u", (gpu_request(0),)), "count is 0"),
        (
            ClaimRequest("ml/x", "u", (gpu_request(),), (DeviceConstraint("a/b", ("nic",)),)),
            "unknown requests",
        ),
    ],
)
def test_malformed_claims_are_rejected(claim: ClaimRequest, words: str) -> None:
    with pytest.raises(InvalidRequestError, match=words):
        allocate_on_node([claim], "node-a", h100_node(), frozenset(), DeviceSelectors())


def test_nodes_that_fit() -> None:
    devices_by_node = {"node-a": h100_node("node-a"), "node-b": h100_node("node-b"), "node-c": []}
    in_use = {d.id for d in devices_by_node["node-b"] if d.id.driver == "dra.net"}
    verdicts = nodes_that_fit([aligned_claim()], devices_by_node, in_use, DeviceSelectors())
    assert verdicts["node-a"] == ""
    assert verdicts["node-b"].startswith("claim ml/train-0: request nic: needs 1 devices")
    assert verdicts["node-c"] == "claim ml/train-0: request gpu: node node-c has no devices"


def test_gang_all_pods_or_none() -> None:
    devices_by_node = {"node-a": h100_node("node-a"), "node-b": h100_node("node-b")}
    pods = [(f"ml/w-{i}", [aligned_claim(f"ml/w-{i}-net", gpus=2)]) for i in range(4)]
    node_of = {pod: ("node-a" if i < 2 else "node-b") for i, (pod, _) in enumerate(pods)}
    result = allocate_gang(pods, node_of, devices_by_node, frozenset(), DeviceSelectors())
    assert isinstance(result, dict) and set(result) == set(node_of)
    for pod, (allocation,) in result.items():
        assert allocation.node == node_of[pod]
    too_many = [*pods, ("ml/w-4", [aligned_claim("ml/w-4-net", gpus=2)])]
    node_of["ml/w-4"] = "node-a"
    busy = {by_name(devices_by_node["node-a"])[n].id for n in ("mlx5-2", "mlx5-3")}
    refusal = allocate_gang(too_many, node_of, devices_by_node, busy, DeviceSelectors())
    assert isinstance(refusal, Unsatisfiable)
    assert refusal.reason.startswith("pods ml/w-0, ml/w-1, ml/w-4 on node-a: ")


def test_gang_shares_a_claim_once() -> None:
    shared = ClaimRequest("ml/shared-nic", "u", (nic_request(),))
    pods = [
        ("ml/p0", [aligned_claim("ml/p0-gpu"), shared]),
        ("ml/p1", [shared, aligned_claim("ml/p1-gpu")]),
    ]
    result = allocate_gang(
        pods,
        {"ml/p0": "node-a", "ml/p1": "node-a"},
        {"node-a": h100_node()},
        frozenset(),
        DeviceSelectors(),
    )
    assert isinstance(result, dict)
    assert result["ml/p0"][1] is result["ml/p1"][0]
    apart = allocate_gang(
        pods,
        {"ml/p0": "node-a", "ml/p1": "node-b"},
        {"node-a": h100_node(), "node-b": h100_node("node-b")},
        frozenset(),
        DeviceSelectors(),
    )
    assert isinstance(apart, Unsatisfiable)
    assert "claim ml/shared-nic is shared by pods ml/p0 (node node-a) and ml/p1" in apart.reason


def test_gang_rejects_a_pod_without_a_node() -> None:
    with pytest.raises(InvalidRequestError, match="no node"):
        allocate_gang([("ml/p", [aligned_claim()])], {}, {}, frozenset(), DeviceSelectors())


# --- properties -----------------------------------------------------------------------------

SELECTOR_CHOICES = {
    "gpu": (GPU_CLASS,),
    "gpu-low": (GPU_CLASS, 'device.attributes["gpu.nvidia.com"].index < 2'),
    "gpu-80g": (
        GPU_CLASS,
        'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0',
    ),
    "nic": (NIC_CLASS,),
    "any": (),
}


@st.composite
def small_node(draw: st.DrawFn, node: str = "node-a") -> tuple[list[Device], set[DeviceId]]:
    gpus = draw(st.integers(0, 4))
    nics = draw(st.integers(0, 3))
    roots = st.sampled_from(ROOTS[:2])
    devices = [gpu(node, i, draw(roots)) for i in range(gpus)]
    devices += [
        nic(node, i, draw(st.one_of(roots, st.none())), draw(st.booleans())) for i in range(nics)
    ]
    in_use = {d.id for d in devices if draw(st.booleans()) and draw(st.booleans())}
    return devices, in_use


@st.composite
def claim_set(draw: st.DrawFn, prefix: str = "ml/c") -> list[ClaimRequest]:
    claims = []
    for c in range(draw(st.integers(1, 2))):
        requests = []
        for r in range(draw(st.integers(1, 2))):
            kind = draw(st.sampled_from(sorted(SELECTOR_CHOICES)))
            all_devices = draw(st.integers(0, 5)) == 0
            requests.append(
                DeviceRequest(
                    f"r{r}", kind, SELECTOR_CHOICES[kind], draw(st.integers(1, 2)), all_devices
                )
            )
        constraints: tuple[DeviceConstraint, ...] = ()
        if draw(st.booleans()):
            names = tuple(r.name for r in requests)
            subset = draw(st.sampled_from([(), *[(n,) for n in names]]))
            constraints = (DeviceConstraint(PCIE_ROOT_ATTRIBUTE, subset),)
        claims.append(
            ClaimRequest(f"{prefix}{c}", f"uid-{prefix}{c}", tuple(requests), constraints)
        )
    return claims


def check_allocations(
    claims: Sequence[ClaimRequest],
    allocations: Sequence[ClaimAllocation],
    devices: Sequence[Device],
    in_use: AbstractSet[DeviceId],
    node: str,
) -> None:
    """Properties (a) and (c): counts, selectors, constraints, no device twice or in use."""
    by_id = {d.id: d for d in devices}
    selectors = DeviceSelectors()
    exclusive_taken: list[DeviceId] = []
    assert [a.claim for a in allocations] == list(dict.fromkeys(c.key for c in claims))
    for claim, allocation in zip(
        dict((c.key, c) for c in claims).values(), allocations, strict=True
    ):
        assert allocation.node == node
        for request in claim.requests:
            chosen = [r for r in allocation.results if r.request == request.name]
            ids = [r.device for r in chosen]
            assert len(ids) == len(set(ids))
            matching = [
                d for d in devices if d.node == node and selectors.matches(d, request.selectors)
            ]
            if request.all_devices:
                assert sorted(ids) == sorted(d.id for d in matching)
            else:
                assert len(ids) == request.count
            for result in chosen:
                device = by_id[result.device]
                assert device.node == node and selectors.matches(device, request.selectors)
                if device.allow_multiple_allocations:
                    assert result.share_id
                else:
                    assert result.share_id is None
                    assert device.id not in in_use
                    exclusive_taken.append(device.id)
        for constraint in claim.constraints:
            names = constraint.requests or tuple(r.name for r in claim.requests)
            values = [
                by_id[r.device].attribute(constraint.match_attribute)
                for r in allocation.results
                if r.request in names
            ]
            assert None not in values and len(set(values)) <= 1
    assert len(exclusive_taken) == len(set(exclusive_taken))


def brute_force_exists(
    claims: Sequence[ClaimRequest], devices: Sequence[Device], in_use: AbstractSet[DeviceId]
) -> bool:
    """Whether any allocation exists, by trying every combination."""
    selectors = DeviceSelectors()
    slots = []
    for claim in claims:
        for request in claim.requests:
            matching = [d for d in devices if selectors.matches(d, request.selectors)]
            if request.all_devices:
                options = [tuple(matching)] if matching else []
            else:
                options = list(itertools.combinations(matching, request.count))
            slots.append((claim, request, options))
    for choice in itertools.product(*(options for _, _, options in slots)):
        taken = [d.id for picked in choice for d in picked if not d.allow_multiple_allocations]
        if len(taken) != len(set(taken)) or set(taken) & in_use:
            continue
        ok = True
        for claim in claims:
            for constraint in claim.constraints:
                names = constraint.requests or tuple(r.name for r in claim.requests)
                values = [
                    d.attribute(constraint.match_attribute)
                    for (c, r, _), picked in zip(slots, choice, strict=True)
                    if c is claim and r.name in names
                    for d in picked
                ]
                ok = ok and None not in values and len(set(values)) <= 1
        if ok:
            return True
    return False


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(small_node(), claim_set(), st.data())
def test_allocations_are_valid_and_complete(
    node: tuple[list[Device], set[DeviceId]], claims: list[ClaimRequest], data: st.DataObject
) -> None:
    devices, in_use = node
    prefer = data.draw(st.permutations([d.id for d in devices]))
    result = allocate_on_node(claims, "node-a", devices, in_use, DeviceSelectors(), prefer)
    exists = brute_force_exists(claims, devices, in_use)
    if isinstance(result, Unsatisfiable):
        event("unsatisfiable")
        assert not exists, result.reason
        assert "claim" in result.reason
    else:
        event("allocated")
        assert exists
        check_allocations(claims, result, devices, in_use, "node-a")


@FAST
@given(
    small_node("node-a"), small_node("node-b"), claim_set("ml/a"), claim_set("ml/b"), st.booleans()
)
def test_gang_is_all_or_nothing_and_valid(
    node_a: tuple[list[Device], set[DeviceId]],
    node_b: tuple[list[Device], set[DeviceId]],
    claims_a: list[ClaimRequest],
    claims_b: list[ClaimRequest],
    same_node: bool,
) -> None:
    devices_by_node = {"node-a": node_a[0], "node-b": node_b[0]}
    in_use = node_a[1] | node_b[1]
    pods = [("ml/p0", claims_a), ("ml/p1", claims_b)]
    node_of = {"ml/p0": "node-a", "ml/p1": "node-a" if same_node else "node-b"}
    result = allocate_gang(pods, node_of, devices_by_node, in_use, DeviceSelectors())
    if isinstance(result, Unsatisfiable):
        event("gang unsatisfiable")
        if same_node:
            assert not brute_force_exists(claims_a + claims_b, node_a[0], in_use)
        else:
            assert not (
                brute_force_exists(claims_a, node_a[0], in_use)
                and brute_force_exists(claims_b, node_b[0], in_use)
            )
        return
    event("gang allocated")
    assert set(result) == {"ml/p0", "ml/p1"}
    everything: list[DeviceId] = []
    for pod, claims in pods:
        node = node_of[pod]
        check_allocations(claims, result[pod], devices_by_node[node], in_use, node)
        for allocation in result[pod]:
            devices = {d.id: d for d in devices_by_node[node]}
            everything += [
                r.device
                for r in allocation.results
                if not devices[r.device].allow_multiple_allocations
            ]
    assert len(everything) == len(set(everything))
    if same_node:
        together = allocate_on_node(
            claims_a + claims_b, "node-a", node_a[0], in_use, DeviceSelectors()
        )
        assert not isinstance(together, Unsatisfiable)
