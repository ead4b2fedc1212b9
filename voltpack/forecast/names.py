"""Forecaster names and one-sentence summaries, without importing any model (so a policy file
can be validated without loading statsmodels or LightGBM); `registry.py` builds them."""

from __future__ import annotations

SUMMARIES = {
    "naive": "Repeats the last value; quantiles are the conformal quantiles of the rule's own "
    "past errors at each horizon.",
    "seasonal_naive": "Repeats the last season; quantiles are the conformal quantiles of the "
    "rule's own past errors at each horizon (naive when shorter than a season).",
    "ets": "statsmodels exponential smoothing (additive error and season) with its Gaussian "
    "prediction intervals, one model per series.",
    "global_gbm": "One LightGBM direct multi-horizon model trained across all series on "
    "normalised lags, seasonal lags and calendar features, with split-conformal quantiles.",
    "ensemble": "The mean of the ets and global_gbm medians, with quantiles re-calibrated by "
    "split conformal on each series' own recent forecast errors.",
    "auto": "Per series, the simplest of naive, seasonal_naive, ets and global_gbm within one "
    "standard error of the lowest pinball loss forecasting the series' own recent past.",
}


def forecaster_names() -> dict[str, str]:
    """Every registered forecaster name with its one-sentence summary."""
    return dict(SUMMARIES)
