"""A milli-GPU share as the NVIDIA DRA driver's sharing configuration."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voltpack.model.errors import InvalidRequestError
from voltpack.scheduler.gpu_share_config import (
    active_thread_percent,
    pinned_memory_mib,
    share_config,
    sharing_strategy,
)

GIB = 1024**3


def test_an_mps_share_limits_threads_and_pinned_memory_in_proportion() -> None:
    config = share_config(250, 80 * GIB, "MPS", ("gpu",))
    assert config.driver == "gpu.nvidia.com" and config.requests == ("gpu",)
    assert config.source == "FromClaim"
    assert config.parameters == {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "GpuConfig",
        "sharing": {
            "strategy": "MPS",
            "mpsConfig": {
                "defaultActiveThreadPercentage": 25,
                "defaultPinnedDeviceMemoryLimit": "20480Mi",
            },
        },
    }


def test_time_slicing_sets_no_limits_and_unknown_memory_leaves_memory_unlimited() -> None:
    sliced = share_config(100, 80 * GIB, "TimeSlicing", ("gpu",))
    assert sliced.parameters["sharing"] == {
        "strategy": "TimeSlicing",
        "timeSlicingConfig": {"interval": "Default"},
    }
    unknown = share_config(100, None, "MPS", ("gpu",))
    assert unknown.parameters["sharing"] == {
        "strategy": "MPS",
        "mpsConfig": {"defaultActiveThreadPercentage": 10},
    }


@given(st.integers(1, 1000), st.integers(1, 200).map(lambda gib: gib * GIB))
def test_a_share_never_gets_fewer_sms_nor_more_memory_than_asked(milli: int, memory: int) -> None:
    percent = active_thread_percent(milli)
    assert 1 <= percent <= 100 and percent * 10 >= milli
    assert pinned_memory_mib(milli, memory) * 1024 * 1024 * 1000 <= max(
        memory * milli, 1024**2 * 1000
    )


def test_bad_shares_and_strategies_are_refused_with_the_allowed_values() -> None:
    assert sharing_strategy(None) == "MPS" and sharing_strategy("time-slicing") == "TimeSlicing"
    with pytest.raises(InvalidRequestError, match="allowed values: mps, time-slicing"):
        sharing_strategy("mig")
    with pytest.raises(InvalidRequestError, match=r"a GPU share is 1\.\.1000 milli, got 0"):
        active_thread_percent(0)
