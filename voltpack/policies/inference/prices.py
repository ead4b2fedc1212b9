"""GPU prices per hour: the planner's cost inputs (`gpu_prices.yaml` is a shipped example)."""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from voltpack.model.errors import CatalogError, InvalidRequestError
from voltpack.model.gpu_sku import default_catalog
from voltpack.model.text_files import read_user_text
from voltpack.perf.yaml_catalog import parse_yaml_file


class GpuPrice(BaseModel):
    """The price of one GPU of a type for one hour."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu_type: str = Field(min_length=1)
    per_gpu_hour: float = Field(gt=0)
    source: str = ""


class _PriceFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1]
    currency: str = "USD"
    prices: list[GpuPrice]


class PriceList:
    """Prices by GPU type (catalog names; aliases resolve to their SKU)."""

    def __init__(self, prices: list[GpuPrice], currency: str = "USD") -> None:
        self.currency = currency
        self._by_type: dict[str, GpuPrice] = {}
        catalog = default_catalog()
        for price in prices:
            try:
                name = catalog.get(price.gpu_type).name
            except CatalogError as exc:
                raise InvalidRequestError(f"price list: {exc}") from None
            if name in self._by_type:
                raise InvalidRequestError(f"price list: GPU type {name} is priced twice")
            self._by_type[name] = price

    @property
    def gpu_types(self) -> list[str]:
        """Priced GPU types (catalog names), in list order."""
        return list(self._by_type)

    def per_gpu_hour(self, gpu_type: str) -> float:
        """The price of `gpu_type`; InvalidRequestError naming the priced types if absent."""
        name = default_catalog().get(gpu_type).name
        try:
            return self._by_type[name].per_gpu_hour
        except KeyError:
            raise InvalidRequestError(
                f"no price for GPU type {name}; priced: {', '.join(self._by_type) or 'none'}"
            ) from None

    @classmethod
    def from_mapping(cls, prices: dict[str, float]) -> PriceList:
        """Prices from `{gpu_type: per_gpu_hour}` (e.g. an InferenceService's spec)."""
        return cls([GpuPrice(gpu_type=k, per_gpu_hour=v) for k, v in prices.items()])

    @classmethod
    def from_yaml(cls, path: Path) -> PriceList:
        """Load a price file; InvalidRequestError naming the file and the bad field."""
        text = read_user_text(path, "GPU price list", InvalidRequestError)
        return cls.parse(text, str(path))

    @classmethod
    def parse(cls, text: str, origin: str) -> PriceList:
        """Parse price-list YAML `text`; `origin` names it in error messages."""
        parsed = parse_yaml_file(text, origin, _PriceFile, InvalidRequestError)
        return cls(parsed.prices, parsed.currency)


@cache
def example_prices() -> PriceList:
    """The example price list shipped with voltpack (`gpu_prices.yaml`)."""
    text = (
        resources.files("voltpack.policies.inference")
        .joinpath("gpu_prices.yaml")
        .read_text("utf-8")
    )
    return PriceList.parse(text, "voltpack/policies/inference/gpu_prices.yaml")
