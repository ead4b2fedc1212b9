"""A serving plan: how many replicas of which GPU type and role serve which request buckets."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from voltpack.perf.inference_profile import ServingProfile
from voltpack.perf.serving_capacity import MAX_BATCH, Role, ServingSlo
from voltpack.policies.inference.buckets import RequestMix
from voltpack.policies.inference.context_classes import ContextClass


@dataclass(frozen=True)
class ReplicaGroup:
    """`replicas` replicas of one profile in one role.

    `bucket_rates_per_s` maps a bucket's position in the plan's mix to the request rate this
    group is planned to serve of it; `capacity_per_s` holds one replica's capacity for every
    bucket it can serve within the SLO (planned or not: a router may send those there).
    """

    profile: ServingProfile
    role: Role
    replicas: int
    price_per_gpu_hour: float
    bucket_rates_per_s: dict[int, float] = field(default_factory=dict)
    capacity_per_s: dict[int, float] = field(default_factory=dict)
    max_batch: int = MAX_BATCH
    """Most sequences a replica decodes at once (the engine's `max_num_seqs`)."""
    prefill_chunk_tokens: int | None = None
    """Unified replicas: prompt tokens added to each decode iteration (chunked prefill, the
    engine's `max_num_batched_tokens` less the batch); None = whole prompts first (prefill
    priority, stalling the batch)."""
    context: ContextClass | None = None
    """The longest context (prompt + output tokens) the replicas are sized for: the router
    sends them no longer request (unless the class is open-ended). None: any request
    (prefill replicas, and groups made without classes)."""

    def covers(self, context_tokens: ArrayLike) -> NDArray[np.bool_]:
        """Per context (prompt + output tokens), whether this group's class takes it."""
        if self.context is None:
            return np.ones(np.shape(context_tokens), dtype=np.bool_)
        return self.context.covers(context_tokens)

    @property
    def gpus(self) -> int:
        """GPUs of the whole group."""
        return self.replicas * self.profile.gpus

    @property
    def cost_per_hour(self) -> float:
        """Price of the group's GPUs per hour."""
        return self.gpus * self.price_per_gpu_hour

    @property
    def load(self) -> float:
        """Planned load in replicas (sum of rate / capacity); at most `replicas`."""
        return sum(
            rate / self.capacity_per_s[bucket]
            for bucket, rate in self.bucket_rates_per_s.items()
            if rate > 0
        )

    @property
    def label(self) -> str:
        """Text such as `3 x llama2-70b/H100-SXM/TP4 (unified, chunk 256, batch <= 40,
        ctx <= 2,048)`."""
        settings: list[str] = [self.role]
        if self.role == "unified" and self.prefill_chunk_tokens is not None:
            settings.append(f"chunk {self.prefill_chunk_tokens}")
        if self.role != "prefill":
            settings.append(f"batch <= {self.max_batch}")
        if self.context is not None:
            settings.append(self.context.label)
        return f"{self.replicas} x {self.profile.label} ({', '.join(settings)})"


@dataclass(frozen=True)
class ServingPlan:
    """The planned fleet of one service, its cost and why it looks the way it does."""

    model: str
    slo: ServingSlo
    rate_per_s: float
    mix: RequestMix
    groups: tuple[ReplicaGroup, ...]
    formulation: str
    """Which planner produced it (e.g. `voltpack`, `melange`, `single:H100-SXM`)."""
    solve_s: float = 0.0
    notes: tuple[str, ...] = ()
    optimality_gap: float = 0.0
    """How far above the best possible cost the plan may be (0 when proven optimal)."""
    kv_link_bytes_per_s_per_gpu: float = 50e9
    """The KV-cache link per prefill GPU the plan's split pools were sized with."""

    @property
    def cost_per_hour(self) -> float:
        """Price of all GPUs of the plan per hour."""
        return sum(group.cost_per_hour for group in self.groups)

    @property
    def split(self) -> bool:
        """Whether any requests are served by separate prefill and decode pools."""
        return any(group.role != "unified" for group in self.groups)

    @property
    def extrapolated(self) -> bool:
        """Whether any group rests on an extrapolated profile."""
        return any(group.profile.extrapolated for group in self.groups)

    def gpus_by_type(self) -> dict[str, int]:
        """GPUs per GPU type."""
        counts: dict[str, int] = {}
        for group in self.groups:
            counts[group.profile.gpu_type] = counts.get(group.profile.gpu_type, 0) + group.gpus
        return counts

    def summary(self) -> str:
        """One line: groups, cost, and a flag for extrapolated profiles."""
        groups = ", ".join(group.label for group in self.groups) or "no replicas"
        flag = " [uses extrapolated profiles]" if self.extrapolated else ""
        return f"{groups}: ${self.cost_per_hour:.2f}/h{flag}"
