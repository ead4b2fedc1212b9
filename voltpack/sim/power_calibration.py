"""Calibrating the simulated row to POLCA's published row-level peaks.

POLCA (Patel et al., "POLCA: Power Oversubscription in LLM Cloud Providers", ASPLOS'24,
arXiv 2308.12908; the figures as voltpack's issue 6 quotes them) reports that a row (cluster)
of LLM inference servers peaks at about 79 % of its provisioned power and a training row at
about 97 %. The anchor is the ROW's peak, not one server's: one server's worst second can sit
far above the row's, because the servers of a row do not all hit their worst second together.

The per-server power models (`voltpack.perf`) are pinned by published figures (Splitwise's
measured A100 profile, the DGX-A100 nameplate, POLCA's training anchor); what no published
figure pins is the offered load, the mean request rate per inference server.
`calibrate_rate_per_s` derives it: bisection on the rate until the uncapped row of
`budget_servers` inference servers, replaying the given trace (any file of the Azure LLM
format) with the scenario's diurnal curve, duration and seed, peaks at the anchor over the run.
`row_peak_share` on a training-only row checks the training anchor the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from voltpack.model.errors import InvalidRequestError
from voltpack.sim.power_row import RowScenario, build_workload, run_uncapped
from voltpack.sim.traces.service_mix import RowTraffic

INFERENCE_ROW_PEAK_SHARE = 0.79
"""POLCA (ASPLOS'24): an LLM inference row peaks at ~79 % of its provisioned power."""
TRAINING_ROW_PEAK_SHARE = 0.97
"""POLCA (ASPLOS'24): an LLM training row peaks at ~97 % of its provisioned power."""
PEAK_SHARE_TOLERANCE = 0.002
"""Bisection stops when the row's peak is within this share of provisioned power of the
anchor (0.2 points), or when the rate bracket is narrower than `RATE_RESOLUTION` of the rate:
the peak is a step function of the rate (one more request in the peak second lifts it by up to
one server's prefill-over-decode swing, ~0.8 points in a row of 40), so the anchor can fall in
a step; the calibration then returns the rate whose peak is nearest to it."""
RATE_RESOLUTION = 1e-3
RATE_BRACKET_PER_S = (0.02, 4.0)
"""Mean requests/s per server searched: from an almost idle server to several times what a
BLOOM-176B instance can prefill (the search fails loudly if the anchor lies outside)."""
MAX_BISECTIONS = 40


@dataclass(frozen=True)
class RateCalibration:
    """The calibrated mean request rate and how it was found."""

    rate_per_s: float
    peak_share: float
    """Uncapped row peak / provisioned power at `rate_per_s`."""
    target_share: float
    evaluations: tuple[tuple[float, float], ...]
    """(rate per s, row peak share) at every rate tried, in order."""


def row_peak_share(scenario: RowScenario, trace: RowTraffic, resolution_s: int = 1) -> float:
    """Peak of the uncapped row's power over the run / the row's provisioned power.

    `resolution_s`: the power is averaged over consecutive windows of this many seconds first
    (1: the peak second, the resolution the controller sees).
    """
    if resolution_s < 1:
        raise InvalidRequestError(f"resolution_s={resolution_s} must be at least 1 s")
    workload = build_workload(scenario, trace)
    power_w = run_uncapped(workload).row_power_w
    windows = power_w.size // resolution_s
    if windows == 0:
        raise InvalidRequestError(
            f"resolution_s={resolution_s} is longer than the run ({power_w.size} s)"
        )
    averaged_w = power_w[: windows * resolution_s].reshape(windows, resolution_s).mean(axis=1)
    provisioned_w = scenario.servers * workload.inference_profile.server.provisioned_w
    return float(averaged_w.max() / provisioned_w)


def calibrate_rate_per_s(
    scenario: RowScenario,
    trace: RowTraffic,
    target_share: float = INFERENCE_ROW_PEAK_SHARE,
    tolerance: float = PEAK_SHARE_TOLERANCE,
    resolution_s: int = 1,
) -> RateCalibration:
    """Mean request rate per server at which the uncapped inference row peaks at the target.

    The row is `scenario` with `budget_servers` servers, all inference (training share 0),
    and the scenario's duration, diurnal swing and seed; its peak is taken over windows of
    `resolution_s` (1: the peak second). The peak grows with the rate (more
    overlapping prefills); bisection keeps the last bracket whose ends lie on either side.
    """
    row = replace(scenario, servers=scenario.budget_servers, training_share=0.0)
    tried: list[tuple[float, float]] = []

    def peak(rate: float) -> float:
        share = row_peak_share(replace(row, mean_rate_per_s=rate), trace, resolution_s)
        tried.append((rate, share))
        return share

    low, high = RATE_BRACKET_PER_S
    low_share, high_share = peak(low), peak(high)
    if not low_share <= target_share <= high_share:
        raise InvalidRequestError(
            f"calibrate_rate_per_s: the row peaks at {low_share:.3f}..{high_share:.3f} of "
            f"provisioned power for {low}..{high} requests/s per server, so no rate in that "
            f"range gives target_share={target_share}; check the trace and the server profile"
        )
    for _ in range(MAX_BISECTIONS):
        if high - low <= RATE_RESOLUTION * high:
            break
        middle = (low + high) / 2.0
        share = peak(middle)
        if abs(share - target_share) <= tolerance:
            return RateCalibration(middle, share, target_share, tuple(tried))
        if share < target_share:
            low, low_share = middle, share
        else:
            high, high_share = middle, share
    best = min(((low, low_share), (high, high_share)), key=lambda p: abs(p[1] - target_share))
    return RateCalibration(best[0], best[1], target_share, tuple(tried))
