"""The Grafana dashboards and Prometheus alert rules of the Helm chart, checked for real.

1. Every dashboard matches `grafana_dashboard.schema.json` (the subset of Grafana's dashboard
   model the dashboards rely on) and a few conventions (variables, unique ids, no overlaps).
2. Three real agents and a real Prometheus scraping them every second (with the alert rules
   loaded): every expression of every dashboard panel, variable and rule returns data once the
   Grafana variables are substituted, every rule evaluates without error, and every alert is
   pending or firing. The scenario that makes every expression non-empty:

   * gpu-node-0: 8 H100-SXM at utilizations 0, 1/7, ..., 1; GPU 7 capped to 300 W (so it is
     throttled by the power cap), an XID error on GPU 2 and ECC errors on GPU 3 after the first
     scrapes, GPU 5 lost (unhealthy);
   * gpu-node-1: 4 A100-80GB at full utilization (power above 90 % of the limits), whose agent
     exports a last-sample timestamp two minutes old (stale telemetry);
   * a target nothing listens on (an agent that is down);
   * the operator scheduling pods on both nodes, one pod pending, and a two-pod training gang
     (gpt-1.3b) placed through a one-level `Topology`: its predicted step slowdown;
   * an InferenceService the operator plans (its predicted cost), annotated with the SLO
     attainment a metrics adapter would report.
3. `promtool check rules` and `promtool test rules` (`voltpack-alerts.test.yaml`) on the rules
   file extracted from the PrometheusRule's `spec`.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from kubernetes import client

from tests.integration.conftest import pod_manifest
from tests.integration.prometheus import (
    PrometheusServer,
    free_port,
    require_binary,
    running_prometheus,
)
from voltpack.emulator import EmulatorConfig, running_emulator
from voltpack.emulator.dra.slices import driver_device_classes, node_resource_slices
from voltpack.model import Node
from voltpack.operator.kube.crds import install_crds
from voltpack.operator.runner import Operator, OperatorConfig
from voltpack.policies.schema import policy_for_strategy
from voltpack.telemetry.agent import NodeAgent, RunningAgent, start_agent
from voltpack.telemetry.simulated import SimulatedBackend

REPO_ROOT = Path(__file__).resolve().parents[2]
DASHBOARD_DIR = REPO_ROOT / "helm" / "voltpack" / "dashboards"
RULES_FILE = REPO_ROOT / "helm" / "voltpack" / "rules" / "voltpack-alerts.yaml"
SCHEMA_FILE = Path(__file__).with_name("grafana_dashboard.schema.json")
UNIT_TESTS_FILE = Path(__file__).with_name("voltpack-alerts.test.yaml")
EXTRACTED_RULES_NAME = "voltpack-alerts.rules.yaml"  # the name the unit tests' rule_files use

DASHBOARDS = ("voltpack-cluster.json", "voltpack-gpu-nodes.json", "voltpack-power.json")
ALERTS = {
    "VoltpackPowerDomainAboveBudget",
    "VoltpackGpuXidErrors",
    "VoltpackGpuUnhealthy",
    "VoltpackTelemetryStale",
    "VoltpackNodePowerAboveThreshold",
    "VoltpackGpuFaultNeedsReset",
    "VoltpackGpuFaultNeedsRebootOrReplace",
    "VoltpackGpuHardwareSlowdown",
    "VoltpackPowerActuationFailing",
}
GRAFANA_VALUES = {"__rate_interval": "10s", "__interval": "5s", "__range": "1m"}
"""Values of Grafana's built-in variables; every dashboard (query) variable becomes `.*`."""
MATCH_ALL = ".*"
VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)(?::\w+)?\]\]")
QUERY_TIMEOUT_S = 30.0
STALE_BY_S = 120.0


def load_dashboard(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DASHBOARD_DIR / name).read_text())
    return data


def substitute(expr: str) -> str:
    """A Grafana expression with its variables replaced as the test's Grafana would."""

    def value(match: re.Match[str]) -> str:
        name = next(group for group in match.groups() if group)
        return GRAFANA_VALUES.get(name, MATCH_ALL)

    return VARIABLE.sub(value, expr)


def panel_targets() -> list[tuple[str, str]]:
    """(test id, expression) of every target of every panel and every query variable."""
    out: list[tuple[str, str]] = []
    for name in DASHBOARDS:
        board = load_dashboard(name)
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                out.append((f"{name}:{panel['title']}:{target['refId']}", target["expr"]))
        for variable in board["templating"]["list"]:
            if variable["type"] == "query":
                query = variable["query"]["query"]
                match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", query)
                assert match, f"{name}: variable {variable['name']}: {query!r}"
                out.append((f"{name}:${variable['name']}", match.group(1)))
    return out


def rules_spec() -> dict[str, Any]:
    document = yaml.safe_load(RULES_FILE.read_text())
    spec: dict[str, Any] = document["spec"]
    return spec


def rule_exprs() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for group in rules_spec()["groups"]:
        for index, rule in enumerate(group["rules"]):
            name = rule.get("alert") or rule.get("record")
            out.append((f"{group['name']}:{index}:{name}", rule["expr"]))
    return out


def write_plain_rules(directory: Path) -> Path:
    """The PrometheusRule's `spec` as a plain Prometheus rules file."""
    path = directory / EXTRACTED_RULES_NAME
    path.write_text(yaml.safe_dump(rules_spec(), sort_keys=False))
    return path


# -- 1. dashboards against the schema -----------------------------------------------------------


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA_FILE.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def test_the_dashboard_directory_holds_exactly_the_known_dashboards() -> None:
    assert sorted(p.name for p in DASHBOARD_DIR.glob("*.json")) == sorted(DASHBOARDS)


@pytest.mark.parametrize("name", DASHBOARDS)
def test_dashboard_matches_the_schema(name: str, validator: jsonschema.protocols.Validator) -> None:
    errors = sorted(validator.iter_errors(load_dashboard(name)), key=lambda e: list(e.path))
    messages = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors]
    assert not messages, f"{name} does not match the schema:\n" + "\n".join(messages)


def test_the_schema_rejects_a_broken_dashboard(validator: jsonschema.protocols.Validator) -> None:
    board = load_dashboard("voltpack-power.json")
    panel = next(p for p in board["panels"] if p["type"] != "row")
    del panel["targets"][0]["expr"]
    board["schemaVersion"] = 38
    paths = {"/".join(map(str, e.absolute_path)) for e in validator.iter_errors(board)}
    assert "schemaVersion" in paths
    assert any(path.endswith("targets/0") for path in paths), paths


@pytest.mark.parametrize("name", DASHBOARDS)
def test_dashboard_conventions(name: str) -> None:
    board = load_dashboard(name)
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for var in ("node", "model"):
        assert variables[var]["type"] == "query", var
        assert variables[var]["includeAll"] and variables[var]["allValue"] == ".*", var
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids)), f"duplicate panel ids in {name}"
    cells: dict[tuple[int, int], str] = {}
    for panel in board["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                other = cells.setdefault((x, y), panel["title"])
                assert other == panel["title"], f"{panel['title']!r} overlaps {other!r}"
    known = set(variables) | set(GRAFANA_VALUES)
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            for match in VARIABLE.finditer(target["expr"]):
                used = next(group for group in match.groups() if group)
                assert used in known, f"{panel['title']}: unknown variable ${used}"


# -- 2. every expression against a real Prometheus ---------------------------------------------


@contextmanager
def scheduling_operator() -> Iterator[Operator]:
    """An operator scheduling an emulated two-node cluster: some pods bound, one pending."""
    nodes = [
        Node.empty("gpu-node-0", 128_000, 1_048_576, 8, "H100-SXM"),
        Node.empty("gpu-node-1", 64_000, 524_288, 4, "A100-80GB"),
    ]
    with running_emulator(nodes=nodes, config=EmulatorConfig(lifecycle=False)) as emulator:
        api = client.ApiClient(client.Configuration(host=emulator.url))
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": "voltpack-system"}})
        install_crds(client.ApiextensionsV1Api(api))
        client.CustomObjectsApi(api).create_cluster_custom_object(
            "voltpack.io", "v1alpha1", "powerbudgets",
            {
                "apiVersion": "voltpack.io/v1alpha1",
                "kind": "PowerBudget",
                "metadata": {"name": "rack-a"},
                # far below eight busy H100s: the domain alert fires
                "spec": {
                    "nodeSelector": {"matchLabels": {"kubernetes.io/hostname": "gpu-node-0"}},
                    "budgetW": 1000,
                },
            },
        )  # fmt: skip
        # an agent that reports a cap it could not apply: the actuation-failure alert
        custom = client.CustomObjectsApi(api)
        custom.create_cluster_custom_object(
            "voltpack.io", "v1alpha1", "gpunodes",
            {"apiVersion": "voltpack.io/v1alpha1", "kind": "GPUNode",
             "metadata": {"name": "gpu-node-0"}, "spec": {}},
        )  # fmt: skip
        refused = {"type": "SettingsApplied", "status": "False", "reason": "DriverRefused",
                   "message": "GPU 0 set-power-limit: Insufficient Permissions"}  # fmt: skip
        custom.patch_cluster_custom_object_status(
            "voltpack.io", "v1alpha1", "gpunodes", "gpu-node-0",
            {"status": {"conditions": [refused]}},
        )  # fmt: skip
        # a Topology (one level: the host) and a training gang placed by predicted step time:
        # the step-slowdown panel
        client.CustomObjectsApi(api).create_cluster_custom_object(
            "voltpack.io", "v1alpha1", "topologies",
            {
                "apiVersion": "voltpack.io/v1alpha1",
                "kind": "Topology",
                "metadata": {"name": "hosts"},
                "spec": {"levels": [
                    {"nodeLabel": "kubernetes.io/hostname", "name": "host",
                     "oversubscription": 1.0},
                ]},
            },
        )  # fmt: skip
        # an InferenceService with the SLO attainment a metrics adapter reports: the cost and
        # attainment panels
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            "voltpack.io", "v1alpha1", "default", "inferenceservices",
            {
                "apiVersion": "voltpack.io/v1alpha1",
                "kind": "InferenceService",
                "metadata": {
                    "name": "chat",
                    "annotations": {"voltpack.io/observed-slo-attainment": "0.995"},
                },
                "spec": {
                    "model": "llama3-8b",
                    "slo": {"ttftMs": 2000, "tpotMs": 100},
                    "ratePerSecond": 0.5,
                    "requestSizes": [{"promptTokens": 512, "outputTokens": 128, "share": 1}],
                    "gpuTypes": ["H100-SXM", "A100-80GB"],
                    "container": {"image": "server:1"},
                },
            },
        )  # fmt: skip
        training = {"voltpack.io/pod-group": "train", "voltpack.io/training-model": "gpt-1.3b"}
        for index in range(2):
            core.create_namespaced_pod(
                "default", pod_manifest(f"train-{index}", gpus=1, annotations=training)
            )
        for index, gpus in enumerate([1, 2, 4, 16]):  # 16 GPUs fit nowhere: stays pending
            core.create_namespaced_pod("default", pod_manifest(f"w-{index}", gpus=gpus))
        core.create_namespaced_pod(
            "default", pod_manifest("share", annotations={"voltpack.io/gpu-milli": "300"})
        )
        # devices a DRA driver publishes for a node, one of them allocated: the DRA panel
        resource = client.ResourceV1Api(api)
        for device_class in driver_device_classes():
            resource.create_device_class(device_class)
        for resource_slice in node_resource_slices("dra-node-0", "H100", None):
            resource.create_resource_slice(resource_slice)
        resource.create_namespaced_resource_claim("default", {
            "metadata": {"name": "held"},
            "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
        })  # fmt: skip
        result = {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "dra-node-0",
                  "device": "gpu-0"}  # fmt: skip
        resource.patch_namespaced_resource_claim_status(
            "held", "default", {"status": {"allocation": {"devices": {"results": [result]}}}}
        )
        config = OperatorConfig(
            policy=policy_for_strategy("best-fit"),
            identity="dashboards",
            cycle_interval_s=0.1,
            lease_duration_s=5,
            metrics_port=0,
        )
        operator = Operator(api, config)
        stop = threading.Event()
        thread = threading.Thread(target=operator.run, args=(stop,), daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while operator.stats.bound < 6 or operator.metrics is None:
            assert time.monotonic() < deadline, "the operator did not bind the fitting pods"
            time.sleep(0.05)
        try:
            yield operator
        finally:
            stop.set()
            thread.join(timeout=15)
            api.close()


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """Prometheus scraping the scenario of the module docstring, with every signal in place."""
    tmp = tmp_path_factory.mktemp("dashboards")
    node0 = SimulatedBackend("H100-SXM", 8, node_name="gpu-node-0")
    for index in range(8):
        node0.set_utilization(index, index / 7)
    capped = node0.set_power_limit(7, 300)
    assert capped.ok, capped
    node1 = SimulatedBackend("A100-80GB", 4, node_name="gpu-node-1", utilization=1.0)
    lagging = NodeAgent(
        node1,
        "gpu-node-1",
        power_interval_s=0.5,
        full_interval_s=1.0,
        wall_clock=lambda: time.time() - STALE_BY_S,
    )
    with ExitStack() as stack:
        agent0 = stack.enter_context(
            start_agent(node0, "gpu-node-0", power_interval_s=0.5, full_interval_s=1.0)
        )
        agent1 = stack.enter_context(RunningAgent(lagging, "127.0.0.1", 0))
        down = f"127.0.0.1:{free_port()}"  # nothing listens here
        operator = stack.enter_context(scheduling_operator())
        targets = [
            f"127.0.0.1:{agent0.port}",
            f"127.0.0.1:{agent1.port}",
            down,
            f"127.0.0.1:{operator.metrics.port}",
        ]
        server = stack.enter_context(running_prometheus(tmp, targets, rules=write_plain_rules(tmp)))
        # counters must be seen at 0 before they grow, or their increase stays 0
        server.wait_for_query(
            'voltpack_gpu_xid_errors_total{node="gpu-node-0"}', lambda r: len(r) == 8
        )
        server.wait_for_query(
            'count(count_over_time(voltpack_gpu_xid_errors_total{node="gpu-node-0"}[1m]) > 2)',
            bool,
        )
        node0.inject_xid(2, 79)
        node0.inject_ecc_errors(3, 2)
        node0.mark_lost(5)
        node0.set_hw_throttle(4, ("hw-thermal-slowdown",))
        server.wait_for_query("increase(voltpack_gpu_xid_errors_total[1m]) > 0", bool)
        server.wait_for_query("increase(voltpack_gpu_ecc_errors_total[1m]) > 0", bool)
        server.wait_for_query("voltpack_gpu_healthy == 0", bool)
        server.wait_for_query(f'up{{instance="{down}"}} == 0', bool)
        # the operator's collector pauses, one series per generation
        server.wait_for_query("voltpack_operator_gc_pause_seconds_total", lambda r: len(r) == 3)
        yield server


def assert_returns_data(prom: PrometheusServer, expr: str) -> None:
    """Poll the substituted `expr` until it returns a non-empty result; fail with the query."""
    query = substitute(expr)
    deadline = time.monotonic() + QUERY_TIMEOUT_S
    result: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        result = prom.query(query)
        if result:
            return
        time.sleep(0.5)
    pytest.fail(f"no data for {query!r} (from {expr!r}) after {QUERY_TIMEOUT_S} s")


@pytest.mark.parametrize(("where", "expr"), panel_targets(), ids=[i for i, _ in panel_targets()])
def test_dashboard_expression_returns_data(prom: PrometheusServer, where: str, expr: str) -> None:
    assert_returns_data(prom, expr)


@pytest.mark.parametrize(("where", "expr"), rule_exprs(), ids=[i for i, _ in rule_exprs()])
def test_rule_expression_returns_data(prom: PrometheusServer, where: str, expr: str) -> None:
    assert_returns_data(prom, expr)


def test_prometheus_evaluates_every_rule_and_every_alert_is_active(prom: PrometheusServer) -> None:
    groups = prom.api("/api/v1/rules")["groups"]
    loaded = [rule for group in groups for rule in group["rules"]]
    assert len(loaded) == len(rule_exprs())

    def all_active() -> bool:
        rules = [rule for group in prom.api("/api/v1/rules")["groups"] for rule in group["rules"]]
        assert all(rule["health"] != "err" for rule in rules), rules
        return all(
            rule["health"] == "ok" and (rule["type"] != "alerting" or rule["state"] != "inactive")
            for rule in rules
        )

    prom.wait_until("every alert rule to be pending or firing", all_active, QUERY_TIMEOUT_S)
    alerts = prom.api("/api/v1/alerts")["alerts"]
    assert {alert["labels"]["alertname"] for alert in alerts} == ALERTS
    by_name: dict[str, list[dict[str, str]]] = {}
    for alert in alerts:
        by_name.setdefault(alert["labels"]["alertname"], []).append(alert["labels"])
    assert [a["gpu"] for a in by_name["VoltpackGpuXidErrors"]] == ["2"]
    assert [a["gpu"] for a in by_name["VoltpackGpuUnhealthy"]] == ["5"]
    assert [a["gpu"] for a in by_name["VoltpackGpuFaultNeedsReset"]] == ["3"]  # ECC
    assert sorted(a["gpu"] for a in by_name["VoltpackGpuFaultNeedsRebootOrReplace"]) == ["2", "5"]
    assert [a["gpu"] for a in by_name["VoltpackGpuHardwareSlowdown"]] == ["4"]
    assert [a["node"] for a in by_name["VoltpackNodePowerAboveThreshold"]] == ["gpu-node-1"]
    assert [a["domain"] for a in by_name["VoltpackPowerDomainAboveBudget"]] == ["rack-a"]
    assert [a["node"] for a in by_name["VoltpackPowerActuationFailing"]] == ["gpu-node-0"]
    assert sorted(a["cause"] for a in by_name["VoltpackTelemetryStale"]) == [
        "agent-down",
        "stale-sample",
    ]


# -- 3. promtool ---------------------------------------------------------------------------------


def test_the_rules_file_is_a_prometheus_rule() -> None:
    document = yaml.safe_load(RULES_FILE.read_text())
    assert document["apiVersion"] == "monitoring.coreos.com/v1"
    assert document["kind"] == "PrometheusRule"
    assert document["metadata"]["name"]
    alerts = {
        rule["alert"]
        for group in rules_spec()["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }
    assert alerts == ALERTS


def run_promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    promtool = require_binary("promtool")
    return subprocess.run(
        [promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_promtool_check_rules(tmp_path: Path) -> None:
    rules = write_plain_rules(tmp_path)
    result = run_promtool("check", "rules", str(rules), cwd=tmp_path)
    assert result.returncode == 0, f"promtool check rules:\n{result.stdout}{result.stderr}"
    assert f"SUCCESS: {len(rule_exprs())} rules found" in result.stdout


def test_promtool_test_rules(tmp_path: Path) -> None:
    write_plain_rules(tmp_path)
    unit_tests = tmp_path / UNIT_TESTS_FILE.name
    shutil.copyfile(UNIT_TESTS_FILE, unit_tests)
    tested = {
        item["alertname"]
        for case in yaml.safe_load(unit_tests.read_text())["tests"]
        for item in case.get("alert_rule_test", [])
        if item.get("exp_alerts")
    }
    assert tested == ALERTS, "every alert needs a unit test that fires it"
    result = run_promtool("test", "rules", unit_tests.name, cwd=tmp_path)
    assert result.returncode == 0, f"promtool test rules:\n{result.stdout}{result.stderr}"
