"""Picking up a policy applied through the admin API: the `voltpack-policy` ConfigMap.

The operator polls the ConfigMap (key `policy.yaml`) every `interval_s`. A changed, valid
policy replaces the scoring strategy and the queueing rules from the next cycle on; a policy
that does not validate is refused with a log line naming the field, and the running policy
stays. Power settings (`spec.power`) take effect at the operator's next start.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from voltpack.model.errors import PolicyError
from voltpack.operator.kube.client import api_message
from voltpack.operator.kube.setup_problems import SetupLog
from voltpack.policies.schema import PolicyFile, parse_policy

log = logging.getLogger(__name__)

POLICY_KEY = "policy.yaml"


class PolicyWatcher:
    """Polls the policy ConfigMap; returns a new valid policy once per change."""

    def __init__(
        self,
        core: CoreV1Api,
        namespace: str,
        name: str,
        interval_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        setup: SetupLog | None = None,
    ) -> None:
        """`setup`: where a missing permission or API server is said once (None: its own)."""
        self._core = core
        self._setup = setup or SetupLog()
        self._site = f"policy ConfigMap {namespace}/{name}"
        self._namespace = namespace
        self._name = name
        self._interval_s = interval_s
        self._clock = clock
        self._due = 0.0
        self._seen: str | None = None

    def poll(self) -> PolicyFile | None:
        """A policy to switch to, or None (nothing new, not due, or not valid)."""
        now = self._clock()
        if now < self._due:
            return None
        self._due = now + self._interval_s
        try:
            found = self._core.read_namespaced_config_map(self._name, self._namespace)
        except (ApiException, HTTPError, OSError) as exc:
            quiet = isinstance(exc, ApiException) and exc.status == 404  # none applied yet
            if not quiet and not self._setup.handle(
                self._site, exc, namespace=self._namespace, resource="configmaps"
            ):
                log.warning("%s not read: %s", self._site, api_message(exc))
            return None
        self._setup.works(self._site)
        text = (found.data or {}).get(POLICY_KEY)
        if not text or text == self._seen:
            return None
        self._seen = text
        try:
            policy = parse_policy(text, f"ConfigMap {self._namespace}/{self._name}")
        except PolicyError as exc:
            log.warning("new policy refused, the running one stays: %s", exc)
            return None
        log.info("policy %s applied from the ConfigMap", policy.metadata.name)
        return policy
