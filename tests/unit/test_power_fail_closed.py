"""Fail closed in the power core: unknown GPU models, persisted brakes, arrival freshness, and
invalid PowerBudgets controlled by their last valid spec."""

from __future__ import annotations

import math

import numpy as np

from voltpack.model.resources import PowerBudgetSpec
from voltpack.operator.power.objects import (
    longer_brake,
    persisted_brake,
    resolve_domains,
    status_of,
)
from voltpack.policies.schema import PowerSpec
from voltpack.power.controller import Telemetry
from voltpack.power.domains import PowerDomain, PowerDomainTree
from voltpack.power.freshness import ArrivalClock
from voltpack.power.nameplate import nameplate_ladder, nameplate_w, vendor_of
from voltpack.power.setup import GpuLocation, build_controller

UNKNOWN = "NVIDIA GB300"


def telemetry(power_w: list[float], read_at_s: float) -> Telemetry:
    n = len(power_w)
    return Telemetry(
        np.array(power_w), np.full(n, read_at_s), np.zeros(n, dtype=np.bool_),
        np.zeros(n, dtype=np.int64),
    )  # fmt: skip


def test_an_unknown_model_counts_at_its_vendors_largest_tdp() -> None:
    assert vendor_of(UNKNOWN) == "nvidia" and vendor_of("AMD Instinct MI355X") == "amd"
    assert nameplate_w(UNKNOWN) == 1000  # B200, the largest NVIDIA TDP in the catalog
    assert nameplate_w("AMD Instinct MI355X") == 750
    assert nameplate_w("Mystery 9") == 1000  # no vendor: the largest of all
    ladder = nameplate_ladder(UNKNOWN)
    assert ladder.bound_w[0] >= 1000 and ladder.settings[ladder.top].power_limit_w == 200


def test_unknown_gpus_are_counted_and_capped_5800_w_is_not_read_as_2800_w() -> None:
    nodes = ["known", "new"]
    tree = PowerDomainTree([PowerDomain("rack", 4000.0, frozenset(nodes))])
    gpus = [GpuLocation("known", i, "H100-SXM") for i in range(4)]
    gpus += [GpuLocation("new", i, UNKNOWN) for i in range(3)]
    controller = build_controller(PowerSpec(), tree, gpus)
    decision = controller.step(10.0, telemetry([700.0] * 4 + [1000.0] * 3, 10.0))
    (report,) = decision.domains
    assert report.power_w == 5800
    assert report.braking
    assert (decision.rung[4:] == 1).all()  # the unknown GPUs are capped too
    # silent: counted at nameplate, not at nothing
    silent = Telemetry(
        np.array([100.0] * 4 + [np.nan] * 3), np.array([10.0] * 4 + [np.nan] * 3),
        np.zeros(7, dtype=np.bool_),
    )  # fmt: skip
    fresh = build_controller(PowerSpec(), tree, gpus)
    (report,) = fresh.step(10.0, silent).domains
    assert report.worst_case_w >= 400 + 3 * 1000


def test_a_new_leader_honours_a_persisted_brake() -> None:
    tree = PowerDomainTree([PowerDomain("rack", 1000.0, frozenset({"n"}))])
    gpus = [GpuLocation("n", i, "H100-SXM") for i in range(2)]
    spec = PowerSpec(brake_hold_s=30.0)
    old = build_controller(spec, tree, gpus)
    (report,) = old.step(0.0, telemetry([600.0, 600.0], 0.0)).domains
    assert report.braking and report.brake_hold_until_s == 30.0
    status = status_of(report)
    assert status["brake"] == {"since": "1970-01-01T00:00:00Z", "holdUntil": "1970-01-01T00:00:30Z"}
    brake = persisted_brake({"status": status})
    assert brake == (0.0, 30.0)
    new = build_controller(spec, tree, gpus)  # the new leader, one second later, power low
    new.restore_brake("rack", *brake)
    decision = new.step(1.0, telemetry([100.0, 100.0], 1.0))
    assert decision.domains[0].braking and (decision.rung == new.ladders.top).all()
    assert not new.step(31.0, telemetry([100.0, 100.0], 31.0)).domains[0].braking


def test_freshness_counts_from_arrival_not_from_the_agents_clock() -> None:
    clock = ArrivalClock()
    ahead_s = 3600.0
    assert clock.observe("n", "hb-1", 1000.0 + ahead_s, 1000.0) == 1000.0
    assert clock.observe("n", "hb-1", 1000.0 + ahead_s, 2800.0) == 1000.0  # silent 30 min
    assert clock.observe("n", "hb-2", 2801.0 + ahead_s, 2801.0) == 2801.0
    behind = ArrivalClock()  # a clock behind only makes a first report look older
    assert behind.observe("n", "hb", 900.0, 1000.0) == 900.0
    assert math.isnan(behind.observe("m", None, math.nan, 1000.0))
    assert math.isnan(behind.observe("k", "garbled", math.nan, 1000.0))


def budget(name: str, spec: dict, status: dict | None = None) -> dict:
    return {"metadata": {"name": name}, "spec": spec, "status": status or {}}


def test_an_invalid_budget_is_controlled_by_its_last_valid_spec() -> None:
    labels = {"n1": {"rack": "a", "row": "1"}}
    row = budget("row", {"nodeSelector": {"matchLabels": {"row": "1"}}, "budgetW": 9000})
    good = {"nodeSelector": {"matchLabels": {"rack": "a"}}, "budgetW": 3000, "parent": "row"}
    broken = {**good, "parent": "typo-row"}
    last = {"rack": PowerBudgetSpec.model_validate(good)}
    domains = resolve_domains(PowerSpec(), [row, budget("rack", broken)], labels, last)
    assert "typo-row" in domains.invalid["rack"] and "rack" in domains.kept
    assert domains.tree.get("rack").budget_w == 3000 and "rack" in domains.budgets
    # a new leader: nothing in memory, the status's acceptedSpec
    stored = budget("rack", broken, {"acceptedSpec": good})
    domains = resolve_domains(PowerSpec(), [row, stored], labels)
    assert domains.tree.get("rack").nodes == frozenset({"n1"}) and "rack" in domains.kept
    # unreadable spec, same
    unreadable = budget("rack", {**good, "budgetW": "lots"}, {"acceptedSpec": good})
    domains = resolve_domains(PowerSpec(), [row, unreadable], labels)
    assert "spec.budgetW" in domains.invalid["rack"] and "rack" in domains.kept
    # never valid: left out, and reported
    domains = resolve_domains(PowerSpec(), [row, budget("rack", broken)], labels)
    assert "rack" not in domains.budgets and "rack" in domains.invalid


def test_a_status_write_never_drops_a_brake_still_holding() -> None:
    """Two leaders writing one PowerBudget's status (guarded by resourceVersion, merged on a
    409): the brake that holds longer is kept while it holds, and dropped once it has ended."""
    theirs = {"since": "2026-01-01T00:00:00Z", "holdUntil": "2026-01-01T00:01:00Z"}
    ours = {"since": "2026-01-01T00:00:10Z", "holdUntil": "2026-01-01T00:00:30Z"}
    start_s = 1767225600.0  # 2026-01-01T00:00:00Z
    assert longer_brake(None, theirs, start_s + 20) == theirs  # ours off, theirs holds
    assert longer_brake(ours, theirs, start_s + 20) == theirs  # theirs holds longer
    assert longer_brake(theirs, ours, start_s + 20) == theirs  # ours holds longer
    assert longer_brake(None, theirs, start_s + 61) is None  # theirs has ended
    assert longer_brake(ours, None, start_s + 20) == ours
    assert longer_brake(None, {"since": "garbled"}, start_s) is None
