"""Domain types shared by every part of voltpack. Imports nothing else of voltpack."""

from voltpack.model.cluster import MILLI_PER_GPU, Gpu, Node
from voltpack.model.decision import Decision, Placement
from voltpack.model.errors import (
    CatalogError,
    InvalidRequestError,
    PolicyError,
    TraceFormatError,
    VoltpackError,
)
from voltpack.model.gpu_sku import GpuCatalog, GpuSku, default_catalog
from voltpack.model.workload import Pod, PodGroup

__all__ = [
    "MILLI_PER_GPU",
    "CatalogError",
    "Decision",
    "Gpu",
    "GpuCatalog",
    "GpuSku",
    "InvalidRequestError",
    "Node",
    "Placement",
    "Pod",
    "PodGroup",
    "PolicyError",
    "TraceFormatError",
    "VoltpackError",
    "default_catalog",
]
