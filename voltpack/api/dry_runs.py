"""Policy dry runs, run in the background: one scheduling cycle and one power tick each.

A dry run plans a whole cycle over the cluster (seconds at thousands of nodes), longer than a
request should take, so `POST /policy/dry-runs` queues it and answers 202 with its id, and the
client polls `GET /policy/dry-runs/{id}` (as simulations are run). One runs at a time; at most
`max_active` are queued or running (429 beyond) and the last `max_finished` finished ones are
kept in memory. The run reads the cluster when it starts, not when it was submitted.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from voltpack.api.background import BoundedRuns
from voltpack.api.sources import ClusterSource, SourceUnavailableError
from voltpack.model.admin import DryRunResult, DryRunStatus, DryRunView
from voltpack.model.errors import VoltpackError
from voltpack.policies.schema import PolicyFile

log = logging.getLogger(__name__)

DEFAULT_MAX_ACTIVE = 2
"""Dry runs queued or running at once: each is a whole scheduling cycle of CPU."""
DEFAULT_MAX_FINISHED = 20
"""Finished dry runs kept in memory; older ones are forgotten."""
RETRY_AFTER_S = 15
"""What a refused submission is told to wait: about one dry run at 5,000 nodes."""


@dataclass
class DryRun:
    """A dry run and how far it got."""

    id: str
    policy: PolicyFile
    user: str
    created_at_s: float
    status: DryRunStatus = "queued"
    started_at_s: float | None = None
    finished_at_s: float | None = None
    error: str | None = None
    result: DryRunResult | None = None

    def view(self) -> DryRunView:
        """What the API shows of it."""
        return DryRunView(
            id=self.id,
            policy=self.policy.metadata.name,
            status=self.status,
            user=self.user,
            created_at_s=self.created_at_s,
            started_at_s=self.started_at_s,
            finished_at_s=self.finished_at_s,
            error=self.error,
            result=self.result,
        )


class DryRunRunner:
    """Runs submitted dry runs one at a time against a cluster source."""

    def __init__(
        self,
        max_active: int = DEFAULT_MAX_ACTIVE,
        max_finished: int = DEFAULT_MAX_FINISHED,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._runs: BoundedRuns[DryRun] = BoundedRuns(
            "dry runs",
            workers=1,
            max_active=max_active,
            max_finished=max_finished,
            retry_after_s=RETRY_AFTER_S,
        )
        self._clock = clock

    def submit(
        self,
        cluster: ClusterSource,
        policy: PolicyFile,
        user: str,
        on_finished: Callable[[DryRun], None] = lambda _: None,
    ) -> DryRun:
        """Queue a dry run of `policy`; RunQueueFullError when `max_active` are active.
        `on_finished` is called (in the worker) once the run is done or failed."""
        self._runs.reserve()
        run = DryRun(uuid.uuid4().hex[:16], policy, user, self._clock())
        self._runs.start(
            run, lambda kept: self._execute(kept, cluster, on_finished), self._cancelled
        )
        return run

    def get(self, run_id: str) -> DryRun | None:
        """A kept dry run by id."""
        return self._runs.get(run_id)

    def shutdown(self) -> None:
        """Stop accepting dry runs; wait for the running one."""
        self._runs.shutdown()

    def _cancelled(self, run: DryRun) -> None:
        run.status, run.error = "failed", "the API shut down before it ran"
        run.finished_at_s = self._clock()

    def _execute(
        self, run: DryRun, cluster: ClusterSource, on_finished: Callable[[DryRun], None]
    ) -> None:
        run.started_at_s, run.status = self._clock(), "running"
        try:
            run.result = cluster.dry_run(run.policy)
            run.status = "done"
        except SourceUnavailableError as exc:
            run.status, run.error = "failed", f"cluster unavailable: {exc}"
        except (VoltpackError, LookupError, ValueError) as exc:
            run.status, run.error = "failed", str(exc)
        except Exception as exc:  # never leave a run 'running' and counted
            run.status, run.error = "failed", f"{type(exc).__name__}: the server logged it"
            log.exception("dry run %s failed", run.id)
        finally:
            if run.status == "running":  # interrupted
                run.status, run.error = "failed", "interrupted"
            run.finished_at_s = self._clock()
        try:
            on_finished(run)
        except Exception:  # the audit record is best effort; the run is finished
            log.exception("recording dry run %s", run.id)
