"""GPU power model: monotone in clock and activity, idle floor, cap/clock inverse, slowdown."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from voltpack.model import CatalogError
from voltpack.perf import power_model_for, server_power_model_for

A100 = power_model_for("A100-SXM4-80GB")
activities = st.floats(0.0, 1.0)
clocks = st.floats(A100.min_clock_mhz, A100.max_clock_mhz)


def test_a100_figures_come_from_catalog_and_calibration() -> None:
    assert A100.sku == "A100-80GB"
    assert (A100.tdp_w, A100.max_clock_mhz, A100.idle_w) == (400, 1410, 60)
    assert A100.calibrated
    assert A100.peak_w == pytest.approx(420)
    assert A100.power_w(A100.sustained_tdp_activity, 1410) == pytest.approx(400)


@pytest.mark.parametrize(("name", "sku"), [("a100", "A100-40GB"), ("H100", "H100-SXM")])
def test_lookup_by_alias(name: str, sku: str) -> None:
    model = power_model_for(name)
    assert model.sku == sku
    assert model.calibrated


def test_generic_fallback_is_flagged_and_scaled_from_catalog() -> None:
    t4 = power_model_for("T4")
    assert not t4.calibrated
    assert "generic fallback" in t4.source
    assert t4.tdp_w == 70
    assert t4.idle_w == pytest.approx(0.15 * 70)
    assert t4.max_clock_mhz == 1590


def test_unknown_sku_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError, match="unknown GPU model 'X9000'"):
        power_model_for("X9000")


def test_sku_without_max_clock_names_the_missing_field() -> None:
    with pytest.raises(CatalogError, match="max_sm_clock_mhz"):
        power_model_for("B200")


def test_every_calibration_value_names_its_source() -> None:
    text = resources.files("voltpack.perf").joinpath("gpu_power.yaml").read_text("utf-8")
    data = yaml.safe_load(text)
    entries = [*data["gpus"], data["generic"], *data["servers"]]
    for entry in entries:
        for key, value in entry.items():
            if isinstance(value, dict):
                assert value.get("source"), f"{key} in {entry} has no source"


def test_server_model_lookup() -> None:
    dgx = server_power_model_for("DGX-A100")
    assert (dgx.gpus_per_server, dgx.provisioned_w) == (8, 6500)
    assert dgx.idle_w(A100) == pytest.approx(1500 + 8 * 60)
    with pytest.raises(CatalogError, match="unknown server power model"):
        server_power_model_for("dgx-z")


@given(activities, clocks, clocks)
def test_power_is_monotone_in_clock(activity: float, low: float, high: float) -> None:
    low, high = sorted((low, high))
    assert A100.power_w(activity, low) <= A100.power_w(activity, high) + 1e-9


@given(activities, activities, clocks)
def test_power_is_monotone_in_activity(low: float, high: float, clock: float) -> None:
    low, high = sorted((low, high))
    assert A100.power_w(low, clock) <= A100.power_w(high, clock) + 1e-9


@given(activities, clocks)
def test_idle_floor_and_peak_ceiling(activity: float, clock: float) -> None:
    power = float(A100.power_w(activity, clock))
    assert A100.idle_w <= power <= A100.peak_w
    assert A100.power_w(0.0, clock) == pytest.approx(A100.idle_w)


@given(st.floats(0.05, 1.0), st.floats(0.0, 1.0))
def test_cap_clock_is_the_inverse_of_power(activity: float, where: float) -> None:
    low = float(A100.power_w(activity, A100.min_clock_mhz))
    high = float(A100.power_w(activity, A100.max_clock_mhz))
    limit = low + where * (high - low)
    clock = A100.clock_for_power_limit_mhz(activity, limit)
    assert A100.power_w(activity, clock) == pytest.approx(limit, rel=1e-9, abs=1e-9)


def test_cap_clock_clamps() -> None:
    assert A100.clock_for_power_limit_mhz(0.5, 1000.0) == A100.max_clock_mhz
    assert A100.clock_for_power_limit_mhz(0.0, 100.0) == A100.max_clock_mhz
    assert A100.clock_for_power_limit_mhz(1.0, 50.0) == A100.min_clock_mhz
    # the 100 W minimum power limit pushes full-load work far down the clock range
    assert 300 < A100.clock_for_power_limit_mhz(1.0, 100.0) < 800


def test_cap_slows_prefill_more_than_decode() -> None:
    clocks_mhz = A100.clock_for_power_limit_mhz(np.array([1.0, 0.54]), 300.0)
    assert clocks_mhz[0] < clocks_mhz[1] == A100.max_clock_mhz


@given(clocks, st.floats(0.0, 1.0))
def test_time_factor_at_least_one(clock: float, share: float) -> None:
    assert A100.time_factor(clock, share) >= 1.0
    assert A100.time_factor(A100.max_clock_mhz, share) == pytest.approx(1.0)


@given(st.floats(A100.min_clock_mhz, A100.max_clock_mhz - 1), st.floats(0, 1), st.floats(0, 1))
def test_memory_bound_work_is_less_clock_sensitive(clock: float, a: float, b: float) -> None:
    memory_bound, compute_bound = sorted((a, b))
    assert A100.time_factor(clock, memory_bound) <= A100.time_factor(clock, compute_bound)


def test_fully_compute_bound_work_scales_with_the_clock() -> None:
    assert A100.time_factor(705.0, 1.0) == pytest.approx(2.0)
    assert A100.time_factor(705.0, 0.0) == pytest.approx(1.0)


def test_arrays_broadcast_over_servers_and_bins() -> None:
    clock = np.full((3, 5), 1200.0)
    activity = np.linspace(0, 1, 5)
    power = A100.power_w(activity, clock)
    assert power.shape == (3, 5)
    assert np.all(np.diff(power, axis=1) > 0)
    assert A100.clock_for_power_limit_mhz(activity, np.full((3, 1), 250.0)).shape == (3, 5)
