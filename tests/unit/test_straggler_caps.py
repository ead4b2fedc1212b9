"""Deliberate caps from GPUNode specs, as the straggler detector's expected slowdowns; the
GPUs' published power draw, SM clock and utilisation, as its evidence."""

from __future__ import annotations

import math

from voltpack.operator.power.straggler_caps import CapSlowdowns, GpuReadings
from voltpack.operator.scheduling.step_reports import RankReport


def report(node: str | None, gpus: tuple[int, ...]) -> RankReport:
    return RankReport(pod="default/w", rank=0, node=node, gpu_indices=gpus, samples=())


GPUNODES = [
    {"metadata": {"name": "a"}, "spec": {"gpus": [{"index": 1, "powerLimitW": 250}]}},
    {"metadata": {"name": "b"}, "spec": {"gpus": [{"index": 0, "powerLimitW": 250}]}},
]


def test_a_rank_on_a_capped_gpu_is_expected_slower_and_others_are_not() -> None:
    caps = CapSlowdowns(GPUNODES, {"a": "A100", "b": "G2"})
    capped = caps.expected(report("a", (0, 1)))
    assert 1.02 < capped < 2.0  # an A100 held to 250 W of 400 W
    assert caps.expected(report("a", (0,))) == 1.0
    assert caps.expected(report(None, (1,))) == 1.0
    # openb's undisclosed G2 has no power model: no cap can be explained
    assert caps.expected(report("b", (0,))) == 1.0
    assert caps.expected(report("c", (0,))) == 1.0


def test_a_ranks_readings_are_the_means_of_its_gpus_as_published() -> None:
    gpunodes = [
        {
            "metadata": {"name": "a"},
            "status": {
                "gpus": [
                    {"index": 0, "powerDrawW": 600.0, "smClockMhz": 1980, "utilizationRatio": 0.9},
                    {"index": 1, "powerDrawW": 400, "smClockMhz": 1500.0, "utilizationRatio": 0.5},
                    {"index": 2},  # no reading
                    {"index": 3, "powerDrawW": "a lot", "smClockMhz": None},  # ignored
                    {"index": 4, "smClockMhz": 1410},  # a clock without power or utilisation
                ]
            },
        },
        {"metadata": {"name": "b"}},  # no status yet
    ]
    gpus = GpuReadings(gpunodes)
    both = gpus.of(report("a", (0, 1)))
    assert (both.power_w, both.sm_clock_mhz, both.utilization) == (500.0, 1740.0, 0.7)
    one = gpus.of(report("a", (1, 2)))
    assert (one.power_w, one.sm_clock_mhz, one.utilization) == (400.0, 1500.0, 0.5)
    clock_only = gpus.of(report("a", (4,)))
    assert clock_only.sm_clock_mhz == 1410.0
    assert math.isnan(clock_only.power_w) and math.isnan(clock_only.utilization)
    for unknown in (report("a", (2, 3)), report("b", (0,)), report(None, (0,))):
        readings = gpus.of(unknown)
        assert all(
            math.isnan(v) for v in (readings.power_w, readings.sm_clock_mhz, readings.utilization)
        )
