"""The JSON API over stored missions, the screenshot route and the health check."""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Any

from litestar import Request, get
from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException, NotFoundException
from litestar.handlers import BaseRouteHandler
from litestar.response import File

from loopwright.config import Settings
from loopwright.store.repository import Store

SESSION_COOKIE = "loopwright_session"
SESSION_MAX_AGE_S = 7 * 24 * 3600


def session_value(token: str, expires: int) -> str:
    """A cookie that proves the dashboard token was given, without containing it.

    Changing LOOPWRIGHT_DASHBOARD_TOKEN invalidates every session.
    """
    mac = hmac.new(token.encode(), f"loopwright-session:{expires}".encode(), hashlib.sha256)
    return f"{expires}.{mac.hexdigest()}"


def valid_session(token: str, value: str, now: float | None = None) -> bool:
    expires_text, _, _mac = value.partition(".")
    if not expires_text.isdigit():
        return False
    expires = int(expires_text)
    if expires < (time.time() if now is None else now):
        return False
    return hmac.compare_digest(session_value(token, expires).encode(), value.encode())


def require_token(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """With LOOPWRIGHT_DASHBOARD_TOKEN set, every view, stream and API call needs it: as a
    bearer token, or as the session cookie the login form sets for browsers."""
    settings: Settings = connection.app.state.settings
    token = settings.dashboard_token
    if token is None:
        return
    header = connection.headers.get("authorization", "")
    given = header[7:] if header.lower().startswith("bearer ") else ""
    if given and hmac.compare_digest(given.encode(), token.encode()):
        return
    cookie = connection.cookies.get(SESSION_COOKIE)
    if cookie and valid_session(token, cookie):
        return
    raise NotAuthorizedException("a bearer token (LOOPWRIGHT_DASHBOARD_TOKEN) is required")


@get("/api/missions", guards=[require_token], sync_to_thread=True, summary="List missions")
def list_missions(
    store: Store, status: str | None = None, repo: str | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """Newest first; filter by status and repository (`owner/name`)."""
    missions = store.list_missions(status=status, repo=repo, limit=min(max(limit, 1), 500))
    return [m.to_dict() for m in missions]


@get(
    "/api/missions/{mission_id:str}",
    guards=[require_token],
    sync_to_thread=True,
    summary="One mission",
)
def get_mission(store: Store, mission_id: str) -> dict[str, Any]:
    """The mission with its request, result (patch, verification evidence, usage) and links."""
    mission = store.get_mission(mission_id)
    if mission is None:
        raise NotFoundException(f"no mission {mission_id}")
    return mission.to_dict()


@get(
    "/api/missions/{mission_id:str}/events",
    guards=[require_token],
    sync_to_thread=True,
    summary="A mission's event log",
)
def mission_events(store: Store, mission_id: str, after: int = 0) -> list[dict[str, Any]]:
    """The stored events with a sequence number above `after`, in order (the SSE stream
    `/missions/{id}/events` sends the same objects live)."""
    if store.get_mission(mission_id) is None:
        raise NotFoundException(f"no mission {mission_id}")
    return store.events_after(mission_id, max(after, 0), limit=5000)


@get("/api/costs", guards=[require_token], sync_to_thread=True, summary="Spend and tokens")
def costs(store: Store) -> dict[str, list[dict[str, Any]]]:
    """Spend, tokens and calls per tier (with the share of finished missions that ended on
    each tier), per repository and per UTC day."""
    return {
        "by_tier": store.costs_by_tier(),
        "by_repo": store.costs_by_repo(),
        "by_day": store.costs_by_day(),
    }


@get(
    "/missions/{mission_id:str}/screenshot.png",
    guards=[require_token],
    sync_to_thread=True,
    summary="Screenshot",
)
def screenshot(settings: Settings, mission_id: str) -> File:
    """The page verification loaded, when the repository is a web app."""
    if not mission_id.isalnum():
        raise NotFoundException("no such mission")
    path = settings.data_dir / "missions" / mission_id / "screenshot.png"
    if not path.is_file():
        raise NotFoundException(f"mission {mission_id} has no screenshot")
    return File(path, media_type="image/png", content_disposition_type="inline")


@get("/healthz", sync_to_thread=False, summary="Health check")
def healthz(request: Request[Any, Any, Any]) -> dict[str, str]:
    return {"status": "ok"}
