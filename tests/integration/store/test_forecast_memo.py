"""The power forecast route keeps its answer until the domain's stored history changes
(SQLite and PostgreSQL, the operator's admin source over the emulator)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from tests.integration.conftest import serving
from voltpack.api.app import ApiDependencies, create_app
from voltpack.api.auth import StaticTokens
from voltpack.api.forecast_memo import ForecastMemo
from voltpack.api.store_history import StoreHistory
from voltpack.emulator import RunningEmulator
from voltpack.operator.admin.source import KubeAdminSource
from voltpack.policies.schema import example_policy_path, load_policy
from voltpack.store import BufferedStore, PowerSample

ADMIN = {"Authorization": "Bearer admin-token"}
DOMAIN = "row-1"
DAYS = 3


@dataclass
class Route:
    url: str
    store: BufferedStore
    memo: ForecastMemo
    last_bucket_s: float

    def get(self, **params: Any) -> httpx.Response:
        return httpx.get(self.url, headers=ADMIN, params=params, timeout=60)

    def add(self, at_s: float, power_w: float) -> None:
        sample = PowerSample(at_s=at_s, power_w=power_w, budget_w=260_000)
        self.store.read(lambda s: s.add_power_samples(DOMAIN, [sample]))


@pytest.fixture
def route(emulator: RunningEmulator, store_url: str, tmp_path: Path) -> Iterator[Route]:
    tokens_file = tmp_path / "tokens.csv"
    tokens_file.write_text("admin-token,ada,admin\n")
    tokens = StaticTokens.from_file(tokens_file)
    kube = client.ApiClient(client.Configuration(host=emulator.url))
    path = example_policy_path("fgd")
    source = KubeAdminSource(kube, load_policy(path), path.read_text())
    store = BufferedStore.open(store_url, retry_interval_s=0.1)
    memo = ForecastMemo(max_entries=2, max_stale_s=0.0)  # every change computed at once
    app = create_app(
        ApiDependencies(
            cluster=source, policies=source, authenticator=tokens, authorizer=tokens,
            history=StoreHistory(store), forecast_memo=memo,
        )
    )  # fmt: skip
    first_s = math.floor((time.time() - DAYS * 86_400) / 60.0) * 60.0
    samples = [
        PowerSample(
            at_s=first_s + i * 60.0,
            power_w=150_000 + 50_000 * math.sin(2 * math.pi * i / 1440),
            budget_w=260_000,
        )
        for i in range(DAYS * 1440)
    ]
    store.read(lambda s: s.add_power_samples(DOMAIN, samples))
    try:
        with serving(app) as url:
            yield Route(
                f"{url}/api/v1/power/domains/{DOMAIN}/forecast", store, memo,
                first_s + (DAYS * 1440 - 1) * 60.0,
            )  # fmt: skip
    finally:
        store.close()
        kube.close()


def test_a_repeat_call_is_served_from_the_memo_and_a_new_bucket_changes_the_answer(
    route: Route,
) -> None:
    first = route.get()
    assert first.status_code == 200, first.text
    assert (route.memo.hits, route.memo.misses) == (0, 1)
    again = route.get()
    assert again.json() == first.json()
    assert (route.memo.hits, route.memo.misses) == (1, 1)  # nothing new: not computed again

    route.add(route.last_bucket_s + 60.0, 180_000)  # a new bucket
    newer = route.get()
    assert (route.memo.hits, route.memo.misses) == (1, 2)
    assert newer.json()["start_s"] == first.json()["start_s"] + 60.0
    assert newer.json()["power_w"] != first.json()["power_w"]

    route.add(route.last_bucket_s + 90.0, 255_000)  # merged into that bucket: a higher peak
    merged = route.get()
    assert (route.memo.hits, route.memo.misses) == (1, 3)
    assert merged.json()["start_s"] == newer.json()["start_s"]
    assert merged.json()["power_w"] != newer.json()["power_w"]
    assert route.get().json() == merged.json()
    assert route.memo.hits == 2


def test_the_memo_keeps_at_most_its_size_least_recently_used_out_first(route: Route) -> None:
    answers = {level: route.get(level=level).json() for level in (0.9, 0.95, 0.99)}
    assert len(route.memo) == 2 and route.memo.misses == 3
    assert route.get(level=0.99).json() == answers[0.99]  # kept
    assert route.memo.hits == 1
    assert route.get(level=0.9).json() == answers[0.9]  # the oldest went: computed again
    assert (route.memo.hits, route.memo.misses, len(route.memo)) == (1, 4, 2)
    # other parameters are other answers
    assert route.get(horizon_s=600).json()["power_w"] != answers[0.99]["power_w"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"horizon_s": 0}, "horizon_s"),
        ({"level": 1.5}, "level"),
        ({"history_days": 61}, "history_days"),
        ({"budget_w": -1}, "budget_w"),
        ({"model": "crystal-ball"}, "crystal-ball"),
    ],
)
def test_bad_parameters_are_still_refused_and_never_kept(
    route: Route, params: dict[str, Any], field: str
) -> None:
    answer = route.get(**params)
    assert answer.status_code == 422 and field in answer.text
    assert len(route.memo) == 0


def test_a_changed_history_is_answered_at_once_from_the_last_answer_then_refreshed(
    route: Route,
) -> None:
    route.memo.max_stale_s = 600.0
    first = route.get().json()
    route.add(route.last_bucket_s + 60.0, 180_000)  # a new bucket
    meanwhile = route.get().json()
    assert meanwhile == first  # the last answer, its start_s saying which data it is from
    assert (route.memo.hits, route.memo.stale, route.memo.misses) == (0, 1, 1)
    assert route.memo.wait_idle()
    refreshed = route.get().json()
    assert refreshed["start_s"] == first["start_s"] + 60.0
    assert (route.memo.hits, route.memo.stale, route.memo.misses) == (1, 1, 1)

    route.memo.max_stale_s = 0.0  # too old to serve: computed in the request
    route.add(route.last_bucket_s + 120.0, 180_000)
    assert route.get().json()["start_s"] == first["start_s"] + 120.0
    assert route.memo.misses == 2
