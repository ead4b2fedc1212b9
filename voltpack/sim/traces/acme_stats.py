"""Job statistics of Acme's two LLM clusters, the tables `llm_jobs.generate_llm_jobs` draws from.

Source: Hu et al., "Characterization of Large Language Model Development in the Datacenter",
NSDI'24 (arXiv 2403.07648; here ACME), and the trace release github.com/InternLM/AcmeTrace
(here TRACE). Each number below is marked with where it comes from:

- **[published]** stated in ACME's text or TRACE's files;
- **[read]** read off one of ACME's plots (approximate);
- **[assumed]** not published in a form reachable here; a voltpack choice, constrained by the
  published aggregates it must reproduce (given next to it);
- **[solved]** computed so that the generator's expected GPU-time share equals a published one.

The paper's full text was not reachable when these tables were written: its numbers below
are the ones voltpack issue 32 quotes from it, and section/table pointers are to where the
paper reports them (not re-checked against the PDF). TRACE's summary file was read directly.
Nothing here is read off a plot.

Published facts the tables are built on:

- pretraining is 0.9 % (Seren) and 3.2 % (Kalos) of GPU jobs but 69.5 % and 94.0 % of GPU
  time; jobs of 256+ GPUs take over 96 % of Kalos' GPU time [published, ACME sec. 3 (job-type
  treemap and GPU-number CDFs), as quoted in voltpack issue 32];
- evaluation jobs are the majority of jobs and small (1-8 GPUs, mostly one) [published, ACME
  sec. 3; the exact per-type counts are in ACME's treemap figure, not reachable here, so the
  shares of evaluation, SFT, debugging and other jobs are [assumed]];
- GPU jobs: Seren 663,813 with mean 5.68 and median 1 GPUs, mean run 1,414 s, median 122 s;
  Kalos 19,907 with mean 26.77 and median 1 GPUs, mean run 1,260 s, median 124 s; the largest
  job 1,024 GPUs in both [published, TRACE data/cluster_summary.csv: gpu_job_num,
  avg_gpu_num, med_gpu_num, avg_run_time_gpu, med_run_time_gpu, max_gpu];
- longest GPU job: Kalos 625,740 s (7.2 days), Seren 1,209,604 s (14 days) [published, TRACE
  cluster_summary.csv max_run_time_gpu];
- Seren 2,288 and Kalos 2,416 A100-80GB GPUs, 8 per node [ACME's cluster table, as
  recalled; the total of 4,704 A100s matches third-party summaries of TRACE] (informational
  only: the generator takes the cluster size as an argument).

The per-type GPU-count tables are [assumed] (powers of two, whole 8-GPU hosts above 8 GPUs,
as Acme's jobs are), chosen so that the mean GPUs per job lands near TRACE's means and the
median is 1 GPU. The durations are log-normal per type [assumed: medians a few minutes, as
TRACE's overall median of ~2 min requires]; the pretraining median is [solved] from its
published GPU-time share (`llm_jobs.expected_shares` reproduces it; a unit test checks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

Cluster = Literal["kalos", "seren"]
JOB_TYPES: Final = ("pretrain", "sft", "eval", "debug", "other")
"""Acme's workload types (ACME sec. 3): pretraining, supervised fine-tuning, evaluation,
debugging, and other (ACME's "Other" and "MLLM" together)."""


@dataclass(frozen=True)
class JobTypeStats:
    """How one job type of one cluster is drawn."""

    count_share: float
    """Share of the cluster's GPU jobs."""
    gpus: tuple[tuple[int, float], ...]
    """(GPU count, probability) pairs; probabilities sum to 1."""
    duration_median_s: float
    """Median of the log-normal run time, seconds."""
    duration_sigma: float
    """Sigma of the log-normal run time (of its natural log)."""
    models: tuple[tuple[int, str], ...]
    """(least GPUs, model): the job trains the model of the largest threshold <= its GPU count
    whose tensor x pipeline (x expert_parallel) divides it (`model_for_gpus`)."""


PRETRAIN_MODELS: Final = (
    (8, "llama-2-7b"),
    (128, "mixtral-8x7b"),
    (256, "llama-2-13b"),
    (512, "llama-2-70b"),
    (1024, "mistral-large-123b"),
)
"""Pretraining trains the bigger model the more GPUs it has [assumed], all with a 4M-token
batch: dense 7B to 123B and one MoE, sized after Shanghai AI Lab's own 7B-100B-class models
(not restated in ACME). On A100 each keeps its step within seconds (about 5-35 s)."""
SFT_MODELS: Final = ((1, "llama-2-7b-sft"), (8, "llama-2-13b-sft"), (64, "llama-2-70b-sft"))
"""Fine-tuning runs the 7B-70B models with a 128-sequence batch [assumed]."""
EVAL_MODELS: Final = ((1, "llama-2-7b-eval"),)
"""Evaluation runs a 7B model on 1-8 GPUs [assumed; ACME: evaluation jobs are short runs of
checkpoints on one node]. A simulated evaluation job is a run of 16-sequence steps of that
model, which only holds its GPUs for its duration (an evaluation is inference, not
training; the step only sets how finely its duration is counted)."""
DEBUG_MODELS: Final = ((1, "llama-2-7b-eval"), (8, "llama-2-7b-sft"), (64, "llama-2-13b-sft"))
OTHER_MODELS: Final = ((1, "llama-2-7b-eval"), (8, "llama-2-7b-sft"), (32, "mixtral-8x7b"))

PUBLISHED_PRETRAIN_COUNT_SHARE: Final[dict[Cluster, float]] = {"seren": 0.009, "kalos": 0.032}
"""[published] pretraining's share of GPU jobs."""
PUBLISHED_PRETRAIN_GPU_TIME_SHARE: Final[dict[Cluster, float]] = {"seren": 0.695, "kalos": 0.940}
"""[published] pretraining's share of GPU time."""
PUBLISHED_KALOS_256_PLUS_GPU_TIME_SHARE: Final = 0.96
"""[published] jobs of 256+ GPUs take more than this share of Kalos' GPU time."""
PUBLISHED_MEAN_GPUS: Final[dict[Cluster, float]] = {"seren": 5.68, "kalos": 26.77}
"""[published] TRACE cluster_summary.csv avg_gpu_num."""
CLUSTER_GPUS: Final[dict[Cluster, int]] = {"seren": 2288, "kalos": 2416}
"""ACME's cluster sizes (as recalled, see the module docstring); informational."""

ACME_STATS: Final[dict[Cluster, dict[str, JobTypeStats]]] = {
    "kalos": {
        "pretrain": JobTypeStats(
            count_share=0.032,  # [published]
            gpus=((256, 0.3), (512, 0.4), (1024, 0.3)),  # [assumed] all >= 256 (see 96 %)
            duration_median_s=6817.0,  # [solved] for a 94.0 % GPU-time share
            duration_sigma=2.0,  # [assumed]
            models=PRETRAIN_MODELS,
        ),
        "sft": JobTypeStats(
            count_share=0.08,  # [assumed]
            gpus=((8, 0.3), (16, 0.2), (32, 0.15), (64, 0.1), (128, 0.1), (256, 0.15)),
            duration_median_s=1800.0,  # [assumed]
            duration_sigma=1.5,  # [assumed]
            models=SFT_MODELS,
        ),
        "eval": JobTypeStats(
            count_share=0.70,  # [assumed] the majority ([published] qualitatively)
            gpus=((1, 0.75), (2, 0.05), (4, 0.1), (8, 0.1)),  # [assumed] 1-8, mostly 1
            duration_median_s=120.0,  # [assumed] near TRACE's overall median (124 s)
            duration_sigma=1.5,  # [assumed]
            models=EVAL_MODELS,
        ),
        "debug": JobTypeStats(
            count_share=0.12,  # [assumed]
            gpus=((1, 0.5), (8, 0.3), (16, 0.1), (64, 0.1)),  # [assumed]
            duration_median_s=60.0,  # [assumed]
            duration_sigma=1.5,  # [assumed]
            models=DEBUG_MODELS,
        ),
        "other": JobTypeStats(
            count_share=0.068,  # [assumed] the rest
            gpus=((1, 0.5), (8, 0.3), (32, 0.15), (256, 0.05)),  # [assumed]
            duration_median_s=300.0,  # [assumed]
            duration_sigma=1.8,  # [assumed]
            models=OTHER_MODELS,
        ),
    },
    "seren": {
        "pretrain": JobTypeStats(
            count_share=0.009,  # [published]
            gpus=((64, 0.2), (128, 0.3), (256, 0.3), (512, 0.15), (1024, 0.05)),  # [assumed]
            duration_median_s=2168.0,  # [solved] for a 69.5 % GPU-time share
            duration_sigma=2.0,  # [assumed]
            models=PRETRAIN_MODELS,
        ),
        "sft": JobTypeStats(
            count_share=0.10,  # [assumed]
            gpus=((8, 0.5), (16, 0.2), (32, 0.2), (64, 0.1)),  # [assumed]
            duration_median_s=1800.0,  # [assumed]
            duration_sigma=1.5,  # [assumed]
            models=SFT_MODELS,
        ),
        "eval": JobTypeStats(
            count_share=0.65,  # [assumed]
            gpus=((1, 0.75), (2, 0.05), (4, 0.1), (8, 0.1)),  # [assumed]
            duration_median_s=120.0,  # [assumed] near TRACE's overall median (122 s)
            duration_sigma=1.5,  # [assumed]
            models=EVAL_MODELS,
        ),
        "debug": JobTypeStats(
            count_share=0.15,  # [assumed]
            gpus=((1, 0.7), (8, 0.3)),  # [assumed]
            duration_median_s=60.0,  # [assumed]
            duration_sigma=1.5,  # [assumed]
            models=DEBUG_MODELS,
        ),
        "other": JobTypeStats(
            count_share=0.091,  # [assumed] the rest
            gpus=((1, 0.7), (8, 0.3)),  # [assumed]
            duration_median_s=300.0,  # [assumed]
            duration_sigma=1.8,  # [assumed]
            models=OTHER_MODELS,
        ),
    },
}
