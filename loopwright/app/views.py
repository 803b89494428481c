"""The live view's pages: missions list, one mission, costs, and the login form.

Pages are server-rendered Jinja (autoescaped); the mission page and the list keep
themselves current with a little plain JavaScript reading the SSE streams. Everything that
comes from events is untrusted text: templates escape it and the scripts only ever set
`textContent`. The Content-Security-Policy allows scripts and styles from this server only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from litestar import MediaType, Request, Response, get, post
from litestar.datastructures import Cookie, ResponseHeader
from litestar.enums import RequestEncodingType
from litestar.exceptions import NotAuthorizedException, NotFoundException
from litestar.params import Body
from litestar.response import Redirect, Template
from litestar.status_codes import HTTP_303_SEE_OTHER, HTTP_401_UNAUTHORIZED

from loopwright.app.api import SESSION_COOKIE, SESSION_MAX_AGE_S, require_token, session_value
from loopwright.app.stream import mission_summary
from loopwright.config import Settings
from loopwright.events import STAGES
from loopwright.store.models import MISSION_STATUSES
from loopwright.store.repository import Store

SECURITY_HEADERS = [
    ResponseHeader(
        name="Content-Security-Policy",
        value="default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    ResponseHeader(name="X-Content-Type-Options", value="nosniff"),
    ResponseHeader(name="Referrer-Policy", value="same-origin"),
]
TIER_COLORS = ("#2f9e77", "#d9a21b", "#c2456b", "#6b5fd3", "#3d8bd9")


def _common(settings: Settings) -> dict[str, Any]:
    return {"login_required": settings.dashboard_token is not None}


@get("/", guards=[require_token], sync_to_thread=True, response_headers=SECURITY_HEADERS,
     include_in_schema=False)  # fmt: skip
def missions_page(
    store: Store, settings: Settings, status: str | None = None, repo: str | None = None
) -> Template:
    """Every mission, newest first, filterable by status and repository; live."""
    status = status if status in MISSION_STATUSES else None
    repo = repo or None
    now = time.time()
    missions = [
        mission_summary(m, now) for m in store.list_missions(status=status, repo=repo, limit=100)
    ]
    repos = sorted(r["repo"] for r in store.costs_by_repo())
    return Template(
        template_name="missions.html",
        context={
            **_common(settings),
            "missions": missions,
            "statuses": sorted(MISSION_STATUSES),
            "repos": repos,
            "status": status or "",
            "repo": repo or "",
        },
    )


@get("/missions/{mission_id:str}", guards=[require_token], sync_to_thread=True,
     response_headers=SECURITY_HEADERS, include_in_schema=False)  # fmt: skip
def mission_page(store: Store, settings: Settings, mission_id: str) -> Template:
    """One mission: pipeline, plan, timeline, verification, screenshot and outcome, filled
    in from the event stream (which replays the log first, so finished missions work)."""
    mission = store.get_mission(mission_id)
    if mission is None:
        raise NotFoundException(f"no mission {mission_id}")
    summary = mission_summary(mission)
    return Template(
        template_name="mission.html",
        context={
            **_common(settings),
            "mission": summary,
            "head_sha": mission.head_sha,
            "check_url": _check_run_url(settings, mission.repo, mission.check_run_id),
            "repo_url": _repo_url(settings, mission.repo, mission.trigger),
            "stages": STAGES,
            "tiers": settings.tier_names,
        },
    )


@get("/costs", guards=[require_token], sync_to_thread=True, response_headers=SECURITY_HEADERS,
     include_in_schema=False)  # fmt: skip
def costs_page(store: Store, settings: Settings) -> Template:
    """Spend and tokens per tier, repository and day, and where missions finished."""
    order = {name: n for n, name in enumerate(settings.tier_names)}
    tiers = sorted(store.costs_by_tier(), key=lambda t: (order.get(t["tier"], 99), t["tier"]))
    for n, tier in enumerate(tiers):
        tier["color"] = TIER_COLORS[n % len(TIER_COLORS)]
        tier["tokens"] = tier["prompt_tokens"] + tier["completion_tokens"]
    repos = store.costs_by_repo()
    days = store.costs_by_day()[-30:]
    for row in [*repos, *days]:
        row["tokens"] = row["prompt_tokens"] + row["completion_tokens"]
    total_cost = sum(t["cost_usd"] for t in tiers)
    total_tokens = sum(t["tokens"] for t in tiers)
    finished = sum(t["finished"] for t in tiers)
    cheapest = tiers[0] if tiers else None
    return Template(
        template_name="costs.html",
        context={
            **_common(settings),
            "tiers": tiers,
            "repos": [{**r, **_bar(r["cost_usd"], repos)} for r in repos],
            "tier_bars": [{**t, **_bar(t["cost_usd"], tiers)} for t in tiers],
            "day_chart": day_chart(days),
            "share": _share_segments(tiers),
            "total_cost": total_cost,
            "total_tokens": total_tokens,
            "missions": sum(r["missions"] for r in repos),
            "finished": finished,
            "cheapest": cheapest,
        },
    )


def _bar(value: float, rows: list[dict[str, Any]]) -> dict[str, float]:
    top = max((float(r["cost_usd"]) for r in rows), default=0.0)
    return {"pct": round(100 * value / top, 2) if top > 0 else 0.0}


def _share_segments(tiers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    segments, x = [], 0.0
    for tier in tiers:
        width = round(100 * float(tier["share"]), 2)
        segments.append({"tier": tier["tier"], "color": tier["color"], "x": x, "width": width,
                         "share": tier["share"], "finished": tier["finished"]})  # fmt: skip
        x += width
    return segments


@dataclass(frozen=True)
class DayBar:
    x: float
    y: float
    width: float
    height: float
    label: str
    cost: float
    tokens: int
    missions: int


def day_chart(days: list[dict[str, Any]], width: int = 1200, height: int = 220) -> dict[str, Any]:
    """Geometry for the spend-per-day bar chart (an inline SVG; no script, no library)."""
    top = max((float(d["cost_usd"]) for d in days), default=0.0)
    plot_h = height - 36
    slot = width / max(len(days), 1)
    bars = []
    for n, d in enumerate(days):
        h = plot_h * float(d["cost_usd"]) / top if top > 0 else 0.0
        bars.append(
            DayBar(
                x=round(n * slot + slot * 0.15, 2),
                y=round(8 + plot_h - h, 2),
                width=round(slot * 0.7, 2),
                height=round(max(h, 1.0 if d["missions"] else 0.0), 2),
                label=str(d["day"])[5:],
                cost=float(d["cost_usd"]),
                tokens=int(d["tokens"]),
                missions=int(d["missions"]),
            )
        )
    label_every = max(1, len(days) // 8)
    return {"width": width, "height": height, "bars": bars, "top": top,
            "baseline": 8 + plot_h, "label_every": label_every}  # fmt: skip


def _web_url(settings: Settings) -> str:
    api = settings.github.api_url.rstrip("/")
    host = urlsplit(api).netloc
    if host == "api.github.com":
        return "https://github.com"
    return api.removesuffix("/api/v3")


def _repo_url(settings: Settings, repo: str, trigger: str) -> str | None:
    if trigger == "cli" or repo.count("/") != 1:
        return None
    return f"{_web_url(settings)}/{repo}"


def _check_run_url(settings: Settings, repo: str, check_run_id: int | None) -> str | None:
    if check_run_id is None or repo.count("/") != 1:
        return None
    return f"{_web_url(settings)}/{repo}/runs/{check_run_id}"


# -- access ------------------------------------------------------------------------------


def _safe_next(target: str | None) -> str:
    """Only paths on this server: no scheme, no host, no `//evil` or `/\\evil`."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/"
    return target


@get("/login", sync_to_thread=False, response_headers=SECURITY_HEADERS, include_in_schema=False)
def login_form(settings: Settings, next: str | None = None) -> Template | Redirect:
    if settings.dashboard_token is None:
        return Redirect(_safe_next(next))
    return Template(
        template_name="login.html", context={**_common(settings), "next": _safe_next(next)}
    )


@dataclass
class LoginForm:
    token: str = ""
    next: str = "/"


@post("/login", sync_to_thread=False, response_headers=SECURITY_HEADERS, include_in_schema=False)
def login(
    request: Request[Any, Any, Any],
    settings: Settings,
    data: LoginForm = Body(media_type=RequestEncodingType.URL_ENCODED),  # noqa: B008
) -> Response[Any]:
    """Trade the dashboard token for a session cookie (HttpOnly, SameSite=Lax, 7 days)."""
    import hmac

    token = settings.dashboard_token
    target = _safe_next(data.next)
    if token is None:
        return Redirect(target, status_code=HTTP_303_SEE_OTHER)
    if not hmac.compare_digest(data.token.encode(), token.encode()):
        return Template(
            template_name="login.html",
            context={**_common(settings), "next": target, "error": "That token is not right."},
            status_code=HTTP_401_UNAUTHORIZED,
        )
    expires = int(time.time()) + SESSION_MAX_AGE_S
    secure = request.url.scheme == "https" or (settings.github.public_url or "").startswith(
        "https://"
    )
    return Redirect(
        target,
        status_code=HTTP_303_SEE_OTHER,
        cookies=[
            Cookie(
                key=SESSION_COOKIE,
                value=session_value(token, expires),
                max_age=SESSION_MAX_AGE_S,
                httponly=True,
                secure=secure,
                # Lax, not Strict: the links on check runs and pull requests are cross-site
                # navigations and must arrive logged in. Every route that changes anything
                # is a POST, which Lax keeps from other sites.
                samesite="lax",
                path="/",
            )
        ],
    )


@post("/logout", sync_to_thread=False, include_in_schema=False)
def logout() -> Redirect:
    response = Redirect("/login", status_code=HTTP_303_SEE_OTHER)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


def unauthorized(request: Request[Any, Any, Any], exc: NotAuthorizedException) -> Response[Any]:
    """401 everywhere; a browser asking for a page gets the login form with it."""
    wants_page = "text/html" in request.headers.get("accept", "") and not (
        request.url.path.startswith("/api/") or request.url.path.endswith(("/events", "/stream"))
    )
    if wants_page and request.method == "GET":
        settings: Settings = request.app.state.settings
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return Template(
            template_name="login.html",
            context={**_common(settings), "next": _safe_next(target)},
            status_code=HTTP_401_UNAUTHORIZED,
            headers={h.name: h.value or "" for h in SECURITY_HEADERS},
        )
    return Response(
        {"status_code": HTTP_401_UNAUTHORIZED, "detail": exc.detail},
        status_code=HTTP_401_UNAUTHORIZED,
        media_type=MediaType.JSON,
        headers={"WWW-Authenticate": 'Bearer realm="loopwright"'},
    )
