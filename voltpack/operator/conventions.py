"""Names voltpack uses on Kubernetes objects: scheduler name, labels, annotations, resources."""

SCHEDULER_NAME = "voltpack"

GPU_RESOURCE = "nvidia.com/gpu"
"""Extended resource of whole GPUs (as the NVIDIA device plugin advertises them)."""

GPU_MODEL_LABELS = ("voltpack.io/gpu-model", "nvidia.com/gpu.product")
"""Node labels that name the GPU model, in order of preference."""

POD_GROUP_ANNOTATION = "voltpack.io/pod-group"
MIN_MEMBERS_ANNOTATION = "voltpack.io/min-members"
GPU_MILLI_ANNOTATION = "voltpack.io/gpu-milli"
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
DURATION_ANNOTATION = "voltpack.io/duration-seconds"
"""Trace replay: how long the emulator lets the pod run."""

WORKLOAD_ANNOTATION = "voltpack.io/workload"
"""What a pod's GPUs do, for the power manager: `inference` (request-driven: slowing it costs
latency, not throughput) or `training`/`batch` (slowing it costs throughput). Without it, pods
of a ReplicaSet or StatefulSet count as inference and all others as throughput-bound."""
REQUEST_DRIVEN_OWNERS = ("ReplicaSet", "StatefulSet")
MANUAL_CAP_ANNOTATION = "voltpack.io/manual-cap-w"
"""On a PowerBudget: a hand-set cap in watts (admin API); the domain is run at min(budget, cap)."""
