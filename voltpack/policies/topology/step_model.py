"""A gang's predicted step time on a placement: the perf model bound to one job and topology."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from voltpack.model.decision import Placement
from voltpack.model.gpu_sku import GpuSku, default_catalog
from voltpack.model.host_layout import HostLayout
from voltpack.model.resources.topology import TopologySpec
from voltpack.model.snapshot import ClusterSnapshot, IntArray
from voltpack.model.topology import ClusterTopology, FloatArray
from voltpack.model.workload import PodGroup
from voltpack.perf.contention import NO_SLOWDOWN, NetworkGang, Slowdowns, comm_duty
from voltpack.perf.links import PerfModelError
from voltpack.perf.network_flows import gang_flows
from voltpack.perf.placement_links import PlacementParts, placement_link_parts
from voltpack.perf.placement_links import placement_links as links_of
from voltpack.perf.step_time import StepTime, predict_step_time
from voltpack.perf.training_models import Parallelism, TrainingModel, default_training_models


@dataclass
class TopologyStepModel:
    """Step time of `model` at `parallelism` on `sku` GPUs, placed in `topology`."""

    topology: ClusterTopology
    model: TrainingModel
    parallelism: Parallelism
    sku: GpuSku
    _ideal_s: float | None = field(default=None, repr=False)

    def predict(self, rank_nodes: IntArray, rank_gpus: IntArray) -> StepTime:
        """The step's parts on this placement (rank r on rank_nodes[r], GPU rank_gpus[r])."""
        links = links_of(self.topology, rank_nodes, rank_gpus, self.parallelism, self.sku)
        return predict_step_time(self.model, self.parallelism, self.sku, links)

    def step_s(self, rank_nodes: IntArray, rank_gpus: IntArray) -> float:
        """Seconds per step on this placement."""
        return self.predict(rank_nodes, rank_gpus).total_s

    def score_s(self, rank_nodes: IntArray, rank_gpus: IntArray) -> float:
        """What placement minimises: the step time (the gang is priced alone)."""
        return self.step_s(rank_nodes, rank_gpus)

    def commit(self, rank_nodes: IntArray, rank_gpus: IntArray) -> None:
        """Nothing to record: the gang is priced alone."""
        del rank_nodes, rank_gpus

    def link_busy(self) -> tuple[FloatArray, ...] | None:
        """Unknown: the gang is priced alone."""
        return None

    def parts(self, rank_nodes: IntArray, rank_gpus: IntArray) -> PlacementParts:
        """The placement's local and network hops, uplinks not divided by oversubscription
        (the contention model shares them explicitly)."""
        return placement_link_parts(
            self.topology, rank_nodes, rank_gpus, self.parallelism, self.sku, oversubscribed=False
        )

    def placed(self, rank_nodes: IntArray, rank_gpus: IntArray) -> PlacedGang:
        """The gang on this placement, ready to share the network with others."""
        parts = self.parts(rank_nodes, rank_gpus)
        flows = gang_flows(self.topology, rank_nodes, rank_gpus, self.parallelism)
        alone = predict_step_time(self.model, self.parallelism, self.sku, parts.links())
        network = NetworkGang(flows, comm_duty(alone, flows.kinds()))
        return PlacedGang(self, parts, network, self.parallelism.world_size)

    def ideal_s(self) -> float:
        """Seconds per step on the best placement the cluster's usual host could give: ranks
        packed in order onto as few such hosts as hold the job, every host under one leaf."""
        if self._ideal_s is None:
            host = _usual_host(self.topology.hosts)
            per_host = max(1, host.gpu_count)
            world = self.parallelism.world_size
            names = [f"ideal-{i}" for i in range(-(-world // per_host))]
            spec = TopologySpec(levels=list(self.topology.levels), nvlink_clique_label=None)
            together = {level.node_label: "one" for level in self.topology.levels}
            ideal = ClusterTopology.from_labels(
                spec, names, dict.fromkeys(names, together), hosts=dict.fromkeys(names, host)
            )
            ranks = np.arange(world, dtype=np.int64)
            self._ideal_s = self._step_on(ideal, ranks // per_host, ranks % per_host)
        return self._ideal_s

    def _step_on(self, topology: ClusterTopology, nodes: IntArray, gpus: IntArray) -> float:
        links = links_of(topology, nodes, gpus, self.parallelism, self.sku)
        return predict_step_time(self.model, self.parallelism, self.sku, links).total_s


def _usual_host(hosts: Sequence[HostLayout]) -> HostLayout:
    """The host layout most nodes have (the first such, for determinism)."""
    if not hosts:
        return HostLayout.single_domain(8)
    counts = Counter(id(host) for host in hosts)
    best = max(counts.values())
    return next(host for host in hosts if counts[id(host)] == best)


def gang_step_model(
    topology: ClusterTopology, model: TrainingModel, parallelism: Parallelism, sku: GpuSku
) -> TopologyStepModel:
    """The step-time model of one gang, ready for the placement mechanism."""
    return TopologyStepModel(topology, model, parallelism, sku)


def ranks_from_placements(
    snapshot: ClusterSnapshot, placements: Sequence[Placement]
) -> tuple[IntArray, IntArray]:
    """Rank order of a placement made pod by pod: pods in order, each pod's GPUs in order."""
    nodes: list[int] = []
    gpus: list[int] = []
    for placement in placements:
        row = snapshot.node_index(placement.node)
        nodes.extend([row] * len(placement.gpu_indices))
        gpus.extend(placement.gpu_indices)
    return np.array(nodes, dtype=np.int64), np.array(gpus, dtype=np.int64)


def step_model_for_group(
    topology: ClusterTopology, snapshot: ClusterSnapshot, group: PodGroup
) -> TopologyStepModel | None:
    """The step-time model of a gang whose topology request names a training model.

    Parallelism: the request's tensor and pipeline degrees, data parallelism the rest of the
    gang's GPUs. GPU: the one model the pods accept, else the most common (by nodes) of the
    models they accept, else of the cluster's. None when the request names no model; a model,
    GPU or parallelism the perf models do not know raises their error (the gang then waits
    with it as the reason).
    """
    request = group.topology
    if request is None or request.model is None:
        return None
    model = default_training_models().get(request.model)
    gpus = sum(pod.num_gpu for pod in group.pods)
    model_parallel = request.tensor_parallel * request.pipeline_parallel
    if gpus % model_parallel:
        raise PerfModelError(
            f"gang {group.name}: {gpus} GPUs are not a multiple of tensor x pipeline "
            f"({request.tensor_parallel} x {request.pipeline_parallel})"
        )
    parallelism = Parallelism(
        request.tensor_parallel, request.pipeline_parallel, gpus // model_parallel
    )
    accepted = group.pods[0].gpu_models
    if len(accepted) == 1:
        gpu_model = accepted[0]
    else:
        present = snapshot.node_gpu_model[snapshot.node_gpu_model >= 0]
        if accepted:
            wanted = {m.casefold() for m in accepted}
            indices = [i for i, m in enumerate(snapshot.gpu_models) if m.casefold() in wanted]
            present = present[np.isin(present, indices)]
        if present.size == 0:
            raise PerfModelError(
                f"gang {group.name}: no node has a GPU model it accepts "
                f"({', '.join(accepted) or 'any'})"
            )
        gpu_model = snapshot.gpu_models[int(np.bincount(present).argmax())]
    return TopologyStepModel(topology, model, parallelism, default_catalog().get(gpu_model))


@dataclass(frozen=True)
class PlacedGang:
    """A gang on a concrete placement: its hops, its flows, and its step at any slowdown."""

    step_model: TopologyStepModel
    parts: PlacementParts
    network: NetworkGang
    gpus: int

    def step_s(self, slowdowns: Slowdowns = NO_SLOWDOWN) -> float:
        """Seconds per step with each kind's network hops `slowdowns` times slower."""
        model = self.step_model
        return predict_step_time(
            model.model, model.parallelism, model.sku, self.parts.links(slowdowns)
        ).total_s
