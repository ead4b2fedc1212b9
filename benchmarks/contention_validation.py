"""The flow-level contention model (issue 32, item 1) against published numbers.

1. **Published points kept.** Every scored step-time point (`voltpack/perf/published_points.py`:
   the ten Megatron SC21 Table 1 points and the four Holmes InfiniBand/RoCE points) placed on
   a topology of that many of the point's hosts under a non-blocking (1:1) two-level fabric of
   32-host leaves, ranks in Megatron order (8 per host, hosts in order), priced as a lone gang
   by the contention model (`network_slowdowns` with only it, then `PlacedGang.step_s`), next
   to the step model's own prediction (`TrainingPoint.predict`). A lone gang on a non-blocking
   fabric should not slow itself; where it does, the row says by how much and the diagnosis
   column shows the same gang with each pipeline flow asking half (see the Markdown).
2. **Crux's co-location slowdown** (Cao et al., SIGCOMM'24, s2.2): a 64-GPU GPT-3 variant on
   hosts H1-H8 and a 16-GPU BERT on H9-H12 (4 GPUs each) under two ToR switches of Crux's
   12-host testbed (s6.1); GPT's iteration grew from 1.53 s to 1.70 s (+11.0 %) beside BERT,
   whose throughput fell 7.7 %. Reproduced once from the stated setup with every unstated
   parameter listed as ASSUMED, then swept over the two unknowns that decide it: the ToR
   uplink capacity and GPT's communication share (its batch).

Usage (from the benchmarks directory):
  python contention_validation.py
"""

from __future__ import annotations

from typing import Any

import numpy as np
from _common import save

from voltpack.model.gpu_sku import default_catalog
from voltpack.model.resources.topology import HostNicSpec, HostSpec, TopologyLevel, TopologySpec
from voltpack.model.topology import ClusterTopology
from voltpack.perf.contention import NetworkGang, Slowdowns, network_slowdowns
from voltpack.perf.network_flows import GroupKind, fabric_links
from voltpack.perf.published_points import (
    NIC_CLASS_POINTS,
    TRAINING_POINTS,
    TrainingPoint,
    error_percent,
)
from voltpack.perf.step_time import flops_per_step, predict_step_time
from voltpack.perf.training_models import Parallelism, default_training_models
from voltpack.policies.topology.step_model import PlacedGang, TopologyStepModel

LEAF_HOSTS = 32
"""Hosts per leaf switch of the published points' fabric (a common 64-port leaf with half
its ports down); both levels 1:1."""

# Crux, s2.2 and s6.1 (doi 10.1145/3651890.3672239)
CRUX_GPT_ALONE_S = 1.53
CRUX_GPT_TOGETHER_S = 1.70
CRUX_GPT_SLOWDOWN = 0.110
CRUX_GPT_THROUGHPUT_DROP = 0.099
CRUX_BERT_THROUGHPUT_DROP = 0.077
CRUX_GPU_UTILIZATION_DROP = 0.095
CRUX_SOURCE = (
    "Cao et al., Crux: GPU-Efficient Communication Scheduling for Deep Learning Training, "
    "SIGCOMM'24 (doi 10.1145/3651890.3672239). s2.2: a 64-GPU GPT-3 variant (footnote 1: "
    "GPT-3 parameters, 24 layers, hidden 1024) on hosts H1-H8 under two ToR switches (four "
    "hosts each) and a 16-GPU BERT on H9-H12 under the same two ToRs (four GPUs per host) "
    "contend on the ToR-aggregation links; GPT's iteration time 1.53 s alone, 1.70 s beside "
    "BERT (+11.0 %); throughput -9.9 % (GPT) and -7.7 % (BERT); GPU utilisation -9.5 %. "
    "s6.1 / Figure 18: the testbed is 12 hosts, each with 8 A100 and 4 x 200 Gbit/s RDMA "
    "NICs, one ToR per host over four links, every two GPUs sharing one NIC through a PCIe "
    "switch, two-layer Clos; s5: CoCoLib speaks RoCEv2 (Crux sets RoCEv2 UDP source ports)"
)
CRUX_HOSTS_PER_TOR = {"tor-1": (1, 2, 3, 4, 9, 10), "tor-2": (5, 6, 7, 8, 11, 12)}
CRUX_GPT = "crux-gpt-24l-1024h"
CRUX_BERT = "bert-large"
CRUX_SKU = "A100-80GB"
CRUX_TOR_OVERSUBSCRIPTION = 1.0
"""The primary run's ToR uplink ratio (ASSUMED, see `CRUX_ASSUMED`)."""
CRUX_ECMP_PORT_GBIT_S = 200.0
"""The primary run's ToR uplink port rate, flows hashed over the ports (ASSUMED)."""
SWEEP_ECMP_PORT_GBIT_S: tuple[float | None, ...] = (200.0, None)
SWEEP_TOR_OVERSUBSCRIPTION = (1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 24.0)
SWEEP_GPT_BATCH = (256, 512, 1536)
"""256: GPT-3 Medium's 0.5M-token batch (the other reading of 'GPT-3 parameters');
1536: GPT-3 175B's 3.2M tokens (the catalog entry's)."""
CRUX_ASSUMED = (
    "Hardware: the pair ran on Crux's 96-GPU testbed (s6.1). s2.2 says only that the pair "
    "was 'reproduced'; its hosts H1-H12 are the testbed's 12. A100 80 GB (the paper says "
    "A100). NIC class RoCE at 200 Gbit/s line rate, four per host, NIC i on the PCIe switch "
    "of GPUs 2i and 2i+1 (stated: 'every two GPUs connected ... via a shared link'; RoCE "
    "because CoCoLib runs RoCEv2)",
    "ToR uplink (ToR-aggregation) capacity: not in the text (Figure 18's link counts are not "
    "given). Primary run 1:1, non-blocking: the paper's own remark that contention persists "
    "'even in networks with a 1:1 oversubscription' through ECMP hash collisions. Swept "
    "1-24:1; at 12:1 and 24:1 a ToR's uplinks carry what one 400 or 200 Gbit/s port does, "
    "i.e. every cross-ToR flow of both jobs hashed onto one uplink (the worst ECMP case)",
    "Layout: BERT's hosts H9, H10 under ToR 1 and H11, H12 under ToR 2 (the paper: 'under "
    "the same two ToR switches'; the even split is assumed); BERT on GPUs 0-3 of each host "
    "(which four is not stated; they share two of the four NICs)",
    "GPT: data parallel over all 64 GPUs (tensor 1, pipeline 1: 0.35B parameters fit one "
    "GPU; not stated), Megatron rank order (8 ranks per host, H1..H8); 16 heads (GPT-3 "
    "Medium, the GPT-3 model of this depth and width; 175B's 96 do not divide 1024); "
    "global batch 1536 sequences of 2048 (GPT-3 175B's 3.2M tokens: footnote 1 changes only "
    "layers and hidden size); micro-batch 4; no activation recomputation; gradient "
    "all-reduce in 16-bit, exposed after the backward (Megatron-LM's default, the model's)",
    "BERT: BERT-large (the paper says 'BERT'): 24 layers, hidden 1024, 16 heads, batch 256 "
    "sequences of 512 (Devlin et al. A.2, the 512-token phase), data parallel over 16 GPUs, "
    "micro-batch 16",
    "Timing: both jobs' gradient traffic on the wire at once, all the time (the contention "
    "model's stated assumption); Crux does not say how their phases align",
    "ECMP: the ToRs hash flows over 200 Gbit/s uplink ports (the hosts' NIC rate; the paper "
    "names ECMP hash collisions as the cause and runs RoCEv2, but gives no port speed); the "
    "sweep also shows balanced uplinks (one aggregate link)",
)


# --- 1. published points ------------------------------------------------------------------


def point_topology(point: TrainingPoint, leaf_hosts: int = LEAF_HOSTS) -> ClusterTopology:
    """`point.gpus / gpus_per_node` of the point's hosts under a 1:1 spine and 1:1 leaves."""
    per_nic = point.gpus_per_node // point.nics_per_node
    host = HostSpec(
        gpus=point.gpus_per_node,
        nics=[
            HostNicSpec(
                name=f"nic{i}",
                nic_class=point.nic_class,  # type: ignore[arg-type]
                line_rate_gbit_s=point.nic_line_rate_gbit_s,
                gpus=list(range(i * per_nic, (i + 1) * per_nic)),
            )
            for i in range(point.nics_per_node)
        ],
    )
    spec = TopologySpec(
        levels=[
            TopologyLevel(node_label="spine", oversubscription=1.0),
            TopologyLevel(node_label="leaf", oversubscription=1.0),
        ],
        nvlink_clique_label=None,
        default_host=host,
    )
    names = [f"host-{i:04d}" for i in range(point.gpus // point.gpus_per_node)]
    labels = {
        name: {"spine": "s0", "leaf": f"leaf-{i // leaf_hosts}"} for i, name in enumerate(names)
    }
    counts = dict.fromkeys(names, point.gpus_per_node)
    return ClusterTopology.from_labels(spec, names, labels, gpu_counts=counts)


def megatron_ranks(gpus: int, per_host: int, first_host: int = 0) -> tuple[Any, Any]:
    """Rank r on host first_host + r // per_host, GPU r % per_host."""
    ranks = np.arange(gpus, dtype=np.int64)
    return first_host + ranks // per_host, ranks % per_host


def lone_slowdowns(topology: ClusterTopology, gang: NetworkGang) -> Slowdowns:
    """The gang's slowdowns with nothing else on the fabric."""
    (slowdowns,) = network_slowdowns(fabric_links(topology), [gang])
    return slowdowns


def published_row(point: TrainingPoint) -> dict[str, Any]:
    """One published point: the step model's prediction and the contention model's."""
    topology = point_topology(point)
    parallelism = point.parallelism()
    model = TopologyStepModel(topology, point.training_model(), parallelism, point.gpu())
    gang = model.placed(*megatron_ranks(point.gpus, point.gpus_per_node))
    slowdowns = lone_slowdowns(topology, gang.network)
    old = point.predict()
    contended_s = gang.step_s(slowdowns)
    flops = flops_per_step(point.training_model()) / point.gpus / 1e12
    published = point.published_tflops_per_gpu
    return {
        "point": point.name,
        "tp_pp_dp": [parallelism.tensor, parallelism.pipeline, parallelism.data],
        "hosts": point.gpus // point.gpus_per_node,
        "published_tflops_per_gpu": published,
        "old_step_s": old.total_s,
        "old_tflops_per_gpu": old.achieved_tflops_per_gpu,
        "old_error_percent": error_percent(old.achieved_tflops_per_gpu, published),
        "contention_step_s": contended_s,
        "contention_tflops_per_gpu": flops / contended_s,
        "contention_error_percent": error_percent(flops / contended_s, published),
        "relative_step_change": contended_s / old.total_s - 1.0,
        "lone_slowdowns_tensor_pipeline_data": list(slowdowns),
        "duty_tensor_pipeline_data": list(gang.network.duty),
    }


def published_rows() -> list[dict[str, Any]]:
    """Every scored Megatron SC21 and Holmes point."""
    return [published_row(point) for point in (*TRAINING_POINTS, *NIC_CLASS_POINTS)]


# --- 2. Crux ------------------------------------------------------------------------------


def crux_topology(
    tor_oversubscription: float, ecmp_port_gbit_s: float | None = CRUX_ECMP_PORT_GBIT_S
) -> ClusterTopology:
    """Crux's 12-host testbed as the s2.2 pair used it: hosts H1..H12 (nodes 0..11) under
    two ToRs with `tor_oversubscription`:1 uplinks to one aggregation layer, hashing flows
    over `ecmp_port_gbit_s` ports (None: balanced)."""
    host = HostSpec(
        gpus=8,
        nics=[
            HostNicSpec(
                name=f"nic{i}", nic_class="roce", line_rate_gbit_s=200.0, gpus=[2 * i, 2 * i + 1]
            )
            for i in range(4)
        ],
    )
    spec = TopologySpec(
        levels=[
            TopologyLevel(node_label="aggregation", oversubscription=1.0),
            TopologyLevel(
                node_label="tor",
                oversubscription=tor_oversubscription,
                ecmp_port_gbit_s=ecmp_port_gbit_s,
            ),
        ],
        nvlink_clique_label=None,
        default_host=host,
    )
    tor_of = {h: tor for tor, hosts in CRUX_HOSTS_PER_TOR.items() for h in hosts}
    names = [f"H{h}" for h in range(1, 13)]
    labels = {f"H{h}": {"aggregation": "agg", "tor": tor_of[h]} for h in range(1, 13)}
    return ClusterTopology.from_labels(spec, names, labels, gpu_counts=dict.fromkeys(names, 8))


def crux_gangs(
    tor_oversubscription: float,
    gpt_batch: int | None = None,
    ecmp_port_gbit_s: float | None = CRUX_ECMP_PORT_GBIT_S,
) -> tuple[ClusterTopology, PlacedGang, PlacedGang]:
    """(topology, GPT on H1-H8, BERT on GPUs 0-3 of H9-H12)."""
    topology = crux_topology(tor_oversubscription, ecmp_port_gbit_s)
    catalog = default_training_models()
    sku = default_catalog().get(CRUX_SKU)
    gpt = catalog.get(CRUX_GPT)
    if gpt_batch is not None:
        gpt = gpt.model_copy(update={"global_batch_size": gpt_batch})
    bert = catalog.get(CRUX_BERT)
    gpt_gang = TopologyStepModel(topology, gpt, Parallelism(1, 1, 64), sku).placed(
        *megatron_ranks(64, 8)
    )
    bert_gang = TopologyStepModel(topology, bert, Parallelism(1, 1, 16), sku).placed(
        *megatron_ranks(16, 4, first_host=8)
    )
    return topology, gpt_gang, bert_gang


def _comm_share(gang: PlacedGang, slowdowns: Slowdowns) -> float:
    model = gang.step_model
    step = predict_step_time(model.model, model.parallelism, model.sku, gang.parts.links(slowdowns))
    return step.communication_s / step.total_s


def crux_case(
    tor_oversubscription: float,
    gpt_batch: int | None = None,
    ecmp_port_gbit_s: float | None = CRUX_ECMP_PORT_GBIT_S,
) -> dict[str, Any]:
    """GPT's and BERT's steps alone and together on one ToR ratio (GPT batch, ECMP ports)."""
    topology, gpt, bert = crux_gangs(tor_oversubscription, gpt_batch, ecmp_port_gbit_s)
    fabric = fabric_links(topology)
    gpt_alone = lone_slowdowns(topology, gpt.network)
    bert_alone = lone_slowdowns(topology, bert.network)
    gpt_together, bert_together = network_slowdowns(fabric, [gpt.network, bert.network])
    gpt_slowdown = gpt.step_s(gpt_together) / gpt.step_s(gpt_alone) - 1.0
    # GPT's share of exposed communication that would give Crux's +11.0 % at these link
    # slowdowns (step = compute + share x link slowdown, data-parallel hops only)
    data = int(GroupKind.DATA)
    excess = (gpt_together[data] - 1.0) - (1.0 + CRUX_GPT_SLOWDOWN) * (gpt_alone[data] - 1.0)
    needed = CRUX_GPT_SLOWDOWN / excess if excess > 0 else None
    return {
        "tor_oversubscription": tor_oversubscription,
        "ecmp_port_gbit_s": ecmp_port_gbit_s,
        "gpt_global_batch": gpt.step_model.model.global_batch_size,
        "gpt_alone_s": gpt.step_s(gpt_alone),
        "gpt_together_s": gpt.step_s(gpt_together),
        "gpt_slowdown": gpt_slowdown,
        "gpt_comm_share_alone": _comm_share(gpt, gpt_alone),
        "gpt_link_slowdown_alone": gpt_alone[data],
        "gpt_link_slowdown_together": gpt_together[data],
        "gpt_comm_share_for_published": needed,
        "bert_alone_s": bert.step_s(bert_alone),
        "bert_together_s": bert.step_s(bert_together),
        "bert_slowdown": bert.step_s(bert_together) / bert.step_s(bert_alone) - 1.0,
        "bert_comm_share_alone": _comm_share(bert, bert_alone),
    }


def crux_primary() -> dict[str, Any]:
    """The one run from the stated setup and the listed assumptions."""
    return crux_case(CRUX_TOR_OVERSUBSCRIPTION)


def crux_sweep() -> list[dict[str, Any]]:
    """The same pair over the ToR uplink ratio and GPT's batch (its communication share)."""
    return [
        crux_case(ratio, batch, ports)
        for ports in SWEEP_ECMP_PORT_GBIT_S
        for batch in SWEEP_GPT_BATCH
        for ratio in SWEEP_TOR_OVERSUBSCRIPTION
    ]


# --- report -------------------------------------------------------------------------------


def _max_abs(rows: list[dict[str, Any]], prefix: str, key: str) -> float:
    return max(abs(row[key]) for row in rows if row["point"].startswith(prefix))


def markdown(
    rows: list[dict[str, Any]], primary: dict[str, Any], sweep: list[dict[str, Any]]
) -> str:
    """The report."""
    bert_published = 1.0 / (1.0 - CRUX_BERT_THROUGHPUT_DROP) - 1.0
    lines = [
        "# The contention model against published numbers",
        "",
        "## 1. Published step-time points, each priced as a lone gang by the contention model",
        "",
        f"Fabric: the point's hosts under {LEAF_HOSTS}-host leaves, leaves and spine 1:1 "
        "(non-blocking); ranks in Megatron order, 8 per host in host order. 'old' is the step "
        "model alone (`TrainingPoint.predict`); 'contention' is `network_slowdowns` with only "
        "this gang, then `PlacedGang.step_s`. TFLOPS per GPU as the source counts them.",
        "",
        "| point | TP/PP/DP | published | old | error % | contention | error % | step change "
        "| lone slowdown (T/P/D) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        tp, pp, dp = row["tp_pp_dp"]
        slow = "/".join(f"{s:.3f}" for s in row["lone_slowdowns_tensor_pipeline_data"])
        lines.append(
            f"| {row['point']} | {tp}/{pp}/{dp} | {row['published_tflops_per_gpu']:.0f} | "
            f"{row['old_tflops_per_gpu']:.1f} | {row['old_error_percent']:+.1f} | "
            f"{row['contention_tflops_per_gpu']:.1f} | {row['contention_error_percent']:+.1f} | "
            f"{row['relative_step_change']:+.2e} | {slow} |"
        )
    lines += [
        "",
        f"Max |error|: Megatron SC21 {_max_abs(rows, 'SC21', 'old_error_percent'):.1f} % old, "
        f"{_max_abs(rows, 'SC21', 'contention_error_percent'):.1f} % with the contention model; "
        f"Holmes {_max_abs(rows, 'Holmes', 'old_error_percent'):.1f} % old, "
        f"{_max_abs(rows, 'Holmes', 'contention_error_percent'):.1f} % with it.",
        "",
        "Every point matches the step model alone (step change 0): a lone gang on a "
        "non-blocking fabric never slows itself. (A first version put a pipeline stage's sends "
        "to the next and the previous stage on the wire at once, while the step model counts "
        "them one after the other; the five points with three or more stages then slowed "
        "themselves by 0.6-1.5 %. A pipeline hop now asks half its NIC share: the two "
        "directions take turns.)",
        "",
        "## 2. Crux's co-location slowdown (SIGCOMM'24, s2.2)",
        "",
        f"Source: {CRUX_SOURCE}.",
        "",
        "Setup as modelled: 12 hosts of 8 A100 and 4 x 200 Gbit/s RoCE NICs (one per two "
        "GPUs); ToR 1 holds H1-H4 and H9-H10, ToR 2 H5-H8 and H11-H12; "
        f"GPT (`{CRUX_GPT}`) data parallel on all 64 GPUs of H1-H8; BERT (`{CRUX_BERT}`) on "
        "GPUs 0-3 of H9-H12. Their cross-ToR ring hops share the ToR uplinks.",
        "",
        "ASSUMED (the paper does not state these; chosen from the setup description before "
        "the run, not fitted):",
        "",
    ]
    lines += [f"- {item}" for item in CRUX_ASSUMED]
    lines += [
        "",
        "### The run (ToR uplinks 1:1 as 200 Gbit/s ECMP ports, GPT batch 1536)",
        "",
        "| | published | predicted |",
        "|---|---:|---:|",
        f"| GPT step alone (s) | {CRUX_GPT_ALONE_S:.2f} | {primary['gpt_alone_s']:.3f} |",
        f"| GPT step beside BERT (s) | {CRUX_GPT_TOGETHER_S:.2f} | "
        f"{primary['gpt_together_s']:.3f} |",
        f"| GPT slowdown | +{CRUX_GPT_SLOWDOWN * 100:.1f} % | "
        f"{primary['gpt_slowdown'] * 100:+.1f} % |",
        f"| BERT slowdown (from its -{CRUX_BERT_THROUGHPUT_DROP * 100:.1f} % throughput) | "
        f"+{bert_published * 100:.1f} % | {primary['bert_slowdown'] * 100:+.1f} % |",
        f"| GPT exposed communication share alone | - | "
        f"{primary['gpt_comm_share_alone'] * 100:.1f} % |",
        "",
        f"**Miss.** Predicted {primary['gpt_slowdown'] * 100:+.1f} % against +11.0 %. GPT's "
        "exposed communication is "
        f"{primary['gpt_comm_share_alone'] * 100:.1f} % of its step alone in the model (a 0.7 GB "
        "fp16 gradient all-reduce over 4 x 200 Gbit/s per host against a 1.5 s step), so no "
        "link slowdown short of about 5x could add 11 %. With the ToR uplinks as 200 Gbit/s "
        "ECMP ports, this hash draw makes GPT's own flows collide (link slowdown "
        f"{primary['gpt_link_slowdown_alone']:.2f} alone) and BERT's land on other ports "
        f"(together {primary['gpt_link_slowdown_together']:.2f}). The GPT step alone is "
        "predicted within "
        f"{abs(error_percent(primary['gpt_alone_s'], CRUX_GPT_ALONE_S)):.1f} % of the published "
        "1.53 s, so the compute side and the batch reading hold; what the model lacks is the "
        "communication volume (or exposure) Crux's GPT had, which the paper does not give.",
        "",
        "### Sensitivity: ToR uplink ratio x GPT's batch (its communication share)",
        "",
        "'comm share' is GPT's exposed communication over its step alone at that ratio; "
        "'share needed' is the communication share of its step on an uncontended fabric that "
        "would give +11.0 % at that row's link slowdowns (-: no contention there).",
        "",
        "| ToR uplinks | GPT batch | ToR ratio | GPT comm share alone | GPT alone s | beside "
        "BERT s | GPT slowdown | link slowdown alone / together | share needed | BERT slowdown |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for case in sweep:
        needed = case["gpt_comm_share_for_published"]
        ports = case["ecmp_port_gbit_s"]
        lines.append(
            f"| {'balanced' if ports is None else f'ECMP {ports:.0f}G'} | "
            f"{case['gpt_global_batch']} | {case['tor_oversubscription']:.0f}:1 | "
            f"{case['gpt_comm_share_alone'] * 100:.1f} % | {case['gpt_alone_s']:.3f} | "
            f"{case['gpt_together_s']:.3f} | {case['gpt_slowdown'] * 100:+.1f} % | "
            f"{case['gpt_link_slowdown_alone']:.2f} / {case['gpt_link_slowdown_together']:.2f} | "
            f"{'-' if needed is None else f'{needed * 100:.0f} %'} | "
            f"{case['bert_slowdown'] * 100:+.1f} % |"
        )
    lines += [
        "",
        "What drives the miss, in order: (1) GPT's communication share: at the catalog's "
        "batch the model prices its exposed all-reduce at 1-4 % of the step, so even the worst "
        "rows add only a few percent; the batch-256 rows (12-21 % share) reach +5.7 % (8:1) "
        "and +10.2 % (24:1) with ECMP. (2) Where the hash puts the flows: one deterministic "
        "draw per flow, as one switch's hash is for one set of connections; another draw (or "
        "another job's source ports) moves the collisions, so single rows are not smooth in "
        "the ratio. (3) Balanced uplinks (adaptive routing) show no contention below 6:1. "
        "The model's 'all gangs communicate at once' assumption is pessimistic, so it is not "
        "what makes the prediction too low.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    rows = published_rows()
    primary = crux_primary()
    sweep = crux_sweep()
    figures = {
        "leaf_hosts": LEAF_HOSTS,
        "published_points": rows,
        "max_abs_error_percent": {
            "megatron_sc21_old": _max_abs(rows, "SC21", "old_error_percent"),
            "megatron_sc21_contention": _max_abs(rows, "SC21", "contention_error_percent"),
            "holmes_old": _max_abs(rows, "Holmes", "old_error_percent"),
            "holmes_contention": _max_abs(rows, "Holmes", "contention_error_percent"),
        },
        "crux": {
            "source": CRUX_SOURCE,
            "published": {
                "gpt_alone_s": CRUX_GPT_ALONE_S,
                "gpt_together_s": CRUX_GPT_TOGETHER_S,
                "gpt_slowdown": CRUX_GPT_SLOWDOWN,
                "gpt_throughput_drop": CRUX_GPT_THROUGHPUT_DROP,
                "bert_throughput_drop": CRUX_BERT_THROUGHPUT_DROP,
                "bert_slowdown": 1.0 / (1.0 - CRUX_BERT_THROUGHPUT_DROP) - 1.0,
                "gpu_utilization_drop": CRUX_GPU_UTILIZATION_DROP,
            },
            "assumed": list(CRUX_ASSUMED),
            "primary": primary,
            "gpt_slowdown_error_points": (primary["gpt_slowdown"] - CRUX_GPT_SLOWDOWN) * 100,
            "within_15_percent_of_slowdown": abs(primary["gpt_slowdown"] / CRUX_GPT_SLOWDOWN - 1)
            <= 0.15,
            "sweep": sweep,
        },
    }
    save("contention_validation", figures, markdown(rows, primary, sweep))


if __name__ == "__main__":
    main()
