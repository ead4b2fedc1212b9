"""Which free GPUs of one node a gang's pods take, so tensor-parallel groups stay on NVLink.

Pods of a gang that land on one node take GPUs in units of a tensor-parallel group (or of a pod,
when a pod is a whole group or more). Each unit goes to the NVLink domain with the fewest free
GPUs that still holds it whole (best fit, so big domains stay whole), GPUs in index order; only
when no domain holds a unit whole does it take the lowest free GPUs across domains.
"""

from __future__ import annotations

from collections.abc import Sequence

from voltpack.model.host_layout import HostLayout


def choose_gpus(
    layout: HostLayout, free: Sequence[bool], pods: int, gpus_per_pod: int, unit_pods: int
) -> list[tuple[int, ...]]:
    """GPU indices for each of `pods` pods on a node (in rank order).

    `free[i]` tells whether GPU i is free; `unit_pods` pods form one tensor-parallel group.
    Raises ValueError when the node has fewer free GPUs than the pods need.
    """
    available = [i for i, is_free in enumerate(free) if is_free]
    if len(available) < pods * gpus_per_pod:
        raise ValueError(f"{pods} pods x {gpus_per_pod} GPUs need more than {len(available)} free")
    domain_of = layout.nvlink_domain_of() if layout.gpu_count == len(free) else ()
    taken: set[int] = set()
    chosen: list[int] = []
    unit_gpus = gpus_per_pod * max(1, unit_pods)
    remaining = pods * gpus_per_pod
    while remaining > 0:
        size = min(unit_gpus, remaining)
        chosen.extend(_one_unit(available, taken, domain_of, size))
        remaining -= size
    return [tuple(chosen[p * gpus_per_pod : (p + 1) * gpus_per_pod]) for p in range(pods)]


def _one_unit(
    available: list[int], taken: set[int], domain_of: Sequence[int], size: int
) -> list[int]:
    free_now = [g for g in available if g not in taken]
    by_domain: dict[int, list[int]] = {}
    for gpu in free_now:
        domain = domain_of[gpu] if domain_of else -1
        if domain >= 0:
            by_domain.setdefault(domain, []).append(gpu)
    fitting = [(len(gpus), domain) for domain, gpus in by_domain.items() if len(gpus) >= size]
    if fitting:
        _, best = min(fitting)
        picked = by_domain[best][:size]
    else:
        picked = free_now[:size]
    taken.update(picked)
    return picked
