"""Property tests of the power controller over random demand traces and telemetry gaps.

1. A domain is never above budget for longer than the actuation latency allows (in band, 0-3
   ticks, or out of band, 10-30 ticks): from the first tick over budget, the settings that
   fix it are decided that tick and act `latency` ticks later, so an excursion lasts at most
   latency + 1 ticks while telemetry is on time. A GPU in a telemetry gap shows its last
   reading until it turns stale, so during gaps the bound grows by `stale_after_s`.
2. The headroom policy never raises a high-priority GPU while a fresh low-priority GPU could
   still give watts.
3. When a GPU's telemetry goes stale, within stale_after_s + one interval of its last reading
   it is capped if it is low priority, and the domain's worst case fits the budget (or every
   fresh GPU is at its floor).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from voltpack.policies.power.headroom import SAVING_EPSILON_W
from voltpack.policies.schema import PowerSpec
from voltpack.power.controller import PowerController
from voltpack.power.domains import PowerDomain, PowerDomainTree
from voltpack.power.setup import GpuLocation, build_controller

from .power_plant import Plant

TICKS = 150
STALE_AFTER_S = 6.0


@st.composite
def scenarios(draw: st.DrawFn) -> dict:
    gpus = draw(st.integers(4, 12))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    high = rng.random(gpus) < draw(st.floats(0.0, 1.0))
    # demand: a random level per GPU, slow waves, and sudden jumps
    base = rng.uniform(0.1, 1.0, gpus)
    wave = 0.3 * np.sin(
        np.arange(TICKS)[:, None] / rng.uniform(5, 40, gpus) + rng.uniform(0, 6, gpus)
    )
    jumps = (rng.random((TICKS, gpus)) < 0.03) * rng.uniform(-0.6, 0.6, (TICKS, gpus))
    activity = np.clip(base + wave + np.cumsum(jumps, axis=0) * 0.3, 0.0, 1.0)
    reporting = np.ones((TICKS, gpus), dtype=bool)
    for gpu in range(gpus):
        if rng.random() < 0.4:
            start = int(rng.integers(10, TICKS - 20))
            reporting[start : start + int(rng.integers(5, 40)), gpu] = False
    budget_share = draw(st.floats(0.35, 1.0))
    return {
        "gpus": gpus,
        "high": high,
        "activity": activity,
        "reporting": reporting,
        "budget_w": max(120.0 * gpus, budget_share * 420.0 * gpus),
        "policy": draw(st.sampled_from(["headroom", "thresholds"])),
        # in-band NVML (about a second) or out-of-band management (tens of seconds)
        "latency": draw(st.one_of(st.integers(0, 3), st.integers(10, 30))),
    }


def make_controller(s: dict) -> PowerController:
    nodes = [f"n{i}" for i in range(s["gpus"])]
    tree = PowerDomainTree([PowerDomain("d", s["budget_w"], frozenset(nodes))])
    spec = PowerSpec(
        policy=s["policy"],
        stale_after_s=STALE_AFTER_S,
        late_after_s=STALE_AFTER_S / 2,
        actuation_latency_s=float(s["latency"]),
        params={"hold_s": 3.0},
    )
    return build_controller(spec, tree, [GpuLocation(n, 0, "A100-80GB") for n in nodes])


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_no_excursion_lasts_longer_than_the_actuation_latency(s: dict) -> None:
    c = make_controller(s)
    plant = Plant(c, s["high"], latency_ticks=s["latency"])
    run = 0
    for t in range(TICKS):
        power, _ = plant.tick(t, s["activity"][t], s["reporting"][t])
        run = run + 1 if power > s["budget_w"] else 0
        # decisions taken on a stale reading act `latency` ticks later, so the gap allowance
        # belongs to an excursion that began near a gap, however long ago that was
        began = t - run + 1
        near_gap = run and not s["reporting"][max(0, began - int(STALE_AFTER_S) - 5) : t + 1].all()
        allowed = s["latency"] + 1 + (STALE_AFTER_S + 1 if near_gap else 0)
        assert run <= allowed, f"tick {t}: {run} ticks over budget"


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_high_priority_is_slowed_only_when_low_priority_has_nothing_left(s: dict) -> None:
    s = {**s, "policy": "headroom"}
    c = make_controller(s)
    plant = Plant(c, s["high"], latency_ticks=s["latency"])
    ladders = c.ladders
    for t in range(TICKS):
        before = c.rung.copy()
        _, decision = plant.tick(t, s["activity"][t], s["reporting"][t])
        (report,) = decision.domains
        if report.braking or report.stale_gpus or np.isnan(plant.reading_w).any():
            continue
        raised_high = np.any(s["high"] & (decision.rung > before))
        if not raised_high:
            continue
        # each GPU's demand as the controller estimated it this tick (its reading scaled back
        # to no action from the rung it was read at)
        demand = c.unthrottled_w
        low = ~s["high"]
        now_w = ladders.estimate_w(demand, before * 0, decision.rung)
        up = np.minimum(decision.rung + 1, ladders.top)
        saving = now_w - ladders.estimate_w(demand, before * 0, up)
        room = low & (decision.rung < ladders.top) & (saving > SAVING_EPSILON_W)
        assert not room.any(), f"tick {t}: high priority slowed while low priority had room"


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_stale_telemetry_tightens_within_the_stated_bound(s: dict) -> None:
    c = make_controller(s)
    plant = Plant(c, s["high"], latency_ticks=s["latency"])
    for t in range(TICKS):
        _, decision = plant.tick(t, s["activity"][t], s["reporting"][t])
        age = t - plant.read_at_s
        newly_stale = (age > STALE_AFTER_S) & (age <= STALE_AFTER_S + 1.0)
        if not newly_stale.any():
            continue
        low_stale = newly_stale & ~s["high"]
        assert (decision.rung[low_stale] == c.ladders.top[low_stale]).all()
        (report,) = decision.domains
        fresh = ~(age > STALE_AFTER_S)
        all_fresh_at_floor = (decision.rung[fresh] == c.ladders.top[fresh]).all()
        assert report.braking or report.worst_case_w <= s["budget_w"] + 1e-6 or all_fresh_at_floor
