"""Names voltpack uses on Kubernetes objects: scheduler name, labels, annotations, resources."""

from voltpack.model.topology_request import (
    VOLTPACK_MODEL,
    VOLTPACK_PIPELINE_PARALLEL,
    VOLTPACK_PREFERRED,
    VOLTPACK_REQUIRED,
    VOLTPACK_TENSOR_PARALLEL,
)

SCHEDULER_NAME = "voltpack"
DEFAULT_SCHEDULER = "default-scheduler"
"""The name kube-scheduler serves, and pods without `schedulerName` get."""
SERVED_SCHEDULERS: frozenset[str] = frozenset({SCHEDULER_NAME})
"""The `schedulerName`s the operator schedules by default (`--scheduler-name` adds more)."""

GPU_RESOURCE = "nvidia.com/gpu"
"""Extended resource of whole GPUs (as the NVIDIA device plugin advertises them)."""

GPU_MODEL_LABELS = ("voltpack.io/gpu-model", "nvidia.com/gpu.product")
"""Node labels that name the GPU model, in order of preference."""

POD_GROUP_ANNOTATION = "voltpack.io/pod-group"
MIN_MEMBERS_ANNOTATION = "voltpack.io/min-members"
GPU_MILLI_ANNOTATION = "voltpack.io/gpu-milli"
GPU_SHARING_ANNOTATION = "voltpack.io/gpu-sharing"
"""How a GPU share is enforced on a DRA node: `mps` (default) or `time-slicing` (docs/dra.md)."""
"""A share of one GPU in milli-GPU (1..999); the pod then asks for no `nvidia.com/gpu`."""
GPU_MODELS_ANNOTATION = "voltpack.io/gpu-models"
"""Accepted GPU models, separated by `|`."""
GPU_INDICES_ANNOTATION = "voltpack.io/gpu-indices"
"""Written by voltpack before binding: the GPU indices the pod was given, e.g. `0,3`."""
PLACEMENT_REASON_ANNOTATION = "voltpack.io/placement-reason"
"""Written by voltpack when binding a pod whose placement has a reason worth keeping (the GPU
model a heterogeneity-aware allocation chose); the GPUJob's Scheduled condition shows it."""
QUEUE_ANNOTATION = "voltpack.io/queue"
"""The Queue a pod's gang belongs to (default: `default`); GPUJob workers get the job's queue."""
PREEMPTIBLE_ANNOTATION = "voltpack.io/preemptible"
"""`true`: a higher-priority gang of the same queue may preempt the pod's gang."""
PRIORITY_ANNOTATION = "voltpack.io/priority"
"""A pod's scheduling priority for voltpack (GPUJob workers carry the job's): a real API server
refuses an explicit `spec.priority` that its PriorityClass (none: 0) does not give. Without the
annotation the pod's `spec.priority` counts."""
DURATION_ANNOTATION = "voltpack.io/duration-seconds"
"""Trace replay: how long the emulator lets the pod run."""

WORKLOAD_ANNOTATION = "voltpack.io/workload"
"""What a pod's GPUs do, for the power manager: `inference` (request-driven: slowing it costs
latency, not throughput) or `training`/`batch` (slowing it costs throughput). Without it, pods
of a ReplicaSet or StatefulSet count as inference and all others as throughput-bound."""
REQUEST_DRIVEN_OWNERS = ("ReplicaSet", "StatefulSet")
MANUAL_CAP_ANNOTATION = "voltpack.io/manual-cap-w"
"""On a PowerBudget: a hand-set cap in watts (admin API); the domain is run at min(budget, cap)."""

TOPOLOGY_REQUIRED_ANNOTATION = VOLTPACK_REQUIRED
"""A gang's required topology level (a `Topology` level's node label or name)."""
TOPOLOGY_PREFERRED_ANNOTATION = VOLTPACK_PREFERRED
TRAINING_MODEL_ANNOTATION = VOLTPACK_MODEL
"""A training model of the catalog: the gang's placement is chosen by predicted step time."""
TENSOR_PARALLEL_ANNOTATION = VOLTPACK_TENSOR_PARALLEL
PIPELINE_PARALLEL_ANNOTATION = VOLTPACK_PIPELINE_PARALLEL
RDMA_PERCENT_ANNOTATION = "voltpack.io/rdma-percent"
"""A share (0..100) of one RDMA NIC's bandwidth; also accepted as an extended resource."""
RDMA_PERCENT_RESOURCE = "voltpack.io/rdma-percent"
RANK_ANNOTATION = "voltpack.io/rank"
"""Written by voltpack when binding a gang: the pod's rank (0..n-1, placement order); also a
label on pods of gangs of two or more. Workers read it through the downward API (`RANK`)."""
RANK_LABEL = RANK_ANNOTATION
GANG_BINDING_ANNOTATION = "voltpack.io/gang-binding"
"""Written by voltpack on every pod of a gang of two or more before any of them is bound:
`<attempt id>/<members>`. Pods of one attempt, some bound and some pending, are a gang left
partly bound (e.g. the operator stopped between two bindings); the next leader undoes it
(`gang_undo.py`, docs/gang-binding.md)."""
NICS_ANNOTATION = "voltpack.io/nics"
"""Written by voltpack when binding a pod that got an RDMA NIC share: the NICs' names,
comma-separated (the worker's `NCCL_IB_HCA`)."""
PREDICTED_STEP_ANNOTATION = "voltpack.io/predicted-step-seconds"
"""Written by voltpack when binding a training gang placed by step time: the predicted step
time of its placement (with `voltpack.io/ideal-step-seconds`, the ideal placement's)."""
IDEAL_STEP_ANNOTATION = "voltpack.io/ideal-step-seconds"
WORLD_SIZE_ANNOTATION = "voltpack.io/world-size"
"""On the workers of an elastic GPUJob: the number of workers the job runs with now (updated on
a shrink or a grow); new workers read it as `WORLD_SIZE` (docs/elastic-training.md)."""
WORKER_RANKS_ANNOTATION = "voltpack.io/world-ranks"
"""With `voltpack.io/world-size`: the ranks of the job's workers now, comma-separated."""
REJOIN_RANK_ANNOTATION = "voltpack.io/rejoin-rank"
"""Written by the GPUJob controller on a worker that rejoins a running elastic job: the rank it
takes (the binder writes it as the pod's `voltpack.io/rank` instead of its position)."""
INFERENCE_SERVICE_LABEL = "voltpack.io/inference-service"
"""On InferenceService replica pods: the service's name (in the pod's namespace)."""
ROUTER_WEIGHT_ANNOTATION = "voltpack.io/router-weight"
"""On a routed InferenceService replica pod: its share of new requests in thousandths (an
integer 0..1000, relative, as Gateway API `backendRefs[].weight` and Envoy's weighted clusters
take them); a replica without it takes an equal share (docs/power.md)."""
