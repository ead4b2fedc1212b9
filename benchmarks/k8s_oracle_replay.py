"""Every binding of a side-by-side run checked by kube-scheduler's own Filter plugins: the
oracle's replay (tests/scheduler_oracle.py, docs/scheduler-oracle.md) in bind order.

The objects are the API server's own (listed once the run is over, `managedFields` left out):
the Nodes, the Namespaces and each bound Pod, handed to the oracle in the order the benchmark's
watch saw them bound (one stream, so resourceVersion order). Each binding is checked against the
nodes and the bindings before it; a violation is a binding kube-scheduler's filters would not
have allowed there and then.
"""

from __future__ import annotations

import gzip
import json
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kubernetes import client

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.scheduler_oracle

from tests.scheduler_oracle import SchedulerOracle, Violation, missing_oracle  # noqa: E402

EXAMPLES = 5
"""Violations quoted in the results (all are counted)."""
REPLAY_TIMEOUT_S = 1800.0
FINAL_CHECKS = 60
"""Groups of order-dependent violations checked again against the final state, at most."""


def _items(response: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(response.data)["items"]
    for item in items:
        item.get("metadata", {}).pop("managedFields", None)
    return items


def cluster_objects(api: client.ApiClient) -> dict[str, list[dict[str, Any]]]:
    """The Nodes, Pods and Namespaces as the API server holds them now."""
    core = client.CoreV1Api(api)
    return {
        "nodes": _items(core.list_node(_preload_content=False)),
        "pods": _items(core.list_pod_for_all_namespaces(_preload_content=False)),
        "namespaces": _items(core.list_namespace(_preload_content=False)),
    }


def save_run(
    path: Path,
    objects: Mapping[str, Sequence[dict[str, Any]]],
    bind_order: Sequence[str],
    bound: Mapping[str, str],
    measured: Sequence[str],
) -> None:
    """A run's objects and bindings as gzipped JSON, for `main` to replay again."""
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"objects": objects, "bind_order": list(bind_order), "bound": dict(bound),
                "measured": list(measured)}  # fmt: skip
    with gzip.open(path, "wt") as out:
        json.dump(document, out, separators=(",", ":"))


def key_of(pod: Mapping[str, Any]) -> str:
    return f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}"


def replay(
    objects: Mapping[str, Sequence[dict[str, Any]]],
    bind_order: Iterable[str],
    bound: Mapping[str, str],
    measured: set[str],
) -> dict[str, Any]:
    """Replays the bindings in `bind_order` (pod keys; `bound`: key -> node the watch saw)."""
    if missing_oracle():
        return {"checked": 0, "error": "scheduler-oracle not built (`make oracle`)"}
    pods = {key_of(pod): pod for pod in objects["pods"]}
    bindings, moved = [], []
    for key in bind_order:
        pod = pods.get(key)
        if pod is None:
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        if node != bound.get(key):
            moved.append(key)  # never expected: a pod's node cannot change
        bindings.append(pod)
    started = time.perf_counter()
    with SchedulerOracle(timeout_s=REPLAY_TIMEOUT_S) as oracle:
        answer = oracle.replay(
            nodes=objects["nodes"], namespaces=objects["namespaces"], bindings=bindings
        )
        violations = answer.violations
        final = final_state_check(oracle, objects, bindings, violations)
    return {
        "checked": answer.checked,
        "violations": len(violations),
        "measure_violations": sum(1 for v in violations if v.pod in measured),
        "order_independent_violations": sum(1 for v in violations if not order_dependent(v)),
        **final,
        "examples": [
            {
                "index": v.index,
                "pod": v.pod,
                "node": v.node,
                "plugin": v.plugin,
                "reasons": v.reasons,
            }
            for v in violations[:EXAMPLES]
        ],
        "by_plugin": _count(v.plugin for v in violations),
        "node_differs_from_watch": moved[:EXAMPLES],
        "oracle_s": round(answer.seconds, 2),
        "wall_s": round(time.perf_counter() - started, 2),
    }


ORDER_DEPENDENT = {
    ("PodTopologySpread", "node(s) didn't match pod topology spread constraints"),
    ("InterPodAffinity", "node(s) didn't match pod affinity rules"),
}
"""(plugin, reason) a binding can fail in bind order only because of the order: a spread's skew
and a required affinity's match depend on which pods came first. Every other rejection (room,
ports, taints, node affinity, anti-affinity) fails in any order the same bindings are made in."""


def order_dependent(violation: Violation) -> bool:
    return bool(violation.reasons) and all(
        (violation.plugin, reason) in ORDER_DEPENDENT for reason in violation.reasons
    )


def signature(pod: Mapping[str, Any]) -> str:
    """What the filters read of a pod but its name: labels, namespace and spec (no nodeName)."""
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
    metadata = pod.get("metadata") or {}
    return json.dumps([metadata.get("namespace"), metadata.get("labels"), spec], sort_keys=True)


def final_state_check(
    oracle: SchedulerOracle,
    objects: Mapping[str, Sequence[dict[str, Any]]],
    bindings: Sequence[dict[str, Any]],
    violations: Sequence[Violation],
) -> dict[str, Any]:
    """The order-dependent violations checked once more, against every other binding of the
    run: is the pod's node among those the filters allow then? A pod refused there is refused in
    any order the bindings could have been made in (a spread's final skew is too large, or no
    pod it needs is there); one allowed there was refused only because of the order the watch
    saw the bindings in (pods bound in parallel reach the API server in another order than they
    were decided in: kube-scheduler's own runs show such). Pods with the same labels and spec on
    the same node get the same answer: one is checked for each such group, at most FINAL_CHECKS
    groups spread evenly over them (`final_state_unchecked` counts the pods of the others)."""
    by_key = {key_of(pod): pod for pod in bindings}
    groups: dict[tuple[str, str], list[str]] = {}
    for violation in violations:
        if order_dependent(violation):
            group = (violation.node, signature(by_key[violation.pod]))
            groups.setdefault(group, []).append(violation.pod)
    chosen = list(groups.values())
    if len(chosen) > FINAL_CHECKS:
        step = len(chosen) / FINAL_CHECKS
        chosen = [chosen[int(i * step)] for i in range(FINAL_CHECKS)]
    result: dict[str, Any] = {
        "order_dependent_violations": sum(len(g) for g in groups.values()),
        "final_state_groups": len(groups),
        "final_state_checked_groups": len(chosen),
        "final_state_unchecked": sum(len(g) for g in groups.values()) - sum(len(g) for g in chosen),
        "final_state_violations": 0,
        "final_state_examples": [],
    }
    if not chosen:
        return result
    nodes_json = json.dumps(objects["nodes"], separators=(",", ":"))
    namespaces_json = json.dumps(objects["namespaces"], separators=(",", ":"))
    encoded = {key: json.dumps(pod, separators=(",", ":")) for key, pod in by_key.items()}
    refused: list[dict[str, Any]] = []
    for number, members in enumerate(chosen):
        key = members[0]
        pod = by_key[key]
        node = pod["spec"]["nodeName"]
        pending = {**pod, "spec": {k: v for k, v in pod["spec"].items() if k != "nodeName"}}
        others = ",".join(text for other, text in encoded.items() if other != key)
        line = (f'{{"id":"final-{number}","nodes":{nodes_json},"pods":[{others}],'
                f'"namespaces":{namespaces_json},"pvs":[],"pvcs":[],"storageClasses":[],'
                f'"csiNodes":[],"pod":{json.dumps(pending, separators=(",", ":"))}}}')  # fmt: skip
        answer = oracle.send_line(line)
        if "error" in answer:
            raise RuntimeError(f"the oracle refused the final-state check: {answer['error']}")
        if node not in answer["feasible"]:
            refused.append({"pod": key, "node": node, "group_pods": len(members),
                            "plugin": answer["plugins"].get(node, ""),
                            "reasons": answer["reasons"].get(node, [])})  # fmt: skip
    result["final_state_violations"] = sum(r["group_pods"] for r in refused)
    result["final_state_examples"] = refused[:EXAMPLES]
    return result


def confirmed(answer: Mapping[str, Any]) -> int | None:
    """Bindings the filters refuse whatever the order: the order-independent violations and
    the order-dependent ones refused in the final state too (None: the oracle did not answer)."""
    if "violations" not in answer:
        return None
    return int(answer["order_independent_violations"]) + int(answer["final_state_violations"])


def _count(values: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def main() -> None:
    """Replays a run written by `k8s_side_by_side.py --keep-bindings` and prints the answer."""
    if len(sys.argv) != 2:
        raise SystemExit("usage: python benchmarks/k8s_oracle_replay.py RUN.json.gz")
    with gzip.open(sys.argv[1], "rt") as source:
        run = json.load(source)
    answer = replay(run["objects"], run["bind_order"], run["bound"], set(run["measured"]))
    print(json.dumps(answer, indent=1))


if __name__ == "__main__":
    main()
