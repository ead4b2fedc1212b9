"""The training-model catalog: shipped entries, and errors a user's file can cause."""

from __future__ import annotations

from pathlib import Path

import pytest

from voltpack.perf.training_models import (
    PerfModelError,
    TrainingModel,
    TrainingModelCatalog,
    default_parallelism,
    default_training_models,
)

GOOD = """
schema_version: 1
models:
  - name: tiny
    parameters_billion: 0.1
    layers: 4
    hidden_size: 512
    attention_heads: 8
    sequence_length: 1024
    vocab_size: 1000
    global_batch_size: 64
    micro_batch_size: 4
    parallelism: {tensor: 2, pipeline: 2}
    source: "test"
"""


def test_shipped_catalog_loads_with_sources() -> None:
    catalog = default_training_models()
    names = {model.name for model in catalog.models}
    assert {"gpt-1.3b", "gpt-13b", "gpt-175b", "llama-2-70b", "megatron-1t"} <= names
    assert all(model.source for model in catalog.models)


@pytest.mark.parametrize("model", default_training_models().models, ids=lambda m: m.name)
def test_computed_parameters_match_the_published_count(model: TrainingModel) -> None:
    assert model.parameter_count / 1e9 == pytest.approx(model.parameters_billion, rel=0.06)


def test_lookup_is_case_insensitive_and_unknown_names_are_listed() -> None:
    catalog = default_training_models()
    assert catalog.get("LLAMA-2-70B").kv_size == 1024
    with pytest.raises(PerfModelError, match=r"known models: megatron-1\.7b"):
        catalog.get("gpt-5")


def test_default_parallelism_fills_data_and_rejects_odd_counts() -> None:
    model = default_training_models().get("llama-2-70b")
    par = default_parallelism(model, 128)
    assert (par.tensor, par.pipeline, par.data, par.virtual_stages) == (8, 4, 4, 5)
    with pytest.raises(PerfModelError, match="not a multiple of tensor x pipeline"):
        default_parallelism(model, 48)


@pytest.mark.parametrize(
    ("change", "replacement", "named"),
    [
        ("hidden_size: 512", "hidden_size: -1", "models.0.hidden_size"),
        ("micro_batch_size: 4", "micro_batch_size: 128", "micro_batch_size (128)"),
        ("tensor: 2, pipeline: 2", "tensor: 3, pipeline: 2", "parallelism.tensor (3)"),
        ("tensor: 2, pipeline: 2", "tensor: 2, pipeline: 3", "parallelism.pipeline"),
        ('source: "test"', 'source: "test"\n    colour: blue', "models.0.colour"),
    ],
)
def test_bad_entries_name_the_field(change: str, replacement: str, named: str) -> None:
    with pytest.raises(PerfModelError) as info:
        TrainingModelCatalog.parse(GOOD.replace(change, replacement), "my.yaml")
    assert str(info.value).startswith("my.yaml: field models.0")
    assert named in str(info.value)


def test_user_file_errors(tmp_path: Path) -> None:
    good = tmp_path / "models.yaml"
    good.write_text(GOOD, encoding="utf-8")
    assert TrainingModelCatalog.from_yaml(good).get("tiny").ffn_size == 2048
    with pytest.raises(PerfModelError, match="cannot read"):
        TrainingModelCatalog.from_yaml(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [", encoding="utf-8")
    with pytest.raises(PerfModelError, match="not valid YAML"):
        TrainingModelCatalog.from_yaml(bad)
    twice = tmp_path / "twice.yaml"
    twice.write_text(GOOD + GOOD.split("models:")[1], encoding="utf-8")
    with pytest.raises(PerfModelError, match="used twice"):
        TrainingModelCatalog.from_yaml(twice)
