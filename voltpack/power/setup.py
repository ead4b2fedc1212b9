"""Build a power controller from the policy file's `spec.power` and the cluster's GPUs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from voltpack.model.errors import CatalogError
from voltpack.model.gpu_sku import default_catalog
from voltpack.perf.gpu_power import GpuPowerModel, power_model_for
from voltpack.policies.power.ladder import ActionLadder
from voltpack.policies.power.registry import make_power_policy
from voltpack.policies.schema import GpuPowerActions, PowerSpec
from voltpack.power.controller import ControllerSettings, GpuSlot, PowerController
from voltpack.power.domains import PowerDomainTree
from voltpack.power.nameplate import nameplate_ladder

DEFAULT_LOCK_SHARES = (0.9, 0.8, 0.7)
"""Clock locks of a SKU the policy file does not list: these shares of its max SM clock."""
CLOCK_STEP_MHZ = 15
"""NVIDIA data-center GPUs expose supported SM clocks in steps of about 15 MHz."""
DEFAULT_FLOOR_TDP_SHARE = 0.5
"""Floor cap when the catalog has no minimum power limit: half the TDP."""


@dataclass(frozen=True)
class GpuLocation:
    """A GPU the controller will manage."""

    node: str
    index: int
    model: str


def default_actions(sku: str, model: GpuPowerModel) -> GpuPowerActions:
    """Clock locks at 90/80/70% of the max clock and the catalog's minimum power limit."""
    clocks = []
    for share in DEFAULT_LOCK_SHARES:
        clock = int(model.max_clock_mhz * share) // CLOCK_STEP_MHZ * CLOCK_STEP_MHZ
        clocks.append(max(clock, int(model.min_clock_mhz)))
    catalog_floor = default_catalog().get(sku).min_power_limit_w
    floor = catalog_floor or model.tdp_w * DEFAULT_FLOOR_TDP_SHARE
    return GpuPowerActions(lock_clocks_mhz=tuple(sorted(set(clocks), reverse=True)),
                           floor_power_w=floor)  # fmt: skip


def ladder_for(sku: str, spec: PowerSpec) -> ActionLadder:
    """The action ladder of `sku`: the policy file's entry, or the derived default; for a
    model without a power model (not in the catalog, or without published figures) the
    nameplate ladder (`nameplate.nameplate_ladder`): counted at nameplate, capped anyway."""
    try:
        model = power_model_for(sku)
    except CatalogError:
        return nameplate_ladder(sku)
    actions = spec.gpus.get(sku) or default_actions(sku, model)
    return ActionLadder.build(sku, model, actions.lock_clocks_mhz, actions.floor_power_w)


def settings_from_spec(spec: PowerSpec) -> ControllerSettings:
    """The controller's timing and fail-safe constants from the policy file."""
    return ControllerSettings(
        interval_s=spec.interval_s,
        actuation_latency_s=spec.actuation_latency_s,
        late_after_s=spec.late_after_s,
        stale_after_s=spec.stale_after_s,
        brake_release_fraction=spec.brake_release_fraction,
        brake_hold_s=spec.brake_hold_s,
    )


def build_controller(
    spec: PowerSpec,
    tree: PowerDomainTree,
    gpus: Sequence[GpuLocation],
    node_overhead_w: Mapping[str, float] | None = None,
) -> PowerController:
    """A controller for `gpus` under `tree`, with the policy and ladders `spec` names."""
    ladders: dict[str, ActionLadder] = {}
    slots = []
    for gpu in gpus:
        if gpu.model not in ladders:
            ladders[gpu.model] = ladder_for(gpu.model, spec)
        slots.append(GpuSlot(gpu.node, gpu.index, ladders[gpu.model]))
    policy = make_power_policy(spec.policy, spec.params)
    return PowerController(
        tree, slots, policy, settings_from_spec(spec), dict(node_overhead_w or {})
    )
