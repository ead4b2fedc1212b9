"""The chart and the image as a platform team installs them, on a real control plane.

`helm install` of helm/voltpack onto etcd + kube-apiserver + kube-controller-manager +
kube-scheduler + kwok (`make k8s`): the chart's CRDs, RBAC, Deployments, DaemonSet, Services
and ConfigMaps are accepted and `helm install --wait` returns once the Deployments have their
replicas and the DaemonSet its pod, on kwok's nodes. kwok only pretends to run those pods, so
then the operator, the admin API and the agent pods run for real, from the image `make image`
built (`buildah run` with chroot isolation, which shares the host's network), each as its pod
would: the pod's own arguments and environment from the cluster, its volumes (ConfigMap,
Secret, emptyDir, hostPath) bind-mounted, and its ServiceAccount's token (TokenRequest, bound to
the pod) mounted at /var/run/secrets/kubernetes.io/serviceaccount with KUBERNETES_SERVICE_HOST
and _PORT set, so each connects in-cluster with the identity the chart created. The agent reads
a fake libnvidia-ml.so.1 (tests/fakes/nvml) through the chart's `agent.driverLibraryPath`.

Then a GPUJob is placed and Running, a PowerBudget's status carries the fake GPUs' power (agent
-> GPUNode -> operator), and the admin API answers a viewer's token and refuses a request
without one. `make install-e2e` runs this test; docs/install.md shows the same steps.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client, utils
from kubernetes.dynamic import DynamicClient

from tests.fakes.nvml import FakeGpu, build_fake_nvml, write_state
from tests.integration.conftest import wait_for
from tests.integration.services import missing_service
from tests.integration.test_helm import helm_binary
from tests.integration.test_image import BUILDAH, buildah, image  # noqa: F401 (a fixture)
from tests.integration.test_real_rbac import (
    CHART,
    HELM_ARGS,
    IDENTITIES,
    NAMESPACE,
    PEOPLE,
    RELEASE,
    USER_ROLES,
    WORKLOADS,
    custom_object,
    token_for,
    user,
)
from tests.k8s_control_plane import (
    KWOK_NODE_ANNOTATION,
    ControlPlane,
    bin_dir,
    free_port,
    missing_binaries,
    running_control_plane,
)

GROUP, VERSION = "voltpack.io", "v1alpha1"
GPU_NODE, GPUS, RACK_LABEL = "gpu-0", 8, "voltpack.io/rack"
FAKE_GPU = FakeGpu()  # an H100 SXM drawing 412.345 W
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
WAIT_S = 120.0


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    missing = missing_binaries(kwok=True, controllers=True)
    if missing:
        missing_service("kube-apiserver", f"{', '.join(missing)} not built in {bin_dir()}")
    with running_control_plane(kwok=True, controllers=True) as running:
        yield running


def node(name: str, labels: dict[str, str], gpus: int = 0) -> dict[str, Any]:
    """A Node kwok keeps Ready with this capacity (kwok keeps a status given on create)."""
    resources = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    if gpus:
        resources["nvidia.com/gpu"] = str(gpus)
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels},
                     "annotations": {KWOK_NODE_ANNOTATION: "fake"}},
        "status": {"capacity": resources, "allocatable": resources},
    }  # fmt: skip


def helm_values(image_name: str, fake_nvml: Path) -> list[str]:
    """The chart's values: the API in its own Deployment with Kubernetes auth (three identities,
    as test_real_rbac), the built image, free ports on the shared host network, and the fake
    NVML as the node's driver libraries."""
    repository, tag = image_name.rsplit(":", 1)
    sets = {
        "image.repository": repository, "image.tag": tag, "image.pullPolicy": "Never",
        "operator.metricsPort": free_port(), "agent.port": free_port(), "api.port": free_port(),
        "agent.driverLibraryPath": fake_nvml,
    }  # fmt: skip
    return [
        *HELM_ARGS,
        *(arg for key, value in sets.items() for arg in ("--set", f"{key}={value}")),
    ]


def helm(plane: ControlPlane, *args: str, timeout_s: float = 300) -> str:
    result = subprocess.run(
        [helm_binary(), "--kubeconfig", str(plane.kubeconfig), *args],
        capture_output=True, text=True, timeout=timeout_s, check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"helm {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


# --- a pod of the chart, run from the image as a kubelet would ------------------------------


def in_image(path: str) -> str:
    """The image's /var/run is a link to /run: buildah mounts onto the resolved path."""
    return "/run" + path.removeprefix("/var/run") if path.startswith("/var/run/") else path


def write_files(folder: Path, files: dict[str, bytes], uid: int) -> Path:
    folder.mkdir(parents=True)
    for key, data in files.items():
        (folder / key).write_bytes(data)
        (folder / key).chmod(0o440)
        os.chown(folder / key, 0, uid)  # readable by the pod's fsGroup, as a kubelet writes them
    os.chown(folder, 0, uid)
    folder.chmod(0o750)
    return folder


def volume_source(api: client.ApiClient, pod: client.V1Pod, volume: Any, folder: Path) -> Path:
    """The host folder that stands for one of the pod's volumes."""
    core, namespace = client.CoreV1Api(api), pod.metadata.namespace
    fs_group = pod.spec.security_context.fs_group
    place = folder / volume.name
    if volume.empty_dir is not None:
        place.mkdir(parents=True)
        os.chown(place, 0, fs_group)
        place.chmod(0o2770)
        return place
    if volume.config_map is not None:
        data = core.read_namespaced_config_map(volume.config_map.name, namespace).data
        items = volume.config_map.items or [client.V1KeyToPath(key=k, path=k) for k in data]
        return write_files(place, {i.path: data[i.key].encode() for i in items}, fs_group)
    if volume.secret is not None:
        data = core.read_namespaced_secret(volume.secret.secret_name, namespace).data
        items = volume.secret.items or [client.V1KeyToPath(key=k, path=k) for k in data]
        return write_files(place, {i.path: base64.b64decode(data[i.key]) for i in items}, fs_group)
    if volume.host_path is not None:
        if volume.host_path.type == "Directory":  # must exist on the node: this host's
            assert Path(volume.host_path.path).is_dir(), volume.host_path.path
            return Path(volume.host_path.path)
        place.mkdir(parents=True)  # DirectoryOrCreate: created empty, not on this host
        return place
    raise AssertionError(f"volume {volume.name} of {pod.metadata.name}: no stand-in for its kind")


def env_value(api: client.ApiClient, pod: client.V1Pod, var: Any) -> str:
    if var.value_from is None:
        return str(var.value or "")
    field = var.value_from.field_ref
    if field is not None:
        fields = {"metadata.name": pod.metadata.name, "spec.nodeName": pod.spec.node_name,
                  "metadata.namespace": pod.metadata.namespace}  # fmt: skip
        return str(fields[field.field_path])
    secret = var.value_from.secret_key_ref
    assert secret is not None, f"{var.name}: no stand-in for its source"
    data = client.CoreV1Api(api).read_namespaced_secret(secret.name, pod.metadata.namespace).data
    return base64.b64decode(data[secret.key]).decode()


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) in arguments."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), text)


def run_command(
    plane: ControlPlane, api: client.ApiClient, pod: client.V1Pod, container: str,
    entrypoint: list[str], folder: Path, extra: tuple[str, ...] = (),
) -> list[str]:  # fmt: skip
    """`buildah run` of the pod's (only) container: its arguments, environment, volumes, user
    and ServiceAccount token, in-cluster."""
    [spec] = pod.spec.containers
    env = {var.name: env_value(api, pod, var) for var in spec.env or []}
    host, port = plane.url.removeprefix("https://").rsplit(":", 1)
    env |= {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
    sources = {v.name: volume_source(api, pod, v, folder) for v in pod.spec.volumes or []}
    mounts = [
        f"{sources[m.name]}:{in_image(m.mount_path)}{':ro' if m.read_only else ''}"
        for m in spec.volume_mounts or []
    ]
    if pod.spec.automount_service_account_token is not False:
        account = pod.spec.service_account_name
        token = token_for(api, account, pod.metadata.namespace, bound_to=pod)
        files = {"token": token.encode(), "ca.crt": plane.ca_file.read_bytes(),
                 "namespace": pod.metadata.namespace.encode()}  # fmt: skip
        tokens = write_files(folder / "serviceaccount", files, pod.spec.security_context.fs_group)
        mounts.append(f"{tokens}:{in_image(SA_DIR)}:ro")
    security = pod.spec.security_context
    argv = ["run", "--user", f"{security.run_as_user}:{security.run_as_group}"]
    argv += [arg for name, value in env.items() for arg in ("--env", f"{name}={value}")]
    argv += [arg for mount in mounts for arg in ("-v", mount)]
    args = [expand(arg, env) for arg in (spec.command or entrypoint) + (spec.args or [])]
    return [*argv, *extra, container, "--", *args]


@contextmanager
def running(argv: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """scripts/buildah.sh with `argv` in its own process group, stopped (SIGTERM) on exit."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(BUILDAH), *argv], stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            yield process
        finally:
            for sig, wait_s in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
                if process.poll() is not None:
                    break
                os.killpg(process.pid, sig)
                try:
                    process.wait(timeout=wait_s)
                except subprocess.TimeoutExpired:
                    continue


def component_pod(api: client.ApiClient, component: str) -> client.V1Pod:
    selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component={component}"
    pods = client.CoreV1Api(api).list_namespaced_pod(NAMESPACE, label_selector=selector).items
    running_pods = sorted(
        (p for p in pods if p.status.phase == "Running"), key=lambda p: p.metadata.name
    )
    assert running_pods, f"no Running {component} pod: {[p.status.phase for p in pods]}"
    return running_pods[0]


def cluster_state(plane: ControlPlane, api: client.ApiClient) -> str:
    """The release namespace's pods and Events and the controllers' logs: why not ready."""
    core = client.CoreV1Api(api)
    lines = [f"pod {p.metadata.name} on {p.spec.node_name}: {p.status.phase}"
             for p in core.list_namespaced_pod(NAMESPACE).items]  # fmt: skip
    lines += [f"event {e.reason}: {e.message}" for e in core.list_namespaced_event(NAMESPACE).items]
    for name in ("kube-controller-manager", "kube-scheduler", "kwok"):
        lines.append(f"--- {name}:\n{plane.log_tail(name, 15)}")
    return "\n".join(lines)


# --- what the test waits for ---------------------------------------------------------------


def ready_workloads(api: client.ApiClient) -> dict[str, tuple[int, int]]:
    """Each Deployment's and DaemonSet's (ready, wanted) pods."""
    apps = client.AppsV1Api(api)
    found = {
        f"Deployment/{d.metadata.name}": (d.status.ready_replicas or 0, d.spec.replicas)
        for d in apps.list_namespaced_deployment(NAMESPACE).items
    }
    for ds in apps.list_namespaced_daemon_set(NAMESPACE).items:
        found[f"DaemonSet/{ds.metadata.name}"] = (
            ds.status.number_ready,
            ds.status.desired_number_scheduled,
        )
    return found


def gpujob_phase(custom: client.CustomObjectsApi) -> str | None:
    job = custom_object(custom, "gpujobs", "train", WORKLOADS) or {}
    return (job.get("status") or {}).get("phase")


def budget_status(custom: client.CustomObjectsApi) -> dict[str, Any]:
    budget = custom_object(custom, "powerbudgets", "rack-r1") or {}
    return dict(budget.get("status") or {})


def create_workloads(custom: client.CustomObjectsApi) -> None:
    def cluster_object(plural: str, kind: str, name: str, spec: dict[str, Any]) -> None:
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name},
                "spec": spec}  # fmt: skip
        custom.create_cluster_custom_object(GROUP, VERSION, plural, body)

    cluster_object("queues", "Queue", "research", {"quotas": [{"gpuModel": "*", "guaranteed": 8}]})
    cluster_object("powerbudgets", "PowerBudget", "rack-r1", {
        "nodeSelector": {"matchLabels": {RACK_LABEL: "r1"}}, "budgetW": 6000,
    })  # fmt: skip
    custom.create_namespaced_custom_object(GROUP, VERSION, WORKLOADS, "gpujobs", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "GPUJob",
        "metadata": {"name": "train", "namespace": WORKLOADS},
        "spec": {"queue": "research", "workers": 2, "gpusPerWorker": 2,
                 "template": {"spec": {"containers": [{"name": "w", "image": "trainer:1"}]}}},
    })  # fmt: skip


# --- the test ------------------------------------------------------------------------------


def test_helm_install_then_the_image_runs_the_charts_pods(
    plane: ControlPlane,
    image: str,  # noqa: F811 (test_image's fixture)
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    admin = plane.api_client()
    core, custom = client.CoreV1Api(admin), client.CustomObjectsApi(admin)
    for name in (WORKLOADS, PEOPLE):
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    core.create_node(node("cpu-0", {}))
    core.create_node(node("cpu-1", {}))
    gpu_labels = {"nvidia.com/gpu.present": "true", "voltpack.io/gpu-model": "H100-SXM",
                  RACK_LABEL: "r1"}  # fmt: skip
    core.create_node(node(GPU_NODE, gpu_labels, GPUS))

    fake_nvml = build_fake_nvml()
    state_dir = tmp_path / "nvml"
    state_dir.mkdir()
    write_state(state_dir / "state", [FakeGpu() for _ in range(GPUS)])
    for path in (state_dir, state_dir / "state"):  # the agent's setters write it back
        os.chown(path, 10001, 10001)

    # helm install, as a user types it; --wait: Deployments and the DaemonSet ready
    values = helm_values(image, fake_nvml)
    try:
        helm(plane, "install", RELEASE, str(CHART), "-n", NAMESPACE, "--create-namespace",
             *values, "--wait", "--timeout", "4m")  # fmt: skip
    except AssertionError as failure:
        raise AssertionError(f"{failure}\n{cluster_state(plane, admin)}") from None
    manifest = [d for d in yaml.safe_load_all(helm(plane, "get", "manifest", RELEASE, "-n",
                                                   NAMESPACE)) if d]  # fmt: skip
    kinds = {d["kind"] for d in manifest}
    assert {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
            "Deployment", "DaemonSet", "Service", "ConfigMap"} <= kinds, kinds  # fmt: skip
    resources = DynamicClient(admin).resources
    for doc in manifest:  # every object of the release is in the cluster
        kind = resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        namespace = NAMESPACE if kind.namespaced else None
        kind.get(name=doc["metadata"]["name"], namespace=namespace)  # 404: ApiException
    crds = client.ApiextensionsV1Api(admin).list_custom_resource_definition().items
    assert {c.metadata.name for c in crds} >= {"gpujobs.voltpack.io", "powerbudgets.voltpack.io"}
    workloads = ready_workloads(admin)
    assert len(workloads) == 3 and all(r == w > 0 for r, w in workloads.values()), workloads
    nodes_used = {p.spec.node_name for p in core.list_namespaced_pod(NAMESPACE).items}
    assert GPU_NODE in nodes_used and nodes_used <= {"cpu-0", "cpu-1", GPU_NODE}, nodes_used
    installed_s = time.monotonic() - started

    for doc in yaml.safe_load_all(USER_ROLES.read_text()):
        utils.create_from_dict(admin, doc)
    viewer = user(admin, "viola", "voltpack-viewer")

    inspected = buildah("inspect", "--type", "image", image)
    assert inspected.returncode == 0, inspected.stderr
    entrypoint = json.loads(inspected.stdout)["OCIv1"]["config"]["Entrypoint"]
    created = buildah("from", "--pull-never", image)
    assert created.returncode == 0, created.stderr
    container = created.stdout.strip().splitlines()[-1]
    logs: dict[str, Path] = {}
    with ExitStack() as stack:
        stack.callback(buildah, "rm", container)
        for component in ("operator", "api", "agent"):
            pod = component_pod(admin, component)
            assert pod.spec.service_account_name == IDENTITIES[component]
            extra: tuple[str, ...] = ()
            if component == "agent":  # the node's GPUs: the fake NVML's state
                assert pod.spec.node_name == GPU_NODE
                extra = ("--env", "FAKE_NVML_STATE=/run/fake-nvml/state",
                         "-v", f"{state_dir}:/run/fake-nvml")  # fmt: skip
            argv = run_command(plane, admin, pod, container, entrypoint,
                               tmp_path / component, extra)  # fmt: skip
            logs[component] = tmp_path / f"{component}.log"
            stack.enter_context(running(argv, logs[component]))

        def tails() -> str:
            return "\n".join(
                f"--- {name}:\n" + "\n".join(path.read_text(errors="replace").splitlines()[-25:])
                for name, path in logs.items()
            )

        create_workloads(custom)
        wait_for(lambda: gpujob_phase(custom) == "Running", timeout_s=WAIT_S,
                 what="GPUJob Running", explain=tails)  # fmt: skip
        workers = core.list_namespaced_pod(WORKLOADS, label_selector="voltpack.io/job=train").items
        assert {w.spec.node_name for w in workers} == {GPU_NODE}, workers
        # the agent's samples of the fake GPUs reach the budget through the GPUNode
        draw_w = GPUS * FAKE_GPU.power_mw / 1000
        status = wait_for(lambda: (s := budget_status(custom)).get("powerW") and s,
                          timeout_s=WAIT_S, what="PowerBudget status", explain=tails)  # fmt: skip
        assert status["powerW"] == pytest.approx(draw_w, rel=0.01), status
        assert status["staleGpus"] == 0, status
        gpunode = custom_object(custom, "gpunodes", GPU_NODE) or {}
        gpus = (gpunode.get("status") or {}).get("gpus") or []
        assert len(gpus) == GPUS, gpunode

        port = next(int(v.split("=")[1]) for v in values if v.startswith("api.port="))
        url = f"http://127.0.0.1:{port}/api/v1/cluster"
        wait_for(lambda: reachable(url), timeout_s=WAIT_S, what="the API", explain=tails)
        answer = httpx.get(url, headers={"Authorization": f"Bearer {viewer}"}, timeout=30)
        assert answer.status_code == 200, answer.text
        assert httpx.get(url, timeout=30).status_code == 401
        for name, path in logs.items():  # each connected in-cluster with its own identity
            assert "Traceback" not in path.read_text(errors="replace"), (name, tails())
    print(f"installed in {installed_s:.1f} s; all in {time.monotonic() - started:.1f} s")
    admin.close()  # type: ignore[no-untyped-call]


def reachable(url: str) -> bool:
    try:
        httpx.get(url, timeout=5)
    except httpx.TransportError:
        return False
    return True
