"""What kube-scheduler's filters read of the nodes, as arrays over the snapshot's nodes: labels,
taints, cordons, every resource a node advertises, the pod count, host ports in use, and the
pods whose labels pod (anti-)affinity and topology spread count.

A `ClusterSnapshot` carries one (`snapshot.rules`) when it comes from a Kubernetes cluster; the
simulators' snapshots carry none and their pods meet no such rule. `ClusterSnapshot.allocate`
and `release` keep the changing parts (pod count, resources, ports, placed pods) current, so a
gang placed pod by pod sees its own members, as kube-scheduler's assumed pods are seen.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from voltpack.model.constraints.label_selectors import (
    LabelSelector,
    integer_label,
    selector_matches,
)
from voltpack.model.constraints.pod_constraints import HostPort, PodAffinityTerm, PodConstraints
from voltpack.model.constraints.taints import Taint

_Key = TypeVar("_Key")
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
ABSENT = -1
"""A node's value id for a label it does not have."""
MATCHER_CACHE_SIZE = 64
"""Pod-count arrays kept per distinct selector; older ones are recounted when asked again."""
HARD_POD_AFFINITY_WEIGHT = 1
"""The score weight of a placed pod's required affinity term toward a pod it selects
(kube-scheduler's InterPodAffinityArgs.hardPodAffinityWeight default)."""


def scored_terms(constraints: PodConstraints) -> Iterable[tuple[PodAffinityTerm, int]]:
    """A placed pod's terms that score the nodes for an incoming pod they select, with their
    signed weights: required affinity (`HARD_POD_AFFINITY_WEIGHT`), preferred affinity (+w)
    and preferred anti-affinity (-w), as kube-scheduler's InterPodAffinity scores them."""
    for term in constraints.required_affinity:
        yield term, HARD_POD_AFFINITY_WEIGHT
    for weighted in constraints.preferred_affinity:
        yield weighted.term, weighted.weight
    for weighted in constraints.preferred_anti_affinity:
        yield weighted.term, -weighted.weight


@dataclass(frozen=True)
class PodsSelected:
    """Which placed pods a selector counts: namespace in `namespaces` (or any when
    `any_namespace`), labels matched by `selector` (None: no pod), and terminating pods
    skipped when `skip_terminating` (topology spread does, pod affinity does not)."""

    selector: LabelSelector | None
    namespaces: frozenset[str]
    any_namespace: bool = False
    skip_terminating: bool = False

    def selects(self, constraints: PodConstraints | None) -> bool:
        """Whether a placed pod with these constraints is counted."""
        if constraints is None:
            return False  # a pod of no namespace and no labels (simulated work)
        if self.skip_terminating and constraints.terminating:
            return False
        if not self.any_namespace and constraints.namespace not in self.namespaces:
            return False
        return selector_matches(self.selector, constraints.label_map)


@dataclass(frozen=True)
class AllSelected:
    """Pods that every one of `parts` counts (an incoming pod's affinity terms together)."""

    parts: tuple[PodsSelected, ...]

    def selects(self, constraints: PodConstraints | None) -> bool:
        return bool(self.parts) and all(part.selects(constraints) for part in self.parts)


Matcher = PodsSelected | AllSelected


def _count(
    carriers_by: dict[_Key, IntArray], key: _Key, row: int, sign: int, node_count: int
) -> None:
    """Add `sign` to `key`'s carriers on `row`; a key no pod carries any more is dropped."""
    carriers = carriers_by.get(key)
    if carriers is None:
        carriers = carriers_by[key] = np.zeros(node_count, dtype=np.int64)
    carriers[row] += sign
    if sign < 0 and not carriers.any():
        del carriers_by[key]


@dataclass
class PlacedPods:
    """The pods on the nodes (those with constraints), and per-node counts kept current for the
    selectors asked about and for the required anti-affinity terms of the placed pods."""

    node_count: int
    on_node: dict[str, tuple[int, PodConstraints]] = field(default_factory=dict)
    counts: OrderedDict[Matcher, IntArray] = field(default_factory=OrderedDict)
    anti_terms: dict[PodAffinityTerm, IntArray] = field(default_factory=dict)
    """Per required anti-affinity term of a placed pod, how many pods carry it on each node."""
    scored: dict[tuple[PodAffinityTerm, int], IntArray] = field(default_factory=dict)
    """Per (term, signed weight) of `scored_terms`, how many placed pods carry it per node."""

    def copy(self) -> PlacedPods:
        return PlacedPods(
            node_count=self.node_count,
            on_node=dict(self.on_node),
            counts=OrderedDict((key, value.copy()) for key, value in self.counts.items()),
            anti_terms={key: value.copy() for key, value in self.anti_terms.items()},
            scored={key: value.copy() for key, value in self.scored.items()},
        )

    def add(self, name: str, row: int, constraints: PodConstraints, sign: int) -> None:
        """Count a pod placed on `row` (sign +1) or taken off it (-1)."""
        if sign > 0:
            self.on_node[name] = (row, constraints)
        else:
            self.on_node.pop(name, None)
        for matcher, counts in self.counts.items():
            if matcher.selects(constraints):
                counts[row] += sign
        for term in constraints.required_anti_affinity:
            _count(self.anti_terms, term, row, sign, self.node_count)
        for key in scored_terms(constraints):
            _count(self.scored, key, row, sign, self.node_count)

    def per_node(self, matcher: Matcher) -> IntArray:
        """How many placed pods `matcher` selects on each node (read only)."""
        counts = self.counts.get(matcher)
        if counts is not None:
            self.counts.move_to_end(matcher)
            return counts
        counts = np.zeros(self.node_count, dtype=np.int64)
        for row, constraints in self.on_node.values():
            if matcher.selects(constraints):
                counts[row] += 1
        self.counts[matcher] = counts
        while len(self.counts) > MATCHER_CACHE_SIZE:
            self.counts.popitem(last=False)
        return counts


@dataclass
class LabelColumn:
    """One label key over the nodes: each node's value id (`ABSENT` without the label)."""

    ids: IntArray
    values: tuple[str, ...]

    def ids_of(self, wanted: Iterable[str]) -> IntArray:
        """Ids of the values in `wanted` that some node has."""
        index = {value: i for i, value in enumerate(self.values)}
        return np.array([index[v] for v in wanted if v in index], dtype=np.int64)

    @property
    def present(self) -> BoolArray:
        present: BoolArray = self.ids != ABSENT
        return present


@dataclass(frozen=True)
class NodeFacts:
    """One node as kube-scheduler's filters read it."""

    labels: Mapping[str, str]
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    allowed_pods: int = 110
    resources: tuple[tuple[str, int], ...] = ()
    """Allocatable resources besides CPU (memory in bytes, ...), by name."""


@dataclass
class NodeRules:
    """Per node (rows as in the snapshot): labels, taints, `spec.unschedulable`, allocatable
    resources, and the pods, ports and resources in use."""

    names: tuple[str, ...]
    labels: tuple[Mapping[str, str], ...]
    taints: tuple[tuple[Taint, ...], ...]
    unschedulable: BoolArray
    allowed_pods: IntArray
    resource_names: tuple[str, ...]
    """Every resource NodeResourcesFit counts besides CPU: memory and ephemeral-storage in
    bytes, hugepages, extended resources (the GPU's too), in this column order."""
    resource_allocatable: IntArray
    """Per resource column (rows) and node (columns): the node's allocatable amount."""
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    pods_free: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Per node, how many more pods it allows."""
    resource_free: IntArray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    """Per resource column and node (as `resource_allocatable`), what the pods on the node
    leave of its allocatable amount."""
    ports: list[Counter[HostPort]] = field(default_factory=list)
    placed: PlacedPods = field(default_factory=lambda: PlacedPods(0))
    static: dict[object, object] = field(default_factory=dict, repr=False)
    """Values derived from the parts no placement changes (label columns, taint masks);
    shared by copies."""

    def __post_init__(self) -> None:
        count = len(self.names)
        if self.pods_free.shape != (count,):
            self.pods_free = self.allowed_pods.astype(np.int64, copy=True)
        if self.resource_free.shape != self.resource_allocatable.shape:
            self.resource_free = self.resource_allocatable.astype(np.int64, copy=True)
        if len(self.ports) != count:
            self.ports = [Counter() for _ in range(count)]
        if self.placed.node_count != count:
            self.placed = PlacedPods(count)
        self._resource_column = {name: i for i, name in enumerate(self.resource_names)}

    @classmethod
    def from_facts(
        cls,
        names: Sequence[str],
        facts: Sequence[NodeFacts],
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    ) -> NodeRules:
        """The rules of nodes `names` (in snapshot order), nothing placed yet."""
        resource_names = tuple(sorted({name for f in facts for name, _ in f.resources}))
        column = {name: i for i, name in enumerate(resource_names)}
        allocatable = np.zeros((len(resource_names), len(facts)), dtype=np.int64)
        for row, node in enumerate(facts):
            for name, amount in node.resources:
                allocatable[column[name], row] = amount
        return cls(
            names=tuple(names),
            labels=tuple(f.labels for f in facts),
            taints=tuple(f.taints for f in facts),
            unschedulable=np.array([f.unschedulable for f in facts], dtype=np.bool_),
            allowed_pods=np.array([f.allowed_pods for f in facts], dtype=np.int64),
            resource_names=resource_names,
            resource_allocatable=allocatable,
            namespace_labels=namespace_labels or {},
        )

    @property
    def node_count(self) -> int:
        return len(self.names)

    def copy(self) -> NodeRules:
        """An independent copy of the parts placements change; the rest shared."""
        return NodeRules(
            names=self.names,
            labels=self.labels,
            taints=self.taints,
            unschedulable=self.unschedulable,
            allowed_pods=self.allowed_pods,
            resource_names=self.resource_names,
            resource_allocatable=self.resource_allocatable,
            namespace_labels=self.namespace_labels,
            pods_free=self.pods_free.copy(),
            resource_free=self.resource_free.copy(),
            ports=[Counter(ports) for ports in self.ports],
            placed=self.placed.copy(),
            static=self.static,
        )

    def resource_column(self, name: str) -> int | None:
        """Column of a resource, None when no node advertises it."""
        return self._resource_column.get(name)

    def take(
        self,
        row: int,
        name: str,
        amounts: Sequence[tuple[str, int]],
        constraints: PodConstraints | None,
        sign: int = 1,
    ) -> None:
        """Count a pod on `row` (sign +1) or no longer (-1): the pod count, its resources, host
        ports and, when it has constraints, its labels."""
        self.pods_free[row] -= sign
        for resource, amount in amounts:
            column = self._resource_column.get(resource)
            if column is not None:
                self.resource_free[column, row] -= sign * amount
        if constraints is None:
            return
        if constraints.host_ports:
            ports = self.ports[row]
            for port in constraints.host_ports:
                ports[port] += sign
                if ports[port] <= 0:
                    del ports[port]
        self.placed.add(name, row, constraints, sign)

    def label_column(self, key: str) -> LabelColumn:
        """The label `key` over the nodes (kept)."""
        cache_key = ("label", key)
        column = self.static.get(cache_key)
        if isinstance(column, LabelColumn):
            return column
        index: dict[str, int] = {}
        ids = np.full(self.node_count, ABSENT, dtype=np.int64)
        for row, labels in enumerate(self.labels):
            value = labels.get(key)
            if value is not None:
                ids[row] = index.setdefault(value, len(index))
        column = LabelColumn(ids=ids, values=tuple(index))
        self.static[cache_key] = column
        return column

    def integer_column(self, key: str) -> tuple[IntArray, BoolArray]:
        """The label `key` read as an integer per node, and where it is one (`Gt`/`Lt`)."""
        column = self.label_column(key)
        numbers = [integer_label(value) for value in column.values]
        parsed = np.array([n if n is not None else 0 for n in numbers] + [0], dtype=np.int64)
        valid = np.array([n is not None for n in numbers] + [False], dtype=np.bool_)
        return parsed[column.ids], valid[column.ids]

    def domain_counts(
        self, key: str, per_node: IntArray, nodes: BoolArray | None = None
    ) -> IntArray:
        """Per value of label `key`, the sum of `per_node` over the nodes with that value (over
        `nodes` only, when given)."""
        column = self.label_column(key)
        rows = column.present if nodes is None else column.present & nodes
        counts: IntArray = np.bincount(
            column.ids[rows], weights=per_node[rows], minlength=len(column.values)
        ).astype(np.int64)
        return counts

    def distinct_taints(self) -> tuple[tuple[Taint, BoolArray], ...]:
        """Every taint some node has, with the nodes that have it (kept)."""
        cached = self.static.get("taints")
        if isinstance(cached, tuple):
            return cached
        rows: dict[Taint, list[int]] = {}
        for row, taints in enumerate(self.taints):
            for taint in taints:
                rows.setdefault(taint, []).append(row)
        result = []
        for taint, taint_rows in rows.items():
            mask = np.zeros(self.node_count, dtype=np.bool_)
            mask[taint_rows] = True
            result.append((taint, mask))
        distinct = tuple(result)
        self.static["taints"] = distinct
        return distinct
