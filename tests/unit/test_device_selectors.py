"""DRA device selectors: Kubernetes' CEL environment over `device`, evaluated with celpy."""

from __future__ import annotations

import itertools
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voltpack.model.devices import Device, DeviceId
from voltpack.model.errors import VoltpackError
from voltpack.scheduler.device_selectors import (
    DeviceSelectors,
    SelectorError,
    parse_quantity,
    parse_semver,
)

GPU = Device(
    DeviceId("gpu.nvidia.com", "node-a", "gpu-0"),
    "node-a",
    {
        "gpu.nvidia.com/type": "gpu",
        "gpu.nvidia.com/productName": "NVIDIA H100 80GB HBM3",
        "gpu.nvidia.com/uuid": "GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c",
        "gpu.nvidia.com/index": 0,
        "gpu.nvidia.com/architecture": "Hopper",
        "gpu.nvidia.com/driverVersion": "550.54.15",
        "resource.kubernetes.io/pcieRoot": "pci0000:15",
    },
    frozenset({"gpu.nvidia.com/driverVersion"}),
    {"gpu.nvidia.com/memory": "80Gi"},
)
NIC = Device(
    DeviceId("dra.net", "node-a", "mlx5-0"),
    "node-a",
    {
        "dra.net/rdma": True,
        "dra.net/ifName": "ib0",
        "resource.kubernetes.io/pcieRoot": "pci0000:15",
    },
    allow_multiple_allocations=True,
)


def holds(expression: str, device: Device = GPU) -> bool:
    return DeviceSelectors().matches(device, [expression])


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('device.driver == "gpu.nvidia.com"', True),
        ('device.driver == "dra.net"', False),
        ('device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"', True),
        ('device.attributes["gpu.nvidia.com"]["architecture"] == "Hopper"', True),
        ('device.attributes["gpu.nvidia.com"].productName in ["NVIDIA B200", "X"]', False),
        ('device.attributes["gpu.nvidia.com"].index in [0, 1, 2, 3]', True),
        ('device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:15"', True),
        ('device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA H")', True),
        ('device.attributes["gpu.nvidia.com"].productName.matches("H1[0-9]0")', True),
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0', True),
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("81Gi")) >= 0', False),
        ('device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("80G"))', True),
        ('device.capacity["gpu.nvidia.com"].memory.isLessThan(quantity("0.1Ti"))', True),
        ('device.capacity["gpu.nvidia.com"].memory == quantity("81920Mi")', True),
        ('device.capacity["gpu.nvidia.com"].memory.asInteger() == 85899345920', True),
        ('device.capacity["gpu.nvidia.com"].memory.asApproximateFloat() > 8.5e10', True),
        ('device.capacity["gpu.nvidia.com"].memory.isInteger()', True),
        ('quantity("1Gi").add(quantity("1Gi")).compareTo(quantity("2Gi")) == 0', True),
        ('quantity("1k").sub(1).asInteger() == 999', True),
        ('quantity("-5m").sign() == -1', True),
        ('quantity("500m").isInteger()', False),
        ('isQuantity("1.5Gi") && !isQuantity("1.5 Gi")', True),
        (
            'device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("550.0.0"))',
            True,
        ),
        ('device.attributes["gpu.nvidia.com"].driverVersion.isLessThan(semver("550.54.2"))', False),
        (
            'device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("550.54.15")) == 0',
            True,
        ),
        ('device.attributes["gpu.nvidia.com"].driverVersion.major() == 550', True),
        ('device.attributes["gpu.nvidia.com"].driverVersion.minor() == 54', True),
        ('device.attributes["gpu.nvidia.com"].driverVersion.patch() == 15', True),
        ('semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))', True),
        ('semver("v1.2", true).compareTo(semver("1.2.0")) == 0', True),
        ('isSemver("1.2.3") && !isSemver("1.2")', True),
        ("device.allowMultipleAllocations", False),
        # an unknown domain is an empty map, so has() is false and no error is raised
        ('has(device.attributes["dra.net"].rdma)', False),
        ('device.driver == "dra.net" && device.attributes["dra.net"].rdma', False),
    ],
)
def test_gpu_selectors(expression: str, expected: bool) -> None:
    assert holds(expression) is expected


def test_nic_selectors() -> None:
    assert holds('device.driver == "dra.net" && device.attributes["dra.net"].rdma', NIC)
    assert holds("device.allowMultipleAllocations", NIC)
    assert holds('device.attributes["dra.net"].ifName == "ib0"', NIC)


def test_matches_needs_every_expression() -> None:
    selectors = DeviceSelectors()
    first = 'device.driver == "gpu.nvidia.com"'
    assert selectors.matches(GPU, [first, 'device.attributes["gpu.nvidia.com"].index == 0'])
    assert not selectors.matches(GPU, [first, 'device.attributes["gpu.nvidia.com"].index == 1'])
    assert selectors.matches(GPU, [])


def test_a_false_class_selector_stops_before_a_failing_request_selector() -> None:
    """The class's selectors come first; a NIC is rejected by the driver check before the GPU
    attribute (which it lacks) is read, as Kubernetes evaluates them."""
    expressions = [
        'device.driver == "gpu.nvidia.com"',
        'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"',
    ]
    assert not DeviceSelectors().matches(NIC, expressions)


def test_missing_attribute_is_an_error_not_a_non_match() -> None:
    expression = 'device.attributes["gpu.nvidia.com"].memoryBandwidth > 1'
    with pytest.raises(SelectorError) as caught:
        holds(expression)
    assert "memoryBandwidth" in str(caught.value)
    assert str(GPU.id) in str(caught.value)
    assert caught.value.expression == expression
    assert isinstance(caught.value, VoltpackError)


def test_attribute_of_an_unknown_domain_is_an_error() -> None:
    with pytest.raises(SelectorError, match="rdma"):
        holds('device.attributes["dra.net"].rdma')


def test_syntax_error_names_the_expression() -> None:
    expression = 'device.driver == "gpu.nvidia.com" &&'
    with pytest.raises(SelectorError) as caught:
        DeviceSelectors().compile(expression)
    assert expression in str(caught.value)
    assert "syntax error" in caught.value.reason


@pytest.mark.parametrize(
    "expression",
    ['lowerAscii(device.driver) == "x"', 'device.driver.frobnicate() == "x"'],
)
def test_unknown_function_is_rejected_at_compile_time(expression: str) -> None:
    with pytest.raises(SelectorError, match="unknown function"):
        DeviceSelectors().compile(expression)


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("device.driver", "not a bool"),
        ('quantity("12 GB").sign() == 1', "not a quantity"),
        ('quantity("1.5").asInteger() == 1', "integer"),
        ('semver("1.2").major() == 1', "not a semantic version"),
        ('device.attributes["gpu.nvidia.com"].productName.compareTo(1) == 0', "no such overload"),
        ('devices.driver == "x"', "devices"),
        ("", "empty"),
    ],
)
def test_runtime_errors_raise(expression: str, words: str) -> None:
    with pytest.raises(SelectorError, match=words):
        holds(expression)


def test_errors_are_remembered_and_raised_again() -> None:
    selectors = DeviceSelectors()
    expression = 'device.attributes["gpu.nvidia.com"].nope'
    for _ in range(2):
        with pytest.raises(SelectorError):
            selectors.evaluate(GPU, expression)


def test_a_changed_device_is_evaluated_afresh() -> None:
    selectors = DeviceSelectors()
    expression = 'device.attributes["gpu.nvidia.com"].index == 0'
    assert selectors.evaluate(GPU, expression)
    moved = Device(GPU.id, GPU.node, {**GPU.attributes, "gpu.nvidia.com/index": 5})
    assert not selectors.evaluate(moved, expression)


def test_malformed_capacity_is_a_clear_error() -> None:
    broken = Device(
        DeviceId("gpu.nvidia.com", "n", "g"), "n", capacity={"gpu.nvidia.com/memory": "lots"}
    )
    with pytest.raises(SelectorError, match=r"capacity gpu\.nvidia\.com/memory"):
        holds('device.driver == "gpu.nvidia.com"', broken)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("80Gi", Decimal(80 * 2**30)),
        ("1500m", Decimal("1.5")),
        ("1.5k", Decimal(1500)),
        ("2", Decimal(2)),
        ("1e3", Decimal(1000)),
        ("1E", Decimal(10**18)),
        ("2Ei", Decimal(2 * 2**60)),
        ("-0.5Mi", Decimal(-(2**19))),
        ("+.5", Decimal("0.5")),
        ("3n", Decimal("3e-9")),
    ],
)
def test_parse_quantity(text: str, value: Decimal) -> None:
    assert parse_quantity(text).value == value


@pytest.mark.parametrize("text", ["", "Gi", "1.2.3", "1 Gi", "1KiB", "1e", "abc"])
def test_parse_quantity_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity(text)


@given(st.integers(min_value=0, max_value=2**40), st.sampled_from(["", "k", "Ki", "Mi", "G"]))
def test_quantity_order_matches_numbers(number: int, suffix: str) -> None:
    factor = {"": 1, "k": 1000, "Ki": 1024, "Mi": 2**20, "G": 10**9}[suffix]
    assert parse_quantity(f"{number}{suffix}").value == number * factor


def test_semver_precedence() -> None:
    order = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta.2", "1.0.0-beta.11"]
    order += ["1.0.0-rc.1", "1.0.0", "1.0.1", "1.2.0", "2.0.0"]
    versions = [parse_semver(text) for text in order]
    for earlier, later in itertools.pairwise(versions):
        assert earlier.compare(later) == -1 and later.compare(earlier) == 1
    assert parse_semver("1.0.0+build.5") == parse_semver("1.0.0")


# --- results shared between devices that show the same values ---------------------------------

SHARED_EXPRESSIONS = [
    'device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"',
    'device.attributes["gpu.nvidia.com"].index >= 2',
    'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0',
    '"index" in device.attributes["gpu.nvidia.com"]',
    'has(device.attributes["gpu.nvidia.com"].index)',
    'device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("550.0.0"))',
    'device.attributes[device.driver].type == "gpu"',
]


@st.composite
def small_devices(draw: st.DrawFn) -> list[Device]:
    devices = []
    for number in range(draw(st.integers(1, 6))):
        attributes: dict[str, bool | int | str] = {
            "gpu.nvidia.com/type": draw(st.sampled_from(["gpu", "mig"]))
        }
        if draw(st.booleans()):
            attributes["gpu.nvidia.com/index"] = draw(st.integers(0, 3))
        versions: frozenset[str] = frozenset()
        if draw(st.booleans()):
            attributes["gpu.nvidia.com/driverVersion"] = draw(
                st.sampled_from(["535.1.0", "560.2.1"])
            )
            versions = frozenset({"gpu.nvidia.com/driverVersion"})
        memory = draw(st.sampled_from(["24Gi", "80Gi", "40Gi"]))
        driver = draw(st.sampled_from(["gpu.nvidia.com", "dra.net"]))
        devices.append(
            Device(
                DeviceId(driver, "node", f"dev-{number}"),
                "node",
                attributes,
                versions,
                {"gpu.nvidia.com/memory": memory},
            )
        )
    return devices


def outcome(selectors: DeviceSelectors, device: Device, expression: str) -> object:
    try:
        return selectors.evaluate(device, expression)
    except SelectorError as error:
        return ("error", str(error))


@settings(max_examples=150, deadline=None)
@given(small_devices())
def test_a_shared_result_is_what_the_device_alone_gives(devices: list[Device]) -> None:
    shared = DeviceSelectors()
    for device in devices:
        for expression in SHARED_EXPRESSIONS:
            alone = outcome(DeviceSelectors(), device, expression)
            assert outcome(shared, device, expression) == alone, (device, expression)
