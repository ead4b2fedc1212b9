"""Straggler detection: which ranks of a synchronous gang are persistently slower than their peers.

Pure and deterministic (no I/O, no clock): the driver feeds one vector of per-rank step times
per step (`StragglerDetector.observe`), optionally with each rank's expected slowdown from a
deliberate power cap (`cap_slowdown`, from the power model in `voltpack.perf`) and its GPU
signals (SM clock, power, utilisation), and gets back the ranks flagged, with their evidence.

The test, per step and rank (MegaScale-style: compare each rank with the gang, step by step):

1. Divide each rank's time by its expected cap slowdown (1 when not capped), and take the
   gang's median; `d = t / median - 1` is the rank's relative excess. Dividing by the median
   of the same step removes what every rank shares (data-dependent step length, a slow
   all-reduce, jitter common to the gang).
2. A capped rank's excess within `cap_tolerance` of what the power model predicts counts as
   zero (the model is an estimate): its slowness is "capped, expected", not a straggler.
3. Scale by a robust spread of the ranks' excess at that step (1.4826 x MAD, floored at
   `spread_floor`) to a z-score and clip it to `z_clip`, so one spike (a GC pause, a
   checkpoint write) cannot flag a rank on its own.
4. One-sided CUSUM per rank: `S = max(0, S + z - reference_z)`; a rank is flagged when
   `S >= alarm_threshold` AND at least `persistence` (3/4) of its last `window_steps` steps
   (cap-adjusted) are at least `min_slowdown` slower than the median (statistically, practically
   and persistently slower); steps not yet observed (or not reported) count as not slower, so
   a burst at the start of a run is judged like any other. S is held below 2h, so the flag
   clears (S back to 0) within about h / k steps of the rank recovering.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from voltpack.perf.gpu_power import GpuPowerModel
from voltpack.perf.training import TrainingProfile, default_training_profile

FloatArray = NDArray[np.float64]

MAD_TO_SIGMA = 1.4826
"""1.4826 x MAD estimates the standard deviation of normally distributed values."""


@dataclass(frozen=True)
class StragglerParams:
    """Detector settings; the defaults hold for gangs of 8 to thousands of ranks with per-rank
    step-time noise up to ~3% CV (Gaussian or heavy-tailed), checked over many seeds by
    `benchmarks/straggler_detection.py`.
    """

    reference_z: float = 1.5
    """CUSUM reference value k: a rank's z must exceed it on average for S to grow. k = delta/2
    is the classical choice for a shift of delta; 1.5 targets shifts of >= 3 spreads, which a
    10% slower GPU is at per-rank noise up to ~3% CV. Smaller shifts grow S slowly or not."""
    alarm_threshold: float = 10.0
    """CUSUM decision interval h. Siegmund's approximation gives an in-control run length of
    ~1e12 steps per rank for Gaussian z at k=1.5, h=10 (no false alarm over thousands of ranks
    and millions of steps); a 10% straggler at 3% CV (z ~ 3.3) crosses it in ~6 steps."""
    z_clip: float = 4.0
    """A step's z counts at most this much: one heavy-tail spike adds at most z_clip - k = 2.5,
    so at least four consecutive spikes are needed to reach h by noise."""
    min_slowdown: float = 0.03
    """The smallest excess worth flagging (3%): below it a rank is within the spread of
    healthy identical GPUs and not worth re-placing a gang for; it also keeps a gang with very
    low noise from flagging a rank 1% slower. Set it to the slowdown worth acting on."""
    window_steps: int = 24
    """Recent steps the persistence test looks at: four times the longest burst of slow steps
    to ignore (6: a checkpoint write, a noisy neighbour, a slow data shard)."""
    persistence: float = 0.75
    """Share of the window's steps that must be >= `min_slowdown` slower: 18 of 24. A 6-step
    burst then needs 12 of the other 18 steps slow as well (probability ~6e-4 even for a healthy
    rank 1.2% slower than the median at 3% CV; with 16 steps and 12 of 16 a benchmark seed
    flagged such a rank), while a 10% straggler at 3% CV (each step >= 3% slower with
    probability ~99%) passes 18-19 steps after its onset. Steps missing from the window (the
    run's first steps, unreported ones) count as not slower."""
    spread_floor: float = 0.005
    """Lower bound of the per-step spread (0.5%): step timers and data-dependent work vary at
    least this much, so a gang with near-identical times does not turn 0.1% into z = 10."""
    cap_tolerance: float = 0.03
    """How far (relative) a capped rank may exceed the power model's predicted slowdown and
    still count as "capped, expected": the model's compute-bound share and clock exponent are
    estimates (`voltpack/perf/gpu_power.yaml`), good to a few percent."""
    min_ranks: int = 4
    """A step with fewer ranks reporting has no meaningful median and is skipped."""

    def __post_init__(self) -> None:
        checks = {
            "reference_z": self.reference_z >= 0,
            "alarm_threshold": self.alarm_threshold > 0,
            "z_clip": self.z_clip > self.reference_z,
            "min_slowdown": self.min_slowdown >= 0,
            "window_steps": self.window_steps >= 1,
            "persistence": 0 < self.persistence <= 1,
            "spread_floor": self.spread_floor > 0,
            "cap_tolerance": self.cap_tolerance >= 0,
            "min_ranks": self.min_ranks >= 3,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ValueError(
                f"StragglerParams: invalid {', '.join(bad)} (need reference_z >= 0, "
                "alarm_threshold > 0, z_clip > reference_z, min_slowdown >= 0, "
                "window_steps >= 1, 0 < persistence <= 1, spread_floor > 0, "
                "cap_tolerance >= 0, min_ranks >= 3)"
            )


@dataclass(frozen=True)
class GpuSignals:
    """Per-rank GPU readings of one step (NaN where unknown); evidence, not the decision."""

    sm_clock_mhz: ArrayLike | None = None
    power_w: ArrayLike | None = None
    utilization: ArrayLike | None = None
    """0..1 (share of the sample period a kernel ran)."""


@dataclass(frozen=True)
class SignalReading:
    """One GPU signal of a rank beside the gang's median of it."""

    name: str
    value: float
    gang_median: float

    @property
    def relative(self) -> float:
        """value / gang median - 1 (NaN when unknown)."""
        if not np.isfinite(self.value) or not self.gang_median:
            return float("nan")
        return self.value / self.gang_median - 1.0


@dataclass(frozen=True)
class StragglerFlag:
    """A rank found persistently slower than its peers, with the evidence."""

    rank: int
    slowdown: float
    """Median relative excess over the window, after any explained cap slowdown."""
    observed_slowdown: float
    """Median of the raw step time / gang median - 1 over the window (cap included)."""
    steps_observed: int
    """Consecutive steps the CUSUM has been accumulating (since it was last 0)."""
    z_score: float
    """Window median excess / the current step's spread."""
    cusum: float
    since_step: int
    """The step at which the accumulation began."""
    step: int
    expected_cap_slowdown: float = 1.0
    signals: tuple[SignalReading, ...] = ()

    @property
    def reason(self) -> str:
        """A sentence for an Event: what, by how much, for how long, and the GPU's signals."""
        text = (
            f"rank {self.rank} is {self.slowdown:.0%} slower than its peers for "
            f"{self.steps_observed} steps (z {self.z_score:.1f})"
        )
        if self.expected_cap_slowdown > 1.0:
            text += (
                f"; it is power-capped, which explains {self.expected_cap_slowdown - 1:.0%} "
                f"of {self.observed_slowdown:.0%}"
            )
        for reading in self.signals:
            if np.isfinite(reading.relative):
                text += (
                    f"; {reading.name} {reading.value:.4g} vs gang median "
                    f"{reading.gang_median:.4g} ({reading.relative:+.0%})"
                )
        hint = self.hint
        return f"{text}; {hint}" if hint else text

    @property
    def hint(self) -> str:
        """The likely cause the signals point to, or ''."""
        by_name = {reading.name: reading.relative for reading in self.signals}
        clock = by_name.get("sm_clock_mhz", float("nan"))
        busy = by_name.get("utilization", float("nan"))
        if np.isfinite(clock) and clock < -0.03 and self.expected_cap_slowdown <= 1.0:
            return "SM clock below its peers' without a cap: throttling (thermal, power brake)"
        if np.isfinite(busy) and busy < -0.1:
            return "GPU less busy than its peers': the delay is likely off the GPU (host, input)"
        return ""


@dataclass(frozen=True)
class CappedRank:
    """A rank slower than its peers because the power manager capped it, as predicted."""

    rank: int
    expected_slowdown: float
    observed_slowdown: float

    @property
    def reason(self) -> str:
        return (
            f"rank {self.rank}: capped, expected {self.expected_slowdown - 1:.0%} slower, "
            f"observed {self.observed_slowdown:.0%}"
        )


@dataclass(frozen=True)
class StragglerReport:
    """What one `observe` found."""

    step: int
    flagged: tuple[StragglerFlag, ...]
    newly_flagged: tuple[int, ...]
    cleared: tuple[int, ...]
    capped_expected: tuple[CappedRank, ...]
    skipped: str = ""
    """Why the step was not used (too few ranks reported), or ''."""


def cap_slowdown(
    gpu: GpuPowerModel, power_limit_w: ArrayLike, profile: TrainingProfile | None = None
) -> FloatArray:
    """Expected step-time multiplier (>= 1) of a training rank whose GPU is held to
    `power_limit_w`: the clock the limit allows at the compute phase's activity, applied to the
    compute-bound share of the compute phase (`voltpack.perf.training`)."""
    chosen = default_training_profile() if profile is None else profile
    limit = np.asarray(power_limit_w, dtype=np.float64)
    full = np.full(limit.shape, gpu.max_clock_mhz)
    clock = gpu.effective_clock_mhz(full, chosen.compute_activity_for(gpu), limit)
    return np.asarray(
        chosen.iteration_time_s(clock, gpu) / chosen.iteration_time_s(full, gpu), dtype=np.float64
    )


def align_samples(
    samples: Mapping[int, Sequence[tuple[int, float]]], ranks: int, after_step: int = -1
) -> tuple[list[int], FloatArray]:
    """Per-rank `(step, seconds)` samples as a `[step, rank]` matrix (NaN where a rank did not
    report), for the steps after `after_step`, in order. Ranks outside 0..ranks-1 are refused."""
    outside = sorted(rank for rank in samples if not 0 <= rank < ranks)
    if outside:
        raise ValueError(f"ranks {outside} are outside the gang's 0..{ranks - 1}")
    steps = sorted({step for values in samples.values() for step, _ in values if step > after_step})
    index = {step: row for row, step in enumerate(steps)}
    matrix = np.full((len(steps), ranks), np.nan)
    for rank, values in samples.items():
        for step, seconds in values:
            if step > after_step:
                matrix[index[step], rank] = seconds
    return steps, matrix


def _per_rank(values: ArrayLike | None, ranks: int, name: str, default: float) -> FloatArray:
    if values is None:
        return np.full(ranks, default)
    array = np.asarray(values, dtype=np.float64)
    if array.shape != (ranks,):
        raise ValueError(f"{name} has shape {array.shape}; the gang has {ranks} ranks")
    return array


@dataclass
class StragglerDetector:
    """Per-gang detector state: feed it each step in order with `observe`."""

    ranks: int
    params: StragglerParams = field(default_factory=StragglerParams)
    last_step: int | None = None
    _cusum: FloatArray = field(init=False, repr=False)
    _run: NDArray[np.int64] = field(init=False, repr=False)
    _excess: FloatArray = field(init=False, repr=False)
    _raw: FloatArray = field(init=False, repr=False)
    _flagged: NDArray[np.bool_] = field(init=False, repr=False)
    _position: int = field(init=False, default=0, repr=False)
    _spread: float = field(init=False, default=0.005, repr=False)

    def __post_init__(self) -> None:
        if self.ranks < self.params.min_ranks:
            raise ValueError(
                f"a gang of {self.ranks} ranks is too small to compare ranks with their peers "
                f"(need >= {self.params.min_ranks})"
            )
        window = self.params.window_steps
        self._cusum = np.zeros(self.ranks)
        self._run = np.zeros(self.ranks, dtype=np.int64)
        self._excess = np.full((window, self.ranks), np.nan)
        self._raw = np.full((window, self.ranks), np.nan)
        self._flagged = np.zeros(self.ranks, dtype=bool)

    @property
    def flagged_ranks(self) -> tuple[int, ...]:
        return tuple(int(rank) for rank in np.flatnonzero(self._flagged))

    def observe(
        self,
        step: int,
        step_times_s: ArrayLike,
        *,
        expected_slowdown: ArrayLike | None = None,
        signals: GpuSignals | None = None,
    ) -> StragglerReport:
        """Take one step's per-rank times (NaN: the rank did not report) and say who is slow.

        `expected_slowdown`: per rank, the step-time multiplier (>= 1) that a deliberate power
        cap explains (`cap_slowdown`), 1 for uncapped ranks.
        """
        if self.last_step is not None and step <= self.last_step:
            raise ValueError(f"step {step} is not after the last step observed ({self.last_step})")
        times = _per_rank(step_times_s, self.ranks, "step_times_s", np.nan)
        expected = _per_rank(expected_slowdown, self.ranks, "expected_slowdown", 1.0)
        if np.any(~np.isfinite(expected) | (expected < 1.0)):
            raise ValueError("expected_slowdown must be finite and >= 1 for every rank")
        valid = np.isfinite(times) & (times > 0)
        if int(valid.sum()) < self.params.min_ranks:
            return StragglerReport(
                step=step,
                flagged=self._flags(step, expected, signals),
                newly_flagged=(),
                cleared=(),
                capped_expected=(),
                skipped=f"{int(valid.sum())} of {self.ranks} ranks reported step {step}",
            )
        self.last_step = step
        params = self.params
        adjusted = times / expected
        median = float(np.median(adjusted[valid]))
        excess = adjusted / median - 1.0
        capped = expected > 1.0
        explained = np.where(
            excess > params.cap_tolerance, excess - params.cap_tolerance, np.minimum(excess, 0.0)
        )
        excess = np.where(capped, explained, excess)
        centre = float(np.median(excess[valid]))
        spread = max(
            MAD_TO_SIGMA * float(np.median(np.abs(excess[valid] - centre))), params.spread_floor
        )
        z = np.clip(excess / spread, -params.z_clip, params.z_clip)
        # capped at 2h so that a rank that recovers clears within ~h / k steps
        grown = np.clip(self._cusum + z - params.reference_z, 0.0, 2 * params.alarm_threshold)
        self._cusum = np.where(valid, grown, self._cusum)
        self._run = np.where(valid, np.where(self._cusum > 0, self._run + 1, 0), self._run)
        row = self._position % params.window_steps
        self._excess[row] = np.where(valid, excess, np.nan)
        self._raw[row] = np.where(valid, times / median - 1.0, np.nan)
        self._position += 1

        slower = np.sum(np.nan_to_num(self._excess, nan=-np.inf) >= params.min_slowdown, axis=0)
        alarm = (self._cusum >= params.alarm_threshold) & (
            slower >= params.persistence * params.window_steps
        )
        newly = alarm & ~self._flagged
        cleared = self._flagged & (self._cusum <= 0.0)
        self._flagged = (self._flagged | alarm) & ~cleared
        self._spread = spread
        window_raw = self._window_median(self._raw)
        capped_expected = tuple(
            CappedRank(int(rank), float(expected[rank]), float(window_raw[rank]))
            for rank in np.flatnonzero(capped & ~self._flagged)
        )
        return StragglerReport(
            step,
            self._flags(step, expected, signals),
            tuple(int(rank) for rank in np.flatnonzero(newly)),
            tuple(int(rank) for rank in np.flatnonzero(cleared)),
            capped_expected,
        )

    @staticmethod
    def _window_median(buffer: FloatArray) -> FloatArray:
        counts = np.sum(np.isfinite(buffer), axis=0)
        filled = np.where(np.isfinite(buffer), buffer, np.inf)
        ordered = np.sort(filled, axis=0)
        # median of the finite values: sorted ascending, NaNs (as inf) last
        low = np.maximum((counts - 1) // 2, 0)
        high = np.maximum(counts // 2, 0)
        columns = np.arange(buffer.shape[1])
        result = (ordered[low, columns] + ordered[high, columns]) / 2.0
        return np.where(counts > 0, result, np.nan)

    def _flags(
        self, step: int, expected: FloatArray, signals: GpuSignals | None
    ) -> tuple[StragglerFlag, ...]:
        ranks = np.flatnonzero(self._flagged)
        if ranks.size == 0:
            return ()
        window_excess = self._window_median(self._excess)
        window_raw = self._window_median(self._raw)
        readings = _signal_readings(signals, self.ranks)
        last = self.last_step if self.last_step is not None else step
        return tuple(
            StragglerFlag(
                rank=int(rank),
                slowdown=float(window_excess[rank]),
                observed_slowdown=float(window_raw[rank]),
                steps_observed=int(self._run[rank]),
                z_score=float(window_excess[rank] / self._spread),
                cusum=float(self._cusum[rank]),
                since_step=last - int(self._run[rank]) + 1,
                step=step,
                expected_cap_slowdown=float(expected[rank]),
                signals=tuple(
                    SignalReading(name, float(values[rank]), median)
                    for name, values, median in readings
                ),
            )
            for rank in ranks
        )


def _signal_readings(signals: GpuSignals | None, ranks: int) -> list[tuple[str, FloatArray, float]]:
    if signals is None:
        return []
    found = []
    for name in ("sm_clock_mhz", "power_w", "utilization"):
        raw = getattr(signals, name)
        if raw is None:
            continue
        values = _per_rank(raw, ranks, name, np.nan)
        finite = values[np.isfinite(values)]
        if finite.size:
            found.append((name, values, float(np.median(finite))))
    return found
