"""The GPU SKU catalog: the shipped figures, look-ups, and errors for bad catalog files."""

from __future__ import annotations

from pathlib import Path

import pytest

from voltpack.model import CatalogError, GpuCatalog, GpuSku, default_catalog
from voltpack.sim.traces.openb import load_nodes

# Model -> (vendor, memory GiB): memory is what tells the 16/32 GB and 40/80 GB variants apart.
DISCLOSED = {
    "K80": ("nvidia", 12),
    "P100": ("nvidia", 16),
    "T4": ("nvidia", 16),
    "V100-16GB": ("nvidia", 16),
    "V100-32GB": ("nvidia", 32),
    "A10": ("nvidia", 24),
    "L4": ("nvidia", 24),
    "L40S": ("nvidia", 48),
    "A100-40GB": ("nvidia", 40),
    "A100-80GB": ("nvidia", 80),
    "H100-SXM": ("nvidia", 80),
    "H100-PCIe": ("nvidia", 80),
    "H200": ("nvidia", 141),
    "B200": ("nvidia", 180),
    "MI250X": ("amd", 128),
    "MI300X": ("amd", 192),
}
UNDISCLOSED = ("G1", "G2", "G3")
FIGURES = (
    "memory_gib",
    "memory_bandwidth_gbps",
    "bf16_tflops",
    "fp16_tflops",
    "fp32_tflops",
    "tdp_w",
    "min_power_limit_w",
    "max_sm_clock_mhz",
    "intra_node_link_bandwidth_gbps",
)

VALID_SKU = """\
  - name: X1
    aliases: [x1-alias]
    vendor: nvidia
    memory_gib: 16
    source: "a datasheet"
"""


def write_catalog(tmp_path: Path, skus: str, header: str = "schema_version: 1\n") -> Path:
    path = tmp_path / "catalog.yaml"
    path.write_text(header + "skus:\n" + skus, encoding="utf-8")
    return path


def message_after(path: Path, error: pytest.ExceptionInfo[CatalogError]) -> str:
    """The error message without its leading file path (so the path cannot match by chance)."""
    text = str(error.value)
    assert text.startswith(f"{path}:"), text
    return text[len(str(path)) + 1 :]


def test_catalog_ships_every_expected_model() -> None:
    names = [sku.name for sku in default_catalog().skus]
    assert set(names) >= {*DISCLOSED, *UNDISCLOSED}
    assert len(names) == len(set(names))


@pytest.mark.parametrize("name", list(DISCLOSED))
def test_disclosed_model_has_spec_sheet_figures_and_source(name: str) -> None:
    sku = default_catalog().get(name)
    vendor, memory_gib = DISCLOSED[name]
    assert sku.name == name
    assert sku.vendor == vendor
    assert sku.specs_disclosed is True
    assert sku.memory_gib == memory_gib
    for figure in ("memory_bandwidth_gbps", "fp32_tflops", "tdp_w"):
        value = getattr(sku, figure)
        assert value is not None, f"{name}.{figure} is missing"
        assert value > 0, f"{name}.{figure}={value}"
    assert sku.architecture
    source = sku.source.lower()
    assert any(word in source for word in ("datasheet", "data sheet", "specifications")), source
    assert "https://" in source


def test_spec_figures_are_plausible_relative_to_each_other() -> None:
    catalog = default_catalog()
    # Variants of one chip share compute and differ in memory.
    assert catalog.get("V100-16GB").fp32_tflops == catalog.get("V100-32GB").fp32_tflops
    assert catalog.get("A100-40GB").fp32_tflops == catalog.get("A100-80GB").fp32_tflops
    assert (
        catalog.get("A100-80GB").memory_bandwidth_gbps
        > catalog.get("A100-40GB").memory_bandwidth_gbps
    )
    # The SXM H100 draws and delivers more than the PCIe card.
    assert catalog.get("H100-SXM").tdp_w > catalog.get("H100-PCIe").tdp_w
    assert (
        catalog.get("H100-SXM").memory_bandwidth_gbps
        > catalog.get("H100-PCIe").memory_bandwidth_gbps
    )
    for sku in catalog.skus:
        if sku.min_power_limit_w is not None:
            assert sku.tdp_w is not None
            assert 0 < sku.min_power_limit_w < sku.tdp_w, sku.name


@pytest.mark.parametrize("name", UNDISCLOSED)
def test_undisclosed_openb_model_has_no_figures(name: str) -> None:
    sku = default_catalog().get(name)
    assert sku.specs_disclosed is False
    assert sku.vendor == "unknown"
    for figure in FIGURES:
        assert getattr(sku, figure) is None, f"{name}.{figure} should be None"
    assert sku.architecture is None
    assert "openb" in sku.source


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("V100M16", "V100-16GB"),
        ("v100m16", "V100-16GB"),
        ("V100M32", "V100-32GB"),
        ("v100-16gb", "V100-16GB"),
        ("a100", "A100-40GB"),
        ("A100-80G", "A100-80GB"),
        ("h100", "H100-SXM"),
        ("Tesla-K80", "K80"),
        ("amd-instinct-mi300x", "MI300X"),
        ("g2", "G2"),
    ],
)
def test_lookup_by_name_or_alias_ignores_case(key: str, expected: str) -> None:
    catalog = default_catalog()
    assert key in catalog
    assert catalog.get(key).name == expected


def test_every_gpu_model_of_the_openb_cluster_is_in_the_catalog(openb_dir: Path) -> None:
    models = {n.gpu_model for n in load_nodes(openb_dir / "openb_node_list_gpu_node.csv")}
    models.discard(None)
    assert models == {"A10", "G2", "G3", "P100", "T4", "V100M16", "V100M32"}
    for model in models:
        assert model in default_catalog()


def test_membership_is_false_for_unknown_names_and_non_strings() -> None:
    catalog = default_catalog()
    assert "RTX-9090" not in catalog
    assert 100 not in catalog
    assert None not in catalog


def test_unknown_model_raises_catalog_error_listing_known_models() -> None:
    with pytest.raises(CatalogError) as error:
        default_catalog().get("RTX-9090")
    message = str(error.value)
    assert "'RTX-9090'" in message
    for name in [*DISCLOSED, *UNDISCLOSED]:
        assert name in message


def test_skus_returns_a_copy() -> None:
    catalog = default_catalog()
    count = len(catalog.skus)
    skus = catalog.skus
    skus.clear()
    assert len(catalog.skus) == count > 0


def test_valid_catalog_file_loads(tmp_path: Path) -> None:
    catalog = GpuCatalog.from_yaml(write_catalog(tmp_path, VALID_SKU))
    assert [sku.name for sku in catalog.skus] == ["X1"]
    assert catalog.get("X1-ALIAS").memory_gib == 16


@pytest.mark.parametrize(
    ("skus", "field"),
    [
        (VALID_SKU.replace("memory_gib: 16", "memory_gib: lots"), "skus.0.memory_gib"),
        (VALID_SKU.replace('    source: "a datasheet"\n', ""), "skus.0.source"),
        (VALID_SKU.replace('source: "a datasheet"', 'source: ""'), "skus.0.source"),
        (VALID_SKU.replace("vendor: nvidia", "vendor: intel"), "skus.0.vendor"),
        (VALID_SKU + "    colour: green\n", "skus.0.colour"),
        (
            VALID_SKU + VALID_SKU.replace("X1", "X2").replace("memory_gib: 16", "tdp_w: hot"),
            "skus.1.tdp_w",
        ),
    ],
    ids=[
        "not-a-number",
        "missing-source",
        "empty-source",
        "bad-vendor",
        "extra-field",
        "second-sku",
    ],
)
def test_bad_catalog_file_names_file_and_field(tmp_path: Path, skus: str, field: str) -> None:
    path = write_catalog(tmp_path, skus)
    with pytest.raises(CatalogError) as error:
        GpuCatalog.from_yaml(path)
    assert f"field {field}" in message_after(path, error)


def test_wrong_schema_version_names_the_field(tmp_path: Path) -> None:
    path = write_catalog(tmp_path, VALID_SKU, header="schema_version: 2\n")
    with pytest.raises(CatalogError) as error:
        GpuCatalog.from_yaml(path)
    assert "schema_version" in message_after(path, error)


def test_invalid_yaml_raises_catalog_error(tmp_path: Path) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text("schema_version: 1\nskus: [unclosed\n", encoding="utf-8")
    with pytest.raises(CatalogError) as error:
        GpuCatalog.from_yaml(path)
    assert "not valid YAML" in message_after(path, error)


def test_catalog_file_that_is_a_list_raises_catalog_error(tmp_path: Path) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text("- name: X1\n", encoding="utf-8")
    with pytest.raises(CatalogError):
        GpuCatalog.from_yaml(path)


def test_missing_catalog_file_raises_catalog_error_naming_it(tmp_path: Path) -> None:
    # The trace loader and the policy loader turn an unreadable file into their own error type;
    # the catalog loader should too, instead of leaking FileNotFoundError.
    path = tmp_path / "no-such-catalog.yaml"
    with pytest.raises(CatalogError) as error:
        GpuCatalog.from_yaml(path)
    assert str(path) in str(error.value)


@pytest.mark.parametrize(
    "second",
    [
        VALID_SKU.replace("name: X1", "name: X2"),  # reuses alias x1-alias
        VALID_SKU.replace("name: X1", "name: X2").replace("[x1-alias]", "[x1]"),  # alias = name
        VALID_SKU.replace("name: X1", "name: X2").replace("[x1-alias]", "[X1-Alias]"),  # case
    ],
    ids=["same-alias", "alias-is-other-name", "alias-differs-in-case"],
)
def test_duplicate_name_or_alias_is_rejected(tmp_path: Path, second: str) -> None:
    path = write_catalog(tmp_path, VALID_SKU + second)
    with pytest.raises(CatalogError) as error:
        GpuCatalog.from_yaml(path)
    assert "used twice" in str(error.value)


def test_duplicate_alias_rejected_when_building_from_skus() -> None:
    first = GpuSku(name="A", aliases=("shared",), vendor="nvidia", source="s")
    second = GpuSku(name="B", aliases=("SHARED",), vendor="amd", source="s")
    with pytest.raises(CatalogError) as error:
        GpuCatalog([first, second])
    assert "'SHARED'" in str(error.value)
