"""Latency of `GET /api/v1/power/domains/{name}/forecast` over 1, 7 and 14 days of 1-minute
power buckets, in process (FastAPI's TestClient), on SQLite and PostgreSQL.

Three kinds of call. Cold: the forecast is computed in the request (the first call for these
parameters, or the first after `max_stale_s` without one: the history is read and the model
fitted); measured as the first call after a new bucket with stale answers switched off.
Changed: the first call after a new bucket was stored (what a client polling every 15 s meets
once a minute, when the operator closes a bucket), served the last answer while the new one is
computed in the background (stale-while-revalidate), which finishes before the next call. Warm:
a repeat call with nothing new (served from the memo after one aggregate query). Defaults:
history_days=14, horizon 1 h, level 0.99, the default model.

    python benchmarks/forecast_route.py [--cold 30] [--warm 200]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import save
from fastapi.testclient import TestClient

from voltpack.api.app import ApiDependencies, create_app
from voltpack.api.auth import StaticTokens
from voltpack.api.forecast_memo import ForecastMemo
from voltpack.api.store_history import StoreHistory
from voltpack.store import BufferedStore, PostgresNotFoundError, PowerSample, TemporaryPostgres

DOMAIN = "row-1"
BUCKET_S = 60.0
DAYS = (1, 7, 14)
URL = f"/api/v1/power/domains/{DOMAIN}/forecast"
HEADERS = {"Authorization": "Bearer admin-token"}


def _client(store: BufferedStore, folder: Path) -> tuple[TestClient, ForecastMemo]:
    tokens_file = folder / "tokens.csv"
    tokens_file.write_text("admin-token,ada,admin\n")
    tokens = StaticTokens.from_file(tokens_file)
    memo = ForecastMemo()
    unused: Any = None  # the forecast route reads only the history
    app = create_app(
        ApiDependencies(
            cluster=unused, policies=unused, authenticator=tokens, authorizer=tokens,
            history=StoreHistory(store), forecast_memo=memo,
        )
    )  # fmt: skip
    return TestClient(app), memo


def _samples(first_s: float, count: int, seed: int) -> list[PowerSample]:
    rng = np.random.default_rng(seed)
    return [
        PowerSample(
            at_s=first_s + i * BUCKET_S,
            power_w=float(
                250_000 + 50_000 * math.sin(2 * math.pi * i / 1440) + rng.normal(0, 5_000)
            ),
            budget_w=400_000.0,
        )
        for i in range(count)
    ]


def _ms(values: list[float]) -> dict[str, float]:
    array = np.asarray(values) * 1000
    return {
        "p50_ms": round(float(np.percentile(array, 50)), 1),
        "p99_ms": round(float(np.percentile(array, 99)), 1),
        "max_ms": round(float(array.max()), 1),
    }


def measure(url: str, days: int, cold: int, warm: int, folder: Path) -> dict[str, Any]:
    """Cold and warm latencies of the route over `days` of history in the database `url`."""
    store = BufferedStore.open(url)
    try:
        now_s = time.time()
        newest_s = math.floor(now_s / BUCKET_S) * BUCKET_S - 2 * cold * BUCKET_S
        count = days * 1440
        store.read(
            lambda s: s.add_power_samples(
                DOMAIN, _samples(newest_s - (count - 1) * 60, count, days)
            )
        )
        client, memo = _client(store, folder)
        allowed_stale_s = memo.max_stale_s
        samples: dict[str, list[float]] = {"cold": [], "changed": [], "warm": []}
        for i in range(2 * cold):  # a new bucket, then the call that has to forecast again
            phase = "cold" if i < cold else "changed"
            memo.max_stale_s = 0.0 if phase == "cold" else allowed_stale_s
            sample = PowerSample(at_s=newest_s + (i + 1) * BUCKET_S, power_w=260_000.0,
                                 budget_w=400_000.0)  # fmt: skip
            store.read(lambda s, sample=sample: s.add_power_samples(DOMAIN, [sample]))
            start = time.perf_counter()
            answer = client.get(URL, headers=HEADERS)
            samples[phase].append(time.perf_counter() - start)
            assert answer.status_code == 200, answer.text
            assert memo.wait_idle(60.0)  # the refresh is done before the next poll
        cold_s, changed_s, warm_s = samples["cold"], samples["changed"], samples["warm"]
        for _ in range(warm):
            start = time.perf_counter()
            answer = client.get(URL, headers=HEADERS)
            warm_s.append(time.perf_counter() - start)
            assert answer.status_code == 200, answer.text
        return {
            "days": days, "buckets": count + 2 * cold, "cold": _ms(cold_s),
            "changed": _ms(changed_s), "warm": _ms(warm_s), "memo_hits": memo.hits,
            "memo_stale": memo.stale, "memo_misses": memo.misses,
        }  # fmt: skip
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cold", type=int, default=30, help="cold calls per size")
    parser.add_argument("--warm", type=int, default=200, help="warm calls per size")
    args = parser.parse_args()
    rows: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows["sqlite"] = [
            measure(f"sqlite:///{folder / f'd{days}.db'}", days, args.cold, args.warm, folder)
            for days in DAYS
        ]
        try:
            with TemporaryPostgres() as server:
                rows["postgresql"] = [
                    measure(
                        server.create_database(f"forecast_{days}"),
                        days,
                        args.cold,
                        args.warm,
                        folder,
                    )
                    for days in DAYS
                ]
        except PostgresNotFoundError as exc:
            print(f"PostgreSQL skipped: {exc}")
    lines = [
        "# Power forecast route latency",
        "",
        f"`GET {URL}` in process, defaults (history_days=14, horizon 1 h, level 0.99, ets), "
        f"1-minute buckets. Cold: computed in the request ({args.cold} calls); changed: the "
        f"first call after a new bucket, the last answer served while the new one is computed "
        f"({args.cold} calls); warm: repeat calls, served from the memo ({args.warm} calls). "
        "Produced by `benchmarks/forecast_route.py`.",
        "",
        "| database | days | buckets | cold p50 / p99 ms | changed p50 / p99 ms | "
        "warm p50 / p99 ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for database, measured in rows.items():
        for row in measured:
            lines.append(
                f"| {database} | {row['days']} | {row['buckets']} | {row['cold']['p50_ms']} / "
                f"{row['cold']['p99_ms']} | {row['changed']['p50_ms']} / "
                f"{row['changed']['p99_ms']} | {row['warm']['p50_ms']} / {row['warm']['p99_ms']} |"
            )
    save("forecast_route", {"rows": rows, "cold_calls": args.cold, "warm_calls": args.warm},
         "\n".join(lines) + "\n")  # fmt: skip


if __name__ == "__main__":
    main()
