"""Divergences the corpus found and the emulator was changed for: what kube-apiserver answered,
what the emulator answered before the fix, and the commit that fixed it. Kept as history for
`docs/emulator-conformance.md`; the replay itself checks that they stay fixed (any of them
coming back is an undocumented divergence).
"""

from __future__ import annotations

from dataclasses import dataclass

FIRST = "f8aa8f5"
SECOND = "0805d9b"
AGGREGATED = "e9acca3"
POD_STATUS = "5d7413a"
PRIORITY = "4bcfb80"


@dataclass(frozen=True)
class Fixed:
    steps: str
    real: str
    emulator_before: str
    commit: str


FIXED: tuple[Fixed, ...] = (
    Fixed("ns-create, ns-get", "label `kubernetes.io/metadata.name: conformance`", "no labels",
          FIRST),
    Fixed("pod-patch-stale-uid (operator.binder's uid precondition)",
          "422 Invalid, `metadata.uid: field is immutable`",
          "200: the patch was applied to the pod although its uid differed", FIRST),
    Fixed("pod-bind-stale-uid", "409 Conflict, details.kind `pods`",
          "409 Conflict, details.kind `pods/binding`", FIRST),
    Fixed("pod-status-patch, pods-list, pod-delete-bound",
          "pod conditions keep `lastProbeTime: null`, `lastTransitionTime: null`",
          "the null fields dropped after a status patch", FIRST),
    Fixed("pod-evict (kubectl drain, preemption)", "201 Success Status; the pod is deleted",
          "404 NotFound (pods/eviction not served)", FIRST),
    Fixed("pod-delete-stale-uid, pod-delete-stale-rv", "409, details.kind `Pod` (the kind)",
          "409, details.kind `pods`", FIRST),
    Fixed("pod-delete-bound, pod-delete-finalized, gpujob-delete",
          "generation + 1 when deletionTimestamp is set", "generation unchanged", FIRST),
    Fixed("pod-patch-json-test-fails, pod-patch-unsupported-type, not-acceptable",
          "`details: {}` in the Status", "no details", f"{FIRST}, {SECOND}"),
    Fixed("cm-dry-run-bad", "422 Invalid, CreateOptions.meta.k8s.io, dryRun FieldValueNotSupported",
          "400 BadRequest", SECOND),
    Fixed("cm-list-limit (limit with a label selector)", "no `remainingItemCount`",
          "`remainingItemCount: 1`", SECOND),
    Fixed("cm-apply-no-manager", "422 Invalid, PatchOptions fieldManager Required",
          "200: applied without a field manager", SECOND),
    Fixed("cm-delete-collection", "ConfigMapList of the 3 deleted objects", "empty `items`",
          SECOND),
    Fixed("secret-create", "`stringData` folded into base64 `data`", "`stringData` kept, no data",
          SECOND),
    Fixed("lease-invalid", "422, spec.leaseDurationSeconds must be greater than 0",
          "201 Created", SECOND),
    Fixed("event-create-no-reporting", "422, reportingComponent/reportingInstance Required",
          "201 Created", SECOND),
    Fixed("event-v1-create", "`deprecatedSource: {}`, `deprecatedFirstTimestamp/LastTimestamp: "
          "null`", "absent", SECOND),
    Fixed("gpujob-cel-min-workers, gpujob-cel-gpu-milli (the chart's CEL rules)",
          "422 Invalid, field `spec`, the rule's message", "201 Created (CEL not evaluated)",
          SECOND),
    Fixed("gpujob-schema-type, gpujob-schema-required",
          "an extra `<nil>` cause: some validation rules were not checked", "schema causes only",
          SECOND),
    Fixed("gpujob-strategic", "415 without details", "415 with `details: {}`", SECOND),
    Fixed("gpujob-replace-no-rv", "422, details.kind `gpujobs`", "422, details.kind `GPUJob`",
          SECOND),
    Fixed("gpujob-delete-precondition", "409, details.group `voltpack.io`", "no group", SECOND),
    Fixed("gpujobs-list-all, gpunodes-list-label, topologies-list, powerbudgets-list",
          "custom lists carry `metadata.continue: \"\"`", "absent", SECOND),
    Fixed("gpujobs-table", "Age column of type `date`, JSONPath descriptions, no continue",
          "type `string`, short descriptions", SECOND),
    Fixed("unknown-kind, unknown-group, gpunode-namespaced-path",
          "plain-text `404 page not found`", "404 NotFound Status", SECOND),
    Fixed("crd-delete", "finalizer customresourcecleanup, reason InstanceDeletionPending, no "
          "deletionGracePeriodSeconds", "no finalizer, InstanceDeletionInProgress, grace 0",
          SECOND),
    Fixed("ns-delete", "no deletionGracePeriodSeconds", "deletionGracePeriodSeconds 0", SECOND),
    Fixed("api-v1, apis-voltpack-v1alpha1, apis-coordination",
          "storageVersionHash = base64(sha256(group/version/kind)[:8]); none for bindings; "
          "custom verbs in kube-apiserver's order", "another hash (hex); verbs sorted", SECOND),
    Fixed("token-review-*, sar-*, self-sar, self-review",
          "no `creationTimestamp: null`; SelfSubjectReview carries a creationTimestamp",
          "`metadata.creationTimestamp: null`", SECOND),
    Fixed("watch-initial-events-bad", "422, sendInitialEvents requires resourceVersionMatch",
          "200, a stream of events", SECOND),
    Fixed("pod-status-put (kubelet-style pods/status PUT)",
          "`qosClass` kept, `podIPs` filled from `podIP`", "qosClass dropped, no podIPs",
          POD_STATUS),
    Fixed("apis-aggregated, api-aggregated (kubectl's discovery)",
          "APIGroupDiscoveryList (apidiscovery.k8s.io/v2)",
          "APIGroupList / APIVersions (kubectl fell back to one request per group)", AGGREGATED),
    Fixed("pod-create-literal-priority, pod-create-unknown-class, pod-create-never-policy",
          "403 Forbidden (the Priority admission plugin)",
          "201: a literal `spec.priority` kept, an unknown class accepted", PRIORITY),
    Fixed("pc-* (PriorityClasses), pod-create-class, pod-create-defaulted",
          "scheduling.k8s.io/v1 served; a pod's priority is its class's or the global default's",
          "404 (not served); priority 0 unless literal", PRIORITY),
)  # fmt: skip
