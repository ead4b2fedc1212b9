"""A Kubernetes pod's spec to the constraints kube-scheduler's filters and scores read.

Every malformed entry (an unknown operator, a `Gt` value that is no integer, a toleration with
a value for `Exists`) raises InvalidRequestError naming the pod and the field, so the pod is
held with that reason and nothing else stops.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import ValidationError

from voltpack.model.constraints.label_selectors import (
    LabelRequirement,
    LabelSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
)
from voltpack.model.constraints.pod_constraints import (
    HostPort,
    PodAffinityTerm,
    PodConstraints,
    TopologySpreadConstraint,
    WeightedNodeSelectorTerm,
    WeightedPodAffinityTerm,
)
from voltpack.model.constraints.taints import Toleration
from voltpack.model.errors import InvalidRequestError

T = TypeVar("T")


def _field(key: str, where: str, build: Callable[..., T], /, **fields: Any) -> T:
    """`build(**fields)`, with any validation error turned into one naming the pod and the
    field."""
    try:
        return build(**fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        message = str(error["msg"]).removeprefix("Value error, ")
        loc = ".".join(str(part) for part in error["loc"])
        detail = f"{loc}: {message}" if loc else message
        raise InvalidRequestError(f"pod {key}: {where}: {detail}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise InvalidRequestError(f"pod {key}: {where}: malformed ({exc})") from None


def _list(value: Any, key: str, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidRequestError(f"pod {key}: {where}: expected a list, got {value!r}")
    return value


def _mapping(value: Any, key: str, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidRequestError(f"pod {key}: {where}: expected an object, got {value!r}")
    return value


def label_selector(value: Any, key: str, where: str) -> LabelSelector | None:
    """A `metav1.LabelSelector` (None when absent: it then selects nothing)."""
    if value is None:
        return None
    raw = _mapping(value, key, where)

    def build() -> LabelSelector:
        labels = _mapping(raw.get("matchLabels"), key, f"{where}.matchLabels")
        expressions = [
            LabelRequirement(
                key=e.get("key"), operator=e.get("operator"), values=tuple(e.get("values") or ())
            )
            for e in _list(raw.get("matchExpressions"), key, f"{where}.matchExpressions")
        ]
        return LabelSelector(
            match_labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
            match_expressions=tuple(expressions),
        )

    return _field(key, where, build)


def _requirements(value: Any, key: str, where: str) -> tuple[NodeSelectorRequirement, ...]:
    found = []
    for index, raw in enumerate(_list(value, key, where)):
        entry = _mapping(raw, key, f"{where}[{index}]")
        found.append(
            _field(
                key,
                f"{where}[{index}]",
                NodeSelectorRequirement,
                key=entry.get("key"),
                operator=entry.get("operator"),
                values=tuple(str(v) for v in entry.get("values") or ()),
            )
        )
    return tuple(found)


def node_selector_term(value: Any, key: str, where: str) -> NodeSelectorTerm:
    """One node selector term (`matchExpressions`, `matchFields`)."""
    raw = _mapping(value, key, where)
    expressions = _requirements(raw.get("matchExpressions"), key, f"{where}.matchExpressions")
    fields = _requirements(raw.get("matchFields"), key, f"{where}.matchFields")
    return _field(key, where, NodeSelectorTerm, match_expressions=expressions, match_fields=fields)


def node_selector_terms(value: Any, key: str, where: str) -> tuple[NodeSelectorTerm, ...]:
    """A `NodeSelector`'s `nodeSelectorTerms`."""
    raw = _mapping(value, key, where)
    terms = _list(raw.get("nodeSelectorTerms"), key, f"{where}.nodeSelectorTerms")
    return tuple(
        node_selector_term(term, key, f"{where}.nodeSelectorTerms[{i}]")
        for i, term in enumerate(terms)
    )


def _affinity_term(raw: Any, key: str, where: str, namespace: str) -> PodAffinityTerm:
    entry = _mapping(raw, key, where)
    namespaces = frozenset(str(n) for n in _list(entry.get("namespaces"), key, where))
    namespace_selector = label_selector(
        entry.get("namespaceSelector"), key, f"{where}.namespaceSelector"
    )
    if not namespaces and namespace_selector is None:
        namespaces = frozenset({namespace})
    selector = label_selector(entry.get("labelSelector"), key, f"{where}.labelSelector")
    return _field(
        key,
        where,
        PodAffinityTerm,
        selector=selector,
        namespaces=namespaces,
        namespace_selector=namespace_selector,
        topology_key=entry.get("topologyKey") or "",
    )


def _affinity_terms(
    section: Mapping[str, Any], key: str, where: str, namespace: str
) -> tuple[tuple[PodAffinityTerm, ...], tuple[WeightedPodAffinityTerm, ...]]:
    required_field = "requiredDuringSchedulingIgnoredDuringExecution"
    preferred_field = "preferredDuringSchedulingIgnoredDuringExecution"
    required = tuple(
        _affinity_term(raw, key, f"{where}.{required_field}[{i}]", namespace)
        for i, raw in enumerate(_list(section.get(required_field), key, where))
    )
    preferred = []
    for i, raw in enumerate(_list(section.get(preferred_field), key, where)):
        entry_where = f"{where}.{preferred_field}[{i}]"
        entry = _mapping(raw, key, entry_where)
        term = _affinity_term(entry.get("podAffinityTerm"), key, entry_where, namespace)
        weight = entry.get("weight")
        preferred.append(
            _field(key, entry_where, WeightedPodAffinityTerm, weight=weight, term=term)
        )
    return required, tuple(preferred)


def _tolerations(spec: Mapping[str, Any], key: str) -> tuple[Toleration, ...]:
    found = []
    for index, raw in enumerate(_list(spec.get("tolerations"), key, "spec.tolerations")):
        entry = _mapping(raw, key, f"spec.tolerations[{index}]")
        found.append(
            _field(
                key,
                f"spec.tolerations[{index}]",
                Toleration,
                key=entry.get("key") or "",
                operator=entry.get("operator") or "Equal",
                value=entry.get("value") or "",
                effect=entry.get("effect") or None,
                toleration_seconds=entry.get("tolerationSeconds"),
            )
        )
    return tuple(found)


def _host_ports(spec: Mapping[str, Any], key: str) -> tuple[HostPort, ...]:
    found = []
    containers = [
        ("initContainers", c)
        for c in _list(spec.get("initContainers"), key, "spec")
        if isinstance(c, Mapping) and c.get("restartPolicy") == "Always"
    ]
    containers += [("containers", c) for c in _list(spec.get("containers"), key, "spec")]
    for field, container in containers:
        for index, raw in enumerate(
            _list(_mapping(container, key, field).get("ports"), key, field)
        ):
            port = _mapping(raw, key, f"spec.{field}[].ports[{index}]")
            if not port.get("hostPort"):
                continue
            found.append(
                _field(
                    key,
                    f"spec.{field}[].ports[{index}]",
                    HostPort,
                    protocol=port.get("protocol") or "TCP",
                    host_ip=port.get("hostIP") or "0.0.0.0",
                    port=port.get("hostPort"),
                )
            )
    return tuple(found)


def _spread(
    spec: Mapping[str, Any], key: str, labels: Mapping[str, str]
) -> tuple[TopologySpreadConstraint, ...]:
    found = []
    field = "spec.topologySpreadConstraints"
    for index, raw in enumerate(_list(spec.get("topologySpreadConstraints"), key, field)):
        where = f"{field}[{index}]"
        entry = _mapping(raw, key, where)
        selector = label_selector(entry.get("labelSelector"), key, f"{where}.labelSelector")
        extra = {k: labels[k] for k in entry.get("matchLabelKeys") or () if k in labels}
        if extra and selector is not None:
            selector = selector.merged(extra)
        found.append(
            _field(
                key,
                where,
                TopologySpreadConstraint,
                max_skew=entry.get("maxSkew"),
                topology_key=entry.get("topologyKey") or "",
                when_unsatisfiable=entry.get("whenUnsatisfiable"),
                selector=selector,
                min_domains=entry.get("minDomains") or 1,
                node_affinity_policy=entry.get("nodeAffinityPolicy") or "Honor",
                node_taints_policy=entry.get("nodeTaintsPolicy") or "Ignore",
            )
        )
    return tuple(found)


def pod_constraints(
    pod: Mapping[str, Any],
    key: str,
    volume_node_terms: tuple[tuple[NodeSelectorTerm, ...], ...] = (),
) -> PodConstraints:
    """The constraints of a pod's spec; `volume_node_terms` are the node affinities of its
    bound PersistentVolumes (looked up by the caller)."""
    meta = _mapping(pod.get("metadata"), key, "metadata")
    spec = _mapping(pod.get("spec"), key, "spec")
    namespace = str(meta.get("namespace") or "default")
    labels = {str(k): str(v) for k, v in _mapping(meta.get("labels"), key, "labels").items()}
    affinity = _mapping(spec.get("affinity"), key, "spec.affinity")
    node_affinity = _mapping(affinity.get("nodeAffinity"), key, "spec.affinity.nodeAffinity")
    required_node = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    preferred_node = []
    preferred_field = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    for i, raw in enumerate(
        _list(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"), key, "")
    ):
        entry = _mapping(raw, key, f"{preferred_field}[{i}]")
        term = node_selector_term(entry.get("preference"), key, f"{preferred_field}[{i}]")
        preferred_node.append(
            _field(
                key,
                f"{preferred_field}[{i}]",
                WeightedNodeSelectorTerm,
                weight=entry.get("weight"),
                term=term,
            )
        )
    required_affinity, preferred_affinity = _affinity_terms(
        _mapping(affinity.get("podAffinity"), key, "spec.affinity.podAffinity"),
        key,
        "spec.affinity.podAffinity",
        namespace,
    )
    required_anti, preferred_anti = _affinity_terms(
        _mapping(affinity.get("podAntiAffinity"), key, "spec.affinity.podAntiAffinity"),
        key,
        "spec.affinity.podAntiAffinity",
        namespace,
    )
    node_selector = _mapping(spec.get("nodeSelector"), key, "spec.nodeSelector")
    return PodConstraints(
        namespace=namespace,
        labels=tuple(sorted(labels.items())),
        node_selector=tuple(sorted((str(k), str(v)) for k, v in node_selector.items())),
        required_node_terms=(
            None
            if required_node is None
            else node_selector_terms(
                required_node,
                key,
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
            )
        ),
        preferred_node_terms=tuple(preferred_node),
        tolerations=_tolerations(spec, key),
        host_ports=_host_ports(spec, key),
        required_affinity=required_affinity,
        required_anti_affinity=required_anti,
        preferred_affinity=preferred_affinity,
        preferred_anti_affinity=preferred_anti,
        spread=_spread(spec, key, labels),
        volume_node_terms=volume_node_terms,
        terminating=bool(meta.get("deletionTimestamp")),
        nominated_node=(pod.get("status") or {}).get("nominatedNodeName") or None,
        never_preempts=spec.get("preemptionPolicy") == "Never",
    )
