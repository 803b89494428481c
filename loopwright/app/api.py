"""The JSON API over stored missions, the screenshot route and the health check."""

from __future__ import annotations

from typing import Any

from litestar import Request, get
from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException, NotFoundException
from litestar.handlers import BaseRouteHandler
from litestar.response import File

from loopwright.app.runtime import Runtime


def require_token(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """With LOOPWRIGHT_DASHBOARD_TOKEN set, every view and API call needs it as a bearer token."""
    runtime: Runtime = connection.app.state.runtime
    token = runtime.settings.dashboard_token
    if token is None:
        return
    import hmac

    header = connection.headers.get("authorization", "")
    given = header[7:] if header.lower().startswith("bearer ") else ""
    if not given or not hmac.compare_digest(given.encode(), token.encode()):
        raise NotAuthorizedException("a bearer token (LOOPWRIGHT_DASHBOARD_TOKEN) is required")


@get("/api/missions", guards=[require_token], sync_to_thread=True, summary="List missions")
def list_missions(
    runtime: Runtime, status: str | None = None, repo: str | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """Newest first; filter by status and repository (`owner/name`)."""
    missions = runtime.store.list_missions(status=status, repo=repo, limit=min(max(limit, 1), 500))
    return [m.to_dict() for m in missions]


@get(
    "/api/missions/{mission_id:str}",
    guards=[require_token],
    sync_to_thread=True,
    summary="One mission",
)
def get_mission(runtime: Runtime, mission_id: str) -> dict[str, Any]:
    """The mission with its request, result (patch, verification evidence, usage) and links."""
    mission = runtime.store.get_mission(mission_id)
    if mission is None:
        raise NotFoundException(f"no mission {mission_id}")
    return mission.to_dict()


@get(
    "/missions/{mission_id:str}/screenshot.png",
    guards=[require_token],
    sync_to_thread=True,
    summary="Screenshot",
)
def screenshot(runtime: Runtime, mission_id: str) -> File:
    """The page verification loaded, when the repository is a web app."""
    if not mission_id.isalnum():
        raise NotFoundException("no such mission")
    path = runtime.settings.data_dir / "missions" / mission_id / "screenshot.png"
    if not path.is_file():
        raise NotFoundException(f"mission {mission_id} has no screenshot")
    return File(path, media_type="image/png", content_disposition_type="inline")


@get("/healthz", sync_to_thread=False, summary="Health check")
def healthz(request: Request[Any, Any, Any]) -> dict[str, str]:
    return {"status": "ok"}
