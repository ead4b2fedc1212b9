"""What the API reads and changes, as protocols a driver implements.

The API never talks to Kubernetes or a database itself: the `voltpack api` command wires the
operator's Kubernetes adapter (`ClusterSource`, `PolicyHolder`) and the store (`History`) in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from voltpack.api.paging import ListPage
from voltpack.model.admin import (
    ClusterSummary,
    DryRunResult,
    JobView,
    NodeView,
    PowerDomainView,
    QueueView,
)
from voltpack.model.inference_views import InferencePlanView, InferenceServiceView
from voltpack.policies.schema import PolicyFile
from voltpack.store import (
    AuditEntry,
    DecisionPage,
    PowerHistoryVersion,
    PowerRollup,
)
from voltpack.store.records import SimulationStatus


class SourceUnavailableError(Exception):
    """The cluster (or the database) could not be read; the message says which and why."""


class ClusterSource(Protocol):
    """The live cluster."""

    def summary(self) -> ClusterSummary: ...

    def node_page(self, after: str | None, limit: int) -> ListPage[NodeView]:
        """Up to `limit` nodes whose name sorts after `after`, by name."""
        ...

    def node(self, name: str) -> NodeView | None:
        """One node (None: no such node)."""
        ...

    def job_page(
        self, after: str | None, limit: int, pending: bool | None, queue: str | None
    ) -> ListPage[JobView]:
        """Up to `limit` jobs whose `namespace/name` sorts after `after`, only pending ones
        (or only not pending ones) and one queue's when asked."""
        ...

    def job(self, namespace: str, name: str) -> JobView | None:
        """One job (None: no such job)."""
        ...

    def queues(self) -> list[QueueView]: ...

    def power_domains(self) -> list[PowerDomainView]: ...

    def dry_run(self, policy: PolicyFile) -> DryRunResult: ...

    def set_manual_cap(self, domain: str, cap_w: float | None) -> PowerDomainView:
        """Cap a domain by hand (None: remove the manual cap); KeyError for an unknown one."""
        ...

    def domain_gpu_models(self, domain: str) -> list[str] | None:
        """The model of every GPU of the domain's nodes (None: no such domain)."""
        ...


class InferenceSource(Protocol):
    """The cluster's InferenceServices and their plans."""

    def inference_services(self) -> list[InferenceServiceView]: ...

    def inference_plan(self, namespace: str, name: str) -> InferencePlanView | None:
        """One service's plan; None for an unknown service."""
        ...


class PolicyHolder(Protocol):
    """The active policy file."""

    def active(self) -> tuple[PolicyFile, str]: ...

    def apply(self, policy: PolicyFile, text: str) -> None: ...


@dataclass
class SimulationRun:
    """A what-if simulation and how far it got."""

    id: str
    created_at_s: float
    request: dict[str, Any]
    status: SimulationStatus = "queued"
    progress: float = 0.0
    report: dict[str, Any] | None = None
    error: str | None = None
    user: str = ""


class History(Protocol):
    """Stored history: decisions, audit, simulation runs (raise SourceUnavailableError)."""

    def query_decisions(
        self,
        job: str | None,
        node: str | None,
        since_s: float | None,
        until_s: float | None,
        limit: int,
        cursor: str | None,
    ) -> DecisionPage: ...

    def record_audit(self, entry: AuditEntry) -> None: ...

    def list_audit(self, limit: int) -> list[AuditEntry]: ...

    def create_simulation(self, run: SimulationRun) -> str:
        """Store a new run; the id it is known by from now on."""
        ...

    def save_simulation(self, run: SimulationRun) -> None: ...

    def load_simulation(self, run_id: str) -> SimulationRun | None: ...

    def power_rollups(self, domain: str, since_s: float | None) -> list[PowerRollup]:
        """What a forecast reads of a domain's roll-ups since `since_s`, oldest first."""
        ...

    def power_history_version(self, domain: str, since_s: float | None) -> PowerHistoryVersion:
        """What changes when a domain's roll-ups since `since_s` change (cheap to read)."""
        ...
