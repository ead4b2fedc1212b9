"""One scheduling cycle's view of Dynamic Resource Allocation, and the claims it allocates.

Where nodes publish their GPUs and NICs in ResourceSlices (NVIDIA's `gpu.nvidia.com` driver,
DRANet's `dra.net`), voltpack's decision is made binding through ResourceClaims:

1. `DraCycle.node_views` shows a node's published GPUs to the snapshot as if the node
   advertised them (count and product), `layouts` gives it a host layout from the devices'
   attributes (NVLink clique, PCIe root shared by a GPU and a NIC), and `account` takes every
   device allocated to any claim, by any scheduler, out of the free capacity.
2. `request` turns a pending pod's claims into the core's request: a GPU per GPU device asked,
   a whole RDMA NIC when a NIC is asked, and the nodes where its claims can be allocated at all
   (`nodes`); a pod whose claims cannot be allocated anywhere is held with the reason.
3. After the core placed a gang, `allocate` chooses each claim's devices on the chosen node,
   the placement's GPUs and NICs first, with the claims' selectors and constraints honoured,
   for every pod of the gang or none (`voltpack.scheduler.dra_allocation`). The operator writes
   them (`dra_writer`) before it binds the pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.devices import (
    NVIDIA_GPU_DRIVER,
    ClaimAllocation,
    ClaimRequest,
    Device,
    DeviceId,
)
from voltpack.model.errors import InvalidRequestError
from voltpack.model.host_layout import HostLayout
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.workload import Pod
from voltpack.operator.dra.devices import (
    DeviceKind,
    NodeDevices,
    describe_devices,
    device_kind,
    gpu_index,
)
from voltpack.operator.dra.view import (
    ClaimState,
    claim_states,
    device_classes,
    devices_by_node,
    devices_in_use,
    pod_claim_keys,
)
from voltpack.operator.kube.conventions import (
    GPU_MILLI_ANNOTATION,
    GPU_MODEL_LABELS,
    GPU_RESOURCE,
    GPU_SHARING_ANNOTATION,
)
from voltpack.scheduler.device_selectors import DeviceSelectors, SelectorError, parse_quantity
from voltpack.scheduler.dra_allocation import Unsatisfiable, allocate_gang, nodes_that_fit
from voltpack.scheduler.gpu_share_config import (
    SharingStrategy,
    pinned_memory_mib,
    share_config,
    sharing_strategy,
)


def node_devices(slices: Iterable[Mapping[str, Any]]) -> dict[str, NodeDevices]:
    """Every node's published devices (`devices_by_node`), as `NodeDevices`."""
    return {name: NodeDevices.of(found) for name, found in devices_by_node(slices).items()}


@dataclass
class DraCycle:
    """The DRA objects of one cycle, and the claims allocated in it so far."""

    nodes: dict[str, NodeDevices]
    claims: dict[str, ClaimState]
    in_use: set[DeviceId]
    selectors: DeviceSelectors
    _kinds: dict[tuple[str, ...], DeviceKind] = field(default_factory=dict)
    _fits: dict[tuple[object, ...], tuple[tuple[str, ...], dict[str, str]]] = field(
        default_factory=dict
    )
    """`nodes_that_fit` by the shape of the claims (pods of one template ask alike), with the
    keys of the claims it was computed for (its reasons name them)."""
    _views: dict[bool, dict[str, Sequence[Device]]] = field(default_factory=dict)

    def devices_for(self, share: bool) -> dict[str, Sequence[Device]]:
        """The devices as the allocator sees them for a pod taking a whole device (`share`
        False: no device is shared with it) or a GPU share (a device several claims may hold
        stays shareable unless a claim holds it whole)."""
        if share not in self._views:
            whole = {
                d for state in self.claims.values() for d in state.allocated
                if d not in state.shared
            }  # fmt: skip
            self._views[share] = {
                name: [
                    replace(d, allow_multiple_allocations=False)
                    if d.allow_multiple_allocations and (not share or d.id in whole)
                    else d
                    for d in found.devices
                ]
                for name, found in self.nodes.items()
            }
        return self._views[share]

    @classmethod
    def build(
        cls,
        slices: Iterable[Mapping[str, Any]],
        classes: Iterable[Mapping[str, Any]],
        claims: Iterable[Mapping[str, Any]],
        selectors: DeviceSelectors,
    ) -> DraCycle:
        """From the listed ResourceSlices, DeviceClasses and ResourceClaims."""
        return cls.with_nodes(node_devices(slices), classes, claims, selectors)

    @classmethod
    def with_nodes(
        cls,
        nodes: dict[str, NodeDevices],
        classes: Iterable[Mapping[str, Any]],
        claims: Iterable[Mapping[str, Any]],
        selectors: DeviceSelectors,
    ) -> DraCycle:
        """From the nodes' devices (`node_devices`, kept while the slices do not change) and
        the listed DeviceClasses and ResourceClaims."""
        states = claim_states(claims, device_classes(classes))
        return cls(nodes, states, devices_in_use(states.values()), selectors)

    @property
    def active(self) -> bool:
        """True when some node publishes devices or some claim exists."""
        return bool(self.nodes or self.claims)

    def node_views(self, nodes: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """The nodes, those publishing GPUs in slices shown with them as `nvidia.com/gpu`."""
        views = []
        for node in nodes:
            found = self.nodes.get(node["metadata"]["name"])
            allocatable = (node.get("status") or {}).get("allocatable") or {}
            if found is None or not found.gpus or GPU_RESOURCE in allocatable:
                views.append(node)
                continue
            labels = dict(node["metadata"].get("labels") or {})
            if not any(labels.get(label) for label in GPU_MODEL_LABELS):
                labels[GPU_MODEL_LABELS[0]] = found.gpu_product or "unknown"
            status = dict(node.get("status") or {})
            status["allocatable"] = {**allocatable, GPU_RESOURCE: str(len(found.gpus))}
            views.append(
                {**node, "metadata": {**node["metadata"], "labels": labels}, "status": status}
            )
        return views

    def layouts(self) -> dict[str, HostLayout]:
        """Host layouts of the nodes whose GPUs are published in slices."""
        found = {}
        for name, devices in self.nodes.items():
            layout = devices.layout if devices.gpus else None
            if layout is not None:
                found[name] = layout
        return found

    def account(self, snapshot: ClusterSnapshot, pods: Iterable[Mapping[str, Any]]) -> None:
        """Take the GPUs and NICs allocated to any claim out of `snapshot`'s free capacity;
        the claims of bound GPU-share pods are left out (`build_snapshot` counted their share
        of the GPU from the pods, so that other shares still fit beside them)."""
        shares = {
            claim
            for pod in pods
            if (pod.get("spec") or {}).get("nodeName") and _share_of(pod) is not None
            for claim in pod_claim_keys(pod)[0]
        }
        rows = {name: row for row, name in enumerate(snapshot.node_names)}
        by_id = {d.id: (name, d) for name, nd in self.nodes.items() for d in nd.devices}
        held = {d for key, s in self.claims.items() if key not in shares for d in s.allocated}
        for device_id in held:
            if device_id not in by_id:
                continue
            node, device = by_id[device_id]
            row = rows.get(node)
            if row is None:
                continue
            kind = device_kind(device)
            slot = self.nodes[node].slot_of.get(device_id)
            if slot is not None and slot < snapshot.gpu_free_milli.shape[1]:
                snapshot.gpu_free_milli[row, slot] = 0
                snapshot.mark_changed([row])
            layout = snapshot.layouts[row]
            if kind == "nic" and layout is not None:
                slots = {nic.name: slot for slot, nic in enumerate(layout.nics)}
                if device.id.name in slots:
                    snapshot.nic_free_pct[row, slots[device.id.name]] = 0
                    snapshot.mark_changed([row])

    def _claims_of(self, pod: Mapping[str, Any]) -> list[ClaimState]:
        key = f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"
        keys, waiting = pod_claim_keys(pod)
        if waiting:
            raise InvalidRequestError(f"pod {key}: {waiting}")
        states = []
        for claim in keys:
            state = self.claims.get(claim)
            if state is None:
                raise InvalidRequestError(f"pod {key}: ResourceClaim {claim} does not exist")
            if state.request is None:
                raise InvalidRequestError(f"pod {key}: {state.problem}")
            states.append(state)
        return states

    def _kind_of_request(self, selectors: tuple[str, ...]) -> DeviceKind:
        """The kind of the devices a request's selectors (its class's and its own) match, the
        first one found."""
        if selectors not in self._kinds:
            self._kinds[selectors] = "other"
            for devices in self.nodes.values():
                match = next(
                    (d for d in devices.devices if self.selectors.matches(d, selectors)), None
                )
                if match is not None:
                    self._kinds[selectors] = device_kind(match)
                    break
        return self._kinds[selectors]

    def _held_whole(self, allocations: Iterable[Sequence[ClaimAllocation]]) -> None:
        """Devices just allocated whole are no longer shareable for the rest of the cycle."""
        view = self._views.get(True)
        if view is None:
            return
        for pod_allocations in allocations:
            for allocation in pod_allocations:
                taken = set(allocation.devices())
                view[allocation.node] = [
                    replace(d, allow_multiple_allocations=False) if d.id in taken else d
                    for d in view.get(allocation.node, ())
                ]

    def _nodes_that_fit(self, claims: Sequence[ClaimRequest], share: bool) -> dict[str, str]:
        """Where these claims could be allocated (before this cycle's allocations)."""
        shape = (share, *((claim.requests, claim.constraints) for claim in claims))
        keys = tuple(claim.key for claim in claims)
        if shape not in self._fits:
            fits = nodes_that_fit(claims, self.devices_for(share), self.in_use, self.selectors)
            self._fits[shape] = (keys, fits)
        first_keys, fits = self._fits[shape]
        if first_keys == keys:
            return fits
        renamed = {}  # the same verdicts, naming this pod's claims
        for node, why in fits.items():
            text = why
            for old_key, new_key in zip(first_keys, keys, strict=True):
                text = text.replace(f"claim {old_key}", f"claim {new_key}")
            renamed[node] = text
        return renamed

    def _with_share(
        self, allocation: ClaimAllocation, share_milli: int, strategy: SharingStrategy
    ) -> ClaimAllocation:
        """A share pod's claim: the sharing configuration of its share for its GPU request
        (unless the claim configures that request itself) and, on a GPU several claims may
        share, the share of its memory as consumed capacity."""
        found = self.nodes.get(allocation.node)
        gpus = {d.id: d for d in found.gpus.values()} if found is not None else {}
        results, requests, memory = [], [], None
        for result in allocation.results:
            device = gpus.get(result.device)
            if device is None:
                results.append(result)
                continue
            requests.append(result.request)
            memory_key = f"{device.id.driver}/memory"
            text = device.capacity.get(memory_key)
            memory = int(parse_quantity(text).value) if text else None
            if device.allow_multiple_allocations and memory:
                consumed = {memory_key: f"{pinned_memory_mib(share_milli, memory)}Mi"}
                results.append(replace(result, consumed_capacity=consumed))
            else:
                results.append(result)
        configured = {
            name
            for config in allocation.config
            if config.driver == NVIDIA_GPU_DRIVER and config.source == "FromClaim"
            for name in config.requests
        }
        wanted = tuple(r for r in requests if r not in configured)
        config = allocation.config
        if wanted:
            config += (share_config(share_milli, memory, strategy, wanted),)
        return replace(allocation, results=tuple(results), config=config)

    def chosen(
        self, allocations: Sequence[ClaimAllocation]
    ) -> tuple[tuple[int, ...], tuple[str, ...]]:
        """The GPU indices and NIC names a pod's allocations hold (what its annotations say)."""
        found = self.nodes.get(allocations[0].node) if allocations else None
        if found is None:
            return (), ()
        index_of = {d.id: i for i, d in found.gpus.items()}
        nic_ids = {d.id: name for name, d in found.nics.items()}
        held = [device for allocation in allocations for device in allocation.devices()]
        gpus = tuple(sorted({index_of[d] for d in held if d in index_of}))
        nics = tuple(nic_ids[d] for d in held if d in nic_ids)
        return gpus, nics

    def describe(self, allocations: Sequence[ClaimAllocation]) -> str:
        """One pod's devices in words (`describe_devices`)."""
        found = self.nodes.get(allocations[0].node) if allocations else None
        if found is None:
            return ""
        layout = found.layout
        domains = (
            {gpu: number for number, group in enumerate(layout.nvlink_domains) for gpu in group}
            if layout is not None
            else {}
        )
        return describe_devices(
            allocations,
            {str(d.id): d for d in found.devices},
            {str(d.id): gpu_index(d) or 0 for d in found.gpus.values()},
            domains,
        )

    def request(self, pod: Mapping[str, Any], base: Pod) -> Pod:
        """The core's request of a pending pod with claims; InvalidRequestError: hold it."""
        states = self._claims_of(pod)
        pending = [s.request for s in states if not s.is_allocated and s.request is not None]
        allocated_on = {s.node for s in states if s.is_allocated and s.node is not None}
        gpus, nic = 0, False
        try:
            for claim in pending:
                for one in claim.requests:
                    kind = self._kind_of_request(one.selectors)
                    if kind == "gpu" and not one.all_devices:
                        gpus += one.count
                    nic = nic or kind == "nic"
            fit = self._nodes_that_fit(pending, base.is_gpu_sharing)
        except SelectorError as exc:
            raise InvalidRequestError(f"pod {base.name}: {exc}") from None
        nodes = {node for node, why in fit.items() if not why}
        if allocated_on:
            nodes &= allocated_on
        if not nodes:
            reasons = sorted({why for why in fit.values() if why})
            detail = reasons[0] if reasons else "no node publishes devices"
            if allocated_on and not reasons:
                detail = f"its allocated claims are on {', '.join(sorted(allocated_on))}"
            raise InvalidRequestError(
                f"pod {base.name}: no node can allocate its ResourceClaims: {detail}"
            )
        update: dict[str, Any] = {"nodes": frozenset(nodes)}
        if base.is_gpu_sharing:
            try:
                _share_of(pod)
            except InvalidRequestError as exc:
                raise InvalidRequestError(f"pod {base.name}: {exc}") from None
            if gpus != 1:
                raise InvalidRequestError(
                    f"pod {base.name}: a GPU share ({base.gpu_milli} milli) takes one GPU "
                    f"device; its ResourceClaims ask for {gpus}"
                )
        elif gpus:
            update |= {"num_gpu": base.num_gpu + gpus, "gpu_milli": MILLI_PER_GPU}
        if nic:
            update["rdma_percent"] = 100
        return base.model_copy(update=update)

    def allocate(
        self,
        gang: Sequence[tuple[str, str, tuple[int, ...], tuple[str, ...]]],
        pods: Mapping[str, Mapping[str, Any]],
    ) -> dict[str, tuple[ClaimAllocation, ...]] | Unsatisfiable:
        """Devices for the claims of a placed gang: (pod, node, GPU indices, NIC names) each.
        On success the devices count as used for the rest of the cycle."""
        wanted: list[tuple[str, Sequence[ClaimRequest]]] = []
        node_of: dict[str, str] = {}
        prefer: dict[str, list[DeviceId]] = {}
        for pod_key, node, gpus, nics in gang:
            pod = pods.get(pod_key)
            if pod is None:
                continue
            states = self._claims_of(pod)
            claims = [s.request for s in states if not s.is_allocated and s.request is not None]
            if not claims:
                continue
            wanted.append((pod_key, claims))
            node_of[pod_key] = node
            devices = self.nodes.get(node)
            if devices is not None:
                prefer[pod_key] = [devices.gpus[g].id for g in gpus if g in devices.gpus] + [
                    devices.nics[n].id for n in nics if n in devices.nics
                ]
        if not wanted:
            return {}
        share = all(_share_of(pods[pod_key]) is not None for pod_key, _ in wanted)
        result = allocate_gang(
            wanted, node_of, self.devices_for(share), self.in_use, self.selectors, prefer
        )
        if isinstance(result, Unsatisfiable):
            return result
        if not share:
            self._held_whole(result.values())
        for pod_key in result:
            asked = _share_of(pods[pod_key])
            if asked is not None:
                result[pod_key] = tuple(self._with_share(a, *asked) for a in result[pod_key])
        for allocations in result.values():
            for allocation in allocations:
                self.in_use.update(allocation.devices())
                state = self.claims.get(allocation.claim)
                if state is not None:  # a claim shared by later gangs is already allocated
                    self.claims[allocation.claim] = _allocated(state, allocation)
        return result


def _share_of(pod: Mapping[str, Any]) -> tuple[int, SharingStrategy] | None:
    """(milli, strategy) of a pod asking for a GPU share, else None."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(GPU_MILLI_ANNOTATION)
    if text is None:
        return None
    try:
        milli = int(text)
    except ValueError:
        return None  # refused by the pod's translation already
    return milli, sharing_strategy(annotations.get(GPU_SHARING_ANNOTATION))


def _allocated(state: ClaimState, allocation: ClaimAllocation) -> ClaimState:
    return replace(
        state,
        allocated=allocation.devices(),
        node=allocation.node,
        shared=frozenset(r.device for r in allocation.results if r.share_id is not None),
    )
