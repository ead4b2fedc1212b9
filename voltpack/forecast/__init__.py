"""Demand and power forecasting with calibrated quantiles, backtesting and error metrics.

Pure code (no I/O, no clock): histories come in as `TimeSeries`, forecasts go out as
`QuantileForecast`. Which data a series is built from lives with the drivers (`voltpack/sim`).
"""
