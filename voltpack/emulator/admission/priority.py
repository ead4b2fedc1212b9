"""PriorityClasses and the Priority admission plugin, as kube-apiserver runs them.

A pod's `spec.priority` is not the client's to set: admission computes it from the pod's
`priorityClassName` (a PriorityClass, or one of the two built-in system classes), else from the
cluster's global-default class, else 0, and refuses (403) a pod that names a class that does not
exist or carries a literal `spec.priority` other than the computed one. voltpack's own pods
carry their priority in an annotation for that reason (docs/queues.md).
"""

from __future__ import annotations

from collections.abc import Iterable

from voltpack.emulator.errors import ApiError, Cause, forbidden
from voltpack.emulator.objects import JsonObj, meta

SYSTEM_CLASSES = {"system-node-critical": 2_000_001_000, "system-cluster-critical": 2_000_000_000}
"""The classes every cluster has (not stored as objects here), by value."""
HIGHEST_USER_PRIORITY = 1_000_000_000
DEFAULT_PREEMPTION = "PreemptLowerPriority"
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _computed_otherwise(pod: str, what: str, given: object, computed: object) -> ApiError:
    return forbidden(
        "pods",
        "",
        pod,
        f"the {what} ({given}) must not be provided in pod spec; priority admission "
        f"controller computed {computed} from the given PriorityClass name",
    )


def admit_pod(pod: JsonObj, classes: Iterable[JsonObj]) -> None:
    """Set a new pod's `spec.priority` (and `preemptionPolicy`) from its PriorityClass, in
    place; raise the 403 kube-apiserver answers for an unknown class or a literal priority."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    name = str(meta(pod).get("name", ""))
    by_name = {str(meta(c).get("name", "")): c for c in classes}
    class_name = spec.get("priorityClassName")
    policy: object = None
    if class_name:
        if class_name in SYSTEM_CLASSES:
            priority = SYSTEM_CLASSES[str(class_name)]
            policy = DEFAULT_PREEMPTION
        elif class_name in by_name:
            priority = _int(by_name[class_name].get("value")) or 0
            policy = by_name[class_name].get("preemptionPolicy")
        else:
            raise forbidden("pods", "", name, f"no PriorityClass with name {class_name} was found")
    else:
        defaults = [c for c in by_name.values() if c.get("globalDefault") is True]
        lowest = min(defaults, key=lambda c: _int(c.get("value")) or 0, default=None)
        priority = (_int(lowest.get("value")) or 0) if lowest is not None else 0
        if lowest is not None:
            spec["priorityClassName"] = meta(lowest).get("name")
            policy = lowest.get("preemptionPolicy")
    given = spec.get("priority")
    if given is not None and given != priority:
        raise _computed_otherwise(name, "integer value of priority", given, priority)
    spec["priority"] = priority
    if policy is None:  # no class: the pod's own, else the default
        spec.setdefault("preemptionPolicy", DEFAULT_PREEMPTION)
        return
    given_policy = spec.get("preemptionPolicy")
    if given_policy is not None and given_policy != policy:
        raise _computed_otherwise(name, "string value of PreemptionPolicy", given_policy, policy)
    spec["preemptionPolicy"] = policy


def admit_priority_class(obj: JsonObj, classes: Iterable[JsonObj]) -> None:
    """Refuse (403) a second global-default class, as the admission plugin does."""
    if obj.get("globalDefault") is not True:
        return
    name = str(meta(obj).get("name", ""))
    for other in classes:
        other_name = str(meta(other).get("name", ""))
        if other.get("globalDefault") is True and other_name != name:
            raise forbidden(
                "priorityclasses",
                "scheduling.k8s.io",
                name,
                f"PriorityClass {other_name} is already marked as default. Only one default "
                "can exist",
            )


def default_priority_class(obj: JsonObj) -> None:
    """The defaults kube-apiserver fills in, in place."""
    obj.setdefault("preemptionPolicy", DEFAULT_PREEMPTION)


def validate_priority_class(obj: JsonObj) -> list[Cause]:
    """A PriorityClass's fields, with kube-apiserver's messages."""
    causes = []
    name = str(meta(obj).get("name", ""))
    value = _int(obj.get("value"))
    if value is None:
        causes.append(Cause("value", "FieldValueRequired", "Required value"))
    elif name not in SYSTEM_CLASSES and value > HIGHEST_USER_PRIORITY:
        causes.append(
            Cause(
                "value",
                "FieldValueForbidden",
                f"Forbidden: maximum allowed value of a user defined priority is "
                f"{HIGHEST_USER_PRIORITY}",
            )
        )
    if name.startswith("system-") and name not in SYSTEM_CLASSES:
        causes.append(
            Cause(
                "metadata.name",
                "FieldValueForbidden",
                "Forbidden: priority class names with 'system-' prefix are reserved",
            )
        )
    policy = obj.get("preemptionPolicy")
    if policy is not None and policy not in PREEMPTION_POLICIES:
        causes.append(
            Cause(
                "preemptionPolicy",
                "FieldValueNotSupported",
                f'Unsupported value: "{policy}": supported values: "Never", "PreemptLowerPriority"',
            )
        )
    return causes


def validate_priority_class_update(new: JsonObj, old: JsonObj) -> list[Cause]:
    """`value` and `preemptionPolicy` cannot change."""
    causes = validate_priority_class(new)
    if new.get("value") != old.get("value"):
        causes.append(
            Cause("value", "FieldValueForbidden", "Forbidden: may not be changed in an update.")
        )
    if new.get("preemptionPolicy") != old.get("preemptionPolicy"):
        causes.append(
            Cause("preemptionPolicy", "FieldValueInvalid", "Invalid value: field is immutable")
        )
    return causes
