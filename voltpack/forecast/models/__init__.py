"""The forecasting models behind the registry's names: ETS, seasonal naive, the global
gradient-boosted model, the ensemble, tail walk."""
