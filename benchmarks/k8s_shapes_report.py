"""The throughput runs summed up: medians per shape and scheduler, voltpack over kube-scheduler,
whether the issue's goal is met on each shape, and the Markdown that says so (oracle violations
never left out)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

GOAL_SPEEDUP = 1.5
"""The issue's goal on every shape: voltpack binds at least 1.5x kube-scheduler's pods/s
(QPS 5000) at fewer CPU-seconds per pod, every binding allowed by kube-scheduler's filters."""


def summarise(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per shape, scheduler set-up and size (in the order first met): runs, and the median, min
    and max of pods/s, scheduler CPU-seconds per pod, peak RSS and the apiserver's CPU-seconds
    per pod; every run must be complete for `all_complete`; the oracle's violations of each run
    (None: not checked)."""
    groups: dict[tuple[str, str, str, int, int], list[dict[str, Any]]] = {}
    for row in rows:
        key = (row.get("shape", "gpu"), row["scheduler"], row["config"], row["nodes"], row["pods"])
        groups.setdefault(key, []).append(row)
    summary = []
    for (shape, scheduler, config, nodes, pods), runs in groups.items():
        entry: dict[str, Any] = {"shape": shape, "scheduler": scheduler, "config": config,
                                 "nodes": nodes, "pods": pods, "runs": len(runs),
                                 "init_pods": runs[0].get("init_pods", 0),
                                 "all_complete": all(r["complete"] for r in runs)}  # fmt: skip
        figures = {
            name: [r[name] for r in runs if r.get(name) is not None]
            for name in ("pods_per_s", "scheduler_cpu_s_per_pod", "scheduler_rss_peak_mib")
        }
        figures["apiserver_cpu_s_per_pod"] = [
            r["apiserver_cpu_s"] / r["bound"]
            for r in runs
            if r.get("apiserver_cpu_s") and r.get("bound")
        ]
        for field_name, values in figures.items():
            if values:
                entry[field_name] = {"median": float(np.median(values)), "min": min(values),
                                     "max": max(values)}  # fmt: skip
        entry["loadavg_before"] = [r["loadavg_before"][0] for r in runs]
        entry["oracle_violations"] = [r.get("oracle_violations") for r in runs]
        entry["oracle_confirmed_violations"] = [r.get("oracle_confirmed_violations") for r in runs]
        entry["oracle_unchecked"] = [r.get("oracle_unchecked") or 0 for r in runs]
        summary.append(entry)
    return summary


def entry_at(
    summary: Sequence[dict[str, Any]], size: tuple[str, int, int], **match: str
) -> dict[str, Any] | None:
    """The summary entry at (shape, nodes, pods) whose fields equal `match` (e.g. `config=...`
    or `scheduler="voltpack"`), if that set-up ran there."""
    return next(
        (
            e
            for e in summary
            if (e.get("shape", "gpu"), e["nodes"], e["pods"]) == size
            and all(e.get(field) == value for field, value in match.items())
        ),
        None,
    )


def ratios(
    summary: Sequence[dict[str, Any]], baseline_config: str, ceiling_config: str | None = None
) -> list[dict[str, Any]]:
    """Per shape and size: voltpack's median pods/s and CPU-seconds per pod over those of the
    set-up named `baseline_config` (kube-scheduler with scheduler_perf's client limits), and
    whether the goal (GOAL_SPEEDUP) is met, with what misses it. Where the set-up named
    `ceiling_config` ran (kube-scheduler deciding nothing: the request path alone), its median
    pods/s too, and whether the goal's rate is under it at all."""
    out = []
    for ours in (e for e in summary if e["scheduler"] == "voltpack"):
        size = (ours.get("shape", "gpu"), ours["nodes"], ours["pods"])
        theirs = entry_at(summary, size, config=baseline_config)
        if theirs is None or "pods_per_s" not in theirs:
            continue
        ceiling = entry_at(summary, size, config=ceiling_config) if ceiling_config else None
        ceiling_rate = (ceiling or {}).get("pods_per_s", {}).get("median")
        speed = ours["pods_per_s"]["median"] / theirs["pods_per_s"]["median"]
        cpu_ours = ours.get("scheduler_cpu_s_per_pod", {}).get("median")
        cpu_theirs = theirs.get("scheduler_cpu_s_per_pod", {}).get("median")
        cpu = cpu_ours / cpu_theirs if cpu_ours and cpu_theirs else None
        violations = ours.get("oracle_violations") or []
        real = ours.get("oracle_confirmed_violations") or [None] * len(violations)
        unchecked = sum(ours.get("oracle_unchecked") or [])
        misses = []
        if speed < GOAL_SPEEDUP:
            misses.append(f"pods/s {speed:.2f}x < {GOAL_SPEEDUP}x")
        if cpu is None or cpu >= 1:
            misses.append("CPU per pod not lower" if cpu else "CPU per pod not measured")
        if not (ours["all_complete"] and theirs["all_complete"]):
            misses.append("a run did not bind every pod")
        if not violations or any(v is None for v in [*violations, *real]):
            misses.append("bindings not checked by the oracle")
        elif sum(r for r in real if r):
            misses.append(f"{sum(r for r in real if r):,} bindings kube-scheduler's filters "
                          "refuse in any order")  # fmt: skip
        elif unchecked:
            misses.append(f"{unchecked:,} bind-order violations not checked in the final state")
        goal_rate = GOAL_SPEEDUP * theirs["pods_per_s"]["median"]
        out.append({
            "shape": size[0], "nodes": ours["nodes"], "pods": ours["pods"],
            "pods_per_s_ratio": speed, "cpu_s_per_pod_ratio": cpu,
            "baseline_config": baseline_config, "ceiling_config": ceiling_config,
            "goal_met": not misses, "goal_misses": misses, "goal_pods_per_s": goal_rate,
            "ceiling_pods_per_s": ceiling_rate,
            "goal_over_ceiling": None if ceiling_rate is None else goal_rate > ceiling_rate,
            "pods_per_s_of_ceiling": (None if ceiling_rate is None
                                      else ours["pods_per_s"]["median"] / ceiling_rate),
        })  # fmt: skip
    return out


def spread(entry: dict[str, Any], key: str, scale: float, digits: int) -> str:
    """median (min-max) of a summary figure."""
    figure = entry.get(key)
    if not figure:
        return ""
    return (f"{figure['median'] * scale:,.{digits}f} ({figure['min'] * scale:,.{digits}f}"
            f"-{figure['max'] * scale:,.{digits}f})")  # fmt: skip


def violation_text(order: int | None, real: int | None, unchecked: int | None) -> str:
    """One run's oracle figures: violations in bind order, and of them those refused in any
    order (the order-independent ones and those the final state refuses too)."""
    if order is None or real is None:
        return "not checked"
    if not order:
        return "0"
    text = f"{order:,} in bind order, **{real:,}** in any order" if real else (
        f"{order:,} in bind order, 0 in any order")  # fmt: skip
    return text + (f" ({unchecked:,} not re-checked)" if unchecked else "")


def violations_text(entry: dict[str, Any]) -> str:
    """Each run of a summary entry's oracle figures."""
    order = entry.get("oracle_violations") or []
    real = entry.get("oracle_confirmed_violations") or [None] * len(order)
    unchecked = entry.get("oracle_unchecked") or [0] * len(order)
    return "; ".join(
        violation_text(*figures) for figures in zip(order, real, unchecked, strict=False)
    )


TIMING = (
    "Each run: a fresh control plane with the shape's nodes (kwok); the scheduler starts, binds "
    "a warm-up pod and then the init pods (created while it runs, as scheduler_perf does); once "
    "it is idle it is paused (SIGSTOP), the measure pods are created, and the clock starts when "
    "it is resumed (SIGCONT) with all of them pending. pods/s = measure pods bound / seconds "
    "from the resume to the last of them bound (as the benchmark's watch saw it); CPU = the "
    "scheduler's CPU-seconds over that interval (/proc) per measure pod. Every binding of the "
    "run (warm-up, init and measure) is then replayed through kube-scheduler v1.34.4's own "
    "Filter plugins (the oracle) in bind order; a spread or required-affinity violation there "
    "can be an artefact of the order (bindings made in parallel reach the API server in "
    "another order than they were decided in), so each is checked again against the run's "
    'final state: refused there, it is refused in any order ("in any order").'
)


def throughput_lines(figures: dict[str, Any]) -> list[str]:
    """The throughput section: the goal per shape, the medians per set-up, every run, and every
    run the oracle found violations in."""
    lines = ["## Throughput on kube-scheduler's scheduler_perf shapes and voltpack's GPU shape",
             "", TIMING, ""]  # fmt: skip
    shapes = figures.get("throughput_shapes") or {}
    if shapes:
        lines += ["| shape | source (test case, workload) | nodes | init pods | measure pods |",
                  "|---|---|---:|---:|---:|"]  # fmt: skip
        for name, shape in shapes.items():
            lines.append(
                f"| {name} | {shape.get('test_case', '')} {shape.get('workload', '')} | "
                f"{shape['nodes']:,} | {shape['init_pods']:,} | {shape['measure_pods']:,} |"
            )
        notes = [n for shape in shapes.values() for n in shape.get("notes", [])]
        lines += ["", *(f"- {note}" for note in dict.fromkeys(notes))] if notes else []
        lines.append("")
    summary = figures.get("throughput_summary") or []
    goals = figures.get("throughput_ratios") or []
    if goals:
        lines += [
            f"Goal per shape: voltpack >= {GOAL_SPEEDUP}x kube-scheduler's (QPS 5000) pods/s at "
            "lower CPU-seconds per pod, no binding kube-scheduler's filters refuse in any order "
            "(medians of the runs, min-max). The apiserver's CPU per pod is what the same "
            "bindings, Events and watches cost it under each scheduler (with its own "
            "background: 5,000 kwok nodes' heartbeats, so a longer run costs more per pod).",
            "",
            "| shape | nodes | measure pods | kube-scheduler pods/s | voltpack pods/s | ratio "
            "| kube-scheduler CPU ms/pod | voltpack CPU ms/pod | CPU ratio "
            "| apiserver CPU ms/pod kube-scheduler / voltpack "
            "| oracle violations kube-scheduler / voltpack | goal |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
        ]
        for g in goals:
            size = (g["shape"], g["nodes"], g["pods"])
            kube = entry_at(summary, size, config=g.get("baseline_config", "")) or {}
            ours = entry_at(summary, size, scheduler="voltpack") or {}
            cpu = g["cpu_s_per_pod_ratio"]
            goal = "met" if g["goal_met"] else "**not met**: " + "; ".join(g["goal_misses"])
            lines.append(
                f"| {g['shape']} | {g['nodes']:,} | {g['pods']:,} | "
                f"{spread(kube, 'pods_per_s', 1, 1)} | {spread(ours, 'pods_per_s', 1, 1)} | "
                f"{g['pods_per_s_ratio']:.2f}x | "
                f"{spread(kube, 'scheduler_cpu_s_per_pod', 1000, 2)} | "
                f"{spread(ours, 'scheduler_cpu_s_per_pod', 1000, 2)} | "
                f"{'' if cpu is None else f'{cpu:.2f}x'} | "
                f"{spread(kube, 'apiserver_cpu_s_per_pod', 1000, 2)} / "
                f"{spread(ours, 'apiserver_cpu_s_per_pod', 1000, 2)} | "
                f"{violations_text(kube)} / {violations_text(ours)} | {goal} |"
            )
        lines.append("")
        lines += ceiling_lines(goals, summary)
    if summary:
        lines += [
            "Per set-up: medians of the runs (min-max); runs alternate between the contenders.",
            "",
            "| shape | scheduler | config | nodes | init pods | measure pods | runs | pods/s "
            "| scheduler CPU ms/pod | scheduler peak RSS MiB | all bound | load before each run "
            "| oracle violations |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
        ]
        for e in summary:
            lines.append(
                f"| {e['shape']} | {e['scheduler']} | {e['config']} | {e['nodes']:,} | "
                f"{e.get('init_pods', 0):,} | {e['pods']:,} | {e['runs']} | "
                f"{spread(e, 'pods_per_s', 1, 1)} | "
                f"{spread(e, 'scheduler_cpu_s_per_pod', 1000, 2)} | "
                f"{spread(e, 'scheduler_rss_peak_mib', 1, 0)} | "
                f"{'yes' if e['all_complete'] else '**no**'} | "
                f"{', '.join(str(x) for x in e['loadavg_before'])} | "
                f"{violations_text(e)} |"
            )
        lines.append("")
    lines += run_lines(figures.get("throughput") or [])
    return lines


CEILING = (
    "The ceiling: kube-scheduler with every Filter and Score plugin off "
    "(`benchmarks/k8s/kube-scheduler-no-plugins.yaml`) binds each pod to the next node without "
    "looking at it and writes the same Scheduled Event: the same requests through kube-scheduler's "
    "own Go client, with no decision. Its pods/s is what the control plane (apiserver, etcd, "
    "kwok) and the cores leave to a scheduler that does this work; a goal above it cannot be "
    "met by any scheduler on this machine. It is not a contender (it checks nothing: where a "
    "shape constrains, the oracle refuses its bindings) and runs in the same alternating rounds."
)


def ceiling_lines(goals: Sequence[dict[str, Any]], summary: Sequence[dict[str, Any]]) -> list[str]:
    """Where the ceiling ran: its pods/s beside the goal's rate and voltpack's."""
    measured = [g for g in goals if g.get("ceiling_pods_per_s")]
    if not measured:
        return []
    lines = [CEILING, "",
             "| shape | goal pods/s (1.5x kube-scheduler) | ceiling pods/s | goal under the "
             "ceiling | voltpack pods/s | voltpack / ceiling | ceiling CPU ms/pod |",
             "|---|---:|---:|---|---:|---:|---:|"]  # fmt: skip
    for g in measured:
        size = (g["shape"], g["nodes"], g["pods"])
        ceiling = entry_at(summary, size, config=g["ceiling_config"]) or {}
        ours = entry_at(summary, size, scheduler="voltpack") or {}
        lines.append(
            f"| {g['shape']} | {g['goal_pods_per_s']:.1f} | {spread(ceiling, 'pods_per_s', 1, 1)} "
            f"| {'**no**' if g['goal_over_ceiling'] else 'yes'} | "
            f"{spread(ours, 'pods_per_s', 1, 1)} | {g['pods_per_s_of_ceiling']:.2f} | "
            f"{spread(ceiling, 'scheduler_cpu_s_per_pod', 1000, 2)} |"
        )
    return [*lines, ""]


def run_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    lines = [
        "Every run, in the order run:",
        "",
        "| shape | scheduler | nodes | measure pods | pods/s | bound | s | scheduler CPU ms/pod "
        "| scheduler peak RSS MiB | apiserver CPU s | load before/after | oracle violations "
        "| run wall s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|",
    ]
    for r in rows:
        cpu = r.get("scheduler_cpu_s_per_pod")
        rss = r.get("scheduler_rss_peak_mib")
        api = r.get("apiserver_cpu_s")
        violations = violation_text(
            r.get("oracle_violations"),
            r.get("oracle_confirmed_violations"),
            r.get("oracle_unchecked"),
        )
        lines.append(
            f"| {r.get('shape', 'gpu')} | {r['scheduler']} | {r['nodes']:,} | {r['pods']:,} | "
            f"{r['pods_per_s']:.1f} | {r['bound']:,} | {r['seconds']:.1f} | "
            f"{'' if cpu is None else f'{cpu * 1000:.2f}'} | "
            f"{'' if rss is None else f'{rss:,.0f}'} | {'' if api is None else api} | "
            f"{r['loadavg_before'][0]} / {r['loadavg_after'][0]} | "
            f"{violations} | "
            f"{r.get('run_wall_s', '')} |"
        )
    for r in rows:
        if r.get("error"):
            lines += ["", f"{r['scheduler']} run {r.get('run', '')} on {r.get('shape')} failed: "
                      f"`{r['error'][-300:]}`"]  # fmt: skip
    for r in (r for r in rows if r.get("oracle_violations")):
        lines += violation_lines(r)
    return lines


def violation_lines(r: dict[str, Any]) -> list[str]:
    """A run's violations: how many, which plugins, the first ones, and the final-state check."""
    oracle = r["oracle"]
    who = "**voltpack**" if r["scheduler"] == "voltpack" else r["scheduler"]
    lines = [
        "",
        f"{who} run {r.get('run', '')} on {r.get('shape', 'gpu')}: **{oracle['violations']:,} "
        f"of {oracle['checked']:,} bindings violate kube-scheduler's filters in bind order** "
        f"({oracle['measure_violations']:,} of them measure pods; by plugin "
        f"{oracle['by_plugin']}); {oracle['order_independent_violations']:,} of them would in "
        f"any order; of the {oracle['order_dependent_violations']:,} that depend on the order "
        f"(spread skew, required affinity), {oracle['final_state_violations']:,} are refused "
        f"in the final state too (checked: {oracle['final_state_checked_groups']:,} of "
        f"{oracle['final_state_groups']:,} groups of pods alike on one node). First ones in "
        "bind order:",
        "",
        *(f"- #{v['index']} {v['pod']} on {v['node']}: {v['plugin']}: "
          f"{'; '.join(v['reasons'])}" for v in oracle["examples"]),
    ]  # fmt: skip
    if oracle.get("final_state_examples"):
        lines += ["", "Refused in the final state:", ""]
        lines += [f"- {v['pod']} on {v['node']} ({v['group_pods']} pods alike): {v['plugin']}: "
                  f"{'; '.join(v['reasons'])}" for v in oracle["final_state_examples"]]  # fmt: skip
    return lines
