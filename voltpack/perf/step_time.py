"""Time of one training step of a transformer under 3D parallelism on a concrete placement.

The model follows Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM" (SC'21, here SC21):

- **Compute.** FLOPs per step are SC21's eq. (3), generalised to grouped-query attention and
  gated MLPs: per token and layer, a forward pass is 2 x (layer weights) + 4·s·h FLOPs of
  matrix multiplies, the logit layer 2·h·V; training is 3 forward passes (4 with activation
  recomputation; the logit layer is not recomputed). For the GPT shapes of SC21 this is
  exactly 96·B·s·l·h²·(1 + s/6h + V/16lh). The time of a pass is a roofline sum: the matrix
  multiplies at `GEMM_EFFICIENCY` of the SKU's peak (bf16, else fp16) plus the memory traffic
  of the element-wise operations (layer norms, GELU, dropout, softmax, residuals), taken as
  `ELEMENTWISE_TRAFFIC_FACTOR` x the activation bytes Korthikanti et al. count per layer
  ("Reducing Activation Recomputation in Large Transformer Models", arXiv 2205.05198,
  eq. 2 with tensor parallelism t: s·b·h·(10 + 24/t + 5·a·s/(h·t)) bytes), at
  `MEMORY_EFFICIENCY` of the SKU's memory bandwidth. With fused (flash) attention the
  5·a·s/(h·t) term is not materialised. This is what makes small hidden sizes and wide
  tensor parallelism less efficient per FLOP, as SC21 observes (Table 1, Fig. 15).
- **Tensor parallelism.** Per layer and micro-batch, two all-reduces of b·s·h activations in
  the forward pass and two in the backward (two more when activations are recomputed), ring
  all-reduce over the tensor group's link: 2(t-1)/t · bytes / bandwidth + 2(t-1) · latency.
  Not overlapped with compute (as in SC21's Megatron).
- **Pipeline parallelism.** Per micro-batch and model chunk, one send of b·s·h/t activations
  forward and one of gradients backward (SC21's scatter/gather optimisation splits the
  tensor over the t ranks of a stage), on the critical path. The bubble is (p-1)/(v·m) of
  the stage's compute and tensor communication (SC21 eq. for the interleaved schedule; m =
  micro-batches per pipeline = B / (b·d), v = model chunks per GPU).
- **Data parallelism.** Ring all-reduce of the gradients of parameters / (t·p) at
  `GRADIENT_BYTES` bytes each over the data group's link, after the last backward pass and
  exposed in full: Megatron-LM's default (`--overlap-grad-reduce` is off unless passed), what
  SC21's runs did, and the only assumption under which the model follows Holmes' measured
  slowdown from 4 to 8 nodes (see `published_points.py`). A run that overlaps the all-reduce
  with the backward pass of the last micro-batch (PyTorch DDP buckets, Megatron's
  `--overlap-grad-reduce`) is predicted with `overlap_data_parallel=True`.

- **ZeRO-3 / FSDP** (`sharding: zero3`). Parameters, gradients and optimizer state are
  sharded over the data-parallel group (Rajbhandari et al., "ZeRO: Memory Optimizations
  Toward Training Trillion Parameter Models", SC'20, here ZeRO). Per micro-batch each GPU
  all-gathers the parameters of its tensor/pipeline slice before the forward pass, again
  before the backward pass (they are freed after use), and reduce-scatters the gradients:
  3 x (d-1)/d x bytes, i.e. 1.5x the volume of a ring all-reduce of the same gradients (ZeRO
  sec. 7.2.2, "ZeRO-DP ... Pos+g+p ... 1.5x"). Every micro-batch repeats it (parameters are
  re-gathered for each micro-batch, and DeepSpeed's stage 3 reduce-scatters each
  micro-batch's gradients into the owner's partition). The collectives are prefetched layer
  by layer (DeepSpeed's prefetch bucket, FSDP's forward/backward prefetch), so they overlap
  the compute of the neighbouring layers: the exposed time is what exceeds the compute time,
  and at least one layer's share (the first gather of each pass, which nothing hides). All of
  it runs on the data group's link (`links.data`), so a slower or shared data link lengthens
  it.
- **Mixture of experts** (`experts` > 1). FLOPs count the `top_k` experts a token uses; the
  weights (and gradients) count all experts. Expert parallelism of degree `expert_parallel`
  is laid over the data-parallel ranks (Megatron-Core's layout), so its traffic uses
  `links.data`: per MoE layer and micro-batch, two all-to-alls in the forward pass (dispatch
  and combine) and two in the backward (two more when activations are recomputed), each of
  b·s/t tokens x h x top_k x 2 bytes per GPU (b·s/t: the tokens one GPU holds with sequence
  parallelism), (e-1)/e of it leaving the GPU. They are on the critical path (Megatron's
  default dispatcher does not overlap them) and count in the pipeline stage time. Gradients
  of the replicated weights are all-reduced over the data group; those of the experts over
  the d/e ranks that hold the same experts.

Not modelled: the optimizer step, data loading, the embedding's all-reduce between first and
last pipeline stage, stage imbalance from the embedding and logit layers, MoE load imbalance
and token dropping, ZeRO stages 1-2 (they move the same bytes as the all-reduce).

Constants (sources):

- `GEMM_EFFICIENCY_BY_ARCHITECTURE` Ampere 0.64: the one calibrated constant. Set once from a
  hand roofline calculation on the smallest and largest SC21 Table 1 points (1.7B on 32 and
  1T on 3072 A100), before the model was run on the others, and not tuned afterwards. It is
  in the range of large 16-bit GEMMs on A100 (cuBLAS reaches ~70-80 % of 312 TFLOPS on large
  square GEMMs; transformer GEMMs and launch gaps reach less). A change of 0.05 moves the
  predictions by about 5 %. Other architectures: estimates, not checked against any
  published point (Hopper 0.55: dense peak grew 3.2x over A100 while memory bandwidth grew
  1.6x, so the same kernels reach a smaller share of peak).
- `MEMORY_EFFICIENCY` 0.80: estimate; element-wise kernels stream at ~80 % of HBM peak.
- `ELEMENTWISE_TRAFFIC_FACTOR` 2.0: estimate; each activation byte is written once and read
  once by the next element-wise or matrix kernel.
- `ACTIVATION_BYTES` 2, `GRADIENT_BYTES` 2: bf16/fp16 mixed precision (SC21 trains in fp16;
  Megatron all-reduces gradients in the training dtype unless told to accumulate in fp32).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from voltpack.model.gpu_sku import GpuSku
from voltpack.model.host_layout import NicDistance
from voltpack.perf.links import LinkSpeed, PerfModelError, network_speed, nvlink_speed, slowest
from voltpack.perf.training_models import Parallelism, TrainingModel

__all__ = [
    "GroupLinks",
    "LinkSpeed",
    "Parallelism",
    "PerfModelError",
    "StepTime",
    "all_to_all_s",
    "bubble_fraction",
    "flops_per_step",
    "ideal_links",
    "micro_batches_per_pipeline",
    "peak_tflops",
    "predict_step_time",
    "ring_all_gather_s",
    "ring_all_reduce_s",
]

GEMM_EFFICIENCY_BY_ARCHITECTURE: Final[dict[str, float]] = {
    "Volta": 0.64,
    "Turing": 0.64,
    "Ampere": 0.64,
    "Ada": 0.64,
    "Hopper": 0.55,
    "Blackwell": 0.55,
    "CDNA2": 0.55,
    "CDNA3": 0.55,
}
DEFAULT_GEMM_EFFICIENCY: Final = 0.64
MEMORY_EFFICIENCY: Final = 0.80
ELEMENTWISE_TRAFFIC_FACTOR: Final = 2.0
ACTIVATION_BYTES: Final = 2
GRADIENT_BYTES: Final = 2
ZERO3_COLLECTIVES_PER_MICRO_BATCH: Final = 3
"""ZeRO-3: all-gather (forward), all-gather (backward), reduce-scatter (gradients); each moves
(d-1)/d of the slice, together 1.5x a ring all-reduce (ZeRO sec. 7.2.2)."""
REPLICATED_ACTIVATION_BYTES_PER_H: Final = 10.0
"""Korthikanti et al. eq. 2: per token and layer, 10·h bytes not split by tensor parallelism
(layer-norm inputs, dropout masks and outputs around attention and MLP) ..."""
SPLIT_ACTIVATION_BYTES_PER_H: Final = 24.0
"""... and 24·h bytes split over the t tensor-parallel ranks (QKV, MLP, GELU activations)."""
ATTENTION_SCORE_BYTES_PER_AS: Final = 5.0
"""... and 5·a·s bytes per token for attention scores, softmax and its dropout (split by t)."""


@dataclass(frozen=True)
class GroupLinks:
    """The slowest link each parallel group crosses in a concrete placement."""

    tensor: LinkSpeed
    pipeline: LinkSpeed
    data: LinkSpeed


@dataclass(frozen=True)
class StepTime:
    """One optimizer step, in seconds, split by cause; `total_s` is their sum."""

    compute_s: float
    tensor_comm_s: float
    pipeline_comm_s: float
    bubble_s: float
    data_comm_s: float
    """Exposed communication on the data group's link: the gradient all-reduce, or ZeRO-3's
    gathers and reduce-scatters, plus MoE all-to-alls."""
    total_s: float
    achieved_tflops_per_gpu: float
    """FLOPs per step as SC21 counts them (recomputation included) / total_s / GPUs."""
    zero3_comm_s: float = 0.0
    """The ZeRO-3 part of `data_comm_s` (exposed)."""
    expert_comm_s: float = 0.0
    """The MoE all-to-all part of `data_comm_s`."""
    data_bytes_per_gpu: float = 0.0
    """Bytes each GPU sends over the data group's link per step (all of it, hidden or not):
    what a flow-level network model needs as the job's demand on that link."""

    @property
    def communication_s(self) -> float:
        """Time spent in exposed communication (tensor + pipeline + data)."""
        return self.tensor_comm_s + self.pipeline_comm_s + self.data_comm_s


def peak_tflops(sku: GpuSku) -> float:
    """Dense 16-bit peak of `sku`: bf16, else fp16; raise PerfModelError if neither is known."""
    peak = sku.bf16_tflops if sku.bf16_tflops is not None else sku.fp16_tflops
    if peak is None or peak <= 0:
        raise PerfModelError(f"GPU {sku.name}: catalog has no bf16_tflops or fp16_tflops")
    return peak


def ring_all_reduce_s(size_bytes: float, ranks: int, link: LinkSpeed) -> float:
    """Ring all-reduce of `size_bytes` over `ranks`: 2(n-1)/n · bytes/bw + 2(n-1) · latency."""
    if ranks <= 1 or size_bytes <= 0:
        return 0.0
    steps = 2 * (ranks - 1)
    transfer_s = steps / ranks * size_bytes / (link.bandwidth_gbyte_s * 1e9)
    return transfer_s + steps * link.latency_s


def ring_all_gather_s(size_bytes: float, ranks: int, link: LinkSpeed) -> float:
    """Ring all-gather (or reduce-scatter) of a buffer of `size_bytes` in full, each of
    `ranks` holding 1/n of it: (n-1)/n · bytes/bw + (n-1) · latency (half a ring all-reduce)."""
    if ranks <= 1 or size_bytes <= 0:
        return 0.0
    steps = ranks - 1
    transfer_s = steps / ranks * size_bytes / (link.bandwidth_gbyte_s * 1e9)
    return transfer_s + steps * link.latency_s


def all_to_all_s(size_bytes: float, ranks: int, link: LinkSpeed) -> float:
    """All-to-all of `size_bytes` per GPU over `ranks`: (n-1)/n of it leaves the GPU, in n-1
    messages (pairwise exchange): (n-1)/n · bytes/bw + (n-1) · latency."""
    if ranks <= 1 or size_bytes <= 0:
        return 0.0
    steps = ranks - 1
    transfer_s = steps / ranks * size_bytes / (link.bandwidth_gbyte_s * 1e9)
    return transfer_s + steps * link.latency_s


def bubble_fraction(pipeline: int, micro_batches: float, virtual_stages: int = 1) -> float:
    """Pipeline bubble as a share of the ideal pipeline time: (p - 1) / (v · m)."""
    if pipeline < 1 or micro_batches <= 0 or virtual_stages < 1:
        raise PerfModelError("bubble_fraction needs pipeline >= 1, micro_batches > 0, v >= 1")
    return (pipeline - 1) / (virtual_stages * micro_batches)


def _forward_passes(model: TrainingModel) -> int:
    return 4 if model.activation_recompute else 3


def flops_per_step(model: TrainingModel) -> float:
    """Matrix-multiply FLOPs of one step, SC21 eq. (3) (recomputation counted; a MoE model
    counts the `top_k` experts each token uses)."""
    tokens = model.global_batch_size * model.sequence_length
    h = model.hidden_size
    layer_forward = 2 * model.active_layer_parameters + 4 * model.sequence_length * h
    logits_forward = 2 * h * model.vocab_size
    return float(
        tokens * (model.layers * layer_forward * _forward_passes(model) + 3 * logits_forward)
    )


def _gemm_efficiency(sku: GpuSku) -> float:
    return GEMM_EFFICIENCY_BY_ARCHITECTURE.get(sku.architecture or "", DEFAULT_GEMM_EFFICIENCY)


def _elementwise_bytes_per_token_layer(model: TrainingModel, tensor: int) -> float:
    """Activation bytes per token and layer on one GPU (Korthikanti et al. eq. 2, which
    counts 16-bit activations)."""
    h = model.hidden_size
    per_h = REPLICATED_ACTIVATION_BYTES_PER_H + SPLIT_ACTIVATION_BYTES_PER_H / tensor
    if not model.fused_attention:
        per_h += (
            ATTENTION_SCORE_BYTES_PER_AS
            * model.attention_heads
            * model.sequence_length
            / (h * tensor)
        )
    return per_h * h


def _compute_s(model: TrainingModel, parallelism: Parallelism, sku: GpuSku) -> float:
    """Per-GPU compute time of one step: matrix multiplies plus element-wise memory traffic."""
    gpus = parallelism.world_size
    peak_flop_s = peak_tflops(sku) * 1e12 * _gemm_efficiency(sku)
    gemm_s = flops_per_step(model) / gpus / peak_flop_s
    if sku.memory_bandwidth_gbps is None or sku.memory_bandwidth_gbps <= 0:
        return gemm_s
    tokens_per_pipeline = model.global_batch_size * model.sequence_length / parallelism.data
    layers_per_stage = model.layers / parallelism.pipeline
    traffic_bytes = (
        ELEMENTWISE_TRAFFIC_FACTOR
        * _forward_passes(model)
        * tokens_per_pipeline
        * layers_per_stage
        * _elementwise_bytes_per_token_layer(model, parallelism.tensor)
    )
    memory_s = traffic_bytes / (sku.memory_bandwidth_gbps * 1e9 * MEMORY_EFFICIENCY)
    return gemm_s + memory_s


def micro_batches_per_pipeline(model: TrainingModel, parallelism: Parallelism) -> float:
    """m = global batch / (micro-batch · data); raise PerfModelError if below 1."""
    micro_batches = model.global_batch_size / (model.micro_batch_size * parallelism.data)
    if micro_batches < 1:
        raise PerfModelError(
            f"{model.name}: global_batch_size {model.global_batch_size} is smaller than "
            f"micro_batch_size x data ({model.micro_batch_size} x {parallelism.data}); "
            "lower the data-parallel degree or the micro-batch size"
        )
    return micro_batches


def _check_fits(model: TrainingModel, parallelism: Parallelism) -> None:
    chunks = parallelism.pipeline * parallelism.virtual_stages
    if chunks > model.layers:
        raise PerfModelError(
            f"{model.name}: pipeline x virtual_stages ({chunks}) exceeds layers ({model.layers})"
        )
    if parallelism.tensor > model.attention_heads:
        raise PerfModelError(
            f"{model.name}: tensor ({parallelism.tensor}) exceeds attention_heads "
            f"({model.attention_heads})"
        )
    if parallelism.data % model.expert_parallel:
        raise PerfModelError(
            f"{model.name}: data ({parallelism.data}) must be a multiple of expert_parallel "
            f"({model.expert_parallel})"
        )


def predict_step_time(
    model: TrainingModel,
    parallelism: Parallelism,
    sku: GpuSku,
    links: GroupLinks,
    overlap_data_parallel: bool = False,
) -> StepTime:
    """Predicted time of one optimizer step of `model` on `sku` GPUs placed as `links` says.

    `overlap_data_parallel` True: the gradient all-reduce hides behind the last micro-batch's
    backward pass (Megatron's `--overlap-grad-reduce`); by default it is exposed in full.
    """
    _check_fits(model, parallelism)
    t, p, v = parallelism.tensor, parallelism.pipeline, parallelism.virtual_stages
    m = micro_batches_per_pipeline(model, parallelism)
    compute_s = _compute_s(model, parallelism, sku)

    activation_bytes = (
        model.micro_batch_size * model.sequence_length * model.hidden_size * ACTIVATION_BYTES
    )
    collectives_per_layer = 6 if model.activation_recompute else 4
    layers_per_stage = model.layers / p
    tensor_comm_s = (
        layers_per_stage
        * m
        * collectives_per_layer
        * ring_all_reduce_s(activation_bytes, t, links.tensor)
    )

    expert_comm_s, expert_bytes = _expert_all_to_all(model, parallelism, links.data, m)

    pipeline_comm_s = 0.0
    bubble_s = 0.0
    if p > 1:
        send_s = activation_bytes / t / (links.pipeline.bandwidth_gbyte_s * 1e9)
        pipeline_comm_s = 2 * m * v * (send_s + links.pipeline.latency_s)
        bubble_s = bubble_fraction(p, m, v) * (compute_s + tensor_comm_s + expert_comm_s)

    zero3_comm_s = 0.0
    if model.sharding == "zero3":
        zero3_comm_s, sync_bytes = _zero3_sync(model, parallelism, links.data, m, compute_s)
        sync_comm_s = zero3_comm_s
    else:
        all_reduce_s, sync_bytes = _gradient_all_reduce(model, parallelism, links.data)
        backward_share = (_forward_passes(model) - 1) / _forward_passes(model)
        overlap_window_s = compute_s / m * backward_share if overlap_data_parallel else 0.0
        sync_comm_s = max(0.0, all_reduce_s - overlap_window_s)
    data_comm_s = sync_comm_s + expert_comm_s

    total_s = compute_s + tensor_comm_s + pipeline_comm_s + bubble_s + data_comm_s
    achieved = flops_per_step(model) / total_s / parallelism.world_size / 1e12
    return StepTime(
        compute_s=compute_s,
        tensor_comm_s=tensor_comm_s,
        pipeline_comm_s=pipeline_comm_s,
        bubble_s=bubble_s,
        data_comm_s=data_comm_s,
        total_s=total_s,
        achieved_tflops_per_gpu=achieved,
        zero3_comm_s=zero3_comm_s,
        expert_comm_s=expert_comm_s,
        data_bytes_per_gpu=sync_bytes + expert_bytes,
    )


def _gradient_all_reduce(
    model: TrainingModel, parallelism: Parallelism, link: LinkSpeed
) -> tuple[float, float]:
    """(seconds, bytes sent per GPU) of the step's gradient all-reduce: the replicated weights
    over the data group, a MoE model's experts over the d / expert_parallel ranks that hold
    the same experts."""
    t, p, d = parallelism.tensor, parallelism.pipeline, parallelism.data
    ep = model.expert_parallel
    replicated = model.layers * model.dense_layer_parameters + model.vocab_size * model.hidden_size
    replicated_bytes = replicated / (t * p) * GRADIENT_BYTES
    seconds = ring_all_reduce_s(replicated_bytes, d, link)
    sent = 2 * (d - 1) / d * replicated_bytes
    if model.is_moe:
        expert_bytes = (
            model.layers * model.experts * model.expert_parameters / (t * p * ep) * GRADIENT_BYTES
        )
        groups = max(1, d // ep)
        seconds += ring_all_reduce_s(expert_bytes, groups, link)
        sent += 2 * (groups - 1) / groups * expert_bytes
    return seconds, sent


def _zero3_sync(
    model: TrainingModel,
    parallelism: Parallelism,
    link: LinkSpeed,
    micro_batches: float,
    compute_s: float,
) -> tuple[float, float]:
    """(exposed seconds, bytes sent per GPU) of ZeRO-3's per-step collectives (module
    docstring): per micro-batch two all-gathers of the parameters and one reduce-scatter of
    the gradients over the data group, hidden behind compute except one layer's share."""
    t, p, d = parallelism.tensor, parallelism.pipeline, parallelism.data
    if d <= 1:
        return 0.0, 0.0
    slice_bytes = model.parameter_count / (t * p) * GRADIENT_BYTES
    collective_s = ring_all_gather_s(slice_bytes, d, link)
    total_s = micro_batches * ZERO3_COLLECTIVES_PER_MICRO_BATCH * collective_s
    unhidden_s = total_s / (model.layers / p)
    exposed_s = max(unhidden_s, total_s - compute_s)
    sent = micro_batches * ZERO3_COLLECTIVES_PER_MICRO_BATCH * (d - 1) / d * slice_bytes
    return exposed_s, sent


def _expert_all_to_all(
    model: TrainingModel, parallelism: Parallelism, link: LinkSpeed, micro_batches: float
) -> tuple[float, float]:
    """(seconds, bytes sent per GPU) of a MoE model's token all-to-alls in one step."""
    ep = model.expert_parallel
    if not model.is_moe or ep <= 1:
        return 0.0, 0.0
    t, p = parallelism.tensor, parallelism.pipeline
    tokens = model.micro_batch_size * model.sequence_length / t
    size_bytes = tokens * model.hidden_size * model.top_k * ACTIVATION_BYTES
    per_micro_batch = (model.layers / p) * (6 if model.activation_recompute else 4)
    count = micro_batches * per_micro_batch
    seconds = count * all_to_all_s(size_bytes, ep, link)
    sent = count * (ep - 1) / ep * size_bytes
    return seconds, sent


def _group_link(
    ranks: int,
    stride: int,
    gpus_per_node: int,
    intra: LinkSpeed,
    network: Callable[[int], LinkSpeed],
) -> LinkSpeed:
    """Slowest link of a group of `ranks` GPUs whose global ranks are `stride` apart."""
    if ranks <= 1 or ranks * stride <= gpus_per_node:
        return intra
    ranks_per_node = max(1, min(ranks, gpus_per_node // stride))
    return slowest(intra, network(ranks_per_node))


def ideal_links(
    sku: GpuSku,
    parallelism: Parallelism,
    gpus_per_node: int,
    nic_class: str,
    line_rate_gbit_s: float,
    nics_per_node: int,
    alignment: NicDistance = NicDistance.SAME_PCIE_SWITCH,
    oversubscription: float = 1.0,
) -> GroupLinks:
    """Links of Megatron's rank order (tensor fastest, then data, then pipeline) on identical
    nodes of `gpus_per_node` GPUs, each with `nics_per_node` NICs of one class.

    A group that stays inside a node uses `nvlink_speed`; one that spans nodes is limited
    by the network (its ranks on one node share their NICs' rings) or by NVLink.
    """
    if gpus_per_node < 1 or nics_per_node < 1:
        raise PerfModelError("gpus_per_node and nics_per_node must be >= 1")
    intra = nvlink_speed(sku)

    def network(ranks_per_node: int) -> LinkSpeed:
        return network_speed(
            nic_class,
            line_rate_gbit_s,
            nics_per_node / gpus_per_node,
            alignment,
            oversubscription,
            ranks_per_node=ranks_per_node,
        )

    t, d, p = parallelism.tensor, parallelism.data, parallelism.pipeline
    pipeline = intra if p * t * d <= gpus_per_node else slowest(intra, network(1))
    return GroupLinks(
        tensor=_group_link(t, 1, gpus_per_node, intra, network),
        pipeline=pipeline,  # point-to-point: each GPU sends its slice over its own NIC share
        data=_group_link(d, t, gpus_per_node, intra, network),
    )
