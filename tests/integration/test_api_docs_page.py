"""`/docs` works without the internet: headless Chromium (Debian's, driven by Playwright) opens
the admin API's OpenAPI page with every request to another host refused, and sees the
operations listed. The screenshot is the evidence (`docs/evidence/api-docs-offline.png`,
refreshed with VOLTPACK_UPDATE_EVIDENCE=1)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from kubernetes import client

from tests.integration.conftest import serving
from tests.integration.services import missing_service
from voltpack.api.app import ApiDependencies, create_app
from voltpack.api.auth import StaticTokens
from voltpack.emulator import RunningEmulator
from voltpack.operator.admin.source import KubeAdminSource
from voltpack.policies.schema import example_policy_path, load_policy

REPO = Path(__file__).resolve().parents[2]
EVIDENCE = REPO / "docs" / "evidence" / "api-docs-offline.png"
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
CHROMIUM_FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    # no name resolves but the API's own address: the network is closed to the page
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]  # fmt: skip


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        missing_service("Chromium", "chromium is not installed (Debian's chromium package)")
    return found


@pytest.fixture
def api_url(emulator: RunningEmulator, tmp_path: Path) -> Iterator[str]:
    tokens_file = tmp_path / "tokens.csv"
    tokens_file.write_text("tok,viewer-user,viewer\n")
    tokens = StaticTokens.from_file(tokens_file)
    path = example_policy_path("fgd")
    source = KubeAdminSource(
        client.ApiClient(client.Configuration(host=emulator.url)),
        load_policy(path),
        path.read_text(),
    )
    app = create_app(
        ApiDependencies(cluster=source, policies=source, authenticator=tokens, authorizer=tokens)
    )
    with serving(app) as url:
        yield url
    source.close()


def test_the_page_names_no_other_host_and_its_assets_come_from_the_api(api_url: str) -> None:
    page = httpx.get(api_url + "/docs", timeout=30)
    assert page.status_code == 200
    urls = re.findall(r"""(?:src|href|url)\s*[=:]\s*['"]([^'"]+)['"]""", page.text)
    assert urls, page.text
    assert all(u.startswith("/") for u in urls), urls  # no CDN, no outside favicon
    for url in urls:
        assert httpx.get(api_url + url, timeout=30).status_code == 200, url
    assert "validatorUrl" in page.text  # set to null: no badge from validator.swagger.io
    assert httpx.get(api_url + "/redoc", timeout=30).status_code == 404


def test_chromium_offline_lists_the_operations(api_url: str, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 - heavy, browser tests only

    executable = chromium_path()
    refused: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})

        def only_local(route: object, request: object) -> None:
            url = request.url  # type: ignore[attr-defined]
            if urlsplit(url).hostname in LOCAL_HOSTS:
                route.continue_()  # type: ignore[attr-defined]
            else:
                refused.append(url)
                route.abort()  # type: ignore[attr-defined]

        context.route("**/*", only_local)
        page = context.new_page()
        failures: list[str] = []
        page.on("requestfailed", lambda request: failures.append(request.url))
        page.goto(api_url + "/docs", wait_until="networkidle")
        page.wait_for_selector(".opblock", timeout=30_000)
        operations = page.locator(".opblock-summary-path").all_inner_texts()
        title = page.locator(".info .title").inner_text()
        shot = tmp_path / "docs.png"
        page.screenshot(path=str(shot), full_page=False)
        browser.close()
    assert refused == [], refused  # the page asked for nothing outside the API
    assert failures == [], failures
    assert title.startswith("voltpack admin API")
    paths = {text.replace("\u200b", "").strip() for text in operations}
    assert {"/api/v1/cluster", "/api/v1/nodes", "/api/v1/decisions", "/api/v1/policy"} <= paths
    assert len(operations) >= 15
    assert shot.stat().st_size > 20_000
    if os.environ.get("VOLTPACK_UPDATE_EVIDENCE"):
        EVIDENCE.write_bytes(shot.read_bytes())
