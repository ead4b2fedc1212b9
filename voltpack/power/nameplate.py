"""GPUs whose model the catalog has no power model for: counted at nameplate, capped anyway.

Fail closed: such a GPU is controlled like the rest, with a two-rung ladder (no action, or a
power cap at a floor). Without a fresh reading it counts at its nameplate: its own catalog TDP
when the catalog knows the model, else the largest TDP of its vendor in the catalog, else the
largest TDP of all. A cap the driver refuses is reported back as not applied, so the GPU keeps
counting at nameplate.
"""

from __future__ import annotations

import math

from voltpack.model.errors import CatalogError
from voltpack.model.gpu_sku import GpuSku, Vendor, default_catalog
from voltpack.perf.gpu_power import power_model_for
from voltpack.policies.power.ladder import ActionLadder, GpuSetting

PEAK_OVER_TDP = 1.05
"""A GPU's transient peaks exceed its TDP by about this factor (as `perf.gpu_power` models)."""
FLOOR_TDP_SHARE = 0.5
"""The floor cap when no catalog SKU of the vendor publishes a minimum power limit."""
VENDOR_WORDS: dict[str, Vendor] = {
    "nvidia": "nvidia", "tesla": "nvidia", "geforce": "nvidia", "quadro": "nvidia",
    "amd": "amd", "instinct": "amd", "radeon": "amd",
}  # fmt: skip


def vendor_of(model: str) -> Vendor:
    """The vendor a reported model name shows ("unknown" when it shows none)."""
    known = default_catalog()
    if model in known:
        return known.get(model).vendor
    words = model.lower().replace("-", " ").replace("_", " ").split()
    for word in words:
        if word in VENDOR_WORDS:
            return VENDOR_WORDS[word]
    if any(word.startswith("mi") and word[2:3].isdigit() for word in words):
        return "amd"
    return "unknown"


def has_power_model(model: str) -> bool:
    """Whether the catalog can model `model`'s power (else it is counted at nameplate)."""
    try:
        power_model_for(model)
    except CatalogError:
        return False
    return True


def _with_tdp(vendor: Vendor) -> list[GpuSku]:
    skus = [s for s in default_catalog().skus if s.tdp_w is not None]
    return [s for s in skus if s.vendor == vendor] or skus


def nameplate_w(model: str) -> float:
    """The TDP `model` is counted at: its own, else its vendor's largest, else the largest."""
    known = default_catalog()
    if model in known and known.get(model).tdp_w is not None:
        return float(known.get(model).tdp_w or 0.0)
    return max(float(s.tdp_w or 0.0) for s in _with_tdp(vendor_of(model)))


def nameplate_floor_w(model: str) -> float:
    """The floor cap: the model's own minimum power limit, else its vendor's largest minimum
    power limit (drivers of its biggest parts accept it), else half its nameplate."""
    known = default_catalog()
    if model in known and known.get(model).min_power_limit_w is not None:
        return float(known.get(model).min_power_limit_w or 0.0)
    limits = [s.min_power_limit_w for s in _with_tdp(vendor_of(model)) if s.min_power_limit_w]
    tdp_w = nameplate_w(model)
    return min(max(limits), tdp_w) if limits else FLOOR_TDP_SHARE * tdp_w


def nameplate_ladder(model: str) -> ActionLadder:
    """No action (counted at nameplate) or a cap at the floor (counted at the floor)."""
    peak_w = nameplate_w(model) * PEAK_OVER_TDP
    floor_w = nameplate_floor_w(model)
    return ActionLadder(
        sku=model,
        settings=(GpuSetting(), GpuSetting(power_limit_w=floor_w)),
        idle_w=(0.0, 0.0),
        full_w=(peak_w, peak_w),
        limit_w=(math.inf, floor_w),
        bound_w=(peak_w, floor_w),
    )
