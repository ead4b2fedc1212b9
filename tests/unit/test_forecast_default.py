"""One default forecaster everywhere (CLI, API, operator), the one the saved benchmark shows
best across families; the benchmark reports that default's own result per family."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from voltpack import cli
from voltpack.forecast.default_model import (
    DEFAULT_MODEL,
    best_across_families,
    cross_family_scores,
)
from voltpack.forecast.domain_power import forecast_domain_power
from voltpack.model.errors import ForecastError
from voltpack.policies.schema import PowerForecastSpec, example_policy_path, load_policy

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def saved(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text())


def test_the_default_is_the_full_benchmarks_best_across_families() -> None:
    document = saved("forecast_accuracy")
    assert best_across_families(document["families"]) == DEFAULT_MODEL
    report = document["default_model"]
    assert report["default"] == report["best_across_families"] == DEFAULT_MODEL
    assert set(report["default_per_family"]) == set(document["families"])


def test_every_entry_point_defaults_to_it() -> None:
    assert inspect.signature(cli.forecast_plan).parameters["model"].default == DEFAULT_MODEL
    assert inspect.signature(forecast_domain_power).parameters["model"].default == DEFAULT_MODEL
    assert PowerForecastSpec().model == DEFAULT_MODEL  # the operator's, from the policy file
    example = load_policy(example_policy_path("fgd-power-headroom"))
    assert example.spec.power.forecast.model == DEFAULT_MODEL


def family(baseline: float, **models: float) -> dict:
    figures = {"sf:AutoETS": {"scaled_pinball_mean": baseline, "series": 3}}
    figures.update({m: {"scaled_pinball_mean": v, "series": 3} for m, v in models.items()})
    return {"best_baseline": "sf:AutoETS", "models": figures}


def test_best_across_families_is_the_best_worst_family() -> None:
    # `sharp` wins two families by far but is twice the baseline on the third: `steady`,
    # never more than 10% behind, is the better default
    families = {
        "a": family(1.0, sharp=0.5, steady=1.1),
        "b": family(1.0, sharp=0.5, steady=1.0),
        "c": family(1.0, sharp=2.0, steady=0.9),
    }
    assert best_across_families(families) == "steady"
    scores = {s.model: s for s in cross_family_scores(families)}
    assert scores["steady"].worst == pytest.approx(1.1)
    assert scores["sharp"].mean == pytest.approx(1.0)


def test_a_model_missing_series_is_not_ranked() -> None:
    families = {"a": family(1.0, full=1.2, partial=0.5)}
    families["a"]["models"]["partial"]["series"] = 2
    assert best_across_families(families) == "full"
    with pytest.raises(ForecastError, match="no voltpack model scored every series"):
        best_across_families({"a": family(1.0)})
