"""schemathesis fuzzes every operation of the API's OpenAPI schema: no 5xx on any input.

The API runs in-process (ASGI) with the emulator behind it and an admin token, so requests
reach the handlers rather than stopping at authentication.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from kubernetes import client
from schemathesis.checks import not_a_server_error

from voltpack.api.app import ApiDependencies, create_app
from voltpack.api.auth import StaticTokens
from voltpack.api.simulations import SimulationRunner
from voltpack.emulator import RunningEmulator
from voltpack.operator.admin.source import KubeAdminSource
from voltpack.operator.kube.crds import install_crds
from voltpack.policies.schema import example_policy_path, load_policy

ADMIN_TOKEN = "fuzz-admin-token"


@pytest.fixture
def api_schema(emulator: RunningEmulator, tmp_path: Path) -> Iterator[Any]:
    kube = client.ApiClient(client.Configuration(host=emulator.url))
    install_crds(client.ApiextensionsV1Api(kube))
    client.CoreV1Api(kube).create_namespace({"metadata": {"name": "voltpack-system"}})
    tokens_file = tmp_path / "tokens.csv"
    tokens_file.write_text(f"{ADMIN_TOKEN},fuzzer,admin\n")
    tokens = StaticTokens.from_file(tokens_file)
    path = example_policy_path("fgd")
    source = KubeAdminSource(kube, load_policy(path), path.read_text())
    runner = SimulationRunner()
    app = create_app(
        ApiDependencies(
            cluster=source,
            policies=source,
            authenticator=tokens,
            authorizer=tokens,
            simulations=runner,
        )
    )
    yield schemathesis.openapi.from_asgi("/openapi.json", app)
    runner.shutdown()
    source.close()
    kube.close()


def test_no_input_makes_the_api_fail(api_schema: Any) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    # Without a database the history routes answer 503 by design (test_api.py checks it);
    # they are fuzzed with a database in store/test_api_history.py.
    history = ("/api/v1/decisions", "/api/v1/audit", "/api/v1/power/domains/{name}/forecast")
    operations = [op for op in operations if op.path not in history]
    assert len(operations) >= 13
    failures: list[str] = []
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
        def fuzz(case: Any) -> None:
            case.call_and_validate(
                headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, checks=[not_a_server_error]
            )

        try:
            fuzz()
        except Exception as exc:  # collect every operation's failure, then report them all
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}")
    assert not failures, "\n".join(failures)
