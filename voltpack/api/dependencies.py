"""What the admin API's routes use (sources, auth, runners, limits), built once by the caller."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from voltpack.api.auth import Authenticator, Authorizer
from voltpack.api.dry_runs import DryRunRunner
from voltpack.api.forecast_memo import ForecastMemo
from voltpack.api.limits import DEFAULT_MAX_BODY_BYTES
from voltpack.api.simulations import SimulationRunner
from voltpack.api.sources import ClusterSource, History, InferenceSource, PolicyHolder


@dataclass
class ApiDependencies:
    """Everything the routes use; the `voltpack api` command builds it, `create_app` keeps it
    in the app's state and the routes receive it through `routers.access.Deps`."""

    cluster: ClusterSource
    policies: PolicyHolder
    authenticator: Authenticator
    authorizer: Authorizer
    history: History | None = None
    simulations: SimulationRunner = field(default_factory=SimulationRunner)
    dry_runs: DryRunRunner = field(default_factory=DryRunRunner)
    clock: Callable[[], float] = time.time
    inference: InferenceSource | None = None
    """InferenceServices and their plans; None: those routes are not served."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    """Larger request bodies get 413 before they are read."""
    forecast_memo: ForecastMemo = field(default_factory=ForecastMemo)
    """Power forecasts kept until the domain's stored history changes."""
