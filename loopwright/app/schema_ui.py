"""`/schema`: the API's OpenAPI description rendered by Swagger UI, offline.

The UI's script and stylesheet are vendored (`vendor/swagger-ui/`: Swagger UI 5, which reads
the OpenAPI 3.1 Litestar generates) and served by this app under `/schema/assets/`. The
page starts the UI from `/static/schema.js` rather than an inline script, so the app's
Content-Security-Policy (`script-src 'self'`) allows it and nothing is loaded from another
host. The validator badge (which would call out to a public validator) is off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from litestar import Request, Router, get
from litestar.exceptions import NotFoundException
from litestar.openapi.plugins import OpenAPIRenderPlugin
from litestar.params import FromPath
from litestar.response import File

SCHEMA_PATH = "/schema"

ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
}
"""The only files of the bundle the page needs; nothing else of it is served."""


ASSETS_DIR = Path(__file__).resolve().parent / "vendor" / "swagger-ui"


@get("/assets/{name:str}", sync_to_thread=False, include_in_schema=False, cache=3600)
def schema_asset(name: FromPath[str]) -> File:
    if name not in ASSETS:
        raise NotFoundException(f"no schema asset {name!r}")
    return File(ASSETS_DIR / name, media_type=ASSETS[name], content_disposition_type="inline")


class OfflineSwaggerUI(OpenAPIRenderPlugin):
    """Swagger UI with its assets served by the app itself."""

    def __init__(self, *, path: str = "/swagger", **kwargs: Any) -> None:
        super().__init__(path=path, **kwargs)

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        title = str(openapi_schema.get("info", {}).get("title", "API"))
        spec_url = f"{SCHEMA_PATH}/openapi.json"
        return f"""<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>{_escape(title)} API</title>
  <link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
  <link rel="stylesheet" href="{SCHEMA_PATH}/assets/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui" data-spec-url="{_escape(spec_url)}"></div>
  <script src="{SCHEMA_PATH}/assets/swagger-ui-bundle.js"></script>
  <script src="/static/schema.js"></script>
</body>
</html>
""".encode()

    def receive_router(self, router: Router) -> None:
        router.register(schema_asset)


def _escape(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )
