"""What the scheduler needs of the power state: each domain's headroom, per node."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from voltpack.model.errors import CatalogError
from voltpack.model.power_headroom import PowerHeadroom
from voltpack.perf.gpu_power import power_model_for
from voltpack.power.domains import PowerDomainTree
from voltpack.power.nameplate import PEAK_OVER_TDP, nameplate_w


def gpu_added_w(model: str | None) -> float:
    """Peak power a GPU of `model` adds above idle when it gets work (0 for no GPU; a model
    without a power model adds its nameplate peak, fail closed)."""
    if not model:
        return 0.0
    try:
        curve = power_model_for(model)
    except CatalogError:
        return nameplate_w(model) * PEAK_OVER_TDP
    return curve.peak_w - curve.idle_w


def power_headroom(
    tree: PowerDomainTree,
    predicted_peak_w: Mapping[str, float],
    node_names: Sequence[str],
    node_gpu_models: Sequence[str | None],
    high_priority_min: int = 1000,
) -> PowerHeadroom:
    """Headroom arrays for a snapshot's nodes; a domain without a prediction has its budget."""
    domains = tree.domains
    budget = np.array([d.budget_w for d in domains], dtype=np.float64)
    peak = np.array([predicted_peak_w.get(d.name, 0.0) for d in domains], dtype=np.float64)
    members = np.array(
        [[name in d.nodes for d in domains] for name in node_names], dtype=np.bool_
    ).reshape(len(node_names), len(domains))
    added = {model: gpu_added_w(model) for model in set(node_gpu_models)}
    return PowerHeadroom(
        domain_names=tuple(d.name for d in domains),
        budget_w=budget,
        headroom_w=budget - peak,
        node_domains=members,
        gpu_added_w=np.array([added[m] for m in node_gpu_models], dtype=np.float64),
        high_priority_min=high_priority_min,
    )
