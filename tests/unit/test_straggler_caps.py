"""Deliberate caps from GPUNode specs, as the straggler detector's expected slowdowns; the
GPUs' published power draw, as its evidence."""

from __future__ import annotations

import math

from voltpack.operator.step_reports import RankReport
from voltpack.operator.straggler_caps import CapSlowdowns, GpuPowerDraws


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


def test_a_ranks_power_draw_is_the_mean_of_its_gpus_as_published() -> None:
    gpunodes = [
        {
            "metadata": {"name": "a"},
            "status": {
                "gpus": [
                    {"index": 0, "powerDrawW": 600.0},
                    {"index": 1, "powerDrawW": 400},
                    {"index": 2},  # no reading
                    {"index": 3, "powerDrawW": "a lot"},  # not a number: ignored
                ]
            },
        },
        {"metadata": {"name": "b"}},  # no status yet
    ]
    draws = GpuPowerDraws(gpunodes)
    assert draws.of(report("a", (0, 1))) == 500.0
    assert draws.of(report("a", (1, 2))) == 400.0
    assert math.isnan(draws.of(report("a", (2, 3))))
    assert math.isnan(draws.of(report("b", (0,))))
    assert math.isnan(draws.of(report(None, (0,))))
