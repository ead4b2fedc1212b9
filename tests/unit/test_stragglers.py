"""Straggler detection: a slow rank is flagged quickly, noise and deliberate caps are not."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from voltpack.perf.gpu_power import power_model_for
from voltpack.policies.stragglers import (
    GpuSignals,
    StragglerDetector,
    StragglerParams,
    align_samples,
    cap_slowdown,
)

RANKS = 1024


def gang_times(
    rng: np.random.Generator,
    steps: int,
    ranks: int = RANKS,
    noise_cv: float = 0.03,
    heavy_tailed: bool = False,
) -> NDArray[np.float64]:
    """`[step, rank]` step times: 1.5 s, 2% jitter common to the gang, per-rank noise."""
    common = 1.0 + rng.normal(0.0, 0.02, size=(steps, 1))
    if heavy_tailed:
        # Student t with 3 degrees of freedom, scaled to the same standard deviation
        noise = rng.standard_t(3, size=(steps, ranks)) * noise_cv / np.sqrt(3.0)
    else:
        noise = rng.normal(0.0, noise_cv, size=(steps, ranks))
    return 1.5 * common * np.maximum(1.0 + noise, 0.5)


def run(
    times: NDArray[np.float64],
    expected: NDArray[np.float64] | None = None,
    params: StragglerParams | None = None,
) -> tuple[StragglerDetector, dict[int, int]]:
    """Feed every step; return the detector and `rank -> step first flagged`."""
    detector = StragglerDetector(times.shape[1], params or StragglerParams())
    first: dict[int, int] = {}
    for step, row in enumerate(times):
        report = detector.observe(step, row, expected_slowdown=expected)
        for rank in report.newly_flagged:
            first.setdefault(rank, step)
    return detector, first


@pytest.mark.parametrize("seed", range(5))
def test_a_gpu_10_percent_slower_is_flagged_within_50_steps_among_1024_ranks(seed: int) -> None:
    rng = np.random.default_rng(seed)
    times = gang_times(rng, 80)
    slow = int(rng.integers(RANKS))
    onset = 20
    times[onset:, slow] *= 1.10
    _, first = run(times)
    assert list(first) == [slow]
    assert first[slow] - onset < 50


@pytest.mark.parametrize(
    ("noise_cv", "heavy_tailed"), [(0.01, False), (0.03, False), (0.02, True), (0.03, True)]
)
def test_no_rank_is_flagged_under_noise_alone(noise_cv: float, heavy_tailed: bool) -> None:
    for seed in range(4):
        rng = np.random.default_rng(100 + seed)
        times = gang_times(rng, 150, noise_cv=noise_cv, heavy_tailed=heavy_tailed)
        detector, first = run(times)
        assert first == {}, f"seed {seed}: ranks {sorted(first)} flagged by noise"
        assert detector.flagged_ranks == ()


def test_cap_slowdown_follows_the_power_model() -> None:
    gpu = power_model_for("A100-80GB")
    factors = cap_slowdown(gpu, [400.0, 350.0, 300.0, 250.0])
    assert factors[0] == pytest.approx(1.0)
    assert np.all(np.diff(factors) > 0)
    assert 1.05 < factors[2] < 1.2  # 300 W on a 400 W A100: about as slow as a 10% straggler


def capped_gang(seed: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Times of a gang with 64 ranks capped at 250-350 W (true slowdown within 2% of the
    power model's), and the model's expected slowdown per rank."""
    rng = np.random.default_rng(seed)
    times = gang_times(rng, 100)
    expected = np.ones(RANKS)
    capped = rng.choice(RANKS, size=64, replace=False)
    limits = rng.choice([250.0, 300.0, 350.0], size=64)
    expected[capped] = cap_slowdown(power_model_for("A100-80GB"), limits)
    truth = expected.copy()
    truth[capped] *= 1.0 + rng.uniform(-0.02, 0.02, size=64)
    return times * truth, expected


@pytest.mark.parametrize("seed", range(3))
def test_deliberately_capped_ranks_are_not_flagged_but_reported_as_expected(seed: int) -> None:
    times, expected = capped_gang(seed)
    detector = StragglerDetector(RANKS)
    for step, row in enumerate(times):
        report = detector.observe(step, row, expected_slowdown=expected)
        assert report.newly_flagged == (), f"step {step}: {report.newly_flagged}"
    capped = {entry.rank for entry in report.capped_expected}
    assert capped == set(np.flatnonzero(expected > 1.0).tolist())
    assert "capped, expected" in report.capped_expected[0].reason


def test_the_same_caps_are_flagged_when_the_detector_is_not_told_of_them() -> None:
    times, expected = capped_gang(0)
    _, first = run(times)
    heavily_capped = set(np.flatnonzero(expected > 1.08).tolist())
    assert heavily_capped <= set(first)


def test_a_capped_rank_slower_than_its_cap_explains_is_flagged_with_both_figures() -> None:
    times, expected = capped_gang(1)
    rank = int(np.flatnonzero(expected > 1.0)[0])
    times[:, rank] *= 1.15
    detector, first = run(times, expected)
    assert list(first) == [rank]
    report = detector.observe(len(times), times[-1], expected_slowdown=expected)
    (flag,) = report.flagged
    assert flag.expected_cap_slowdown == pytest.approx(expected[rank])
    assert "power-capped" in flag.reason
    assert flag.slowdown > 0.08  # beyond the cap and its tolerance


def test_the_flag_carries_the_evidence_and_the_clock_hint() -> None:
    rng = np.random.default_rng(7)
    times = gang_times(rng, 60)
    times[:, 17] *= 1.11
    clocks = np.full(RANKS, 1410.0)
    clocks[17] = 1250.0
    detector = StragglerDetector(RANKS)
    for step, row in enumerate(times):
        report = detector.observe(step, row, signals=GpuSignals(sm_clock_mhz=clocks))
    (flag,) = report.flagged
    assert flag.rank == 17
    assert 0.07 < flag.slowdown < 0.15
    assert flag.steps_observed == 60
    assert flag.since_step == 0
    assert flag.z_score > 2
    assert "rank 17 is" in flag.reason and "slower than its peers for 60 steps" in flag.reason
    assert "sm_clock_mhz 1250 vs gang median 1410" in flag.reason
    assert "throttling" in flag.reason


def test_a_rank_that_recovers_is_cleared() -> None:
    rng = np.random.default_rng(3)
    times = gang_times(rng, 120)
    times[:40, 5] *= 1.2
    detector = StragglerDetector(RANKS)
    cleared_at = None
    for step, row in enumerate(times):
        report = detector.observe(step, row)
        if 5 in report.cleared:
            cleared_at = step
    assert cleared_at is not None and 40 <= cleared_at < 60, cleared_at
    assert detector.flagged_ranks == ()


def test_a_small_gang_of_eight_finds_a_20_percent_straggler_without_false_alarms() -> None:
    for seed in range(20):
        rng = np.random.default_rng(seed)
        clean = gang_times(rng, 200, ranks=8, noise_cv=0.02)
        assert run(clean)[1] == {}, f"seed {seed}"
        slow = clean.copy()
        slow[:, 3] *= 1.2
        first = run(slow)[1]
        assert list(first) == [3] and first[3] < 30, f"seed {seed}: {first}"


def test_missing_reports_and_bad_input() -> None:
    detector = StragglerDetector(8)
    times = np.full(8, 1.0)
    times[:6] = np.nan
    report = detector.observe(0, times)
    assert report.skipped == "2 of 8 ranks reported step 0"
    detector.observe(1, np.ones(8))
    with pytest.raises(ValueError, match="step 1 is not after the last step observed"):
        detector.observe(1, np.ones(8))
    with pytest.raises(ValueError, match="shape"):
        detector.observe(2, np.ones(7))
    with pytest.raises(ValueError, match="expected_slowdown must be finite and >= 1"):
        detector.observe(2, np.ones(8), expected_slowdown=np.full(8, 0.9))
    with pytest.raises(ValueError, match="too small"):
        StragglerDetector(2)
    with pytest.raises(ValueError, match="invalid z_clip"):
        StragglerParams(z_clip=1.0)


def test_align_samples_builds_the_step_matrix() -> None:
    steps, matrix = align_samples({0: [(5, 1.0), (6, 1.1)], 2: [(6, 1.2), (7, 1.3)]}, 3, 5)
    assert steps == [6, 7]
    assert np.array_equal(matrix, [[1.1, np.nan, 1.2], [np.nan, np.nan, 1.3]], equal_nan=True)
    with pytest.raises(ValueError, match=r"ranks \[3\] are outside"):
        align_samples({3: [(1, 1.0)]}, 3)


def test_a_transient_slowdown_of_a_few_steps_is_not_flagged() -> None:
    for seed in range(5):
        times = gang_times(np.random.default_rng(seed), 80)
        times[30:36, 11] *= 1.3  # six slow steps (a checkpoint write, a noisy neighbour)
        times[0:6, 12] *= 1.4  # also at the start of a run, before the window is full
        assert run(times)[1] == {}, f"seed {seed}"
