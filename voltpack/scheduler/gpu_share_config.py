"""The NVIDIA GPU DRA driver's sharing configuration for a milli-GPU share.

A voltpack GPU share (`voltpack.io/gpu-milli`, 1..999 thousandths of one GPU) becomes, in the
claim's allocation, an opaque `GpuConfig` for the `gpu.nvidia.com` driver (API
`resource.nvidia.com/v1beta1`):

- `MPS` (the default): the driver starts an MPS control daemon for the GPU and limits the
  pod's clients to `defaultActiveThreadPercentage` = the share in percent (rounded up: a share
  never gets fewer SMs than asked) and `defaultPinnedDeviceMemoryLimit` = the share of the
  GPU's memory (rounded down to MiB: never more memory than asked). Compute and memory are
  bounded; a fault in one client can still affect the others on the GPU (MPS shares one
  context per GPU), and memory bandwidth is not partitioned.
- `TimeSlicing`: the GPU's contexts take turns (`interval: Default`); memory and faults are
  isolated per context, but nothing bounds a pod's compute or memory: the share is advisory.

Pure: no Kubernetes, no I/O.
"""

from __future__ import annotations

import math
from typing import Literal

from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.devices import NVIDIA_GPU_DRIVER, OpaqueConfig
from voltpack.model.errors import InvalidRequestError

NVIDIA_CONFIG_API_VERSION = "resource.nvidia.com/v1beta1"
SharingStrategy = Literal["MPS", "TimeSlicing"]
SHARING_STRATEGIES: dict[str, SharingStrategy] = {"mps": "MPS", "time-slicing": "TimeSlicing"}
"""The values of the `voltpack.io/gpu-sharing` annotation, and the driver's strategy names."""
MIB = 1024 * 1024


def sharing_strategy(text: str | None) -> SharingStrategy:
    """The strategy a pod asks for (`mps` when it names none)."""
    if text is None:
        return "MPS"
    try:
        return SHARING_STRATEGIES[text]
    except KeyError:
        allowed = ", ".join(SHARING_STRATEGIES)
        raise InvalidRequestError(
            f"GPU sharing {text!r} is not known; allowed values: {allowed}"
        ) from None


def active_thread_percent(share_milli: int) -> int:
    """The share in percent of the GPU's SMs, rounded up (1..100)."""
    if not 1 <= share_milli <= MILLI_PER_GPU:
        raise InvalidRequestError(f"a GPU share is 1..{MILLI_PER_GPU} milli, got {share_milli}")
    return max(1, min(100, math.ceil(share_milli / 10)))


def pinned_memory_mib(share_milli: int, gpu_memory_bytes: int) -> int:
    """The share of the GPU's memory in MiB, rounded down (at least 1)."""
    return max(1, gpu_memory_bytes * share_milli // MILLI_PER_GPU // MIB)


def share_config(
    share_milli: int,
    gpu_memory_bytes: int | None,
    strategy: SharingStrategy,
    requests: tuple[str, ...],
) -> OpaqueConfig:
    """The `GpuConfig` of one share, for the claim's GPU `requests`."""
    sharing: dict[str, object] = {"strategy": strategy}
    if strategy == "MPS":
        mps: dict[str, object] = {
            "defaultActiveThreadPercentage": active_thread_percent(share_milli)
        }
        if gpu_memory_bytes:
            mps["defaultPinnedDeviceMemoryLimit"] = (
                f"{pinned_memory_mib(share_milli, gpu_memory_bytes)}Mi"
            )
        sharing["mpsConfig"] = mps
    else:
        sharing["timeSlicingConfig"] = {"interval": "Default"}
    return OpaqueConfig(
        driver=NVIDIA_GPU_DRIVER,
        parameters={
            "apiVersion": NVIDIA_CONFIG_API_VERSION,
            "kind": "GpuConfig",
            "sharing": sharing,
        },
        requests=requests,
        source="FromClaim",
    )
