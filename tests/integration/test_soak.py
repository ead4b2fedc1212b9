"""The soak, short: a real control plane (etcd + kube-apiserver + kwok) with pod groups and
GPUJobs arriving and finishing for 90 s while every kind of fault is injected once (bindings
answered 500 by the proxy, the operator SIGKILLed, the apiserver and etcd restarted, watches
dropped and sent 410, GPU faults); no invariant may be violated (tests/soak/invariants.py) and
the cluster must recover from every fault. `benchmarks/soak.py` runs the long version.

Without the binaries (`make k8s`) it fails in CI and is skipped elsewhere, naming the target.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.services import missing_service
from tests.k8s_control_plane import bin_dir, missing_binaries
from tests.soak.faults import Timings
from tests.soak.run import SoakConfig, run_soak

KINDS = (
    "binding-5xx", "operator-kill", "apiserver-restart", "watch-410", "gpu-fault",
    "etcd-restart", "binding-5xx-after", "watch-drop",
)  # fmt: skip


def test_a_short_soak_with_every_fault_keeps_every_invariant(tmp_path: Path) -> None:
    missing = missing_binaries(kwok=True)
    if missing:
        missing_service("kube-apiserver", f"{', '.join(missing)} not built in {bin_dir()}")
    config = SoakConfig(
        duration_s=90, nodes=12, nodes_per_rack=4, pods_per_s=2.0, lifetime_s=(8.0, 20.0),
        max_wait_s=60.0, kinds=KINDS, seed=7,
        timings=Timings(window_s=5.0, gap_s=3.0, recover_timeout_s=60.0),
    )  # fmt: skip
    result = run_soak(config, tmp_path)
    (tmp_path / "soak.json").write_text(json.dumps(result, indent=1))
    invariants = result["invariants"]
    assert invariants["violations"] == 0, json.dumps(invariants["details"], indent=1)
    assert result["workload"]["pods_bound"] > 0, result["workload"]
    injected = {fault["kind"] for fault in result["faults"]}
    assert {"binding-5xx", "operator-kill", "apiserver-restart"} <= injected, result["faults"]
    not_recovered = [f for f in result["faults"] if f["recovery_s"] is None]
    assert not_recovered == [], not_recovered
    assert result["operator"]["crashes"] == [], result["operator"]
    assert result["view"]["subscriber_errors"] == [], result["view"]
