"""Latency of the store's history queries with 1 million decisions, on SQLite and PostgreSQL.

Writes 1,000,000 decisions (about 5,000 jobs on 1,000 nodes over 30 days, reasons of about 120
characters, 80% placed) through `Store.add_decisions` in batches, into a SQLite file and into a
throwaway PostgreSQL server started from the installed binaries (`TemporaryPostgres`: fsync
off, otherwise PostgreSQL's defaults; fsync changes the insert rate, not the reads), then
ANALYZE (what autovacuum does on its own). Then times, each query `--repeats` times with
varying arguments after a warm-up, in this process (the admin API's path minus HTTP):

- newest page: the first page (50) of the newest decisions;
- by job / by node: the first page of one job's (one node's) decisions, a random one each time;
- time window: the first page of a random one-hour window;
- page 20: the 20th page of the newest decisions, through the cursor of page 19;
- count all: `count_decisions()` over the whole table;
- summary 24 h: `summarize_decisions` of the last day (decisions, placed, unplaced: the
  store's part of the cluster summary);
- count job: `count_decisions(job=...)`.

Goal: p99 under 100 ms for each on this machine.

Usage: python benchmarks/store_queries.py [--decisions 1000000] [--repeats 200]
       [--backends sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from _common import save
from sqlalchemy import text

from voltpack.store import DecisionRecord, Store, TemporaryPostgres

JOBS = 5000
NODES = 1000
DAYS = 30
START_S = 1_767_225_600.0  # 2026-01-01
PAGE = 50
DEPTH = 20
BATCH = 20_000

REASONS_PLACED = (
    "node {node}: {free} of 8 GPUs free, needs {gpus}; fragmentation score {score:.3f} is the "
    "lowest of {candidates} feasible nodes",
    "gang {job}: all {gpus} pods placed on {node} and its NVLink peers; queue research within "
    "its guaranteed quota",
)
REASONS_UNPLACED = (
    "no node fits: {candidates} nodes have fewer than {gpus} free GPUs of model A100; the "
    "largest free block is {free} GPUs on {node}",
    "queue research is at its limit of 64 A100 GPUs (borrowing is disabled); gang {job} waits "
    "for {gpus} GPUs to be released",
)


def generate(count: int, seed: int = 7) -> Iterator[list[DecisionRecord]]:
    """Decisions in time order, in batches of BATCH."""
    rng = np.random.default_rng(seed)
    at_s = np.sort(rng.uniform(START_S, START_S + DAYS * 86400.0, count))
    # skewed: the busiest job has ~1.4% of the decisions, the median one ~0.01%
    jobs = (JOBS * rng.random(count) ** 2).astype(np.int64)
    nodes = rng.integers(0, NODES, count)
    placed = rng.random(count) < 0.8
    gpus = rng.choice([1, 2, 4, 8], count)
    free = rng.integers(0, 8, count)
    candidates = rng.integers(1, NODES, count)
    score = rng.random(count)
    variant = rng.integers(0, 2, count)
    for start in range(0, count, BATCH):
        batch = []
        for i in range(start, min(start + BATCH, count)):
            job = f"job-{int(jobs[i]):05d}"
            node = f"gpu-node-{int(nodes[i]):04d}"
            ok = bool(placed[i])
            template = (REASONS_PLACED if ok else REASONS_UNPLACED)[int(variant[i])]
            reason = template.format(
                node=node, free=int(free[i]), gpus=int(gpus[i]), score=float(score[i]),
                candidates=int(candidates[i]), job=job,
            )  # fmt: skip
            batch.append(
                DecisionRecord(
                    at_s=float(at_s[i]),
                    subject=f"{job}-worker-{i % 64}",
                    job=job,
                    node=node if ok else None,
                    placed=ok,
                    reason=reason,
                    policy="fgd",
                    cycle_id=int((at_s[i] - START_S) // 1.0),
                )
            )
        yield batch


def percentile_ms(samples: list[float], q: float) -> float:
    return float(np.percentile(np.array(samples) * 1000.0, q))


def measure(call: Callable[[int], Any], repeats: int, warmup: int = 10) -> dict[str, float]:
    for i in range(warmup):
        call(i)
    samples = []
    for i in range(repeats):
        started = time.perf_counter()
        call(warmup + i)
        samples.append(time.perf_counter() - started)
    return {
        "p50_ms": round(percentile_ms(samples, 50), 2),
        "p99_ms": round(percentile_ms(samples, 99), 2),
        "max_ms": round(max(samples) * 1000.0, 2),
    }


def queries(store: Store, repeats: int, seed: int = 11) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(seed)
    job_ids = (JOBS * rng.random(repeats + 10) ** 2).astype(np.int64)
    node_ids = rng.integers(0, NODES, repeats + 10)
    windows = rng.uniform(START_S, START_S + DAYS * 86400.0 - 3600.0, repeats + 10)
    cursor = None
    for _ in range(DEPTH - 1):
        cursor = store.query_decisions(limit=PAGE, cursor=cursor).next_cursor
    end_s = START_S + DAYS * 86400.0
    figures = {
        "newest page": measure(lambda i: store.query_decisions(limit=PAGE), repeats),
        "by job": measure(
            lambda i: store.query_decisions(job=f"job-{int(job_ids[i]):05d}", limit=PAGE),
            repeats,
        ),
        "by node": measure(
            lambda i: store.query_decisions(node=f"gpu-node-{int(node_ids[i]):04d}", limit=PAGE),
            repeats,
        ),
        "time window": measure(
            lambda i: store.query_decisions(
                since_s=float(windows[i]), until_s=float(windows[i]) + 3600.0, limit=PAGE
            ),
            repeats,
        ),
        f"page {DEPTH}": measure(
            lambda i: store.query_decisions(limit=PAGE, cursor=cursor), repeats
        ),
        "count all": measure(lambda i: store.count_decisions(), repeats),
        "summary 24 h": measure(
            lambda i: store.summarize_decisions(since_s=end_s - 86400.0, until_s=end_s), repeats
        ),
        "count job": measure(
            lambda i: store.count_decisions(job=f"job-{int(job_ids[i]):05d}"), repeats
        ),
    }
    return figures


def fill(store: Store, count: int) -> dict[str, float]:
    started = time.perf_counter()
    for batch in generate(count):
        store.add_decisions(batch)
    insert_s = time.perf_counter() - started
    # what autovacuum does by itself after a bulk load (PostgreSQL's VACUUM sets the visibility
    # map that index-only scans need); VACUUM cannot run inside a transaction
    with store.engine.connect() as plain:
        autocommit = plain.execution_options(isolation_level="AUTOCOMMIT")
        autocommit.execute(text("VACUUM ANALYZE" if store.dialect == "postgresql" else "ANALYZE"))
    assert store.count_decisions() == count
    return {"insert_s": round(insert_s, 1), "insert_per_s": round(count / insert_s)}


def run_backend(name: str, url: str, count: int, repeats: int) -> dict[str, Any]:
    with Store.open(url) as store:
        print(f"{name}: writing {count:,} decisions ...", flush=True)
        loading = fill(store, count)
        print(f"{name}: {loading}", flush=True)
        return {**loading, "queries": queries(store, repeats)}


def markdown(results: dict[str, dict[str, Any]], count: int, repeats: int) -> str:
    backends = list(results)
    lines = [
        f"# Store queries with {count:,} decisions",
        "",
        f"Latency in ms over {repeats} calls each after a warm-up, in-process through `Store` "
        f"(pages of {PAGE}); goal: p99 under 100 ms. Produced by `benchmarks/store_queries.py`.",
        "",
        "| query | " + " | ".join(f"{b} p50 | {b} p99" for b in backends) + " |",
        "|---|" + "---:|---:|" * len(backends),
    ]
    names = list(next(iter(results.values()))["queries"])
    for query in names:
        cells = []
        for backend in backends:
            figures = results[backend]["queries"][query]
            cells += [f"{figures['p50_ms']:.2f}", f"{figures['p99_ms']:.2f}"]
        lines.append(f"| {query} | " + " | ".join(cells) + " |")
    lines += ["", "| backend | insert time | decisions written per second |", "|---|---:|---:|"]
    for backend in backends:
        r = results[backend]
        lines.append(f"| {backend} | {r['insert_s']} s | {r['insert_per_s']:,} |")
    worst = max(
        f["p99_ms"] for r in results.values() for f in r["queries"].values()
    )  # fmt: skip
    lines += ["", f"Worst p99: {worst:.2f} ms ({'meets' if worst < 100 else 'misses'} the goal)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--name", default="store_queries")
    args = parser.parse_args()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="voltpack-bench-") as folder:
        for backend in args.backends.split(","):
            if backend == "sqlite":
                path = Path(folder) / "voltpack.db"
                results["sqlite"] = run_backend(
                    "sqlite", f"sqlite:///{path}", args.decisions, args.repeats
                )
                results["sqlite"]["file_mib"] = round(path.stat().st_size / 2**20, 1)
            elif backend == "postgresql":
                with TemporaryPostgres() as server:
                    url = server.create_database("bench")
                    results["postgresql"] = run_backend(
                        "postgresql", url, args.decisions, args.repeats
                    )
            else:
                parser.error(f"unknown backend {backend!r}: use sqlite and/or postgresql")
    figures = {"decisions": args.decisions, "repeats": args.repeats, "results": results}
    save(args.name, figures, markdown(results, args.decisions, args.repeats))


if __name__ == "__main__":
    main()
