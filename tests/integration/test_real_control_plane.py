"""voltpack's CRDs and a GPUJob on a real kube-apiserver + etcd (built by `make k8s`).

The real apiserver checks what the emulator only imitates: that the chart's CRDs are structural
schemas it accepts, that their defaults are applied and their CEL rules enforced.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from kubernetes import client
from kubernetes.client import ApiException

from tests import k8s_control_plane
from tests.integration.conftest import wait_for
from tests.integration.services import missing_service, started_control_plane
from tests.k8s_control_plane import ControlPlane, bin_dir, missing_binaries, running_control_plane

REPO = Path(__file__).resolve().parents[2]
CRDS = REPO / "helm" / "voltpack" / "crds"
NAMESPACE = "team-a"


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    yield from started_control_plane()


@pytest.fixture(scope="module")
def api(plane: ControlPlane) -> Iterator[client.ApiClient]:
    with plane.api_client() as api_client:
        yield api_client


def gpujob(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "voltpack.io/v1alpha1",
        "kind": "GPUJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "queue": "research",
            "workers": 2,
            "template": {"spec": {"containers": [{"name": "trainer", "image": "trainer:1.0"}]}},
            **spec,
        },
    }


def established(extensions: client.ApiextensionsV1Api, name: str) -> bool:
    crd = extensions.read_custom_resource_definition(name)
    conditions = (crd.status and crd.status.conditions) or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


def test_chart_crds_and_a_gpujob_on_the_real_apiserver(api: client.ApiClient) -> None:
    version = client.VersionApi(api).get_code()
    assert version.git_version.startswith("v1."), version

    extensions = client.ApiextensionsV1Api(api)
    names = []
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        extensions.create_custom_resource_definition(crd)  # a non-structural schema fails here
        names.append(crd["metadata"]["name"])
    assert "gpujobs.voltpack.io" in names
    for name in names:
        wait_for(partial(established, extensions, name), timeout_s=30, what=f"{name} Established")

    client.CoreV1Api(api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE))
    )
    custom = client.CustomObjectsApi(api)
    args = ("voltpack.io", "v1alpha1", NAMESPACE, "gpujobs")
    created = cast(
        dict[str, Any], custom.create_namespaced_custom_object(*args, gpujob("pretrain"))
    )
    assert created["metadata"]["uid"]

    read = cast(dict[str, Any], custom.get_namespaced_custom_object(*args, "pretrain"))
    assert read["spec"]["workers"] == 2
    assert read["spec"]["queue"] == "research"
    assert read["spec"]["gpusPerWorker"] == 1  # the schema's default, applied by the apiserver
    assert read["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

    # the chart's CEL rule, enforced by the real apiserver
    with pytest.raises(ApiException) as rejected:
        custom.create_namespaced_custom_object(*args, gpujob("too-small", workers=2, minWorkers=3))
    assert rejected.value.status == 422
    assert "minWorkers must not exceed workers" in str(rejected.value.body)


def test_a_port_taken_before_etcd_binds_it_is_retried_on_new_ports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another process (a second pytest worker) may bind the port `free_port` picked before etcd
    does: the start is tried again on new ports instead of failing the test that needed it."""
    missing = missing_binaries()
    if missing:
        missing_service("kube-apiserver", f"{', '.join(missing)} not built in {bin_dir()}")
    picked = iter(range(10**6))
    real_free_port = k8s_control_plane.free_port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        taken_port = int(taken.getsockname()[1])

        def first_taken() -> int:
            return taken_port if next(picked) == 0 else real_free_port()

        monkeypatch.setattr(k8s_control_plane, "free_port", first_taken)
        with running_control_plane() as running:
            assert str(taken_port) not in running.etcd_url
            assert (
                running.workdir.name,
                running.workdir.parent.name.startswith("voltpack-k8s-"),
            ) == (
                "attempt-2",
                True,
            )
            version = client.VersionApi(running.api_client()).get_code()
            assert version.git_version.startswith("v1.")
