"""Where a pod may go, as its Kubernetes spec says: the constraints kube-scheduler's filters read
(node name, selector and affinity, tolerations, host ports, pod (anti-)affinity, topology spread,
volume topology) and the preferences its scores read.

A pod without any of these has `Pod.constraints` None; the filters then cost nothing for it
beyond the node-side checks every pod gets (cordons, taints, the pod count).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from voltpack.model.constraints.label_selectors import (
    LabelSelector,
    NodeSelectorTerm,
    selector_matches,
)
from voltpack.model.constraints.taints import Toleration

WILDCARD_IP = "0.0.0.0"


class HostPort(BaseModel):
    """A container port bound on the node (`hostPort`); two conflict when protocol and port are
    equal and either IP is the wildcard or both IPs are the same (kube-scheduler's NodePorts)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    protocol: str = "TCP"
    host_ip: str = WILDCARD_IP
    port: int = Field(ge=1, le=65535)

    def conflicts(self, other: HostPort) -> bool:
        """Whether the two cannot be bound on one node."""
        if self.protocol != other.protocol or self.port != other.port:
            return False
        return WILDCARD_IP in (self.host_ip, other.host_ip) or self.host_ip == other.host_ip


class PodAffinityTerm(BaseModel):
    """Pods selected by `selector` in `namespaces` (or namespaces matching
    `namespace_selector`), counted within the nodes sharing a `topology_key` value.

    The translation fills `namespaces` with the pod's own namespace when the term names neither
    namespaces nor a namespace selector, as kube-scheduler does.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    selector: LabelSelector | None
    namespaces: frozenset[str] = frozenset()
    namespace_selector: LabelSelector | None = None
    topology_key: str = Field(min_length=1)

    def selects(
        self,
        namespace: str,
        labels: Mapping[str, str],
        namespace_labels: Mapping[str, Mapping[str, str]],
    ) -> bool:
        """Whether a pod in `namespace` with `labels` is one this term counts."""
        in_namespace = namespace in self.namespaces or selector_matches(
            self.namespace_selector, namespace_labels.get(namespace, {})
        )
        return in_namespace and selector_matches(self.selector, labels)


class WeightedPodAffinityTerm(BaseModel):
    """A preferred (anti-)affinity term and its weight (1..100)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    weight: int = Field(ge=1, le=100)
    term: PodAffinityTerm


class WeightedNodeSelectorTerm(BaseModel):
    """A preferred node affinity term and its weight (1..100)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    weight: int = Field(ge=1, le=100)
    term: NodeSelectorTerm


InclusionPolicy = Literal["Honor", "Ignore"]


class TopologySpreadConstraint(BaseModel):
    """One `topologySpreadConstraints` entry, its selector already merged with the values of
    its `matchLabelKeys`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_skew: int = Field(ge=1)
    topology_key: str = Field(min_length=1)
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"]
    selector: LabelSelector | None = None
    min_domains: int = Field(default=1, ge=1)
    node_affinity_policy: InclusionPolicy = "Honor"
    node_taints_policy: InclusionPolicy = "Ignore"


class PodConstraints(BaseModel):
    """What of a pod's spec decides which nodes it may use and which it prefers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    namespace: str = "default"
    labels: tuple[tuple[str, str], ...] = ()
    node_name: str | None = None
    """`spec.nodeName` asked for by the pod's creator (NodeName filter)."""
    node_selector: tuple[tuple[str, str], ...] = ()
    required_node_terms: tuple[NodeSelectorTerm, ...] | None = None
    """Required node affinity: terms ORed (None: no requirement; empty: matches nothing)."""
    preferred_node_terms: tuple[WeightedNodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    required_affinity: tuple[PodAffinityTerm, ...] = ()
    required_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    spread: tuple[TopologySpreadConstraint, ...] = ()
    volume_node_terms: tuple[tuple[NodeSelectorTerm, ...], ...] = ()
    """Per bound PersistentVolume of the pod, its required node affinity (terms ORed); every
    one must match (VolumeBinding)."""
    terminating: bool = False
    """A bound pod being deleted: topology spread no longer counts it."""
    nominated_node: str | None = None
    """`status.nominatedNodeName`: the node preemption freed for the pod, tried first."""
    never_preempts: bool = False
    """`spec.preemptionPolicy: Never`: the pod waits for room and never preempts others."""

    @cached_property
    def label_map(self) -> dict[str, str]:
        """The pod's labels as a mapping (computed once; do not change it)."""
        return dict(self.labels)

    @property
    def has_node_affinity(self) -> bool:
        """Whether a node selector or required node affinity narrows the nodes."""
        return bool(self.node_selector) or self.required_node_terms is not None
