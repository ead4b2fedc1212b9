"""Power headroom as the scheduler sees it: each domain's watts to spare, per node.

A placement adds the dynamic power of the GPUs it occupies (a GPU share adds its share) to
every domain of the node; the filter refuses a placement that would push any domain's
predicted peak over its budget. High-priority pods prefer nodes whose tightest domain keeps a
`preferred_headroom_fraction` of its budget free.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.workload import Pod

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]


@dataclass
class PowerHeadroom:
    """Domains' spare watts and the power a GPU adds on each node (arrays)."""

    domain_names: tuple[str, ...]
    budget_w: FloatArray
    headroom_w: FloatArray
    """Budget minus the domain's predicted peak, per domain (may be negative)."""
    node_domains: BoolArray
    """[node, domain]: the node is in the domain."""
    gpu_added_w: FloatArray
    """Per node: the peak power one of its GPUs adds above idle when it gets work."""
    high_priority_min: int = 1000
    preferred_headroom_fraction: float = 0.1

    def added_w(self, pod: Pod) -> FloatArray:
        """Per node: the peak power `pod` would add there."""
        gpus = pod.num_gpu * pod.gpu_milli / MILLI_PER_GPU
        return np.asarray(gpus * self.gpu_added_w, dtype=np.float64)

    def _tightest_w(self) -> FloatArray:
        masked = np.where(self.node_domains, self.headroom_w[None, :], np.inf)
        return np.asarray(masked.min(axis=1, initial=np.inf), dtype=np.float64)

    def fits(self, pod: Pod) -> BoolArray:
        """Per node: every domain of the node keeps its predicted peak within budget."""
        return np.asarray(self.added_w(pod) <= self._tightest_w(), dtype=np.bool_)

    def preferred(self, pod: Pod) -> BoolArray:
        """Per node: after placing `pod`, its tightest domain keeps the preferred headroom."""
        share = np.where(self.node_domains, (self.headroom_w / self.budget_w)[None, :], np.inf)
        tight_share = share.min(axis=1, initial=np.inf)
        needed = self.preferred_headroom_fraction + self.added_w(pod) / self.budget_w.max(
            initial=1.0
        )
        return np.asarray(tight_share >= needed, dtype=np.bool_)

    def is_high_priority(self, pod: Pod) -> bool:
        """Whether the pod counts as high priority for power."""
        return pod.priority >= self.high_priority_min

    def take(self, node: int, pod: Pod, sign: float = 1.0) -> None:
        """Spend (or with sign -1 give back) the pod's power in every domain of `node`."""
        self.headroom_w[self.node_domains[node]] -= sign * self.added_w(pod)[node]

    def copy(self) -> PowerHeadroom:
        """An independent copy (headroom copied)."""
        return PowerHeadroom(
            self.domain_names, self.budget_w, self.headroom_w.copy(), self.node_domains,
            self.gpu_added_w, self.high_priority_min, self.preferred_headroom_fraction,
        )  # fmt: skip
