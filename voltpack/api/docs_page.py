"""The interactive OpenAPI page, `/docs`, with every asset served by the API itself.

FastAPI's default page loads Swagger UI's script and styles from a public CDN, so on an
air-gapped cluster it stays blank. Here they come from the `swagger-ui-bundle-v2` package
(Swagger UI 5, which reads the OpenAPI 3.1 FastAPI writes), mounted under `/docs/assets`; the
page names no outside URL (not even the validator badge). ReDoc is not served. The page and
its assets need no token, as the OpenAPI document itself; every operation on it does.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

DOCS_URL = "/docs"
ASSETS_URL = f"{DOCS_URL}/assets"
OAUTH2_REDIRECT_URL = f"{DOCS_URL}/oauth2-redirect"


def install_docs_page(app: FastAPI) -> None:
    """Serve `/docs` (Swagger UI) and its assets from the installed package; `app` must have
    been created with `docs_url=None, redoc_url=None`."""
    app.mount(ASSETS_URL, StaticFiles(directory=str(swagger_ui_path)), name="swagger-ui")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get(DOCS_URL, include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} - docs",
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon-32x32.png",
            oauth2_redirect_url=OAUTH2_REDIRECT_URL,
            swagger_ui_parameters={"validatorUrl": None},  # no badge from validator.swagger.io
        )

    @app.get(OAUTH2_REDIRECT_URL, include_in_schema=False)
    def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
