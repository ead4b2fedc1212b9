"""A catalog of transformer training jobs: shape, batch, and default 3D parallelism.

The shipped catalog is `training_models.yaml` (each entry names its source). A user's file in
the same format loads with `TrainingModelCatalog.from_yaml`; a malformed one raises
`PerfModelError` naming the file and the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from voltpack.perf.links import PerfModelError
from voltpack.perf.yaml_catalog import ModelCatalogFile

__all__ = [
    "Parallelism",
    "ParallelismRule",
    "PerfModelError",
    "TrainingModel",
    "TrainingModelCatalog",
    "default_parallelism",
    "default_training_models",
    "model_parallel_gpus",
]


@dataclass(frozen=True)
class Parallelism:
    """Tensor-, pipeline- and data-parallel degrees; `virtual_stages` > 1 is Megatron's
    interleaved pipeline schedule (model chunks per GPU)."""

    tensor: int
    pipeline: int
    data: int
    virtual_stages: int = 1

    def __post_init__(self) -> None:
        for name in ("tensor", "pipeline", "data", "virtual_stages"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise PerfModelError(f"parallelism.{name} must be an integer >= 1, got {value!r}")

    @property
    def world_size(self) -> int:
        """GPUs the job uses: tensor x pipeline x data."""
        return self.tensor * self.pipeline * self.data


class ParallelismRule(BaseModel):
    """Default model-parallel degrees; data parallelism takes the remaining GPUs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tensor: int = Field(ge=1)
    pipeline: int = Field(ge=1)
    virtual_stages: int = Field(default=1, ge=1)


class TrainingModel(BaseModel):
    """One transformer training job (decoder-only, GPT/Llama style)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    parameters_billion: float = Field(gt=0)
    """Published parameter count (what the source calls the model); see `parameter_count`."""
    layers: int = Field(ge=1)
    hidden_size: int = Field(ge=1)
    attention_heads: int = Field(ge=1)
    kv_heads: int | None = Field(default=None, ge=1)
    """Key/value heads (grouped-query attention); None = attention_heads."""
    ffn_hidden_size: int | None = Field(default=None, ge=1)
    """MLP inner width; None = 4 x hidden_size."""
    gated_mlp: bool = False
    """True for SwiGLU-style MLPs (three weight matrices instead of two)."""
    sequence_length: int = Field(ge=1)
    vocab_size: int = Field(ge=1)
    global_batch_size: int = Field(ge=1)
    """Sequences per optimizer step."""
    micro_batch_size: int = Field(ge=1)
    activation_recompute: bool = True
    """Full activation recomputation (one extra forward pass in the backward)."""
    fused_attention: bool = False
    """Flash-style attention: scores and softmax never written to memory."""
    parallelism: ParallelismRule
    sharding: Literal["none", "zero3"] = "none"
    """Data-parallel sharding: "none" replicates the weights on every data-parallel rank (one
    gradient all-reduce per step); "zero3" shards parameters, gradients and optimizer state
    over the data-parallel group (ZeRO stage 3 / FSDP full sharding), see `step_time`."""
    experts: int = Field(default=1, ge=1)
    """MLP experts per layer (mixture of experts); 1 = a dense model."""
    top_k: int = Field(default=1, ge=1)
    """Experts each token is routed to (MoE models)."""
    expert_parallel: int = Field(default=1, ge=1)
    """Expert-parallel degree: the experts are split over this many data-parallel ranks (laid
    over the data-parallel group, as Megatron-Core does), so data must be a multiple of it."""
    source: str = Field(min_length=1)

    @model_validator(mode="after")
    def _check_shape(self) -> TrainingModel:
        if self.micro_batch_size > self.global_batch_size:
            raise ValueError(
                f"micro_batch_size ({self.micro_batch_size}) exceeds global_batch_size "
                f"({self.global_batch_size})"
            )
        if self.kv_heads is not None and self.attention_heads % self.kv_heads:
            raise ValueError(
                f"attention_heads ({self.attention_heads}) must be a multiple of kv_heads "
                f"({self.kv_heads})"
            )
        if self.attention_heads % self.parallelism.tensor:
            raise ValueError(
                f"parallelism.tensor ({self.parallelism.tensor}) must divide attention_heads "
                f"({self.attention_heads})"
            )
        if self.layers % (self.parallelism.pipeline * self.parallelism.virtual_stages):
            raise ValueError(
                f"parallelism.pipeline x virtual_stages "
                f"({self.parallelism.pipeline} x {self.parallelism.virtual_stages}) must "
                f"divide layers ({self.layers})"
            )
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) exceeds experts ({self.experts})")
        if self.experts % self.expert_parallel:
            raise ValueError(
                f"expert_parallel ({self.expert_parallel}) must divide experts ({self.experts})"
            )
        if self.sharding == "zero3" and self.experts > 1:
            raise ValueError(
                "sharding zero3 with experts > 1 is not modelled; use sharding: none for MoE "
                "models (Megatron-style expert parallelism)"
            )
        return self

    @property
    def is_moe(self) -> bool:
        """True for a mixture-of-experts model (more than one expert per layer)."""
        return self.experts > 1

    @property
    def ffn_size(self) -> int:
        """MLP inner width."""
        return self.ffn_hidden_size if self.ffn_hidden_size is not None else 4 * self.hidden_size

    @property
    def kv_size(self) -> int:
        """Width of the key (and of the value) projection."""
        heads = self.kv_heads if self.kv_heads is not None else self.attention_heads
        return self.hidden_size * heads // self.attention_heads

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices in one MLP block (3 for gated MLPs, else 2)."""
        return 3 if self.gated_mlp else 2

    @property
    def attention_parameters(self) -> int:
        """Weights of one layer's attention projections (Q, K, V, output)."""
        h = self.hidden_size
        return 2 * h * h + 2 * h * self.kv_size

    @property
    def expert_parameters(self) -> int:
        """Weights of one MLP (one expert of a MoE layer)."""
        return self.mlp_matrices * self.hidden_size * self.ffn_size

    @property
    def dense_layer_parameters(self) -> int:
        """Weights of one layer replicated over the whole data-parallel group: attention, plus
        the MLP of a dense model or the router (hidden x experts) of a MoE model."""
        if self.is_moe:
            return self.attention_parameters + self.hidden_size * self.experts
        return self.attention_parameters + self.expert_parameters

    @property
    def layer_parameters(self) -> int:
        """Weights of one transformer layer (projections, MLP or all experts and the router;
        norms and biases ignored)."""
        if self.is_moe:
            return self.dense_layer_parameters + self.experts * self.expert_parameters
        return self.dense_layer_parameters

    @property
    def active_layer_parameters(self) -> int:
        """Weights one token multiplies in one layer: attention and `top_k` experts (the whole
        layer of a dense model)."""
        if self.is_moe:
            return self.dense_layer_parameters + self.top_k * self.expert_parameters
        return self.layer_parameters

    @property
    def parameter_count(self) -> int:
        """Parameters computed from the shape: layers plus the embedding (tied output)."""
        return self.layers * self.layer_parameters + self.vocab_size * self.hidden_size


class _CatalogFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1]
    models: list[TrainingModel]


class TrainingModelCatalog(ModelCatalogFile[TrainingModel]):
    """Look-up of training models by name (case-insensitive)."""

    file_model = _CatalogFile
    kind = "training model"
    error = PerfModelError

    @property
    def models(self) -> list[TrainingModel]:
        """All models in catalog order."""
        return self.entries


@cache
def default_training_models() -> TrainingModelCatalog:
    """The catalog shipped with voltpack (`voltpack/perf/training_models.yaml`)."""
    text = resources.files("voltpack.perf").joinpath("training_models.yaml").read_text("utf-8")
    return TrainingModelCatalog.parse(text, "voltpack/perf/training_models.yaml")


def model_parallel_gpus(model: TrainingModel) -> int:
    """The unit a job's GPU count must be a multiple of: tensor x pipeline x expert_parallel."""
    rule = model.parallelism
    return rule.tensor * rule.pipeline * model.expert_parallel


def default_parallelism(model: TrainingModel, gpus: int) -> Parallelism:
    """The model's default rule applied to `gpus`: data = gpus / (tensor x pipeline); for a
    MoE model data must also be a multiple of `expert_parallel`."""
    rule = model.parallelism
    model_parallel = rule.tensor * rule.pipeline
    if gpus < model_parallel or gpus % model_parallel:
        raise PerfModelError(
            f"{model.name}: {gpus} GPUs is not a multiple of tensor x pipeline "
            f"({rule.tensor} x {rule.pipeline} = {model_parallel})"
        )
    if (gpus // model_parallel) % model.expert_parallel:
        raise PerfModelError(
            f"{model.name}: {gpus} GPUs is not a multiple of tensor x pipeline x "
            f"expert_parallel ({rule.tensor} x {rule.pipeline} x {model.expert_parallel} = "
            f"{model_parallel * model.expert_parallel}); the expert-parallel groups are laid "
            "over the data-parallel ranks"
        )
    return Parallelism(
        tensor=rule.tensor,
        pipeline=rule.pipeline,
        data=gpus // model_parallel,
        virtual_stages=rule.virtual_stages,
    )
