"""Scheduling decisions: where each pod goes, or why it could not go anywhere."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Placement(BaseModel):
    """A pod bound to a node, to specific GPUs on it (each giving `gpu_milli`) and to the NICs
    that carry its RDMA traffic (each giving `rdma_percent` of its bandwidth)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pod: str
    node: str
    gpu_indices: tuple[int, ...] = ()
    gpu_milli: int = 0
    nics: tuple[str, ...] = ()
    """Names of the NICs (as in the node's `HostLayout`), e.g. for `NCCL_IB_HCA`."""
    rdma_percent: int = 0


class Decision(BaseModel):
    """The outcome for one pod or pod group, with a reason a person can read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    subject: str
    placed: bool
    placements: tuple[Placement, ...] = ()
    reason: str
    predicted_step_s: float | None = None
    """A training gang placed by topology: the predicted seconds per step of its placement."""
    ideal_step_s: float | None = None
    """... and of the best placement the topology could give (their ratio is the slowdown)."""
