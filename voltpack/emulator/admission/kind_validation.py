"""Validation of Leases and core/v1 Events, the kinds voltpack's operator writes besides pods.

The rules are kube-apiserver's (`pkg/apis/coordination/validation`, `pkg/apis/core/validation/
events.go`): a lease's durations are positive, its transitions not negative; a core Event with an
`eventTime` (as voltpack records them) names its reporting component and instance.
"""

from __future__ import annotations

from typing import Any

from voltpack.emulator.admission.validation import qualified_name_problems
from voltpack.emulator.errors import Cause
from voltpack.emulator.objects import JsonObj

REPORTING_INSTANCE_MAX = 128
ACTION_MAX = 128
REASON_MAX = 128
NOTE_MAX = 1024
_NAME_PART = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


def _invalid(field: str, value: Any, why: str) -> Cause:
    shown = f'"{value}"' if isinstance(value, str) else str(value)
    return Cause(field, "FieldValueInvalid", f"Invalid value: {shown}: {why}")


def _required(field: str) -> Cause:
    return Cause(field, "FieldValueRequired", "Required value")


def _too_long(field: str, limit: int) -> Cause:
    return Cause(field, "FieldValueTooLong", f"Too long: must have at most {limit} bytes")


def validate_lease(obj: JsonObj) -> list[Cause]:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    causes = []
    for key in ("leaseDurationSeconds", "leaseTransitions"):
        value = (spec or {}).get(key)
        if not isinstance(value, int):
            continue
        if key == "leaseDurationSeconds" and value <= 0:
            causes.append(_invalid(f"spec.{key}", value, "must be greater than 0"))
        elif key == "leaseTransitions" and value < 0:
            causes.append(_invalid(f"spec.{key}", value, "must be greater than or equal to 0"))
    return causes


def validate_core_event(obj: JsonObj) -> list[Cause]:
    """A core/v1 Event with an eventTime carries the fields of the events.k8s.io API."""
    if not obj.get("eventTime"):
        return []
    causes: list[Cause] = []
    component = obj.get("reportingComponent") or ""
    if not component:
        causes.append(_required("reportingComponent"))
        causes.append(_invalid("reportingComponent", "", "name part must be non-empty"))
        causes.append(_invalid("reportingComponent", "", _NAME_PART))
    else:
        causes.extend(qualified_name_problems(str(component), "reportingComponent"))
    instance = str(obj.get("reportingInstance") or "")
    if not instance:
        causes.append(_required("reportingInstance"))
    elif len(instance) > REPORTING_INSTANCE_MAX:
        causes.append(_too_long("reportingInstance", REPORTING_INSTANCE_MAX))
    if len(str(obj.get("action") or "")) > ACTION_MAX:
        causes.append(_too_long("action", ACTION_MAX))
    reason = str(obj.get("reason") or "")
    if not reason:
        causes.append(_required("reason"))
    elif len(reason) > REASON_MAX:
        causes.append(_too_long("reason", REASON_MAX))
    if len(str(obj.get("message") or "")) > NOTE_MAX:
        causes.append(_too_long("message", NOTE_MAX))
    return causes
