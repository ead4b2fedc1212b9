"""How well the inference profile model predicts measured points it was not fitted on.

- Leave one out: each measured setting is predicted from its configuration's other settings
  (prefill: the interpolated table without it; decode: coefficients refitted without it).
- Held-out GPU type: each GPU type is predicted by the shared coefficients fitted on the
  other types only: the error an extrapolated type can expect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from voltpack.perf.inference_measurements import (
    MeasuredPoint,
    PrefillSetting,
    ProfileKey,
    prefill_settings,
)
from voltpack.perf.inference_profile import PrefillTable, fit_coefficients, fit_rows
from voltpack.perf.serving_models import ServingModelCatalog, default_serving_models

Phase = Literal["prefill", "decode"]


@dataclass(frozen=True)
class Prediction:
    """One measured time and the model's prediction of it."""

    key: ProfileKey
    phase: Phase
    setting: str
    measured_s: float
    predicted_s: float

    @property
    def relative_error(self) -> float:
        """|predicted / measured - 1|."""
        return abs(self.predicted_s / self.measured_s - 1.0)


def _prefill_label(setting: PrefillSetting) -> str:
    return f"batch {setting.batch_size} x {setting.prompt_tokens} tokens"


def _predict(
    train_prefill: Sequence[PrefillSetting],
    train_decode: Sequence[MeasuredPoint],
    test_prefill: Sequence[PrefillSetting],
    test_decode: Sequence[MeasuredPoint],
    models: ServingModelCatalog,
) -> list[Prediction]:
    coefficients = fit_coefficients(train_prefill, train_decode, models)
    rows = fit_rows(test_prefill, test_decode, models)
    prefill = rows.prefill_x @ np.array(coefficients.prefill) + rows.prefill_offset_s
    decode = rows.decode_x @ np.array(coefficients.decode)
    out = [
        Prediction(s.key, "prefill", _prefill_label(s), s.prompt_time_s, float(p))
        for s, p in zip(test_prefill, prefill, strict=True)
    ]
    out += [
        Prediction(
            d.key,
            "decode",
            f"batch {d.batch_size}, {d.prompt_tokens}+{d.output_tokens}",
            d.token_time_s,
            float(p),
        )
        for d, p in zip(test_decode, decode, strict=True)
    ]
    return out


def leave_one_out(
    points: Sequence[MeasuredPoint], models: ServingModelCatalog | None = None
) -> list[Prediction]:
    """Every measured setting predicted from its configuration's other settings."""
    catalog = models or default_serving_models()
    prefills, _ = prefill_settings(list(points))
    predictions: list[Prediction] = []
    for key in dict.fromkeys(p.key for p in points):
        own_prefill = [s for s in prefills if s.key == key]
        own_decode = [p for p in points if p.key == key]
        for index, setting in enumerate(own_prefill):
            rest = own_prefill[:index] + own_prefill[index + 1 :]
            total = np.array([float(setting.prompt_tokens * setting.batch_size)])
            predicted = float(PrefillTable.from_settings(rest).time_s(total)[0])
            predictions.append(
                Prediction(
                    key, "prefill", _prefill_label(setting), setting.prompt_time_s, predicted
                )
            )
        for index, point in enumerate(own_decode):
            rest_decode = own_decode[:index] + own_decode[index + 1 :]
            predictions += _predict(own_prefill, rest_decode, [], [point], catalog)
    return predictions


def held_out_gpu_types(
    points: Sequence[MeasuredPoint], models: ServingModelCatalog | None = None
) -> list[Prediction]:
    """Every measured setting of each GPU type predicted by the shared coefficients fitted on
    the other GPU types (capped variants count as their type)."""
    catalog = models or default_serving_models()
    prefills, _ = prefill_settings(list(points))
    predictions: list[Prediction] = []
    for gpu_type in dict.fromkeys(p.key.gpu_type for p in points):
        train_prefill = [s for s in prefills if s.key.gpu_type != gpu_type]
        train_decode = [p for p in points if p.key.gpu_type != gpu_type]
        if not train_prefill or not train_decode:
            continue
        predictions += _predict(
            train_prefill,
            train_decode,
            [s for s in prefills if s.key.gpu_type == gpu_type],
            [p for p in points if p.key.gpu_type == gpu_type],
            catalog,
        )
    return predictions
