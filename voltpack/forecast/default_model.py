"""The one forecaster every entry point uses unless told otherwise, and how it is chosen.

The CLI (`voltpack forecast plan`), the admin API (`/power/domains/{name}/forecast`) and the
operator's power forecast (policy `spec.power.forecast.model`) all default to `DEFAULT_MODEL`.
It is the model that `benchmarks/forecast_accuracy.py` shows best across families: for each
family (GPU demand, power, request rate) a model's mean scaled pinball is divided by the best
statsforecast baseline's, and the model whose *worst* family ratio is lowest wins (ties: the
lower mean ratio). A model that is best on one family but poor on another (e.g. `ensemble`,
4x the baseline on GPU demand) does not become the default. `tests/unit/test_forecast_default.py`
checks the saved benchmark still picks `DEFAULT_MODEL`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from voltpack.model.errors import ForecastError

DEFAULT_MODEL = "ets"
"""The default forecaster (see the module docstring for how the benchmark chooses it)."""

SCORE_KEY = "scaled_pinball_mean"
BASELINE_PREFIX = "sf:"


@dataclass(frozen=True)
class CrossFamilyScore:
    """One voltpack model's mean scaled pinball over the best baseline's, per family."""

    model: str
    ratios: dict[str, float]

    @property
    def worst(self) -> float:
        """The highest ratio: how far behind the best baseline its worst family is."""
        return max(self.ratios.values())

    @property
    def mean(self) -> float:
        """The mean ratio over families (each family weighs the same)."""
        return sum(self.ratios.values()) / len(self.ratios)


def cross_family_scores(families: Mapping[str, Mapping[str, Any]]) -> list[CrossFamilyScore]:
    """Scores of the voltpack models that scored every series of every family, best first.

    `families` is the benchmark's per-family summary: `{family: {"best_baseline": name,
    "models": {name: {"scaled_pinball_mean": float, "series": int}}}}`.
    """
    ratios: dict[str, dict[str, float]] = {}
    complete: set[str] | None = None
    for family, summary in families.items():
        models = summary["models"]
        baseline = summary.get("best_baseline")
        if baseline is None:
            continue
        base = models[baseline]
        scored = {
            name: figures[SCORE_KEY] / base[SCORE_KEY]
            for name, figures in models.items()
            if not name.startswith(BASELINE_PREFIX) and figures["series"] == base["series"]
        }
        for name, ratio in scored.items():
            ratios.setdefault(name, {})[family] = ratio
        complete = set(scored) if complete is None else complete & set(scored)
    scores = [CrossFamilyScore(name, ratios[name]) for name in sorted(complete or ())]
    return sorted(scores, key=lambda s: (s.worst, s.mean, s.model))


def best_across_families(families: Mapping[str, Mapping[str, Any]]) -> str:
    """The model with the lowest worst-family ratio to the best baseline (see the module)."""
    scores = cross_family_scores(families)
    if not scores:
        raise ForecastError("families: no voltpack model scored every series of every family")
    return scores[0].model
