"""`EmulatorState`: the store, the served resource types, the verbs, faults and simulators."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from voltpack.emulator.access.auth import Authenticator, load_token_file
from voltpack.emulator.access.rbac import RbacPolicy
from voltpack.emulator.dra.controller import ResourceClaimController
from voltpack.emulator.dra.slices import driver_device_classes, node_resource_slices
from voltpack.emulator.errors import ApiError, EmulatorError
from voltpack.emulator.faults import Faults
from voltpack.emulator.http.discovery import KUBERNETES_VERSION
from voltpack.emulator.lifecycle import PodLifecycle
from voltpack.emulator.nodes import node_object
from voltpack.emulator.objects import Clock, JsonObj, utc_now
from voltpack.emulator.operations import SYSTEM_NAMESPACES, Operations
from voltpack.emulator.resources import (
    CLUSTERROLEBINDINGS,
    CLUSTERROLES,
    DEVICECLASSES,
    NODES,
    RESOURCESLICES,
    ROLEBINDINGS,
    ROLES,
    SERVICEACCOUNTS,
    ResourceRegistry,
)
from voltpack.emulator.store import Store
from voltpack.model import Node


@dataclass(frozen=True)
class EmulatorConfig:
    """Settings of one emulator instance.

    `time_factor` scales every simulated duration of the lifecycle simulator into wall-clock
    time (0.01 runs a 100 s pod in 1 s). `history_size` bounds the watch history: a watch
    from a resourceVersion older than the history gets `410 Expired`. `token_file` is a
    static token file in kube-apiserver's `--token-auth-file` format (`token,user,uid,
    "group1,group2"`), whose tokens TokenReview accepts.

    `dra` turns on Dynamic Resource Allocation drivers on the simulated nodes: each GPU node
    publishes ResourceSlices as NVIDIA's GPU DRA driver (`gpu.nvidia.com`) and DRANet
    (`dra.net`) would, from its `Node.layout` (or `dra_slices.default_host_layout`), advertises
    no `nvidia.com/gpu`, and the drivers' DeviceClasses exist. Off by default; the
    `resource.k8s.io/v1` API itself is always served.
    """

    history_size: int = 10_000
    lifecycle: bool = True
    time_factor: float = 1.0
    pod_start_delay_s: float = 0.0
    pod_stop_delay_s: float = 0.0
    bookmark_interval_s: float = 60.0
    max_watch_timeout_s: float = 1800.0
    kubernetes_version: str = KUBERNETES_VERSION
    seed: int | None = None
    token_file: Path | None = None
    dra: bool = False
    dra_shared_gpus: bool = False
    """With `dra`: GPUs are published as shareable by several claims (GPU shares)."""

    def __post_init__(self) -> None:
        problems = []
        if self.history_size < 1:
            problems.append(f"history_size must be >= 1, got {self.history_size}")
        if self.time_factor < 0:
            problems.append(f"time_factor must be >= 0, got {self.time_factor}")
        for name in ("pod_start_delay_s", "pod_stop_delay_s"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("bookmark_interval_s", "max_watch_timeout_s"):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be > 0, got {getattr(self, name)}")
        if problems:
            raise EmulatorError("emulator config: " + "; ".join(problems))


class EmulatorState:
    """Everything one emulator serves; create it, then `create_app(state)`.

    Methods that change state must run on the server's event loop once it serves; from
    another thread use `RunningEmulator.call`.
    """

    def __init__(
        self,
        config: EmulatorConfig | None = None,
        *,
        nodes: Iterable[Node] = (),
        clock: Clock = utc_now,
    ) -> None:
        self.config = config or EmulatorConfig()
        self.clock = clock
        self.store = Store(self.config.history_size)
        self.registry = ResourceRegistry()
        self.ops = Operations(self.store, self.registry, clock, random.Random(self.config.seed))
        self.faults = Faults()
        tokens = load_token_file(self.config.token_file) if self.config.token_file else {}
        self.authenticator = Authenticator(
            tokens, service_accounts=self._service_account_uid, clock=clock
        )
        self.lifecycle: PodLifecycle | None = None
        if self.config.lifecycle:
            self.lifecycle = PodLifecycle(
                self.ops,
                time_factor=self.config.time_factor,
                start_delay_s=self.config.pod_start_delay_s,
                stop_delay_s=self.config.pod_stop_delay_s,
            )
        self.claim_controller = ResourceClaimController(self.ops)
        for namespace in SYSTEM_NAMESPACES:
            self.ops.ensure_namespace(namespace)
        if self.config.dra:
            for device_class in driver_device_classes():
                self.ops.create(DEVICECLASSES, None, device_class)
        for node in nodes:
            self.add_node(node)

    def add_node(self, node: Node) -> JsonObj:
        """Register a simulated node (Ready, with `nvidia.com/gpu` capacity and model labels).

        With `config.dra`, the node's GPUs and NICs are published as ResourceSlices (owned by
        the Node, so deleting the node deletes them) instead of `nvidia.com/gpu` capacity.
        """
        dra = self.config.dra
        try:
            created = self.ops.create(
                NODES, None, node_object(node, self.clock(), device_plugin=not dra)
            ).obj
            if dra and node.gpu_count:
                owner = {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": node.name,
                    "uid": created["metadata"]["uid"],
                    "controller": True,
                }
                for resource_slice in node_resource_slices(
                    node.name,
                    node.gpu_model,
                    node.layout,
                    node.gpu_count,
                    shared_gpus=self.config.dra_shared_gpus,
                ):
                    resource_slice["metadata"]["ownerReferences"] = [owner]
                    self.ops.create(RESOURCESLICES, None, resource_slice)
            return created
        except ApiError as error:
            raise EmulatorError(f"cannot add node {node.name!r}: {error.message}") from None

    def _service_account_uid(self, namespace: str, name: str) -> str | None:
        account = self.store.get(SERVICEACCOUNTS.key, namespace, name)
        return None if account is None else str(account["metadata"].get("uid", ""))

    def rbac_policy(self) -> RbacPolicy:
        """The RBAC objects stored now, ready to answer access reviews."""
        return RbacPolicy(
            cluster_roles=self.store.objects(CLUSTERROLES.key),
            roles=self.store.objects(ROLES.key),
            cluster_role_bindings=self.store.objects(CLUSTERROLEBINDINGS.key),
            role_bindings=self.store.objects(ROLEBINDINGS.key),
        )

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Called when the server starts serving on `loop`."""
        if self.lifecycle is not None:
            self.lifecycle.start(loop)
        self.claim_controller.start(loop)

    def stop(self) -> None:
        self.claim_controller.stop()
        if self.lifecycle is not None:
            self.lifecycle.stop()
        self.drop_watches()

    def drop_watches(self, resource: str | None = None, *, abort: bool = False) -> int:
        """End open watches (of one resource, e.g. `pods` or `widgets.example.io`, if given).

        Streams end cleanly, as when the server closes a watch; with `abort` the connection is
        cut instead. Returns how many watches were dropped.
        """
        dropped = 0
        for watcher in self.store.watchers():
            if resource is None or watcher.key == resource:
                watcher.abort = abort
                watcher.queue.put_nowait(None)
                dropped += 1
        return dropped

    def compact_history(self) -> int:
        """Forget the watch history: a watch from any resourceVersion issued so far gets 410.

        Clients that reconnect with such a version must list again; the list returns a newer
        resourceVersion that can be watched. Returns the oldest watchable resourceVersion.
        """
        return self.store.compact()
