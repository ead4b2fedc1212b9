"""The operator's straggler watch: pod reports in, one notice per new flag or refused report."""

from __future__ import annotations

from typing import Any

import numpy as np

from voltpack.operator.power.straggler_caps import RankReadings
from voltpack.operator.scheduling.step_reports import STEP_TIMES_ANNOTATION, RankReport
from voltpack.operator.scheduling.straggler_watch import StragglerWatch


def worker(
    rank: int, times: list[tuple[int, float]], node: str, gang: str = "llm"
) -> dict[str, Any]:
    text = ",".join(f"{step}:{seconds:.4f}" for step, seconds in times)
    return {
        "metadata": {
            "name": f"{gang}-worker-{rank}",
            "namespace": "ml",
            "annotations": {
                "voltpack.io/pod-group": gang,
                "voltpack.io/rank": str(rank),
                "voltpack.io/gpu-indices": str(rank % 8),
                STEP_TIMES_ANNOTATION: text,
            },
        },
        "spec": {"nodeName": node},
    }


def gang_pods(
    rng: np.random.Generator, first: int, steps: int, slow: dict[int, float]
) -> list[dict[str, Any]]:
    pods = []
    for rank in range(32):
        values = 1.5 * slow.get(rank, 1.0) * (1 + rng.normal(0, 0.02, size=steps))
        samples = [(first + i, float(v)) for i, v in enumerate(values)]
        pods.append(worker(rank, samples, node=f"node-{rank // 8}"))
    return pods


def test_a_slow_rank_gets_one_notice_naming_node_and_gpu() -> None:
    rng = np.random.default_rng(1)
    watch = StragglerWatch()
    notices = watch.update(gang_pods(rng, 0, 30, {17: 1.11}))
    assert [n.pod for n in notices] == ["ml/llm-worker-17"]
    assert notices[0].reason == "Straggler"
    assert notices[0].message.startswith("gang llm: rank 17 on node-2 GPU 1 is ")
    assert "slower than its peers for" in notices[0].message
    # the next report (steps 30..59) continues the same detector: no second notice
    assert watch.update(gang_pods(rng, 30, 30, {17: 1.11})) == []
    assert watch.detectors["llm"].flagged_ranks == (17,)
    assert watch.detectors["llm"].last_step == 59


def test_a_notice_shows_the_ranks_gpu_readings_beside_the_gang_medians() -> None:
    rng = np.random.default_rng(1)

    def readings(report: RankReport) -> RankReadings:
        if report.rank == 17:  # a throttled GPU: clock and draw down, as busy as its peers
            return RankReadings(power_w=420.0, sm_clock_mhz=1400.0, utilization=0.97)
        return RankReadings(power_w=700.0, sm_clock_mhz=1980.0, utilization=0.97)

    notices = StragglerWatch().update(gang_pods(rng, 0, 30, {17: 1.11}), gpu_readings=readings)
    assert [n.pod for n in notices] == ["ml/llm-worker-17"]
    message = notices[0].message
    assert "; sm_clock_mhz 1400 vs gang median 1980 (-29%)" in message
    assert "; power_w 420 vs gang median 700 (-40%)" in message
    assert "; utilization 0.97 vs gang median 0.97 (+0%)" in message
    assert message.endswith(
        "; SM clock below its peers' without a cap: throttling (thermal, power brake)"
    )


def test_a_notice_names_a_gpu_less_busy_than_its_peers_and_leaves_out_unknown_signals() -> None:
    rng = np.random.default_rng(1)

    def readings(report: RankReport) -> RankReadings:  # an agent that publishes no power draw
        if report.rank == 17:
            return RankReadings(sm_clock_mhz=1980.0, utilization=0.55)
        if report.rank == 3:  # a rank on a node whose agent has not reported yet
            return RankReadings()
        return RankReadings(sm_clock_mhz=1980.0, utilization=0.97)

    notices = StragglerWatch().update(gang_pods(rng, 0, 30, {17: 1.11}), gpu_readings=readings)
    assert [n.pod for n in notices] == ["ml/llm-worker-17"]
    message = notices[0].message
    assert "; sm_clock_mhz 1980 vs gang median 1980 (+0%)" in message
    assert "; utilization 0.55 vs gang median 0.97 (-43%)" in message
    assert "power_w" not in message
    assert message.endswith(
        "; GPU less busy than its peers': the delay is likely off the GPU (host, input)"
    )


def test_a_capped_rank_is_not_reported_when_its_cap_explains_it() -> None:
    rng = np.random.default_rng(2)

    def expected(report: RankReport) -> float:
        return 1.11 if report.rank == 17 else 1.0

    assert StragglerWatch().update(gang_pods(rng, 0, 40, {17: 1.11}), expected) == []


def test_a_refused_report_is_noticed_once_and_gangs_that_left_are_dropped() -> None:
    rng = np.random.default_rng(3)
    pods = gang_pods(rng, 0, 20, {})
    pods[4]["metadata"]["annotations"][STEP_TIMES_ANNOTATION] = "1:1.0,1:1.0"
    watch = StragglerWatch()
    notices = watch.update(pods)
    assert [(n.pod, n.reason) for n in notices] == [("ml/llm-worker-4", "StepReportRefused")]
    assert "steps must increase" in notices[0].message
    assert watch.update(pods) == []
    assert watch.update([]) == [] and watch.detectors == {}
