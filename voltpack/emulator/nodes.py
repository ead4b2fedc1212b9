"""Simulated nodes: a `voltpack.model.Node` as the v1 Node a kubelet would register."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime

from voltpack.emulator.objects import JsonObj, timestamp
from voltpack.model import Node

GPU_RESOURCE = "nvidia.com/gpu"
GPU_MODEL_LABEL = "voltpack.io/gpu-model"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
EMULATED_ANNOTATION = "voltpack.io/emulated"
KUBELET_VERSION = "v1.32.0-voltpack"
MAX_PODS = 110


def label_value(text: str) -> str:
    """`text` made a valid label value: invalid characters become '-', at most 63 chars."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "-", text)[:63]
    return cleaned.strip("-_.")


def cpu_quantity(cpu_milli: int) -> str:
    return str(cpu_milli // 1000) if cpu_milli % 1000 == 0 else f"{cpu_milli}m"


def node_ip(name: str) -> str:
    """A stable fake InternalIP in 10.0.0.0/8 derived from the node name."""
    digest = hashlib.sha256(name.encode()).digest()
    return f"10.{digest[0]}.{digest[1]}.{max(digest[2], 1)}"


def node_object(node: Node, now: datetime, *, device_plugin: bool = True) -> JsonObj:
    """The v1 Node for a model node: capacity with `nvidia.com/gpu`, GPU-model labels, Ready.

    With `device_plugin=False` (DRA: the GPU DRA driver replaces the device plugin) the node
    advertises no `nvidia.com/gpu`; its GPUs are published as ResourceSlices instead.
    """
    capacity = {
        "cpu": cpu_quantity(node.cpu_milli),
        "memory": f"{node.memory_mib}Mi",
        "pods": str(MAX_PODS),
        "ephemeral-storage": "100Gi",
    }
    labels = {
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "voltpack-emulated",
    }
    if node.gpu_count:
        if device_plugin:
            capacity[GPU_RESOURCE] = str(node.gpu_count)
        labels[GPU_COUNT_LABEL] = str(node.gpu_count)
        if node.gpu_model:
            labels[GPU_MODEL_LABEL] = label_value(node.gpu_model)
            labels[GPU_PRODUCT_LABEL] = label_value(node.gpu_model)
    stamp = timestamp(now)
    digest = hashlib.sha256(node.name.encode()).hexdigest()

    def condition(ctype: str, status: str, reason: str, message: str) -> JsonObj:
        return {
            "type": ctype,
            "status": status,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
            "reason": reason,
            "message": message,
        }

    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": labels,
            "annotations": {EMULATED_ANNOTATION: "true"},
        },
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "ok"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "ok"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "ok"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": node_ip(node.name)},
                {"type": "Hostname", "address": node.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": digest[:32],
                "containerRuntimeVersion": "containerd://1.7.0",
                "kernelVersion": "6.1.0-voltpack",
                "kubeProxyVersion": KUBELET_VERSION,
                "kubeletVersion": KUBELET_VERSION,
                "machineID": digest[32:64],
                "operatingSystem": "linux",
                "osImage": "voltpack emulated node",
                "systemUUID": digest[:32],
            },
            "phase": "Running",
        },
    }
