"""Property: whatever goes wrong around it, a domain's power stays under its budget but for the
documented control latency.

For any sequence of PowerBudget edits (valid or not: an invalid edit keeps the last valid
spec), telemetry gaps, agent clocks ahead or behind (freshness by arrival), leader changes (a
new controller rebuilt only from what is persisted: the GPUNode specs' rungs and the
PowerBudget status's brake) and actuations that fail (a GPU that keeps its old setting and
says so), the domain's real power is above its effective budget for at most `latency + 1`
ticks in a row, plus `stale_after_s + 1` when the excursion began near a telemetry gap (the
bound `test_power_properties` documents). The budget always leaves room for the GPUs whose
actuation fails to run flat out while the others sit at their floor (otherwise no controller
could keep it).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from voltpack.model.resources import PowerBudgetSpec
from voltpack.operator.power.objects import persisted_brake, resolve_domains, status_of
from voltpack.policies.schema import PowerSpec
from voltpack.power.controller import PowerController, Telemetry
from voltpack.power.freshness import ArrivalClock
from voltpack.power.setup import GpuLocation, build_controller

TICKS = 120
STALE_AFTER_S = 6.0
LABELS = {"rack": "a"}


@st.composite
def scenarios(draw: st.DrawFn) -> dict:
    gpus = draw(st.integers(3, 8))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    models = ["A100-80GB"] * gpus
    if draw(st.booleans()):
        models[-1] = "NVIDIA GB300"  # not in the catalog: nameplate ladder
    base = rng.uniform(0.1, 1.0, gpus)
    jumps = (rng.random((TICKS, gpus)) < 0.05) * rng.uniform(-0.6, 0.6, (TICKS, gpus))
    activity = np.clip(base + np.cumsum(jumps, axis=0) * 0.4, 0.0, 1.0)
    reporting = np.ones((TICKS, gpus), dtype=bool)
    for gpu in range(gpus):
        if rng.random() < 0.3:
            start = int(rng.integers(5, TICKS - 20))
            reporting[start : start + int(rng.integers(3, 30)), gpu] = False
    failing = np.zeros((TICKS, gpus), dtype=bool)  # actuations that do not take
    for gpu in rng.choice(gpus, size=int(rng.integers(0, 3)), replace=False):
        start = int(rng.integers(0, TICKS - 10))
        failing[start : start + int(rng.integers(5, 60)), gpu] = True
    return {
        "models": models,
        "activity": activity,
        "reporting": reporting,
        "failing": failing,
        "skew_s": rng.choice([-3600.0, -5.0, 0.0, 5.0, 3600.0], gpus),
        "budget_share": draw(st.lists(st.floats(0.3, 1.0), min_size=1, max_size=4)),
        "edits": sorted(draw(st.lists(st.integers(1, TICKS - 1), max_size=4))),
        "invalid_edit": draw(st.lists(st.booleans(), min_size=4, max_size=4)),
        "leader_changes": set(draw(st.lists(st.integers(1, TICKS - 1), max_size=3))),
        "latency": draw(st.integers(0, 3)),
        "policy": draw(st.sampled_from(["headroom", "thresholds"])),
    }


def budget_w(s: dict, share: float, controller: PowerController) -> float:
    """`share` of the domain's peak, never below what failing GPUs at full plus the rest at
    their floor draw."""
    ladders = controller.ladders
    could_fail = s["failing"].any(axis=0)
    needed = np.where(could_fail, ladders.full_w[:, 0], ladders.at(ladders.bound_w, ladders.top))
    return max(share * float(ladders.full_w[:, 0].sum()), float(needed.sum()) * 1.05 + 1.0)


def budget_object(spec: dict, status: dict) -> dict:
    return {"metadata": {"name": "rack"}, "spec": spec, "status": status}


@settings(max_examples=40, deadline=None, derandomize=True)
@given(scenarios())
def test_no_sequence_of_faults_keeps_a_domain_over_budget(s: dict) -> None:
    n = len(s["models"])
    spec = PowerSpec(
        policy=s["policy"], stale_after_s=STALE_AFTER_S, late_after_s=STALE_AFTER_S / 2,
        actuation_latency_s=float(s["latency"]), params={"hold_s": 3.0}, brake_hold_s=5.0,
    )  # fmt: skip
    nodes = [f"n{i}" for i in range(n)]
    labels = {node: LABELS for node in nodes}
    gpus = [GpuLocation(node, 0, model) for node, model in zip(nodes, s["models"], strict=True)]

    def controller_for(budget: dict, last: dict[str, PowerBudgetSpec]) -> PowerController:
        domains = resolve_domains(spec, [budget], labels, last)
        last.update({k: v for k, v in domains.specs.items() if k not in domains.invalid})
        return build_controller(spec, domains.tree, gpus)

    probe = build_controller(spec, resolve_domains(spec, [], labels).tree, gpus)
    shares = iter(s["budget_share"][1:])
    valid = {"nodeSelector": {"matchLabels": LABELS}}
    valid["budgetW"] = budget_w(s, s["budget_share"][0], probe)
    last: dict[str, PowerBudgetSpec] = {}
    status: dict = {}
    c = controller_for(budget_object(valid, status), last)
    arrivals = ArrivalClock()
    applied = np.zeros(n, dtype=np.int64)
    pending = [np.zeros(n, dtype=np.int64) for _ in range(s["latency"])]
    reading_w = np.full(n, np.nan)
    report_seq = np.zeros(n, dtype=np.int64)
    reported_at_s = np.full(n, np.nan)
    effective_w = valid["budgetW"]
    run = 0
    edits = iter(zip(s["edits"], s["invalid_edit"], strict=False))
    next_edit = next(edits, None)
    for t in range(TICKS):
        now_s = float(t)
        ladders = c.ladders
        idle = ladders.at(ladders.idle_w, applied)
        full = ladders.at(ladders.full_w, applied)
        power = np.minimum(
            idle + s["activity"][t] * (full - idle), ladders.at(ladders.limit_w, applied)
        )
        run = run + 1 if power.sum() > effective_w + 1e-6 else 0
        began = t - run + 1
        near_gap = run and not s["reporting"][max(0, began - int(STALE_AFTER_S) - 5) : t + 1].all()
        allowed = s["latency"] + 1 + (STALE_AFTER_S + 1 if near_gap else 0)
        assert run <= allowed, f"tick {t}: {run} ticks over {effective_w:.0f} W"
        # budget edits: a valid one changes the budget, an invalid one keeps the last valid
        while next_edit is not None and next_edit[0] == t:
            if next_edit[1]:
                broken = {**valid, "parent": "typo-row"}
                c2 = controller_for(budget_object(broken, status), last)
            else:
                valid = {**valid, "budgetW": budget_w(s, next(shares, 0.5), probe)}
                c2 = controller_for(budget_object(valid, status), last)
                effective_w = valid["budgetW"]
                run = 0  # a lower budget starts a new excursion now
            c2.rung = c.rung.copy()
            c2.adopt(c)
            c = c2
            next_edit = next(edits, None)
        assert c.tree.domains and c.tree.domains[0].budget_w == effective_w
        if t in s["leader_changes"]:  # a new leader: only the specs and the status survive
            rungs = c.rung.copy()
            c = controller_for(budget_object(valid, status), {})
            c.rung = rungs
            brake = persisted_brake({"status": status})
            if brake is not None:
                c.restore_brake("rack", *brake)
            arrivals = ArrivalClock()
        reporting = s["reporting"][t]
        reading_w = np.where(reporting, power, reading_w)
        report_seq = report_seq + reporting
        reported_at_s = np.where(reporting, now_s + s["skew_s"], reported_at_s)
        read_at_s = np.array(
            [
                arrivals.observe(i, int(report_seq[i]) or None, reported_at_s[i], now_s)
                for i in range(n)
            ]
        )
        telemetry = Telemetry(
            reading_w.copy(), read_at_s, np.zeros(n, dtype=np.bool_),
            np.where(reporting, applied, -1),
        )  # fmt: skip
        decision = c.step(now_s, telemetry)
        status = status_of(decision.domains[0])
        pending.append(decision.rung.copy())
        arriving = pending.pop(0)
        applied = np.where(s["failing"][t], applied, arriving)
