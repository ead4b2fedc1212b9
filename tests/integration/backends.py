"""The two clusters the operator's integration suite runs on: voltpack's emulator and a real
control plane (etcd + kube-apiserver + kwok, `tests/k8s_control_plane.py`).

Both are driven the same way: `api_client()` (the official client, authenticated), `url`,
`kubeconfig` (for kubectl and an operator process), `add_gpu_nodes(...)`, `install_crds()` (from
the Helm chart), `compact()` (make resumed watches expire) and `kubectl(home)`. The emulator is
fresh per test; a real plane is started once per module and `reset()` between tests (no
controller-manager runs there, so nothing else cleans up).
"""

from __future__ import annotations

import base64
import json
import shutil
import time
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.conftest import Kubectl, operator_on, wait_for
from tests.k8s_control_plane import KWOK_NODE_ANNOTATION, ControlPlane
from voltpack.emulator import RunningEmulator
from voltpack.emulator.dra.slices import driver_device_classes, node_resource_slices
from voltpack.emulator.nodes import EMULATED_ANNOTATION, node_object
from voltpack.model import Node
from voltpack.operator.runner import Operator, OperatorConfig

REPO = Path(__file__).resolve().parents[2]
CHART_CRDS = REPO / "helm" / "voltpack" / "crds"
GROUP, VERSION = "voltpack.io", "v1alpha1"
PLURALS = ("gpujobs", "queues", "powerbudgets", "gpunodes", "inferenceservices", "topologies")


def chart_crds() -> list[dict[str, Any]]:
    """The CustomResourceDefinitions shipped in the Helm chart's `crds/` folder."""
    return [yaml.safe_load(path.read_text()) for path in sorted(CHART_CRDS.glob("*.yaml"))]


def _established(extensions: client.ApiextensionsV1Api, name: str) -> bool:
    crd = extensions.read_custom_resource_definition(name)
    conditions = (crd.status and crd.status.conditions) or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


class Cluster(ABC):
    """A Kubernetes API the operator and the tests talk to."""

    name: str
    url: str
    kubeconfig: Path

    @abstractmethod
    def configuration(self) -> client.Configuration:
        """A client configuration for the cluster's admin."""

    def api_client(self) -> client.ApiClient:
        return client.ApiClient(self.configuration())

    @abstractmethod
    def add_gpu_nodes(self, nodes: Sequence[Node]) -> None:
        """Register `nodes` as Ready v1 Nodes with `nvidia.com/gpu` and GPU-model labels."""

    @abstractmethod
    def add_dra_gpu_nodes(self, nodes: Sequence[Node], *, shared_gpus: bool = False) -> None:
        """Register `nodes` whose GPUs and NICs are published in ResourceSlices by the DRA
        drivers (`gpu.nvidia.com`, `dra.net`; no `nvidia.com/gpu`), with the DeviceClasses;
        `shared_gpus`: GPUs several claims may hold (`allowMultipleAllocations`)."""

    @abstractmethod
    def compact(self) -> None:
        """Drop the history: a watch resumed from a resourceVersion of before now gets 410."""

    def install_crds(self) -> list[str]:
        """Create the chart's CRDs (existing ones are kept) and wait until they are served."""
        with self.api_client() as api:
            extensions = client.ApiextensionsV1Api(api)
            names = []
            for crd in chart_crds():
                try:
                    extensions.create_custom_resource_definition(crd)
                except ApiException as error:
                    if error.status != 409:
                        raise
                names.append(crd["metadata"]["name"])
            for name in names:
                wait_for(partial(_established, extensions, name), timeout_s=30, what=name)
        return names

    def ensure_namespace(self, name: str) -> None:
        with self.api_client() as api:
            try:
                client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
            except ApiException as error:
                if error.status != 409:
                    raise

    def kubectl(self, home: Path) -> Kubectl:
        """kubectl against this cluster, with `home` for its kubeconfig copy and cache."""
        home.mkdir(parents=True, exist_ok=True)
        shutil.copy(self.kubeconfig, home / "kubeconfig")
        return Kubectl(self.url, home)


def _kubeconfig(url: str, user: dict[str, Any], cluster: dict[str, Any]) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": url, **cluster}}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "c",
        }
    )


class EmulatorCluster(Cluster):
    """voltpack's emulator (serves every request, anonymous or not)."""

    name = "emulator"

    def __init__(self, emulator: RunningEmulator, workdir: Path) -> None:
        self.emulator = emulator
        self.url = emulator.url
        self.kubeconfig = workdir / "emulator.kubeconfig"
        self.kubeconfig.write_text(_kubeconfig(self.url, {}, {}))

    def configuration(self) -> client.Configuration:
        return client.Configuration(host=self.url)

    def add_gpu_nodes(self, nodes: Sequence[Node]) -> None:
        for node in nodes:
            self.emulator.add_node(node)

    def add_dra_gpu_nodes(self, nodes: Sequence[Node], *, shared_gpus: bool = False) -> None:
        """The emulator's own drivers publish the slices (it must run with `dra=True`, and
        `dra_shared_gpus` as `shared_gpus` asks)."""
        config = self.emulator.state.config
        assert config.dra, "start the emulator with EmulatorConfig(dra=True)"
        assert config.dra_shared_gpus == shared_gpus, "EmulatorConfig.dra_shared_gpus differs"
        for node in nodes:
            self.emulator.add_node(node)

    def compact(self) -> None:
        self.emulator.compact_history()


class RealCluster(Cluster):
    """kube-apiserver + etcd + kwok: kwok makes the Nodes Ready and the bound pods Running."""

    name = "real"

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.url = plane.url
        self.kubeconfig = plane.kubeconfig

    def configuration(self) -> client.Configuration:
        return self.plane.configuration()

    def add_gpu_nodes(self, nodes: Sequence[Node], *, device_plugin: bool = True) -> None:
        """Node objects as the emulator would register them, annotated for kwok. A Node's
        status is kept on create; kwok then keeps it Ready (capacity as given)."""
        with self.api_client() as api:
            core = client.CoreV1Api(api)
            for node in nodes:
                body = node_object(node, datetime.now(UTC), device_plugin=device_plugin)
                annotations = body["metadata"]["annotations"]
                annotations.pop(EMULATED_ANNOTATION, None)
                annotations[KWOK_NODE_ANNOTATION] = "fake"
                core.create_node(body)
            names = {node.name for node in nodes}
            wait_for(
                lambda: names <= _ready_nodes(core), timeout_s=30, what=f"kwok to ready {names}"
            )

    def add_dra_gpu_nodes(self, nodes: Sequence[Node], *, shared_gpus: bool = False) -> None:
        """kwok nodes without `nvidia.com/gpu`, and the slices the drivers would publish for
        them (the same builder the emulator's simulated drivers use), created by the test
        (shared GPUs need the apiserver's `DRAConsumableCapacity` feature gate)."""
        self.add_gpu_nodes(nodes, device_plugin=False)
        with self.api_client() as api:
            resource = client.ResourceV1Api(api)
            for device_class in driver_device_classes():
                _ignore_409(resource.create_device_class, device_class)
            for node in nodes:
                for item in node_resource_slices(
                    node.name, node.gpu_model, node.layout, node.gpu_count, shared_gpus=shared_gpus
                ):
                    resource.create_resource_slice(item)

    def etcd(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST to etcd's HTTP/JSON gateway (`/v3/...`)."""
        request = urllib.request.Request(
            self.plane.etcd_url + path, data=json.dumps(body).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as reply:
            answer: dict[str, Any] = json.loads(reply.read())
        return answer

    def revision(self) -> int:
        key = base64.b64encode(b"/").decode()
        return int(self.etcd("/v3/kv/range", {"key": key, "limit": 1})["header"]["revision"])

    def compact(self) -> None:
        """Compact etcd at its current revision. The apiserver's watch cache keeps serving
        resumed watches from its own window, so only a watch the apiserver sends to etcd
        (`--watch-cache=false`) then gets 410."""
        self.etcd("/v3/kv/compaction", {"revision": self.revision(), "physical": True})

    def reset(self) -> None:
        """Delete what a test left: voltpack objects (finalizers dropped), pods, nodes, Events,
        Leases and ConfigMaps of voltpack-system."""
        with self.api_client() as api:
            core = client.CoreV1Api(api)
            custom = client.CustomObjectsApi(api)
            for plural in PLURALS:
                _delete_custom(custom, plural)
            namespaces = [n.metadata.name for n in core.list_namespace().items]
            for namespace in namespaces:
                for pod in core.list_namespaced_pod(namespace).items:
                    _ignore_404(core.delete_namespaced_pod, pod.metadata.name, namespace,
                                grace_period_seconds=0)  # fmt: skip
                core.delete_collection_namespaced_event(namespace)
            _delete_dra_objects(client.ResourceV1Api(api), namespaces)
            core.delete_collection_node()
            if "voltpack-system" in namespaces:
                client.CoordinationV1Api(api).delete_collection_namespaced_lease("voltpack-system")
                core.delete_collection_namespaced_config_map("voltpack-system")
            wait_for(
                lambda: not core.list_pod_for_all_namespaces().items and not core.list_node().items,
                timeout_s=30,
                what="pods and nodes gone",
            )


def _ready_nodes(core: client.CoreV1Api) -> set[str]:
    return {
        n.metadata.name
        for n in core.list_node().items
        if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
    }


def _delete_dra_objects(resource: client.ResourceV1Api, namespaces: Sequence[str]) -> None:
    """ResourceClaims (their finalizers dropped: no controller runs here), slices, classes."""
    for namespace in namespaces:
        for claim in resource.list_namespaced_resource_claim(namespace).items:
            if claim.metadata.finalizers:
                _ignore_404(
                    resource.patch_namespaced_resource_claim,
                    claim.metadata.name,
                    namespace,
                    {"metadata": {"finalizers": None}},
                )
        resource.delete_collection_namespaced_resource_claim(namespace)
    resource.delete_collection_resource_slice()
    resource.delete_collection_device_class()


def _ignore_409(function: Any, *args: Any) -> None:
    try:
        function(*args)
    except ApiException as error:
        if error.status != 409:
            raise


def _ignore_404(function: Any, *args: Any, **kwargs: Any) -> None:
    try:
        function(*args, **kwargs)
    except ApiException as error:
        if error.status != 404:
            raise


def _delete_custom(custom: client.CustomObjectsApi, plural: str) -> None:
    try:
        listed = custom.list_cluster_custom_object(GROUP, VERSION, plural)
    except ApiException as error:
        if error.status == 404:
            return  # the CRD is not installed
        raise
    for item in listed["items"]:
        meta = item["metadata"]
        namespace = meta.get("namespace")
        if namespace:
            args: tuple[str, ...] = (GROUP, VERSION, namespace, plural, meta["name"])
            patch, delete = (
                custom.patch_namespaced_custom_object,
                custom.delete_namespaced_custom_object,
            )
        else:
            args = (GROUP, VERSION, plural, meta["name"])
            patch, delete = custom.patch_cluster_custom_object, custom.delete_cluster_custom_object
        if meta.get("finalizers"):
            _ignore_404(patch, *args, {"metadata": {"finalizers": None}})
        _ignore_404(delete, *args)


@contextmanager
def operator_in_thread(
    cluster: Cluster, config: OperatorConfig, **kwargs: Any
) -> Iterator[Operator]:
    """An operator replica with its own authenticated client, in a thread; stopped on exit
    (`kwargs`: e.g. `power_clock`)."""
    with operator_on(cluster.api_client(), config, **kwargs) as operator:
        yield operator


def wait_gone(function: Any, *args: Any, timeout_s: float = 30, what: str = "deletion") -> None:
    """Wait until `function(*args)` answers 404."""

    def gone() -> bool:
        try:
            function(*args)
        except ApiException as error:
            return error.status == 404
        return False

    wait_for(gone, timeout_s=timeout_s, what=what)


def settle(seconds: float) -> None:
    """Let background loops run (used only where a test asserts something did NOT happen)."""
    time.sleep(seconds)
