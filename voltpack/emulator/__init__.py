"""A Kubernetes-compatible API server with simulated GPU nodes, for demos and tests.

It speaks the Kubernetes REST protocol well enough for the official `kubernetes` Python
client and `kubectl` (discovery, CRUD, patch, watch, selectors, CRDs, binding), keeps
everything in memory, and simulates kubelets (pods bound to a node start running and, when
asked, finish). See `runner.py` for how to start it and `faults.py` for fault injection.

    from voltpack.emulator import EmulatorConfig, running_emulator

    with running_emulator(nodes=model_nodes, config=EmulatorConfig(time_factor=0.01)) as emu:
        configuration = kubernetes.client.Configuration(host=emu.url)
        ...                                  # or: kubectl --server <emu.url> get nodes
        emu.faults.fail_next(1, status=500)  # the next request gets a 500
        emu.compact_history()                # watches from older resourceVersions get 410

What it simplifies, compared with a real kube-apiserver:
- strategic merge patch merges the well-known lists by key (containers by name, env, volumes,
  conditions, ports, ...) and treats finalizers as a set; other lists are replaced;
  `$setElementOrder` is ignored. Server-side apply is create-or-merge, with no field managers;
- custom resources are validated against their OpenAPI schema and their CEL rules
  (`x-kubernetes-validations`) with cel-python, without Kubernetes' CEL library extensions
  (`cel.py`; rules that fail to evaluate, transition rules and messageExpression are not
  checked); list-type uniqueness and string formats are not checked; CRD conversion only
  rewrites `apiVersion`;
- core and events.k8s.io Events are stored apart; foreground deletion acts as background;
  PodDisruptionBudgets, PersistentVolumeClaims, PersistentVolumes and StorageClasses are
  stored, but no disruption or volume controller writes their status or binds a claim, and
  evictions (`pods/eviction`) always succeed;
- no node heartbeats or node leases, and pods stay on a deleted node;
- protobuf request bodies are decoded for the kinds `kubectl create` and `kubectl auth` send
  (Namespace, ConfigMap, Secret, ServiceAccount, the RBAC kinds and the reviews) only;
  `/openapi/v3` is served without schemas, so `kubectl explain` has nothing;
- `tests/integration/test_emulator_conformance.py` replays a corpus of voltpack's and kubectl's
  requests here and on a real kube-apiserver; docs/emulator-conformance.md lists what differs;
- authentication and authorization (`auth.py`, `rbac.py`, `reviews.py`): the emulator serves
  TokenReview (static tokens of `EmulatorConfig.token_file`, kube-apiserver's
  `--token-auth-file` format, and service-account tokens from `serviceaccounts/<name>/token`,
  signed HS256 with a per-emulator key and not bound to pods or secrets; `kubectl create -f`
  of a review needs `--validate=false`) and SubjectAccessReview with real
  RBAC semantics, but does not itself authenticate or authorize requests: every request is
  served, anonymous or not. Bearer tokens and `Impersonate-*` headers only decide whom the
  self reviews (`kubectl auth can-i|whoami`) are about; impersonation is authorized as in
  kube-apiserver (the `impersonate` verb on users, groups, serviceaccounts, uids and
  userextras; `system:masters` may), so anonymous clients cannot impersonate.
  RBAC escalation checks (`escalate`, `bind`) are not made; aggregated ClusterRoles get their
  rules when evaluated, not written into the object. A SubjectAccessReview about a service
  account that gives no groups is evaluated with the service-account groups (kube-apiserver
  uses exactly the groups sent). No bootstrap roles (`cluster-admin`, `view`, ...) and no
  `default` ServiceAccount per namespace exist; `system:masters` is allowed everything.
"""

from voltpack.emulator.errors import EmulatorError
from voltpack.emulator.faults import FaultRule, Faults
from voltpack.emulator.http.server import create_app
from voltpack.emulator.runner import RunningEmulator, run, running_emulator, serve
from voltpack.emulator.state import EmulatorConfig, EmulatorState

__all__ = [
    "EmulatorConfig",
    "EmulatorError",
    "EmulatorState",
    "FaultRule",
    "Faults",
    "RunningEmulator",
    "create_app",
    "run",
    "running_emulator",
    "serve",
]
