"""Weights of a pod's soft constraints beside the packing score (`spec.scoring.preferences`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class PreferenceWeights(BaseModel):
    """kube-scheduler's default weights (its NodeResourcesFit weight 1 is the packing
    strategy's here); 0 turns one off."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    packing: float = Field(default=1.0, ge=0, description="the packing strategy's score")
    node_affinity: float = Field(default=2.0, ge=0, description="preferred node affinity")
    taint_toleration: float = Field(default=3.0, ge=0, description="PreferNoSchedule taints")
    pod_topology_spread: float = Field(default=2.0, ge=0, description="ScheduleAnyway spread")
    inter_pod_affinity: float = Field(default=2.0, ge=0, description="preferred pod affinity")
