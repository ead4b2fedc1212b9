"""Published measurements the step-time model is checked against, each with its source.

`TRAINING_POINTS` are end-to-end training throughputs (TFLOPS per GPU as the source counts
them) with everything the model needs to predict them; `LINK_POINTS` are link-level
bandwidths checked against `voltpack.perf.links`; `UNSCORED_POINTS` are published numbers
whose setup could not be found, kept so that the gap is visible rather than filled in.
`benchmarks/step_time_model.py` and `tests/unit/test_step_time.py` read these lists.
"""

from __future__ import annotations

from dataclasses import dataclass

from voltpack.model.gpu_sku import GpuSku, default_catalog
from voltpack.model.host_layout import NicDistance
from voltpack.perf.links import LinkSpeed, network_speed
from voltpack.perf.step_time import StepTime, ideal_links, predict_step_time
from voltpack.perf.training_models import (
    Parallelism,
    TrainingModel,
    default_parallelism,
    default_training_models,
)

SC21_TABLE_1 = (
    "Narayanan et al., SC'21 (arXiv 2104.04473), Table 1: Selene, DGX A100 80GB nodes "
    "(8 GPUs, NVSwitch), 8 x 200 Gbit/s HDR InfiniBand per node; configs from "
    "github.com/NVIDIA/Megatron-LM examples/sc21/run_table_1.sh"
)


@dataclass(frozen=True)
class TrainingPoint:
    """A published training throughput and the setup it was measured on."""

    name: str
    model: str
    """Name in `voltpack/perf/training_models.yaml` (shape, batch, parallelism rule)."""
    gpus: int
    sku: str
    gpus_per_node: int
    nic_class: str
    nic_line_rate_gbit_s: float
    nics_per_node: int
    published_tflops_per_gpu: float
    source: str

    def training_model(self) -> TrainingModel:
        """The catalog entry this point trains."""
        return default_training_models().get(self.model)

    def gpu(self) -> GpuSku:
        """The GPU SKU of the measurement."""
        return default_catalog().get(self.sku)

    def parallelism(self) -> Parallelism:
        """The published parallelism (the catalog rule applied to `gpus`)."""
        return default_parallelism(self.training_model(), self.gpus)

    def predict(self) -> StepTime:
        """The model's prediction for this point (Megatron's rank order on identical nodes)."""
        parallelism = self.parallelism()
        sku = self.gpu()
        links = ideal_links(
            sku,
            parallelism,
            gpus_per_node=self.gpus_per_node,
            nic_class=self.nic_class,
            line_rate_gbit_s=self.nic_line_rate_gbit_s,
            nics_per_node=self.nics_per_node,
        )
        return predict_step_time(self.training_model(), parallelism, sku, links)


@dataclass(frozen=True)
class LinkPoint:
    """A published link-level bandwidth and the arguments of `network_speed` it concerns."""

    name: str
    nic_class: str
    line_rate_gbit_s: float
    nics_per_gpu: float
    alignment: NicDistance
    published_gbyte_s: float
    source: str
    independent: bool
    """False when the constant being checked was derived from this very point."""

    def predict(self) -> LinkSpeed:
        """`network_speed` for this point's arguments."""
        return network_speed(
            self.nic_class, self.line_rate_gbit_s, self.nics_per_gpu, self.alignment, 1.0
        )


@dataclass(frozen=True)
class UnscoredPoint:
    """A published number the model cannot be checked against yet, and why."""

    name: str
    published: str
    source: str
    missing: str


def _sc21(model: str, gpus: int, tflops: float) -> TrainingPoint:
    return TrainingPoint(
        name=f"SC21 Table 1 {model.removeprefix('megatron-')} on {gpus} A100",
        model=model,
        gpus=gpus,
        sku="A100-80GB",
        gpus_per_node=8,
        nic_class="infiniband",
        nic_line_rate_gbit_s=200.0,
        nics_per_node=8,
        published_tflops_per_gpu=tflops,
        source=SC21_TABLE_1,
    )


TRAINING_POINTS: tuple[TrainingPoint, ...] = (
    _sc21("megatron-1.7b", 32, 137.0),
    _sc21("megatron-3.6b", 64, 138.0),
    _sc21("megatron-7.5b", 128, 142.0),
    _sc21("megatron-18.4b", 256, 135.0),
    _sc21("megatron-39.1b", 512, 138.0),
    _sc21("megatron-76.1b", 1024, 140.0),
    _sc21("megatron-145.6b", 1536, 148.0),
    _sc21("megatron-310.1b", 1920, 155.0),
    _sc21("megatron-529.6b", 2520, 163.0),
    _sc21("megatron-1t", 3072, 163.0),
)

LINK_POINTS: tuple[LinkPoint, ...] = (
    LinkPoint(
        name="Azure NCCL test: GPU-NIC across NUMA vs aligned (ratio 25/56)",
        nic_class="infiniband",
        line_rate_gbit_s=200.0,
        nics_per_gpu=1.0,
        alignment=NicDistance.SAME_HOST,
        published_gbyte_s=25.0 / 56.0,
        source=(
            "Azure's published NCCL all-reduce test as quoted in voltpack issue 19: 56 GB/s "
            "bus bandwidth aligned vs 25 GB/s across NUMA; checked as the ratio of "
            "network_speed(SAME_HOST) to network_speed(SAME_PCIE_SWITCH), because the test's "
            "VM size and NIC line rate were not found"
        ),
        independent=False,
    ),
)

UNSCORED_POINTS: tuple[UnscoredPoint, ...] = (
    UnscoredPoint(
        name="Holmes GPT-3.6B, 4 nodes: InfiniBand / RoCE / Ethernet",
        published="197 / 160 / 122 TFLOPS per GPU",
        source="Yang et al., Holmes, ICPP'24 (arXiv 2312.03549)",
        missing=(
            "parallelism (TP/PP/DP), micro/global batch, NIC line rates and NICs per node of "
            "each cluster: the paper's setup section was not reachable; the released "
            "config.json (github.com/CodexDive/Holmes) shows 4 InfiniBand HCAs vs 2 RoCE "
            "HCAs per node and NCCL's socket transport for Ethernet, but no line rates"
        ),
    ),
    UnscoredPoint(
        name="Holmes GPT-3.6B, 8 nodes: InfiniBand / RoCE / Ethernet",
        published="148 / 145 / 83 TFLOPS per GPU",
        source="Yang et al., Holmes, ICPP'24 (arXiv 2312.03549)",
        missing="as for 4 nodes",
    ),
)


def error_percent(predicted: float, published: float) -> float:
    """Signed relative error of a prediction, in percent of the published value."""
    return (predicted - published) / published * 100.0


def link_ratio_prediction(point: LinkPoint) -> float:
    """Predicted bandwidth of `point` relative to the same link aligned (SAME_PCIE_SWITCH)."""
    aligned = network_speed(
        point.nic_class,
        point.line_rate_gbit_s,
        point.nics_per_gpu,
        NicDistance.SAME_PCIE_SWITCH,
        1.0,
    )
    return point.predict().bandwidth_gbyte_s / aligned.bandwidth_gbyte_s
