"""Shapes of the LLMs voltpack can plan inference for (`serving_models.yaml`).

A user's file in the same format loads with `ServingModelCatalog.from_yaml`; a malformed one
raises `PerfModelError` naming the file and the field.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from voltpack.perf.links import PerfModelError
from voltpack.perf.yaml_catalog import ModelCatalogFile


class ServingModel(BaseModel):
    """One decoder-only LLM as an inference server holds it (16-bit weights by default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    parameters_billion: float = Field(gt=0)
    layers: int = Field(ge=1)
    hidden_size: int = Field(ge=1)
    attention_heads: int = Field(ge=1)
    kv_heads: int = Field(ge=1)
    bytes_per_parameter: float = Field(default=2.0, gt=0)
    source: str = Field(min_length=1)

    @model_validator(mode="after")
    def _check_heads(self) -> ServingModel:
        if self.attention_heads % self.kv_heads:
            raise ValueError(
                f"attention_heads ({self.attention_heads}) must be a multiple of kv_heads "
                f"({self.kv_heads})"
            )
        return self

    @property
    def parameters(self) -> float:
        """Parameter count."""
        return self.parameters_billion * 1e9

    @property
    def weight_bytes(self) -> float:
        """Bytes of the weights."""
        return self.parameters * self.bytes_per_parameter

    @property
    def kv_bytes_per_token(self) -> float:
        """Bytes of key and value cache one token holds, over all layers."""
        head_dim = self.hidden_size / self.attention_heads
        return 2.0 * self.layers * self.kv_heads * head_dim * self.bytes_per_parameter

    def supports_tensor_parallel(self, degree: int) -> bool:
        """Whether the heads split evenly over `degree` GPUs."""
        return degree >= 1 and self.attention_heads % degree == 0


class _CatalogFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1]
    models: list[ServingModel]


class ServingModelCatalog(ModelCatalogFile[ServingModel]):
    """Look-up of serving models by name (case-insensitive)."""

    file_model = _CatalogFile
    kind = "serving model"
    error = PerfModelError


@cache
def default_serving_models() -> ServingModelCatalog:
    """The catalog shipped with voltpack (`voltpack/perf/serving_models.yaml`)."""
    text = resources.files("voltpack.perf").joinpath("serving_models.yaml").read_text("utf-8")
    return ServingModelCatalog.parse(text, "voltpack/perf/serving_models.yaml")
