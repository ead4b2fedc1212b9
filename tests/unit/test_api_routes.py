"""The admin API's route table is what the docs promise and what clients were built against:
every path and method, the success status, the error statuses, the operation id, tag and
summary (issue 31 split the routes into routers; none of this may move).

The app is built over sources that fail when touched: drawing the table reads none of them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from voltpack.api.app import ApiDependencies, create_app
from voltpack.api.auth import StaticTokens

DOCS = Path(__file__).resolve().parents[2] / "docs"

# method, path, success status, tag, operationId, summary
ROUTES = [
    ("GET", "/api/v1/cluster", 200, "cluster", "cluster_api_v1_cluster_get", "Cluster"),
    ("GET", "/api/v1/nodes", 200, "cluster", "nodes_api_v1_nodes_get", "Nodes"),
    ("GET", "/api/v1/nodes/{name}", 200, "cluster", "node_api_v1_nodes__name__get", "Node"),
    ("GET", "/api/v1/jobs", 200, "workloads", "jobs_api_v1_jobs_get", "Jobs"),
    ("GET", "/api/v1/jobs/{namespace}/{name}", 200, "workloads",
     "job_api_v1_jobs__namespace___name__get", "Job"),
    ("GET", "/api/v1/queues", 200, "workloads", "queues_api_v1_queues_get", "Queues"),
    ("GET", "/api/v1/inferenceservices", 200, "workloads",
     "inference_services_api_v1_inferenceservices_get", "Inference Services"),
    ("GET", "/api/v1/inferenceservices/{namespace}/{name}/plan", 200, "workloads",
     "inference_plan_api_v1_inferenceservices__namespace___name__plan_get", "Inference Plan"),
    ("GET", "/api/v1/power/domains", 200, "power", "power_domains_api_v1_power_domains_get",
     "Power Domains"),
    ("GET", "/api/v1/power/domains/{name}/forecast", 200, "power",
     "power_forecast_api_v1_power_domains__name__forecast_get", "Power Forecast"),
    ("POST", "/api/v1/power/domains/{name}/cap", 200, "power",
     "cap_domain_api_v1_power_domains__name__cap_post", "Cap Domain"),
    ("GET", "/api/v1/decisions", 200, "history", "decisions_api_v1_decisions_get", "Decisions"),
    ("GET", "/api/v1/audit", 200, "history", "audit_log_api_v1_audit_get", "Audit Log"),
    ("GET", "/api/v1/policy", 200, "policy", "active_policy_api_v1_policy_get", "Active Policy"),
    ("POST", "/api/v1/policy/validate", 200, "policy",
     "validate_policy_api_v1_policy_validate_post", "Validate Policy"),
    ("POST", "/api/v1/policy/dry-runs", 202, "policy",
     "submit_dry_run_api_v1_policy_dry_runs_post", "Submit Dry Run"),
    ("GET", "/api/v1/policy/dry-runs/{run_id}", 200, "policy",
     "dry_run_api_v1_policy_dry_runs__run_id__get", "Dry Run"),
    ("PUT", "/api/v1/policy", 200, "policy", "apply_policy_api_v1_policy_put", "Apply Policy"),
    ("POST", "/api/v1/simulations", 202, "simulations",
     "submit_simulation_api_v1_simulations_post", "Submit Simulation"),
    ("GET", "/api/v1/simulations/{run_id}", 200, "simulations",
     "simulation_api_v1_simulations__run_id__get", "Simulation"),
    ("GET", "/api/v1/simulations/{run_id}/report", 200, "simulations",
     "simulation_report_api_v1_simulations__run_id__report_get", "Simulation Report"),
]  # fmt: skip
INFERENCE = {path for _, path, *_ in ROUTES if "/inferenceservices" in path}
# every route may answer these besides its success (401/403 auth, 413 body, 422 input, 503 down)
ERRORS = {"401", "403", "413", "422", "503"}


class Untouchable:
    """A source that fails when any route reads it: the table must not need one."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the route table read the source ({name})")


def schema(tmp_path: Path, inference: bool) -> dict[str, Any]:
    tokens_file = tmp_path / "tokens.csv"
    tokens_file.write_text("tok,admin-user,admin\n")
    tokens = StaticTokens.from_file(tokens_file)
    source: Any = Untouchable()
    app = create_app(
        ApiDependencies(
            cluster=source,
            policies=source,
            authenticator=tokens,
            authorizer=tokens,
            inference=source if inference else None,
        )
    )
    return app.openapi()


def table(document: dict[str, Any]) -> list[tuple[str, str, int, str, str, str]]:
    rows = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            successes = [int(code) for code in operation["responses"] if code.startswith("2")]
            assert len(successes) == 1, (method, path, successes)
            assert set(operation["responses"]) == ERRORS | {str(successes[0])}, (method, path)
            rows.append((method.upper(), path, successes[0], *operation["tags"],
                         operation["operationId"], operation["summary"]))  # fmt: skip
    return rows


@pytest.mark.parametrize("inference", [True, False])
def test_the_route_table_is_unchanged(tmp_path: Path, inference: bool) -> None:
    expected = [row for row in ROUTES if inference or row[1] not in INFERENCE]
    assert sorted(table(schema(tmp_path, inference))) == sorted(expected)


def documented_routes() -> set[tuple[str, str]]:
    """(method, path) of every route named in docs/api.md's route table and, for the
    InferenceService routes, in docs/inference.md; `{ns}` and `{id}` as the routes spell them."""
    found: set[tuple[str, str]] = set()
    for line in (DOCS / "api.md").read_text().splitlines():
        spans = re.findall(r"`([^`]+)`", line) if line.startswith("| `") else []
        if not spans or not re.match(r"[A-Z]+ /api/v1/", spans[0]):
            continue
        method, first = spans[0].split(" ")
        first = first.split("?")[0]
        found.add((method, first))
        for more in spans[1:]:
            if more.startswith("/{"):  # `/{id}/report`: below the first path
                found.add((method, first.rsplit("/", 1)[0] + more))
            elif more.startswith("/"):
                found.add((method, "/api/v1" + more))
    inference_text = (DOCS / "inference.md").read_text()
    found |= set(re.findall(r"`(GET) (/api/v1/inferenceservices[^`]*)`", inference_text))
    spelled = {"{ns}": "{namespace}", "{id}": "{run_id}"}
    for short, long in spelled.items():
        found = {(method, path.replace(short, long)) for method, path in found}
    return found


def test_the_docs_name_every_route_and_no_other() -> None:
    assert documented_routes() == {(method, path) for method, path, *_ in ROUTES}
