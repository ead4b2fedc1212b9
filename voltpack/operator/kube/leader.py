"""Leader election with a coordination.k8s.io/v1 Lease, so two replicas never both bind.

A replica is leader while the Lease names it and its last renewal is younger than the lease
duration. Every write goes through the Lease's resourceVersion (optimistic concurrency), so of
two replicas racing for an expired Lease exactly one wins.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes.client import CoordinationV1Api

from voltpack.operator.kube.client import api_message, call_json, status_code
from voltpack.operator.kube.setup_problems import SetupLog

log = logging.getLogger(__name__)

MICROTIME = "%Y-%m-%dT%H:%M:%S.%fZ"
RENEW_DEADLINE_SHARE = 2 / 3
"""A leader acts only this share of the lease duration after its last renewal."""


def _format(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(MICROTIME)


def _parse(text: str | None) -> datetime | None:
    """An RFC 3339 time in any of its spellings (`Z` or `+00:00`, with or without fraction)."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class LeaderElector:
    """Acquires and renews one Lease for `identity`."""

    def __init__(
        self,
        api: CoordinationV1Api,
        namespace: str,
        name: str,
        identity: str,
        lease_duration_s: int = 15,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        setup: SetupLog | None = None,
    ) -> None:
        """`setup`: where a missing namespace or permission is said once (None: its own log)."""
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration_s = lease_duration_s
        self.clock = clock
        self._valid_until: datetime | None = None
        self._setup = setup or SetupLog()
        self._site = f"lease {namespace}/{name}"

    def is_leader(self) -> bool:
        """True until the renew deadline (2/3 of the lease duration) after the last renewal.

        Stopping before the Lease expires leaves the rest of the duration as a safety margin:
        no other replica can take the Lease while this one still believes it leads.
        """
        return self._valid_until is not None and self.clock() < self._valid_until

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True if this replica holds the Lease afterwards."""
        now = self.clock()
        try:
            lease = call_json(self.api.read_namespaced_lease, self.name, self.namespace)
        except Exception as error:
            if status_code(error) != 404:
                if not self._setup.handle(
                    self._site, error, namespace=self.namespace, resource="leases"
                ):
                    log.warning("lease %s: cannot read: %s", self.name, api_message(error))
                return self._lost()
            return self._create(now)
        self._setup.works(self._site)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        renewed = _parse(spec.get("renewTime")) or _parse(spec.get("acquireTime"))
        duration = timedelta(seconds=int(spec.get("leaseDurationSeconds") or 0))
        expired = renewed is None or now >= renewed + duration
        if holder and holder != self.identity and not expired:
            return self._lost()
        new_spec: dict[str, Any] = {
            **spec,
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.lease_duration_s,
            "renewTime": _format(now),
        }
        if holder != self.identity:
            new_spec["acquireTime"] = _format(now)
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        body = {**lease, "spec": new_spec}
        try:
            call_json(self.api.replace_namespaced_lease, self.name, self.namespace, body)
        except Exception as error:
            log.info("lease %s: lost the race: %s", self.name, api_message(error))
            return self._lost()
        return self._won(now)

    def keep_renewing(self, stop: threading.Event, every_s: float) -> None:
        """Acquire or renew every `every_s` seconds until `stop` is set.

        Run in its own thread (as client-go's leader election does), so a long scheduling cycle
        never lets the Lease lapse while the replica is still binding.
        """
        while not stop.is_set():
            self.try_acquire_or_renew()
            stop.wait(every_s)

    def release(self) -> None:
        """Give the Lease up (graceful shutdown), so a standby takes over at once."""
        if not self.is_leader():
            return
        try:
            lease = call_json(self.api.read_namespaced_lease, self.name, self.namespace)
            spec = {**(lease.get("spec") or {}), "holderIdentity": None, "renewTime": None}
            call_json(
                self.api.replace_namespaced_lease,
                self.name,
                self.namespace,
                {**lease, "spec": spec},
            )
        except Exception as error:
            if not self._setup.handle(self._site, error, namespace=self.namespace):
                log.warning("lease %s: release failed: %s", self.name, api_message(error))
        self._valid_until = None

    def _create(self, now: datetime) -> bool:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self.lease_duration_s,
                "acquireTime": _format(now),
                "renewTime": _format(now),
                "leaseTransitions": 0,
            },
        }
        try:
            call_json(self.api.create_namespaced_lease, self.namespace, body)
        except Exception as error:
            if not self._setup.handle(
                self._site, error, namespace=self.namespace, resource="leases"
            ):
                log.info("lease %s: not created: %s", self.name, api_message(error))
            return self._lost()
        return self._won(now)

    def _won(self, now: datetime) -> bool:
        self._setup.works(self._site)
        self._valid_until = now + timedelta(seconds=self.lease_duration_s * RENEW_DEADLINE_SHARE)
        return True

    def _lost(self) -> bool:
        self._valid_until = None
        return False
