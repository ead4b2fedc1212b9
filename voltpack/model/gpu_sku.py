"""GPU SKUs and the catalog of public spec-sheet figures shipped with voltpack."""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from voltpack.model import safe_yaml
from voltpack.model.errors import CatalogError
from voltpack.model.text_files import read_user_text

Vendor = Literal["nvidia", "amd", "unknown"]


class GpuSku(BaseModel):
    """One GPU model; figures are per device as the driver sees it, `None` when unpublished."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    aliases: tuple[str, ...] = ()
    vendor: Vendor
    architecture: str | None = None
    specs_disclosed: bool = True
    memory_gib: float | None = None
    memory_bandwidth_gbps: float | None = None
    bf16_tflops: float | None = None
    fp16_tflops: float | None = None
    fp32_tflops: float | None = None
    tdp_w: float | None = None
    min_power_limit_w: float | None = None
    max_sm_clock_mhz: float | None = None
    intra_node_link: str | None = None
    intra_node_link_bandwidth_gbps: float | None = None
    source: str = Field(min_length=1)


class _CatalogFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1]
    skus: list[GpuSku]


class GpuCatalog:
    """Look-up of GPU SKUs by name or alias (case-insensitive)."""

    def __init__(self, skus: list[GpuSku]) -> None:
        self._skus = list(skus)
        self._by_key: dict[str, GpuSku] = {}
        for sku in skus:
            for key in (sku.name, *sku.aliases):
                folded = key.casefold()
                if folded in self._by_key:
                    raise CatalogError(f"GPU catalog: name or alias {key!r} is used twice")
                self._by_key[folded] = sku

    @property
    def skus(self) -> list[GpuSku]:
        """All SKUs in catalog order."""
        return list(self._skus)

    def get(self, name: str) -> GpuSku:
        """Return the SKU called `name` (or with that alias); raise CatalogError if unknown."""
        try:
            return self._by_key[name.casefold()]
        except KeyError:
            known = ", ".join(sku.name for sku in self._skus)
            raise CatalogError(f"unknown GPU model {name!r}; known models: {known}") from None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.casefold() in self._by_key

    @classmethod
    def from_yaml(cls, path: Path) -> GpuCatalog:
        """Load a catalog file; raise CatalogError naming the file and the bad field."""
        return cls._parse(read_user_text(path, "GPU catalog", CatalogError), str(path))

    @classmethod
    def _parse(cls, text: str, origin: str) -> GpuCatalog:
        try:
            parsed = _CatalogFile.model_validate(safe_yaml.safe_load(text))
        except yaml.YAMLError as exc:
            raise CatalogError(f"{origin}: not valid YAML: {exc}") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise CatalogError(f"{origin}: field {where}: {first['msg']}") from None
        return cls(parsed.skus)


@cache
def default_catalog() -> GpuCatalog:
    """The catalog shipped with voltpack (`voltpack/model/gpu_skus.yaml`)."""
    text = resources.files("voltpack.model").joinpath("gpu_skus.yaml").read_text("utf-8")
    return GpuCatalog._parse(text, "voltpack/model/gpu_skus.yaml")
