"""The resource types the emulator serves: built-in ones and those that CRDs define."""

from __future__ import annotations

import re
from dataclasses import dataclass

from voltpack.emulator.objects import JsonObj

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
SUBRESOURCE_VERBS = {
    "status": ("get", "patch", "update"),
    "binding": ("create",),
    "token": ("create",),
    "eviction": ("create",),
}


@dataclass(frozen=True)
class ResourceType:
    """One resource of one group/version, e.g. `pods` in `v1` or `widgets` in `example.io/v1`."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    verbs: tuple[str, ...] = ALL_VERBS
    field_selectors: tuple[str, ...] = ()
    """Field-selector labels beyond metadata.name and metadata.namespace."""
    field_aliases: tuple[tuple[str, str], ...] = ()
    """Field-selector labels whose value lives at another path (events' `source`)."""
    tracks_generation: bool = False
    return_deleted_object: bool = False
    allow_unconditional_update: bool = True
    strategic_merge: bool = True
    """Built-in types accept strategic merge patches; custom resources do not."""
    custom: bool = False
    storage_version: str = ""
    crd_name: str = ""
    schema: JsonObj | None = None
    printer_columns: tuple[JsonObj, ...] = ()
    review: bool = False
    """A review (TokenReview, SubjectAccessReview, ...): create only, answered, never stored."""

    @property
    def key(self) -> str:
        """Storage key, the same for every version of a resource: `pods`, `widgets.example.io`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


_POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)
_EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)

NAMESPACES = ResourceType(
    "",
    "v1",
    "Namespace",
    "namespaces",
    "namespace",
    namespaced=False,
    short_names=("ns",),
    subresources=frozenset({"status"}),
    verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
    field_selectors=("status.phase",),
    return_deleted_object=True,
)
NODES = ResourceType(
    "",
    "v1",
    "Node",
    "nodes",
    "node",
    namespaced=False,
    short_names=("no",),
    subresources=frozenset({"status"}),
    field_selectors=("spec.unschedulable",),
)
PODS = ResourceType(
    "",
    "v1",
    "Pod",
    "pods",
    "pod",
    namespaced=True,
    short_names=("po",),
    categories=("all",),
    subresources=frozenset({"status", "binding", "eviction"}),
    field_selectors=_POD_FIELDS,
    tracks_generation=True,
    return_deleted_object=True,
)
BINDINGS = ResourceType(
    "", "v1", "Binding", "bindings", "binding", namespaced=True, verbs=("create",)
)
EVENTS = ResourceType(
    "",
    "v1",
    "Event",
    "events",
    "event",
    namespaced=True,
    short_names=("ev",),
    field_selectors=_EVENT_FIELDS,
    field_aliases=(("source", "source.component"),),
)
CONFIGMAPS = ResourceType(
    "", "v1", "ConfigMap", "configmaps", "configmap", namespaced=True, short_names=("cm",)
)
SECRETS = ResourceType(
    "", "v1", "Secret", "secrets", "secret", namespaced=True, field_selectors=("type",)
)
LEASES = ResourceType("coordination.k8s.io", "v1", "Lease", "leases", "lease", namespaced=True)
EVENTS_V1 = ResourceType(
    "events.k8s.io",
    "v1",
    "Event",
    "events",
    "event",
    namespaced=True,
    short_names=("ev",),
    field_selectors=("reason", "type", "reportingController", "regarding.kind", "regarding.name"),
)
CRDS = ResourceType(
    "apiextensions.k8s.io",
    "v1",
    "CustomResourceDefinition",
    "customresourcedefinitions",
    "customresourcedefinition",
    namespaced=False,
    short_names=("crd", "crds"),
    categories=("api-extensions",),
    subresources=frozenset({"status"}),
    tracks_generation=True,
)
SERVICEACCOUNTS = ResourceType(
    "",
    "v1",
    "ServiceAccount",
    "serviceaccounts",
    "serviceaccount",
    namespaced=True,
    short_names=("sa",),
    subresources=frozenset({"token"}),
)

RBAC_GROUP = "rbac.authorization.k8s.io"
ROLES = ResourceType(RBAC_GROUP, "v1", "Role", "roles", "role", namespaced=True)
CLUSTERROLES = ResourceType(
    RBAC_GROUP, "v1", "ClusterRole", "clusterroles", "clusterrole", namespaced=False
)
ROLEBINDINGS = ResourceType(
    RBAC_GROUP, "v1", "RoleBinding", "rolebindings", "rolebinding", namespaced=True
)
CLUSTERROLEBINDINGS = ResourceType(
    RBAC_GROUP,
    "v1",
    "ClusterRoleBinding",
    "clusterrolebindings",
    "clusterrolebinding",
    namespaced=False,
)

PRIORITYCLASSES = ResourceType(
    "scheduling.k8s.io",
    "v1",
    "PriorityClass",
    "priorityclasses",
    "priorityclass",
    namespaced=False,
    short_names=("pc",),
    tracks_generation=True,
)

PODDISRUPTIONBUDGETS = ResourceType(
    "policy",
    "v1",
    "PodDisruptionBudget",
    "poddisruptionbudgets",
    "poddisruptionbudget",
    namespaced=True,
    short_names=("pdb",),
    subresources=frozenset({"status"}),
    tracks_generation=True,
)
"""Stored and served; no disruption controller computes their status (a test writes it)."""

PERSISTENTVOLUMECLAIMS = ResourceType(
    "",
    "v1",
    "PersistentVolumeClaim",
    "persistentvolumeclaims",
    "persistentvolumeclaim",
    namespaced=True,
    short_names=("pvc",),
    subresources=frozenset({"status"}),
)
PERSISTENTVOLUMES = ResourceType(
    "",
    "v1",
    "PersistentVolume",
    "persistentvolumes",
    "persistentvolume",
    namespaced=False,
    short_names=("pv",),
    subresources=frozenset({"status"}),
)
STORAGECLASSES = ResourceType(
    "storage.k8s.io",
    "v1",
    "StorageClass",
    "storageclasses",
    "storageclass",
    namespaced=False,
    short_names=("sc",),
)
"""Claims, volumes and classes are stored and served; no volume controller binds them."""

RESOURCE_GROUP = "resource.k8s.io"
DEVICECLASSES = ResourceType(
    RESOURCE_GROUP,
    "v1",
    "DeviceClass",
    "deviceclasses",
    "deviceclass",
    namespaced=False,
    tracks_generation=True,
)
RESOURCESLICES = ResourceType(
    RESOURCE_GROUP,
    "v1",
    "ResourceSlice",
    "resourceslices",
    "resourceslice",
    namespaced=False,
    field_selectors=("spec.nodeName", "spec.driver"),
    tracks_generation=True,
)
RESOURCECLAIMS = ResourceType(
    RESOURCE_GROUP,
    "v1",
    "ResourceClaim",
    "resourceclaims",
    "resourceclaim",
    namespaced=True,
    subresources=frozenset({"status"}),
)
RESOURCECLAIMTEMPLATES = ResourceType(
    RESOURCE_GROUP,
    "v1",
    "ResourceClaimTemplate",
    "resourceclaimtemplates",
    "resourceclaimtemplate",
    namespaced=True,
)


def _review(group: str, kind: str, *, namespaced: bool = False) -> ResourceType:
    plural = kind.lower() + "s"
    return ResourceType(
        group,
        "v1",
        kind,
        plural,
        kind.lower(),
        namespaced=namespaced,
        verbs=("create",),
        strategic_merge=False,
        review=True,
    )


AUTHENTICATION_GROUP = "authentication.k8s.io"
AUTHORIZATION_GROUP = "authorization.k8s.io"
TOKENREVIEWS = _review(AUTHENTICATION_GROUP, "TokenReview")
SELFSUBJECTREVIEWS = _review(AUTHENTICATION_GROUP, "SelfSubjectReview")
SUBJECTACCESSREVIEWS = _review(AUTHORIZATION_GROUP, "SubjectAccessReview")
SELFSUBJECTACCESSREVIEWS = _review(AUTHORIZATION_GROUP, "SelfSubjectAccessReview")
LOCALSUBJECTACCESSREVIEWS = _review(
    AUTHORIZATION_GROUP, "LocalSubjectAccessReview", namespaced=True
)
SELFSUBJECTRULESREVIEWS = _review(AUTHORIZATION_GROUP, "SelfSubjectRulesReview")

BUILTINS: tuple[ResourceType, ...] = (
    NAMESPACES,
    NODES,
    PODS,
    BINDINGS,
    EVENTS,
    CONFIGMAPS,
    SECRETS,
    LEASES,
    EVENTS_V1,
    CRDS,
    SERVICEACCOUNTS,
    ROLES,
    CLUSTERROLES,
    ROLEBINDINGS,
    CLUSTERROLEBINDINGS,
    PRIORITYCLASSES,
    PODDISRUPTIONBUDGETS,
    PERSISTENTVOLUMECLAIMS,
    PERSISTENTVOLUMES,
    STORAGECLASSES,
    DEVICECLASSES,
    RESOURCECLAIMS,
    RESOURCECLAIMTEMPLATES,
    RESOURCESLICES,
    TOKENREVIEWS,
    SELFSUBJECTREVIEWS,
    SUBJECTACCESSREVIEWS,
    SELFSUBJECTACCESSREVIEWS,
    LOCALSUBJECTACCESSREVIEWS,
    SELFSUBJECTRULESREVIEWS,
)

_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key of Kubernetes version names: v2 > v1 > v1beta2 > v1beta1 > v1alpha1 > other."""
    match = _VERSION_RE.match(version)
    if match is None:
        return (0, 0, 0, version)
    major = int(match.group(1))
    stage = {"alpha": 1, "beta": 2, None: 3}[match.group(2)]
    minor = int(match.group(3) or 0)
    return (stage, major, minor, "")


def sort_versions(versions: list[str]) -> list[str]:
    """Versions in the order discovery lists them, the preferred one first."""
    return sorted(versions, key=version_priority, reverse=True)


def crd_resource_types(crd: JsonObj) -> list[ResourceType]:
    """The served versions of a CRD as resource types (assumes a validated CRD)."""
    spec = crd.get("spec", {})
    names = spec.get("names", {})
    versions = spec.get("versions", [])
    storage = next((v["name"] for v in versions if v.get("storage")), versions[0]["name"])
    plural = names["plural"]
    kind = names["kind"]
    result: list[ResourceType] = []
    for version in versions:
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        selectable = tuple(
            str(item.get("jsonPath", "")).lstrip(".")
            for item in version.get("selectableFields") or []
            if isinstance(item, dict)
        )
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        result.append(
            ResourceType(
                spec["group"],
                version["name"],
                kind,
                plural,
                names.get("singular") or kind.lower(),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=frozenset({"status"})
                if isinstance(subresources.get("status"), dict)
                else frozenset(),
                field_selectors=selectable,
                tracks_generation=True,
                allow_unconditional_update=False,
                strategic_merge=False,
                custom=True,
                storage_version=storage,
                crd_name=crd["metadata"]["name"],
                schema=schema if isinstance(schema, dict) else None,
                printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
            )
        )
    return result


class ResourceRegistry:
    """Which resource types are served at which group/version, built-ins first, then CRDs."""

    def __init__(self) -> None:
        self._builtin = list(BUILTINS)
        self._custom: dict[str, list[ResourceType]] = {}

    def all_types(self) -> list[ResourceType]:
        types = list(self._builtin)
        for served in self._custom.values():
            types.extend(served)
        return types

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        for rtype in self.all_types():
            if rtype.group == group and rtype.version == version and rtype.plural == plural:
                return rtype
        return None

    def by_key(self, key: str) -> ResourceType | None:
        """The type of a storage key in its storage version (any version for built-ins)."""
        for rtype in self.all_types():
            if rtype.key == key and (not rtype.custom or rtype.version == rtype.storage_version):
                return rtype
        for rtype in self.all_types():
            if rtype.key == key:
                return rtype
        return None

    def group_versions(self) -> dict[str, list[str]]:
        """Named API groups (not the core group) and their served versions, preferred first."""
        groups: dict[str, list[str]] = {}
        for rtype in self.all_types():
            if not rtype.group:
                continue
            versions = groups.setdefault(rtype.group, [])
            if rtype.version not in versions:
                versions.append(rtype.version)
        return {group: sort_versions(versions) for group, versions in groups.items()}

    def resources_in(self, group: str, version: str) -> list[ResourceType]:
        return [t for t in self.all_types() if t.group == group and t.version == version]

    def register_crd(self, crd: JsonObj) -> None:
        """Serve (or re-serve, after an update) the resources a CRD defines."""
        self._custom[crd["metadata"]["name"]] = crd_resource_types(crd)

    def unregister_crd(self, name: str) -> None:
        self._custom.pop(name, None)

    def custom_types(self, crd_name: str) -> list[ResourceType]:
        return list(self._custom.get(crd_name, []))

    def conflicting_crd(self, crd: JsonObj) -> str | None:
        """Name of another served CRD (or built-in) already using this CRD's group and plural."""
        spec = crd.get("spec", {})
        group = spec.get("group")
        plural = (spec.get("names") or {}).get("plural")
        name = crd.get("metadata", {}).get("name")
        for rtype in self.all_types():
            if rtype.group == group and rtype.plural == plural and rtype.crd_name != name:
                return rtype.crd_name or rtype.key
        return None
