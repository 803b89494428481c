"""The framework's floor for the webhook benchmark: a bare Litestar app whose
`POST /webhooks/github` reads the body, verifies nothing, stores nothing and answers 202.
Started under uvicorn the way `loopwright serve` is (loopback, one socket, N workers).

Run: python -m uvicorn --app-dir benchmarks litestar_floor:app [--workers N]
"""

from __future__ import annotations

from litestar import Litestar, get, post
from litestar.params import Body
from litestar.response import Response


@post("/webhooks/github", status_code=202)
async def webhook(body: bytes = Body()) -> Response[dict[str, int]]:
    return Response({"bytes": len(body)}, status_code=202)


@get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


app = Litestar([webhook, healthz])
