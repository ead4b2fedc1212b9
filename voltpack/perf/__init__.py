"""Performance and power models: GPU power versus clock and cap, LLM inference and training.

Imports only `voltpack.model`. Everything is vectorised with numpy over servers and time bins.
"""

from voltpack.perf.gpu_power import (
    GpuPowerModel,
    ServerPowerModel,
    power_model_for,
    server_power_model_for,
)
from voltpack.perf.llm_inference import (
    InferenceBusy,
    InferenceLoad,
    InferenceProfile,
    LatencyBreakdown,
    bin_requests,
    default_inference_profile,
    inference_busy,
    power_from_busy_w,
    request_latency_breakdown,
    request_latency_s,
    server_power_w,
)
from voltpack.perf.training import (
    TrainingProfile,
    default_training_profile,
    training_power_w,
    training_progress,
)

__all__ = [
    "GpuPowerModel",
    "InferenceBusy",
    "InferenceLoad",
    "InferenceProfile",
    "LatencyBreakdown",
    "ServerPowerModel",
    "TrainingProfile",
    "bin_requests",
    "default_inference_profile",
    "default_training_profile",
    "inference_busy",
    "power_from_busy_w",
    "power_model_for",
    "request_latency_breakdown",
    "request_latency_s",
    "server_power_model_for",
    "server_power_w",
    "training_power_w",
    "training_progress",
]
